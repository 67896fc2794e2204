"""A Lightning module and its data module as a batch-advisor workload.

``lightning_workload(factory, task=..., ...)`` calls ``factory()`` (no arguments) for a ``LightningModule``
and its ``LightningDataModule`` (or a module alone that defines ``train_dataloader``/``val_dataloader``),
and maps them onto a :class:`advisor.Workload`. The workload function that calls it runs in each fresh
worker process, so nothing live crosses processes. What is taken, without a ``Trainer``:

- the loss: ``training_step(batch, batch_idx)``, a tensor or a dict's ``"loss"``;
- validation metrics: what ``validation_step`` logs with ``self.log``/``self.log_dict`` (Lightning drops
  those values when no Trainer is attached, so they are captured during the call) and the numbers of a
  dict it returns; the sweep ranks by ``metric=`` (e.g. ``"val_acc"``), else the validation loss, which is
  ``training_step``'s loss on the validation batches;
- the optimizer: ``configure_optimizers()``, with its param groups and hyper-parameters; the advisor sets
  the LR it is trialling (keeping the groups' LR ratios) and runs its own warmup, so LR schedulers are
  ignored (the description names them); its class names the family (``optimizer=`` for other classes);
- data: the data module's ``prepare_data()``/``setup("fit")``, then the train and val DataLoaders'
  datasets and the train loader's ``collate_fn`` (samplers, batch sizes and loader options are the
  advisor's own); ``on_after_batch_transfer`` runs on each batch, as a Trainer would.

Not supported: manual optimization (``automatic_optimization = False``) and several optimizers (GANs).
Lightning is optional (``pip install 'batch-advisor[lightning]'``); this module never imports it: user
objects are recognised by what they define, so ``lightning`` and ``pytorch_lightning`` both work.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Mapping
from typing import Any, Callable

from torch import nn

from ..errors import WorkloadError
from ..method.lr import KNOWN_OPTIMIZERS
from ..workload import Workload

TRAINING, VALIDATION = "training", "validation"


def lightning_workload(factory: Callable[[], Any], **fields) -> Workload:
    """A Workload from ``factory() -> (LightningModule, LightningDataModule)``; ``fields`` are Workload fields
    (``task`` is required; ``name``, ``metric``, ``num_classes``, ``current_batch_size``, ... as for any
    workload) and override what is read from the module."""
    if importlib.util.find_spec("lightning") is None and importlib.util.find_spec("pytorch_lightning") is None:
        raise WorkloadError("The Lightning integration needs Lightning installed: pip install "
                            "'batch-advisor[lightning]' (or pip install lightning).")
    module, datamodule = _module_and_data(factory)
    if getattr(module, "automatic_optimization", True) is False:
        raise WorkloadError(f"{type(module).__name__} sets automatic_optimization = False: the advisor steps the "
                            "optimizer itself, so manual optimization is not supported. Use automatic optimization "
                            "(training_step returns the loss), or write a plain Workload with compute_loss.")
    train_loader = _loader(module, datamodule, "train_dataloader")
    val_loader = _loader(module, datamodule, "val_dataloader")
    optimizer, schedulers = _configured_optimizer(module)
    family = type(optimizer).__name__.lower()
    if family not in KNOWN_OPTIMIZERS and "optimizer" not in fields:
        raise WorkloadError(f"{type(module).__name__}.configure_optimizers returns {type(optimizer).__name__}, whose "
                            "LR scaling family the advisor cannot tell: pass optimizer= (one of "
                            f"{', '.join(sorted(KNOWN_OPTIMIZERS))}) to lightning_workload.")
    ignored = (f"; its LR scheduler ({', '.join(type(_scheduler(s)).__name__ for s in schedulers)}) is ignored: "
               "the advisor runs its own warmup at the LR it trials" if schedulers else "")
    unused = [module]  # the module built here serves the first build_model(); later ones call the factory again

    def build_model():
        return LightningSteps(unused.pop() if unused else _module_and_data(factory)[0])

    derived = dict(
        name=type(module).__name__, build_model=build_model,
        train_data=train_loader.dataset, val_data=val_loader.dataset, collate_fn=_own_collate(train_loader),
        compute_loss=training_loss, evaluate=validation_metrics, optimizer_factory=configured_optimizer,
        optimizer=family, current_lr=_base_lr(optimizer),
        description=f"Lightning {type(module).__name__} with {type(datamodule).__name__ if datamodule else 'its own'} "
                    f"data; {type(optimizer).__name__} from configure_optimizers{ignored}")
    derived.update(fields)
    return Workload(**derived)


class LightningSteps(nn.Module):
    """The LightningModule's steps as ``forward``, so a DDP or DeepSpeed wrapper sees every call (gradient sync),
    as Lightning's own strategy wrapper does."""

    def __init__(self, module):
        super().__init__()
        self.module = module
        self.calls = 0

    def forward(self, batch, step: str = TRAINING):
        batch = self.module.on_after_batch_transfer(batch, 0)
        batch_idx, self.calls = self.calls, self.calls + 1
        with captured_logs(self.module) as logged:
            if step == TRAINING:
                return step_loss(self.module.training_step(batch, batch_idx), type(self.module).__name__)
            returned = self.module.validation_step(batch, batch_idx)
        metrics = dict(logged)
        if isinstance(returned, Mapping):
            metrics.update({str(k): v for k, v in returned.items() if _is_number(v)})
        return {k: _number(v) for k, v in metrics.items()}


