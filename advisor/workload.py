"""The public Workload API: how a user points the advisor at their own model.

A workload spec is a built-in name (``digits-cnn``), ``package.module:function``
or ``path/to/file.py:function``; the function takes no arguments and returns a
:class:`Workload`. Resolving one imports user code, so it happens only when a
command is asked to run that workload, never when a recipe is read.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .errors import WorkloadError
from .lr import KNOWN_OPTIMIZERS
from .optimizers import build_optimizer, hyperparameters  # light (no torch at import); loaded before a worker's memory budget
from .tasks import TASKS


@dataclass
class Workload:
    """Everything the advisor needs to train a user's model for a few steps.

    ``train_data``/``val_data`` are map-style datasets yielding ``(input, target)``.
    ``current_batch_size``/``current_lr`` are the global batch and LR used today:
    the base for LR scaling. ``current_warmup_steps`` is today's warmup in optimizer
    steps at that global batch, and ``epochs`` the length of the run to plan for;
    the planned warmup is derived from the first and never fills more than a
    fraction of the second.
    """

    name: str
    build_model: Callable[[], Any]
    train_data: Any
    val_data: Any
    loss_fn: Callable[[Any, Any], Any]
    task: str
    num_classes: int | None = None
    optimizer: str = "sgd"
    current_batch_size: int | None = None
    current_lr: float | None = None
    current_warmup_steps: int | None = None
    epochs: float | None = None
    momentum: float = 0.9
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)  # Adam, AdamW and LAMB
    eps: float = 1e-8  # Adam, AdamW and LAMB
    description: str = ""
    collate_fn: Callable[[list], Any] | None = None  # the DataLoader's collate for train batches (None: torch's)

    def validate(self, spec: str) -> "Workload":
        problems = []
        if not callable(self.build_model):
            problems.append("build_model must be a callable that returns a torch.nn.Module")
        if not callable(self.loss_fn):
            problems.append("loss_fn must be a callable (outputs, targets) -> loss tensor")
        if self.collate_fn is not None and not callable(self.collate_fn):
            problems.append("collate_fn must be None or a callable that turns a list of samples into a batch")
        for name in ("train_data", "val_data"):
            data = getattr(self, name)
            if not (hasattr(data, "__len__") and hasattr(data, "__getitem__")):
                problems.append(f"{name} must be a map-style dataset (with __len__ and __getitem__)")
            elif len(data) == 0:
                problems.append(f"{name} is empty")
        if self.task not in TASKS:
            problems.append(f"task {self.task!r} is not one of {', '.join(sorted(TASKS))}")
        if self.optimizer.lower() not in KNOWN_OPTIMIZERS:
            problems.append(f"optimizer {self.optimizer!r} is not one of {', '.join(sorted(KNOWN_OPTIMIZERS))}")
        if self.current_batch_size is not None and self.current_batch_size < 1:
            problems.append("current_batch_size must be a positive integer")
        if self.current_lr is not None and not self.current_lr > 0:
            problems.append("current_lr must be positive")
        if self.current_warmup_steps is not None and (isinstance(self.current_warmup_steps, bool) or not
                                                      isinstance(self.current_warmup_steps, int)
                                                      or self.current_warmup_steps < 0):
            problems.append("current_warmup_steps must be a whole number of optimizer steps, 0 or more")
        if self.epochs is not None and not self.epochs > 0:
            problems.append("epochs must be positive (the length of the planned run)")
        if problems:
            raise WorkloadError(f"The workload {spec!r} is not usable: " + "; ".join(problems) + ".")
        self.optimizer = self.optimizer.lower()
        return self

    def batch_loss(self, model, batch):
        """The loss of one mini-batch. Tuples are ``(input, target)``; richer batches can override this."""
        inputs, targets = batch
        return self.loss_fn(model(inputs), targets)

    def make_optimizer(self, params, lr: float):
        """The optimizer named by ``optimizer``, for real (LAMB and LARS included): see advisor.optimizers."""
        return self.build_optimizer(params, lr).optimizer

    def optimizer_hyperparameters(self) -> dict:
        """The hyper-parameters besides the LR that ``optimizer`` takes, with this workload's values."""
        return hyperparameters(self.optimizer, self.momentum, self.weight_decay, self.betas, self.eps)

    def build_optimizer(self, params, lr: float):
        """``advisor.optimizers.BuiltOptimizer``: the optimizer and the implementation that runs."""
        built = build_optimizer(self.optimizer, params, lr, **self.optimizer_hyperparameters())
        built.optimizer.advisor_implementation = built.implementation  # read back by the worker's report
        return built


