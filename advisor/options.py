"""Every `advisor plan` option, declared once.

One ``PlanOption`` a row: its name (``trial_steps``: the flag ``--trial-steps``, the app's field ``#trial-steps``), type,
default, help and, where the app has a field for it, the field's label. The CLI's parser, the app's Setup form and the
``[tui]`` pre-fill flags, the named-option reader (``advisor.settings``), the set-up checks' ``Flag`` names, the
command a recipe records (``plan_command``) and the recipe's ``[inputs]`` table (``recipe_inputs``) all read this
table, so a new option is one row here, one ``MethodSettings`` field and its range check (``tests/test_options.py``
fails when a part is missing).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, fields

from .adapters import DEFAULT_ADAPTER
from .method import MethodSettings, WorkloadInfo
from .workloads import DEFAULT_WORKLOAD


def _settings_default(name: str):
    return next(f.default for f in fields(MethodSettings) if f.name == name)


@dataclass(frozen=True)
class PlanOption:
    """One `advisor plan` option: what the parser, the app's form, the checks and the recorded command read."""

    name: str  # the named option; the flag is --name-with-dashes, the app's field id name-with-dashes
    type: type = str  # int, float or str; bool: a switch (--subset-sweep), a checkbox in the app
    default: object = None  # taken when the option is left out (None: the engine decides, e.g. from the host)
    help: str = ""  # argparse help (a literal % is written %%)
    choices: tuple | None = None
    choice_labels: tuple[str, ...] | None = None  # the app's words for each choice, in the choices' order
    setting: str | None = None  # the MethodSettings attribute it fills as it is (None: settings_from_options reads it)
    label: str | None = None  # the app's field label; None: the app has no field for it
    placeholder: str = ""  # the app's hint in an empty field
    shows_default: bool = False  # the app's field starts filled with the default (else empty, with the placeholder)
    parser_default: bool = True  # argparse fills the default in (False: left None, so "was it given" can be asked)
    prefill: str | None = None  # help of `advisor [tui] --flag`, which pre-fills the app's field; None: no such flag
    # Its former flags, still read where a user's command or a recipe's recorded command may carry them (a note on
    # stderr names the new flag); never written.
    deprecated_flags: tuple[str, ...] = ()
    # Where the recipe's [inputs] reads the value the plan ran with: a MethodSettings attribute, or
    # "workload.<attribute>" for one the plan resolved from the workload (the base LR and batch); None: [inputs] does
    # not record it (tests/test_options.py lists those, each with where the recipe says it instead).
    recorded: str | None = None
    recipe_key: str | None = None  # its [inputs] key, when not the option's name (device_memory: the bytes)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def field_id(self) -> str:
        return self.name.replace("_", "-")

    def parse_text(self, text: str):
        """Text (a form field's) as this option's type; ValueError when it is not one."""
        return self.type(text.strip()) if self.type in (int, float) else text

    def type_words(self) -> str:
        return "a whole number" if self.type is int else "a number"

    @property
    def inputs_key(self) -> str:
        """Its key in a recipe's [inputs] (only an option the recipe records has one there)."""
        return self.recipe_key or self.name


_EXTENSIONS = _settings_default("sweep_extensions")
_SEEDS = _settings_default("sweep_seeds")