def training_loss(model, batch):
    """compute_loss: ``training_step``'s loss, called through the (wrapped) model."""
    return model(batch, TRAINING)


def validation_metrics(model, batch) -> dict:
    """evaluate: what ``validation_step`` logged or returned."""
    return model(batch, VALIDATION)


def configured_optimizer(model, lr: float):
    """optimizer_factory: ``configure_optimizers()``'s optimizer at ``lr``, its groups' LR ratios kept."""
    optimizer, _ = _configured_optimizer(model.module)
    base = _base_lr(optimizer)
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("initial_lr", group["lr"]) / base
    return optimizer


@contextlib.contextmanager
def captured_logs(module):
    """Collects ``self.log(name, value)`` (and ``log_dict``, which calls it) during a step. Without a Trainer,
    Lightning's ``log`` checks the value, warns and drops it; the instance attribute shadows it meanwhile."""
    logged: dict[str, Any] = {}

    def log(name, value, *args, **kwargs):
        logged[str(name)] = value

    module.log = log
    try:
        yield logged
    finally:
        del module.log


def step_loss(output, module_name: str):
    """The loss of a ``training_step`` result: a tensor, or a dict's ``"loss"``."""
    if isinstance(output, Mapping):
        if "loss" not in output:
            raise WorkloadError(f"{module_name}.training_step returned a dict without a 'loss' key (keys: "
                                f"{', '.join(map(str, output))}): return the loss tensor, or {{'loss': loss, ...}}.")
        return output["loss"]
    if output is None:
        raise WorkloadError(f"{module_name}.training_step returned None: the advisor needs the loss (return it, or "
                            "{'loss': loss}); a step that skips batches cannot be measured.")
    return output


def _is_number(value) -> bool:
    if hasattr(value, "numel"):
        return value.numel() == 1
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or hasattr(value, "compute")


def _number(value) -> float:
    if hasattr(value, "compute") and hasattr(value, "reset"):  # a torchmetrics Metric: this batch's value
        result = value.compute()
        value.reset()
        return float(result)
    return float(value.detach() if hasattr(value, "detach") else value)


def _module_and_data(factory):
    try:
        built = factory()
    except WorkloadError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code
        raise WorkloadError(f"The Lightning factory {getattr(factory, '__name__', factory)!r} raised "
                            f"{type(exc).__name__}: {exc}") from None
    parts = list(built) if isinstance(built, (tuple, list)) else [built]
    modules = [p for p in parts if _is_lightning_module(p)]
    datas = [p for p in parts if p not in modules and hasattr(p, "train_dataloader")]
    if len(modules) != 1 or len(datas) > 1 or len(parts) != len(modules) + len(datas):
        got = ", ".join(type(p).__name__ for p in parts)
        raise WorkloadError(f"The Lightning factory {getattr(factory, '__name__', factory)!r} returned ({got}): "
                            "return (LightningModule, LightningDataModule), or a LightningModule that defines "
                            "train_dataloader and val_dataloader.")
    return modules[0], (datas[0] if datas else None)