def _builtin_table() -> dict[str, tuple[str, str]]:
    from .workloads import BUILTINS

    return BUILTINS


def builtin_names() -> dict[str, str]:
    """Built-in workload name -> one-line description, without building anything."""
    return {name: desc for name, (_, desc) in _builtin_table().items()}


def _load_function(spec: str) -> Callable[[], Any]:
    builtins = _builtin_table()
    if spec in builtins:
        target = builtins[spec][0]
    elif ":" in spec:
        target = spec
    else:
        raise WorkloadError(
            f"Unknown workload {spec!r}. Use a built-in ({', '.join(builtins)}; see `advisor workloads`), "
            "'package.module:function', or 'path/to/file.py:function'."
        )
    location, _, func_name = target.rpartition(":")
    if not location or not func_name:
        raise WorkloadError(f"The workload spec {spec!r} needs the form 'module:function' or 'file.py:function'.")
    try:
        if location.endswith(".py") or "/" in location:
            path = Path(location).expanduser().resolve()
            if not path.is_file():
                raise WorkloadError(f"The workload file {location!r} does not exist. Check the path in {spec!r}.")
            mod_name = f"_advisor_workload_{abs(hash(str(path)))}"
            module_spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[mod_name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(location)
    except WorkloadError:
        raise
    except ModuleNotFoundError as exc:
        raise WorkloadError(
            f"Cannot import the workload module for {spec!r}: {exc}. Run from the directory that holds the "
            "package, add it to PYTHONPATH, or install the missing dependency."
        ) from None
    except Exception as exc:  # user code can raise anything while importing
        last = traceback.extract_tb(exc.__traceback__)[-1]
        raise WorkloadError(
            f"Importing the workload {spec!r} failed with {type(exc).__name__}: {exc} "
            f"(at {last.filename}:{last.lineno}). Fix the error in that file and run again."
        ) from None
    func = getattr(module, func_name, None)
    if func is None:
        public = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise WorkloadError(
            f"The module for {spec!r} has no function {func_name!r}. Callables it defines: "
            f"{', '.join(public[:12]) or 'none'}."
        )
    if not callable(func):
        raise WorkloadError(f"{spec!r} names {type(func).__name__} {func_name!r}, which is not callable.")
    return func


def resolve_workload(spec: str) -> Workload:
    """Import and call the workload function; check what it returned."""
    func = _load_function(spec)
    try:
        result = func()
    except Exception as exc:
        if isinstance(exc, ImportError) and "sklearn" in str(exc):
            raise WorkloadError(
                f"The workload {spec!r} needs scikit-learn for the digits data: pip install 'batch-advisor[examples]'."
            ) from None
        last = traceback.extract_tb(exc.__traceback__)[-1]
        raise WorkloadError(
            f"The workload function {spec!r} raised {type(exc).__name__}: {exc} (at {last.filename}:{last.lineno})."
        ) from None
    if not isinstance(result, Workload):
        raise WorkloadError(
            f"The workload function {spec!r} returned {type(result).__name__}, not advisor.Workload. "
            "Return Workload(name=..., build_model=..., train_data=..., val_data=..., loss_fn=..., task=...)."
        )
    return result.validate(spec)
