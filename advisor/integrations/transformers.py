"""A Hugging Face ``transformers.Trainer`` as an ``advisor.Workload``.

A workload function may return a ``Trainer`` (``advisor plan --workload train.py:make_trainer``): the advisor
converts it with :func:`from_trainer`. Call :func:`from_trainer` yourself to state what a Trainer cannot
say (the task row, today's number of processes), or :func:`from_parts` with a model, datasets, a collator
and ``TrainingArguments``. The function runs again in every worker process, so each one builds its own
Trainer; nothing live crosses processes.

What the workload takes from the Trainer:
- data: ``train_dataset``/``eval_dataset`` and the Trainer's ``data_collator``, with the columns the model's
  ``forward`` does not take removed, as the Trainer's own loaders do;
- loss: ``trainer.compute_loss(model, batch)`` (the model's own ``.loss``, label smoothing,
  ``compute_loss_func``, a subclass's override);
- optimizer: what ``TrainingArguments.optim`` builds, with the Trainer's two param groups (no weight decay
  on biases and norms), ``adam_beta1/adam_beta2/adam_epsilon`` and ``weight_decay``; the LR of each trial
  is the advisor's (its scaling rules), today's ``learning_rate`` is their base;
- precision: ``bf16``/``fp16``; gradient checkpointing, switched on in the model so probes measure it;
- validation: the loss (HF's ``eval_loss``) plus ``compute_metrics``, called per validation batch and
  averaged over samples (exact for means such as accuracy; for F1-like metrics an approximation of the
  whole-set value); the sweep ranks by ``metric_for_best_model`` (``greater_is_better``) when set, else
  by the loss, as the Trainer does;
- today's run: ``learning_rate``, ``warmup_steps``, ``num_train_epochs``; the global batch is
  ``per_device_train_batch_size x gradient_accumulation_steps x devices_today`` when ``devices_today``
  is given.

transformers is imported only when a Trainer is converted: ``pip install 'batch-advisor[transformers]'``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

from ..errors import WorkloadError
from ..workload_record import LOSS_METRIC, Workload
from . import require

EXTRA = "transformers"

# Model class name endings -> the advisor's task row, for a Trainer returned without task=.
TASK_BY_HEAD = (("ForSequenceClassification", "nlp-classification"),
                ("ForTokenClassification", "nlp-classification"),
                ("ForMultipleChoice", "nlp-classification"),
                ("ForQuestionAnswering", "nlp-classification"),
                ("ForCausalLM", "language-modeling"),
                ("LMHeadModel", "language-modeling"),
                ("ForMaskedLM", "language-modeling"),
                ("ForImageClassification", "image-classification"),
                ("ForSemanticSegmentation", "semantic-segmentation"),
                ("ForObjectDetection", "object-detection"))

# TrainingArguments.optim values -> the optimizer family whose LR scaling rule applies.
OPTIMIZER_FAMILY = ((r"^adamw", "adamw"), (r"^adam", "adam"), (r"^sgd$", "sgd"), (r"^adagrad$", "adagrad"),
                    (r"^rmsprop", "rmsprop"), (r"^lamb", "lamb"))


def is_trainer(obj) -> bool:
    """Whether ``obj`` is a ``transformers.Trainer`` (or a subclass), without importing transformers."""
    return any(cls.__name__ == "Trainer" and cls.__module__.startswith("transformers")
               for cls in type(obj).__mro__)


def task_for_model(model) -> str | None:
    """The task row a Hugging Face model's head implies (``BertForTokenClassification`` -> nlp-classification)."""
    name = type(model).__name__
    return next((task for ending, task in TASK_BY_HEAD if name.endswith(ending)), None)


def optimizer_family(optim: str) -> str | None:
    optim = str(getattr(optim, "value", optim)).lower()
    return next((family for pattern, family in OPTIMIZER_FAMILY if re.search(pattern, optim)), None)


def from_parts(model, args, train_dataset, eval_dataset, data_collator=None, compute_metrics=None,
               preprocess_logits_for_metrics=None, **workload_fields) -> Workload:
    """A Workload from the parts of a Trainer: builds the Trainer, then :func:`from_trainer`."""
    transformers = require("transformers", EXTRA)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset,
                                   data_collator=data_collator, compute_metrics=compute_metrics,
                                   preprocess_logits_for_metrics=preprocess_logits_for_metrics)
    return from_trainer(trainer, **workload_fields)


