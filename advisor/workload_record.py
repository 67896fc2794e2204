"""The Workload record: what a workload function returns (the model, the data, the loss, the optimizer, the
validation), with its checks. Plain data and small methods the workers call; loading a workload from its spec
(advisor.workload, which also knows the integrations that turn a Trainer into one) sits a layer above, so an
integration can build a Workload without importing the loader."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from .batches import is_iterable_dataset
from .errors import WorkloadError
from .method.lr import KNOWN_OPTIMIZERS
from .optimizers import build_optimizer, hyperparameters  # light (no torch at import); loaded before a worker's memory budget
from .tasks import TASKS


# Metric names whose direction is known without asking (lower-cased substrings); anything else needs
# ``higher_is_better`` stated.
HIGHER_IS_BETTER_WORDS = ("acc", "f1", "precision", "recall", "iou", "dice", "auc", "bleu", "rouge", "map",
                          "score", "r2", "exact_match", "matthews")
LOWER_IS_BETTER_WORDS = ("loss", "perplexity", "ppl", "error", "wer", "cer", "mse", "mae", "rmse", "nll")
LOSS_METRIC = "loss"  # ``metric="loss"``: rank by the validation loss


def metric_direction(name: str) -> bool | None:
    """Whether a larger ``name`` is better, when its name says so; None when it does not."""
    low = name.lower()
    if any(w in low for w in LOWER_IS_BETTER_WORDS):
        return False
    if any(w in low for w in HIGHER_IS_BETTER_WORDS):
        return True
    return None


@dataclass
class Workload:
    """Everything the advisor needs to train a user's model for a few steps.

    Data: ``train_data``/``val_data`` are map-style datasets (``__len__``/``__getitem__``), or ``train_data``
    is a streaming ``IterableDataset`` with ``train_size`` (its samples per epoch: epochs, warmup and the
    per-device cap are counted from it). Each rank reads its own share of a stream: the advisor keeps every
    world-size-th sample, unless ``stream_shards_itself=True`` says the dataset splits itself by rank and
    loader worker (see ``advisor.streams``). Validation needs the same fixed samples for every run, so
    ``val_data`` stays map-style. A sample can be any
    nesting of tuples, dicts, named tuples and dataclasses; ``collate_fn`` (default: torch's
    ``default_collate``) turns a list of samples into a batch, which is moved to the device whole.

    Loss: ``compute_loss(model, batch) -> scalar tensor`` when given; else a dict batch is called as
    ``model(**batch)`` and a tuple batch ``(inputs, targets)`` as ``model(inputs)``, and the loss is
    ``loss_fn(outputs, targets)`` (for a dict batch the targets are ``batch["labels"]``, left out of the
    call) or, without ``loss_fn``, the model's own ``outputs.loss`` (Hugging Face models given labels).

    Validation: ``evaluate(model, batch) -> {name: number}`` adds metrics (averaged over samples);
    ``metric`` names the one the sweep ranks by (``"loss"``: the validation loss) and
    ``higher_is_better`` its direction (known from common names: accuracy, f1, iou, perplexity, ...).
    Defaults: accuracy when outputs are ``(N, num_classes)`` logits for ``(N,)`` integer targets, else
    the validation loss; the recipe says which. A metric is reported only when it was computed.

    Optimizer: ``optimizer`` names its family (sgd, adam, adamw, lamb, lars, ...: the LR scaling rule
    depends on it) and, without a factory, builds it with ``momentum``/``weight_decay``/``betas``/``eps``;
    ``optimizer_factory(model, lr) -> torch.optim.Optimizer`` builds it yourself (param groups, no decay
    on norms and biases, ...).

    Worst case for memory: the ceiling probes use the longest training samples (``sample_length(sample)``,
    default: the elements of its tensors and lists of numbers), collated by ``collate_fn``; or, when given,
    ``probe_batch(n) -> batch`` builds the largest batch of ``n`` samples training will meet (say, ``n``
    rows at your maximum sequence length).

    Today's run: ``current_batch_size``/``current_lr`` are the global batch and LR used today (the base
    for LR scaling), ``current_warmup_steps`` today's warmup in optimizer steps at that global batch, and
    ``epochs`` the length of the run to plan for; ``precision`` what it trains in (``bf16``/``fp16``/``fp32``;
    None: the advisor's ``--precision auto`` rule), which the probes then measure in.
    """

    name: str
    build_model: Callable[[], Any]
    train_data: Any
    val_data: Any
    loss_fn: Callable[[Any, Any], Any] | None = None
    task: str = ""
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
    collate_fn: Callable[[list], Any] | None = None  # the DataLoader's collate (None: torch's default_collate)
    compute_loss: Callable[[Any, Any], Any] | None = None  # (model, batch) -> scalar loss tensor
    evaluate: Callable[[Any, Any], dict] | None = None  # (model, batch) -> {metric name: number}
    metric: str | None = None  # the metric the sweep ranks by; "loss" for the validation loss
    higher_is_better: bool | None = None
    optimizer_factory: Callable[[Any, float], Any] | None = None  # (model, lr) -> torch.optim.Optimizer
    probe_batch: Callable[[int], Any] | None = None  # n -> the largest batch of n samples training meets
    sample_length: Callable[[Any], int] | None = None  # a raw sample's size, to find the longest ones
    train_size: int | None = None  # samples per epoch of an IterableDataset (epochs, warmup)
    stream_shards_itself: bool = False  # an IterableDataset that splits itself by rank (and loader worker)
    precision: str | None = None  # what the user trains in ("fp32", "bf16", "fp16"): --precision auto measures in it

    def validate(self, spec: str) -> "Workload":
        problems = self._callable_problems()
        for name in ("train_data", "val_data"):
            problems += self._data_problems(name)
        problems += self._task_and_optimizer_problems() + self._metric_problems() + self._todays_run_problems()
        if problems:
            raise WorkloadError(f"The workload {spec!r} is not usable: " + "; ".join(problems) + ".")
        self.optimizer = self.optimizer.lower()
        return self

    def _callable_problems(self) -> list[str]:
        problems = []
        if not callable(self.build_model):
            problems.append("build_model must be a callable that returns a torch.nn.Module")
        for field_name, what in (("loss_fn", "(outputs, targets) -> loss tensor"),
                                 ("compute_loss", "(model, batch) -> loss tensor"),
                                 ("collate_fn", "that turns a list of samples into a batch"),
                                 ("evaluate", "(model, batch) -> dict of metric name to number"),
                                 ("optimizer_factory", "(model, lr) -> torch.optim.Optimizer"),
                                 ("probe_batch", "(n) -> the largest batch of n samples"),
                                 ("sample_length", "(sample) -> its length")):
            value = getattr(self, field_name)
            if value is not None and not callable(value):
                problems.append(f"{field_name} must be None or a callable {what}, not {type(value).__name__}")
        return problems

    def _task_and_optimizer_problems(self) -> list[str]:
        problems = []
        if self.task not in TASKS:
            problems.append((f"task {self.task!r} is not" if self.task else "task is not set: make it")
                            + f" one of {', '.join(sorted(TASKS))} (`advisor init` lists them with their batch "
                            "sizes; 'regression' for anything else)")
        if not isinstance(self.optimizer, str) or self.optimizer.lower() not in KNOWN_OPTIMIZERS:
            problems.append(f"optimizer {self.optimizer!r} is not one of {', '.join(sorted(KNOWN_OPTIMIZERS))}"
                            + (" (with optimizer_factory it names the family of what the factory builds: the LR "
                               "scaling rule depends on it)" if self.optimizer_factory else ""))
        return problems

    def _metric_problems(self) -> list[str]:
        if self.metric is not None and (not isinstance(self.metric, str) or not self.metric):
            return ["metric must be the name of a metric evaluate returns, 'accuracy', or 'loss'"]
        if self.metric and self.metric not in (LOSS_METRIC, "accuracy") and self.evaluate is None:
            return [f"metric {self.metric!r} is not computed: give evaluate(model, batch) returning "
                    f"{{{self.metric!r}: value}}, or use metric='loss' / 'accuracy'"]
        if self.metric and self.metric != LOSS_METRIC and self.higher_is_better is None \
                and metric_direction(self.metric) is None:
            return [f"say whether a larger {self.metric!r} is better: set higher_is_better=True or False"]
        return []

    def _todays_run_problems(self) -> list[str]:
        """The user's current batch, LR, warmup, epochs and precision (the base the plan scales from)."""
        problems = []
        if self.current_batch_size is not None and self.current_batch_size < 1:
            problems.append("current_batch_size must be a positive integer")
        if self.current_lr is not None and not self.current_lr > 0:
            problems.append("current_lr must be positive")
        if self.current_warmup_steps is not None and (isinstance(self.current_warmup_steps, bool) or not
                                                      isinstance(self.current_warmup_steps, int)
                                                      or self.current_warmup_steps < 0):
            problems.append("current_warmup_steps must be a whole number of optimizer steps, 0 or more")
        if self.train_size is not None and (isinstance(self.train_size, bool) or not isinstance(self.train_size, int)
                                            or self.train_size < 1):
            problems.append(f"train_size must be a positive whole number of samples per epoch, not {self.train_size!r}")
        if self.epochs is not None and not self.epochs > 0:
            problems.append("epochs must be positive (the length of the planned run)")
        if self.precision not in (None, "fp32", "bf16", "fp16"):
            problems.append(f"precision must be None, 'fp32', 'bf16' or 'fp16', not {self.precision!r}")
        return problems

    def _data_problems(self, name: str) -> list[str]:
        data = getattr(self, name)
        if is_iterable_dataset(data) and name == "val_data":
            return ["val_data is an IterableDataset: validation compares every run on the same fixed samples, "
                    "so give it as a map-style dataset (e.g. list(itertools.islice(stream, N)), or datasets' "
                    ".take(N) then a list)"]
        if is_iterable_dataset(data):
            if self.train_size is None:  # without it no epoch, warmup or per-device cap can be counted
                return ["train_data is an IterableDataset (a stream) and train_size is not set: state its samples "
                        "per epoch, train_size=N (epochs, warmup and the per-device cap are counted from it; a "
                        "stream cannot be counted without reading it all)"]
            return []
        if not (hasattr(data, "__len__") and hasattr(data, "__getitem__")):
            return [f"{name} must be a dataset: map-style (with __len__ and __getitem__) or a "
                    f"torch.utils.data.IterableDataset, not {type(data).__name__}"]
        if len(data) == 0:
            return [f"{name} is empty"]
        return []

    @property
    def train_length(self) -> int:
        """Samples in one training epoch (``train_size`` for an IterableDataset)."""
        return self.train_size if self.train_size else len(self.train_data)

    # -- loss -------------------------------------------------------------------------------------------
    @property
    def has_own_loss(self) -> bool:
        """Whether the loss comes from ``compute_loss`` or an overridden ``batch_loss`` (outputs unseen)."""
        return self.compute_loss is not None or type(self).batch_loss is not Workload.batch_loss

    def batch_loss(self, model, batch):
        """The loss of one mini-batch: ``compute_loss``, else the default call (see the class)."""
        if self.compute_loss is not None:
            return self.compute_loss(model, batch)
        return self.forward(model, batch)[0]

    def forward(self, model, batch):
        """The default call: ``(loss, outputs, targets)`` for one batch (targets None when the model took them)."""
        from .batches import output_loss

        if _is_mapping(batch):
            items = dict(batch.items())
            if self.loss_fn is not None:
                if "labels" not in items:
                    raise WorkloadError(
                        f"The workload {self.name!r} has a loss_fn and dict batches without a 'labels' key "
                        f"(keys: {', '.join(map(str, items))}): name the targets 'labels', or give "
                        "compute_loss(model, batch).")
                targets = items.pop("labels")
                outputs = model(**items)
                return self.loss_fn(outputs, targets), outputs, targets
            outputs = model(**items)
            targets = items.get("labels")
        elif isinstance(batch, (tuple, list)) and len(batch) == 2:
            inputs, targets = batch
            outputs = model(inputs)
            if self.loss_fn is not None:
                return self.loss_fn(outputs, targets), outputs, targets
        else:
            raise WorkloadError(
                f"The workload {self.name!r} gave a {type(batch).__name__} batch"
                + (f" of {len(batch)} items" if isinstance(batch, (tuple, list)) else "")
                + ": the default loss takes (inputs, targets) pairs or dicts of model keyword arguments. "
                "Give compute_loss(model, batch) -> loss for this batch structure.")
        loss = output_loss(outputs)
        if loss is None:
            raise WorkloadError(
                f"The workload {self.name!r} sets no loss_fn and its model's outputs "
                f"({type(outputs).__name__}) carry no .loss: give loss_fn(outputs, targets), compute_loss(model, "
                "batch), or pass the labels the model needs to compute its own loss.")
        return loss, outputs, targets

    # -- validation -------------------------------------------------------------------------------------
    def eval_batch(self, model, batch) -> tuple[float, dict[str, float]]:
        """One validation batch: its mean loss and its metrics (means over its samples), computed only."""
        from .batches import output_logits

        metrics: dict[str, float] = {}
        if self.has_own_loss:
            loss = self.batch_loss(model, batch)
        else:
            loss, outputs, targets = self.forward(model, batch)
            logits = output_logits(outputs)
            if (self.num_classes and logits is not None and targets is not None and logits.dim() == 2
                    and logits.shape[-1] == self.num_classes and getattr(targets, "dim", lambda: -1)() == 1
                    and len(targets) == len(logits) and not targets.is_floating_point()):
                metrics["accuracy"] = float((logits.argmax(dim=-1) == targets).float().mean())
        if self.evaluate is not None:
            extra = self.evaluate(model, batch)
            if not isinstance(extra, Mapping):
                raise WorkloadError(f"The workload {self.name!r}'s evaluate returned {type(extra).__name__}; it "
                                    "must return a dict of metric name to number, e.g. {'f1': 0.83}.")
            for key, value in extra.items():
                try:
                    metrics[str(key)] = float(value)
                except (TypeError, ValueError, RuntimeError):
                    raise WorkloadError(
                        f"The workload {self.name!r}'s evaluate returned {key!r} = {type(value).__name__}; each "
                        "metric must be one number (a float or a one-element tensor).") from None
        check_scalar_loss(loss, self.name)
        return float(loss), metrics

    def ranking_metric(self, computed: Iterable[str]) -> tuple[str, bool, str]:
        """(name, higher_is_better, why) of the metric the sweep ranks by, given the names computed."""
        computed = set(computed)
        if self.metric == LOSS_METRIC:
            return LOSS_METRIC, False, "the workload's metric = 'loss'"
        if self.metric:
            if self.metric not in computed:
                raise WorkloadError(
                    f"The workload {self.name!r} ranks by metric {self.metric!r}, but validation computed "
                    f"{', '.join(sorted(computed)) or 'no metric'} besides the loss: make evaluate(model, batch) "
                    f"return {{{self.metric!r}: value}}, or set metric to one of those (or 'loss').")
            direction = self.higher_is_better if self.higher_is_better is not None else metric_direction(self.metric)
            return self.metric, bool(direction), "the workload's metric"
        if "accuracy" in computed:
            why = ("evaluate returned accuracy" if self.evaluate is not None and self.has_own_loss
                   else f"outputs were (N, {self.num_classes}) class scores")
            return "accuracy", True if self.higher_is_better is None else self.higher_is_better, why
        return LOSS_METRIC, False, ("no metric named and no accuracy computed (outputs were not (N, num_classes) "
                                    "class scores for integer targets)")

    # -- optimizer --------------------------------------------------------------------------------------
    def make_optimizer(self, params, lr: float):
        """The optimizer named by ``optimizer``, for real (LAMB and LARS included): see advisor.optimizers."""
        return self.build_optimizer(params, lr).optimizer

    def optimizer_for(self, model, lr: float):
        """What training runs: ``optimizer_factory(model, lr)`` when given, else the named optimizer."""
        if self.optimizer_factory is None:
            return self.make_optimizer(model.parameters(), lr)
        optimizer = self.optimizer_factory(model, lr)
        if not hasattr(optimizer, "param_groups") or not hasattr(optimizer, "step"):
            raise WorkloadError(
                f"The workload {self.name!r}'s optimizer_factory returned {type(optimizer).__name__}, not a "
                "torch.optim.Optimizer: return e.g. torch.optim.AdamW(groups, lr=lr).")
        inner = type(optimizer)
        optimizer.advisor_implementation = f"{inner.__module__}.{inner.__qualname__} (the workload's optimizer_factory)"
        return optimizer

    def optimizer_hyperparameters(self) -> dict:
        """The hyper-parameters besides the LR that ``optimizer`` takes, with this workload's values."""
        return hyperparameters(self.optimizer, self.momentum, self.weight_decay, self.betas, self.eps)

    def build_optimizer(self, params, lr: float):
        """``advisor.optimizers.BuiltOptimizer``: the optimizer and the implementation that runs."""
        built = build_optimizer(self.optimizer, params, lr, **self.optimizer_hyperparameters())
        built.optimizer.advisor_implementation = built.implementation  # read back by the worker's report
        return built


def _is_mapping(obj) -> bool:
    return isinstance(obj, Mapping) or (hasattr(obj, "data") and isinstance(getattr(obj, "data"), Mapping)
                                         and hasattr(obj, "items"))


def check_scalar_loss(loss, name: str) -> None:
    """A loss must be one number: a tensor with a single element (what ``backward()`` needs)."""
    if not (hasattr(loss, "numel") and hasattr(loss, "backward")):
        raise WorkloadError(f"The workload {name!r}'s loss is {type(loss).__name__}, not a tensor: return the "
                            "loss tensor itself (not loss.item()), so it can be back-propagated.")
    if loss.numel() != 1:
        raise WorkloadError(f"The workload {name!r}'s loss has shape {tuple(loss.shape)}, not a scalar: reduce it "
                            "(e.g. .mean(), or reduction='mean' in the loss function).")