def _is_lightning_module(obj) -> bool:
    return (hasattr(obj, "training_step") and hasattr(obj, "configure_optimizers")
            and hasattr(obj, "parameters") and callable(getattr(obj, "log", None)))


def _loader(module, datamodule, hook: str):
    """The DataLoader ``hook`` gives (the first, when it gives several), after the data module's setup."""
    owner = datamodule if datamodule is not None else module
    try:
        if datamodule is not None and not getattr(datamodule, "_advisor_set_up", False):
            datamodule.prepare_data()
            datamodule.setup("fit")
            datamodule._advisor_set_up = True
        loader = getattr(owner, hook)()
    except Exception as exc:  # noqa: BLE001 - user code; Lightning raises when a hook is not implemented
        raise WorkloadError(f"{type(owner).__name__}.{hook}() failed with {type(exc).__name__}: {exc} "
                            f"(the advisor needs {hook} for the training and validation data).") from None
    if isinstance(loader, Mapping):
        loader = next(iter(loader.values()), None)
    elif isinstance(loader, (list, tuple)):
        loader = loader[0] if loader else None
    if not hasattr(loader, "dataset"):
        raise WorkloadError(f"{type(owner).__name__}.{hook}() returned {type(loader).__name__}, not a "
                            "torch DataLoader: return DataLoader(dataset, ...).")
    return loader


def _own_collate(loader):
    """The loader's collate_fn, or None for torch's default (which lets a TensorDataset be sliced directly)."""
    from torch.utils.data import default_collate

    collate = getattr(loader, "collate_fn", None)
    return None if collate is None or collate is default_collate else collate


def _configured_optimizer(module):
    """(the optimizer, its schedulers) from ``configure_optimizers()``, in any form Lightning accepts."""
    name = type(module).__name__
    try:
        out = module.configure_optimizers()
    except Exception as exc:  # noqa: BLE001 - e.g. a scheduler that reads self.trainer
        raise WorkloadError(f"{name}.configure_optimizers() failed with {type(exc).__name__}: {exc}. The advisor "
                            "calls it without a Trainer: build what needs self.trainer (e.g. estimated_stepping_"
                            "batches for OneCycleLR) only when self._trainer is set.") from None
    schedulers: list = []
    if isinstance(out, Mapping):
        optimizers, schedulers = [out.get("optimizer")], [out["lr_scheduler"]] if out.get("lr_scheduler") else []
    elif isinstance(out, (list, tuple)) and len(out) == 2 and all(isinstance(o, (list, tuple)) for o in out):
        optimizers, schedulers = list(out[0]), list(out[1])
    elif isinstance(out, (list, tuple)):
        optimizers = list(out)
    else:
        optimizers = [out]
    optimizers = [o.get("optimizer") if isinstance(o, Mapping) else o for o in optimizers]
    if len(optimizers) != 1:
        raise WorkloadError(f"{name}.configure_optimizers() gives {len(optimizers)} optimizers: the advisor trains "
                            "with one (several optimizers need manual optimization, which it cannot step).")
    optimizer = optimizers[0]
    if not (hasattr(optimizer, "param_groups") and hasattr(optimizer, "step")):
        raise WorkloadError(f"{name}.configure_optimizers() gives {type(optimizer).__name__}, not a "
                            "torch.optim.Optimizer.")
    return optimizer, schedulers


def _scheduler(entry):
    return entry.get("scheduler", entry) if isinstance(entry, Mapping) else entry


def _base_lr(optimizer) -> float:
    group = optimizer.param_groups[0]
    return float(optimizer.defaults.get("lr") or group.get("initial_lr", group["lr"]))