def from_trainer(trainer, *, name: str | None = None, task: str | None = None, devices_today: int | None = None,
                 optimizer: str | None = None, **workload_fields) -> Workload:
    """The Workload a Trainer trains (see the module's docstring for what is taken from where).

    ``task``: the advisor's task row (default: implied by the model's head class); ``devices_today``: the
    processes today's run uses, which makes today's global batch known; ``optimizer``: the family of what
    ``TrainingArguments.optim`` builds when its name does not say (``"adamw"``, ``"sgd"``, ...); any other
    keyword sets that Workload field (``current_batch_size``, ``num_classes``, ``probe_batch``, ...).
    """
    require("transformers", EXTRA)
    if not is_trainer(trainer):
        raise WorkloadError(f"from_trainer needs a transformers.Trainer, not {type(trainer).__name__}.")
    args, model = trainer.args, trainer.model
    label = name or getattr(model.config, "name_or_path", "") or type(model).__name__
    problems = []
    if trainer.train_dataset is None:
        problems.append("the Trainer has no train_dataset")
    eval_data = trainer.eval_dataset
    if isinstance(eval_data, dict):  # several named eval sets: the first ranks the sweep, as the first is logged
        eval_data = next(iter(eval_data.values()), None)
    if eval_data is None:
        problems.append("the Trainer has no eval_dataset (the sweep compares batch sizes on validation): pass "
                        "eval_dataset=")
    task = task or task_for_model(model)
    if task is None:
        problems.append(f"the task row cannot be told from the model class {type(model).__name__}: return "
                        "advisor.integrations.transformers.from_trainer(trainer, task='...') (see `advisor init`)")
    family = optimizer or optimizer_family(args.optim)
    if trainer.optimizer is not None:
        problems.append("the Trainer was given a live optimizer (optimizers=(...)): the advisor builds one per "
                        "trial at its own LR; set TrainingArguments.optim (or optim_target_modules/optim_args), or "
                        "return from_trainer(trainer, optimizer_factory=lambda model, lr: ...)")
    elif family is None and "optimizer_factory" not in workload_fields:
        problems.append(f"TrainingArguments.optim={getattr(args.optim, 'value', args.optim)!r} names no optimizer "
                        "family the LR rules know: return from_trainer(trainer, optimizer='adamw' (or sgd, adam, "
                        "lamb, ...)) naming what it is")
    if getattr(args, "fp16", False) and getattr(args, "bf16", False):
        problems.append("TrainingArguments sets both fp16 and bf16")
    if problems:
        raise WorkloadError(f"The Trainer for {label!r} cannot become a workload: " + "; ".join(problems) + ".")

    today = _todays_run(args, devices_today, len(trainer.train_dataset))
    fields = dict(
        name=label,
        build_model=_model_builder(trainer),
        train_data=_model_columns(trainer, trainer.train_dataset, "training"),
        val_data=_model_columns(trainer, eval_data, "evaluation"),
        collate_fn=_collator(trainer),
        task=task,
        optimizer=family or "adamw",
        optimizer_factory=_optimizer_factory(trainer),
        weight_decay=float(args.weight_decay),
        betas=(float(args.adam_beta1), float(args.adam_beta2)),
        eps=float(args.adam_epsilon),
        precision="bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
        description=f"transformers.Trainer ({type(trainer).__name__}) of {type(model).__name__}",
        **today,
    )
    evaluation = _Evaluation(trainer)
    fields["compute_loss"] = evaluation.loss
    if trainer.compute_metrics is not None:
        fields["evaluate"] = evaluation.metrics
    metric = args.metric_for_best_model
    if metric:
        metric = metric[len("eval_"):] if metric.startswith("eval_") else metric
        fields["metric"] = LOSS_METRIC if metric == "loss" else metric
        if metric != "loss" and args.greater_is_better is not None:
            fields["higher_is_better"] = bool(args.greater_is_better)
    else:
        fields["metric"] = LOSS_METRIC  # the Trainer's own default for metric_for_best_model
    fields.update(workload_fields)
    return Workload(**fields)


def _todays_run(args, devices_today: int | None, train_size: int) -> dict:
    """current_lr, and what TrainingArguments tell of today's run: the global batch (with devices_today), the
    warmup in steps (a ratio converted at that batch) and the length in epochs (max_steps converted)."""
    per_device, accumulation = int(args.per_device_train_batch_size), int(args.gradient_accumulation_steps)
    today: dict[str, Any] = {"current_lr": float(args.learning_rate)}
    global_batch = per_device * accumulation * int(devices_today) if devices_today else None
    steps_per_epoch = math.ceil(train_size / global_batch) if global_batch else None
    if global_batch:
        today["current_batch_size"] = global_batch
    max_steps = getattr(args, "max_steps", -1) or -1
    if max_steps > 0:
        if steps_per_epoch:
            today["epochs"] = max_steps / steps_per_epoch
    else:
        today["epochs"] = float(args.num_train_epochs)
    warmup = float(getattr(args, "warmup_steps", 0) or 0)
    ratio = warmup if 0 < warmup < 1 else float(getattr(args, "warmup_ratio", 0) or 0)  # 5.x: below 1 is a ratio
    if warmup >= 1 or (warmup == 0 and not ratio):
        today["current_warmup_steps"] = int(warmup)
    elif steps_per_epoch and "epochs" in today:
        today["current_warmup_steps"] = math.ceil(ratio * today["epochs"] * steps_per_epoch)
    # else: a ratio of a run whose length in steps is unknown here leaves the advisor's default warmup
    return today