PLAN_OPTION_TABLE: tuple[PlanOption, ...] = (
    PlanOption("workload", default=DEFAULT_WORKLOAD, setting="workload", label="Workload",
               help="built-in name, 'package.module:function' or 'path/file.py:function' (default digits-cnn)",
               placeholder="built-in name, package.module:function or file.py:function",
               prefill="pre-fill the app's workload (built-in name or 'module:function')"),
    PlanOption("adapter", default=DEFAULT_ADAPTER, setting="adapter_name", recorded="adapter_name", label="Adapter",
               help="data-parallel flavour (see `advisor adapters`; default ddp)", prefill="pre-fill the app's adapter"),
    PlanOption("nproc", int, help="data-parallel processes (default: every GPU; 2 on CPU)", label="Processes",
               recorded="nproc", placeholder="default: every GPU; 2 on CPU", prefill="pre-fill the app's number of processes"),
    PlanOption("device", choices=("cpu", "cuda"), help="default: cuda when a GPU is visible", recorded="device"),
    PlanOption("device_memory", help="memory per device to plan for, e.g. 1GiB (default: the GPU's own)",
               label="Memory per device", placeholder="e.g. 1GiB (default: the GPU's own)",
               recorded="memory_budget_bytes", recipe_key="device_memory_bytes",
               prefill="pre-fill the app's memory per device, e.g. 1GiB"),
    PlanOption("headroom", float, _settings_default("headroom"), setting="headroom", recorded="headroom",
               label="Headroom", help="memory left free below the OOM edge (0.10-0.20)", shows_default=True),
    PlanOption("trial_steps", int, _settings_default("trial_steps"), setting="trial_steps", recorded="trial_steps",
               label="Trial steps", help="iterations of each short trial (30-50)", shows_default=True,
               prefill="pre-fill the app's trial steps"),
    PlanOption("sweep_steps", int, _settings_default("sweep_steps"), setting="sweep_steps", recorded="sweep_steps",
               label="Sweep steps",
               help="sweep length: every candidate trains on the samples the trial's choice sees in this many steps (a "
                    "bigger batch gets fewer steps, at least 4)", shows_default=True,
               prefill="pre-fill the app's sweep steps"),
    PlanOption("subset_sweep", bool, False, setting="subset_sweep",
               label="Subset sweep: 8, 16, 32, 64, 128 instead of half / chosen / double",
               help="sweep 8,16,32,64,128 instead of half/chosen/double"),
    PlanOption("sweep_extensions", int, _EXTENSIONS, setting="sweep_extensions", recorded="sweep_extensions",
               deprecated_flags=("--sweep-walk",),
               help="how many times the swept range may grow past an end that wins (half the smallest or double the "
                    f"largest; default {_EXTENSIONS}; 0: half/chosen/double only)"),
    PlanOption("sweep_seeds", int, _SEEDS, setting="sweep_seeds", recorded="sweep_seeds", label="Sweep seeds",
               shows_default=True,
               help="paired seeds per sweep candidate: every candidate runs seeds 0..k-1 and ties are judged by a "
                    f"paired t-interval with k-1 degrees of freedom (default {_SEEDS}; 1: no interval, only the "
                    "practical margin ties)"),
    PlanOption("start", int, setting="start_per_device",
               help="step 2's starting value per device, instead of the one your base batch or the task table gives "
                    "(capped by the ceiling)"),
    PlanOption("global_batch", int, setting="global_batch", recorded="global_batch", label="Target global batch",
               help="a global batch target to plan for (accumulation fills gaps)",
               placeholder="empty: the sweep decides"),
    PlanOption("base_lr", float, setting="base_lr", recorded="workload.base_lr", label="LR used today",
               help="the LR used today (default: the workload's)", placeholder="the learning rate you use"),
    PlanOption("base_batch", int, setting="base_batch", recorded="workload.base_global_batch",
               label="Batch used today",
               help="the global batch that LR was tuned for (default: the workload's current_batch_size)",
               placeholder="the global batch your LR was tuned for"),
    PlanOption("base_warmup", recorded="base_warmup_text",
               help="the warmup used today: optimizer steps at the base batch (500) or epochs (2epochs); default: "
                    "the workload's current_warmup_steps, else 1 epoch"),
    PlanOption("epochs", float, setting="run_epochs", recorded="run_epochs",
               help="the length of the planned run in epochs: the warmup never takes more than 20%% of it (default: "
                    "the workload's epochs)"),
    PlanOption("precision", default=_settings_default("precision"), choices=("auto", "fp32", "bf16", "fp16"),
               setting="precision", recorded="precision", label="Precision",
               choice_labels=("auto: bf16 on Ampere+ GPUs; else fp32, mixed before halving", "fp32", "bf16",
                              "fp16 (CUDA)"),
               help="auto (default): on a GPU with bf16 Tensor Cores (compute capability >= 8.0) measure and plan in "
                    "bf16 with TF32; elsewhere fp32, with mixed precision tried before halving a batch or "
                    "accumulating; or fix one"),
    PlanOption("task", setting="task", recorded="task", label="Task type",
               help="the task type, if not the workload's (sets the starting value and the global range: see "
                    "advisor/tasks.py)"),
    PlanOption("optimizer", setting="optimizer", recorded="optimizer", label="Optimizer",
               help="the optimizer training runs, for real (sgd, adam, adamw, adagrad, rmsprop, lamb, lars; default: "
                    "the workload's)"),
    PlanOption("nodes", int, _settings_default("nodes"), parser_default=False, recorded="nodes",
               label="Target nodes",
               help="nodes of the target cluster (default 1; probes run on this host)",
               placeholder="default 1: the cluster the plan is for (probes run here)"),
    PlanOption("gpus_per_node", int, label="GPUs per node",
               help="processes per node on the target cluster (default --nproc)",
               placeholder="default: the processes above"),
    PlanOption("world_size", int, help="the target cluster's processes in all (instead of --gpus-per-node)",
               recorded="world_size"),
    PlanOption("trial_timeout", float, _settings_default("trial_timeout_s"), setting="trial_timeout_s",
               help="seconds one trial may take in all"),
    PlanOption("idle_timeout", float, _settings_default("idle_timeout_s"), setting="idle_timeout_s",
               help="seconds without progress before a trial is declared hung"),
)
PLAN_OPTION = {option.name: option for option in PLAN_OPTION_TABLE}