def _model_builder(trainer) -> Callable[[], Any]:
    """The Trainer's model on the first call (this process's fresh one); a later call in the same process
    gets ``model_init()`` or, without one, a fresh model of the same config: never weights already trained."""
    state = {"handed_out": False}
    args = trainer.args

    def build_model():
        if trainer.model_init is not None and state["handed_out"]:
            model = trainer.call_model_init()
        elif state["handed_out"]:
            model = type(trainer.model)(trainer.model.config)
        else:
            model = trainer.model
        state["handed_out"] = True
        if checkpointing(args):
            # The Trainer switches it on when train() starts; the advisor never calls train(), so it does it
            # here: the probes measure the memory checkpointing saves, and trials pay its recompute time.
            _enable_checkpointing(model, args)
            if getattr(model.config, "use_cache", False):
                model.config.use_cache = False  # incompatible with checkpointing; the Trainer's run warns and does so
        return model

    return build_model


def checkpointing(args) -> bool:
    """Whether TrainingArguments ask for activation (gradient) checkpointing; transformers 5 renamed it."""
    return bool(getattr(args, "activation_checkpointing", None) or getattr(args, "gradient_checkpointing", False))


def _enable_checkpointing(model, args) -> None:
    """As Trainer.train() does: transformers 5's activation_checkpointing_enable (every_n_layers and offload
    come out of the kwargs), else the older gradient_checkpointing_enable."""
    kwargs = dict(getattr(args, "activation_checkpointing_kwargs", None) or args.gradient_checkpointing_kwargs or {})
    if hasattr(model, "activation_checkpointing_enable"):
        every_n_layers, offload = kwargs.pop("every_n_layers", 1), kwargs.pop("offload", False)
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs or None,
                                              every_n_layers=every_n_layers, offload=offload)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs or None)


def _model_columns(trainer, dataset, description: str):
    """A datasets.Dataset without the columns the model's forward does not take (the Trainer's loaders drop
    them too); any other dataset as it is (the collator drops unknown keys, see _collator)."""
    try:
        import datasets
    except ImportError:
        return dataset
    if isinstance(dataset, datasets.Dataset) and hasattr(trainer, "_remove_unused_columns"):
        return trainer._remove_unused_columns(dataset, description=description)
    return dataset


def _collator(trainer) -> Callable[[list], Any]:
    """The Trainer's data collator, wrapped to drop keys the model's forward does not take, as its loaders do."""
    collator = trainer.data_collator
    wrap = getattr(trainer, "_get_collator_with_removed_columns", None)
    return wrap(collator, description="training") if wrap is not None else collator


def _optimizer_factory(trainer) -> Callable[[Any, float], Any]:
    """What ``Trainer.create_optimizer`` builds (optim's class and kwargs, the decay / no-decay groups), at the
    LR the advisor is trialling."""
    args = trainer.args

    def factory(model, lr: float):
        optimizer_cls, kwargs = type(trainer).get_optimizer_cls_and_kwargs(args, model)
        decay = set(trainer.get_decay_parameter_names(model))
        groups = [{"params": [p for n, p in model.named_parameters() if n in decay and p.requires_grad],
                   "weight_decay": args.weight_decay},
                  {"params": [p for n, p in model.named_parameters() if n not in decay and p.requires_grad],
                   "weight_decay": 0.0}]
        return optimizer_cls([g for g in groups if g["params"]], **{**kwargs, "lr": lr})

    return factory


class _Evaluation:
    """The Trainer's loss and its compute_metrics, per batch. In evaluation the loss call keeps the outputs,
    so the metrics of the same batch need no second forward."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.label_names = trainer.args.label_names or ["labels"]
        self._last: tuple[int, Any] | None = None  # (id of the batch, outputs) of the last evaluation forward

    def loss(self, model, batch):
        if model.training:  # a copy: compute_loss may pop "labels", and a probe steps on one batch again
            self._last = None
            return self.trainer.compute_loss(model, dict(batch))
        loss, outputs = self.trainer.compute_loss(model, dict(batch), return_outputs=True)
        self._last = (id(batch), outputs)
        return loss

    def metrics(self, model, batch) -> dict:
        from transformers import EvalPrediction

        from ..batches import output_logits

        if self._last is not None and self._last[0] == id(batch):
            outputs = self._last[1]
        else:
            outputs = model(**batch)
        self._last = None
        logits = output_logits(outputs)
        if logits is None:
            raise WorkloadError(f"compute_metrics needs the model's logits, and its outputs "
                                f"({type(outputs).__name__}) carry none.")
        labels = [batch[name] for name in self.label_names if name in batch]
        labels = labels[0] if len(labels) == 1 else tuple(labels) if labels else None
        if self.trainer.preprocess_logits_for_metrics is not None:
            logits = self.trainer.preprocess_logits_for_metrics(logits, labels)
        prediction = EvalPrediction(predictions=_numpy(logits), label_ids=_numpy(labels))
        return dict(self.trainer.compute_metrics(prediction))


def _numpy(obj):
    if obj is None:
        return None
    if isinstance(obj, tuple):
        return tuple(_numpy(o) for o in obj)
    obj = obj.detach().cpu()
    return (obj.float() if obj.is_floating_point() else obj).numpy()