def recipe_inputs(settings: MethodSettings, workload: WorkloadInfo) -> dict:
    """The recipe's [inputs]: every recorded option's value as the plan ran with it (``workload``: what it resolved
    from the workload), in the table's order."""
    owners = {"settings": settings, "workload": workload}
    inputs = {}
    for option in PLAN_OPTION_TABLE:
        if option.recorded is not None:
            owner, _, attribute = option.recorded.rpartition(".")
            inputs[option.inputs_key] = getattr(owners[owner or "settings"], attribute)
    return inputs


# Where a plan measured on the cluster runs (`advisor plan`, and the app on node 0: `advisor [tui]`): not plan settings
# (advisor.cluster.cluster_spec reads them, with SLURM's variables for what they leave out), declared once here for
# both parsers.
CLUSTER_OPTION_TABLE: tuple[PlanOption, ...] = (
    PlanOption("nnodes", int, help="measure on the cluster itself: start the same command on every node, as torchrun "
                                   "(under SLURM, `srun advisor plan ...` fills the cluster flags in); the app runs on "
                                   "node 0 (`advisor --nnodes N --node-rank 0 ...`), `advisor plan` on the others"),
    PlanOption("node_rank", int, help="this node's rank, 0 to --nnodes - 1; node 0 runs the method and writes the "
                                      "recipe"),
    PlanOption("rdzv_endpoint", help="HOST:PORT where the nodes meet: node 0's host, a free port (default port 29400)"),
    PlanOption("rdzv_id", help="an id shared by the nodes of one plan (default: the SLURM job id, else 'advisor')"),
    PlanOption("rdzv_timeout", float, help="seconds node 0 waits for every node to join (default 300)"),
)


def add_cluster_arguments(parser) -> None:
    """The cluster flags (CLUSTER_OPTION_TABLE), for `advisor plan` and the app."""
    for option in CLUSTER_OPTION_TABLE:
        parser.add_argument(option.flag, help=option.help,
                            **({"type": option.type} if option.type is not str else {}))


def plan_option(name: str) -> PlanOption:
    """The declared option ``name``; a KeyError names the declared ones (a check or field naming an undeclared one)."""
    try:
        return PLAN_OPTION[name]
    except KeyError:
        raise KeyError(f"no plan option {name!r} is declared in advisor/options.py "
                       f"(declared: {', '.join(PLAN_OPTION)})") from None


def add_plan_arguments(parser) -> None:
    """Every declared option as an `advisor plan` argument, in the table's order."""
    for option in PLAN_OPTION_TABLE:
        if option.type is bool:
            parser.add_argument(option.flag, action="store_true", help=option.help)
            continue
        extra = {"type": option.type} if option.type is not str else {}
        if option.choices is not None:
            extra["choices"] = option.choices
        if option.default is not None and option.parser_default:
            extra["default"] = option.default
        parser.add_argument(option.flag, help=option.help, **extra)
        for old in option.deprecated_flags:
            parser.add_argument(old, dest=option.name, action=_DeprecatedFlag, new_flag=option.flag,
                                help=argparse.SUPPRESS, **{k: v for k, v in extra.items() if k != "default"})


class _DeprecatedFlag(argparse.Action):
    """A former flag of an option: read as the option, with a one-line note naming the flag it is now."""

    def __init__(self, *args, new_flag: str, **kwargs):
        self.new_flag = new_flag
        super().__init__(*args, **kwargs)

    def __call__(self, parser, namespace, value, option_string=None):
        print(f"advisor: {option_string} is now {self.new_flag} (the same setting); the old name still works.",
              file=sys.stderr)
        setattr(namespace, self.dest, value)


def add_prefill_arguments(parser) -> None:
    """The options the app's Setup can be pre-filled with (`advisor [tui] --trial-steps 8`)."""
    for option in PLAN_OPTION_TABLE:
        if option.prefill is not None:
            parser.add_argument(option.flag, help=option.prefill, **({"type": option.type} if option.type is not str
                                                                    else {}))
