"""The set-up checklist: every input checked before the first process starts.

Each topic has a small checker returning typed ``Problem``s (a code, what is wrong, the fix); ``validate_setup`` runs
them in order and raises one ``SetupRefused`` that carries the list. A problem names options as ``Flag``s, so the
CLI says ``--base-lr`` and the app its field's label from the same problem, without rewriting a joined string.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Union

from .adapters import Adapter
from .device import HostDevices
from .errors import AdvisorError, SetupError
from .method import MethodSettings, PrecisionChoice
from .method.lr import DEFAULT_BASE_WARMUP_EPOCHS, KNOWN_OPTIMIZERS, base_warmup_epochs
from .options import plan_option

# Past this many processes per CPU core a plan measures contention and takes hours: refused.
MAX_CPU_OVERSUBSCRIPTION = 4
MIN_STEPS = 4  # a short run's first two steps pay one-time and tracking costs; time at least two more


@dataclass(frozen=True)
class Flag:
    """An option named inside a problem's words: ``--base-lr`` on the command line, a field's label in the app."""

    name: str
    verb: str = ""  # "pass": the app says "fill in" its field
    metavar: str = ""  # "SIZE", "N": the command line's placeholder (a form field needs none)


Words = tuple[Union[str, Flag], ...]


def option_flag(name: str, verb: str = "", metavar: str = "") -> Flag:
    """The declared plan option ``name`` (advisor/options.py) named in a problem; a KeyError if none is declared."""
    return Flag(plan_option(name).flag, verb, metavar)


def cli_words(flag: Flag) -> str:
    """A flag as the command line says it: ``pass --base-batch N``."""
    return " ".join(part for part in (flag.verb, flag.name, flag.metavar) if part)


def render(words: Words, say_flag: Callable[[Flag], str] = cli_words) -> str:
    return "".join(word if isinstance(word, str) else say_flag(word) for word in words)


@dataclass(frozen=True)
class Problem:
    """One input the plan cannot start with: ``code`` (stable, for tests and front ends), what is wrong and the
    fix (empty when the message says what is allowed), each in words that may name options."""

    code: str
    message: Words
    fix: Words = ()
    joiner: str = ": "  # between the message and the fix when both are said as one sentence

    @property
    def options(self) -> list[str]:
        """The options this problem names, in order (the first is the field to fix)."""
        return [word.name for word in self.message + self.fix if isinstance(word, Flag)]

    def text(self, say_flag: Callable[[Flag], str] = cli_words) -> str:
        fix = render(self.fix, say_flag)
        return render(self.message, say_flag) + (self.joiner + fix if fix else "")


def said(code: str, text: str) -> Problem:
    """A problem another part found and worded (a workload that does not resolve, an adapter's option)."""
    return Problem(code, (text.rstrip("."),))


def refusal_text(problems: list[Problem], say_flag: Callable[[Flag], str] = cli_words) -> str:
    """The one paragraph a refused set-up prints: each problem and its fix."""
    return "Cannot start the plan: " + "; ".join(p.text(say_flag) for p in problems) + ". Nothing was run."


class SetupRefused(SetupError):
    """The set-up checklist's answer: ``problems`` typed, ``str()`` the command line's paragraph (exit 2), or
    ``paragraph`` where the refusal is one value read alone (an option's text that is not a number)."""

    def __init__(self, problems: list[Problem], paragraph: str | None = None):
        self.problems = problems
        super().__init__(paragraph or refusal_text(problems))


def refuse_value(flag: str, what: str) -> SetupRefused:
    """One option's value refused on its own: ``--nodes must be at least 1, not 0.``"""
    problem = Problem("bad-value", (Flag(flag), " " + what))
    return SetupRefused([problem], paragraph=problem.text() + ".")


@dataclass
class Setup:
    """What was checked before any process started."""

    workload: object  # advisor.Workload, resolved in this process
    host: HostDevices
    base_lr: float
    base_global_batch: int
    base_source: str
    optimizer: str
    notes: list[str] = field(default_factory=list)
    adapter_options: dict | None = None  # checked against the optimizer and precision (adapter.plan_options)
    base_warmup_epochs: float = DEFAULT_BASE_WARMUP_EPOCHS
    base_warmup_source: str = "the advisor's default"
    run_epochs: float | None = None
    run_source: str = ""


def base_source(lr_from_flag: bool, batch_from_flag: bool) -> str:
    """Where the base LR and its global batch came from, said as the recipe records it."""
    if lr_from_flag == batch_from_flag:
        return "--base-lr/--base-batch" if lr_from_flag else "the workload's current_lr/current_batch_size"
    lr = "--base-lr" if lr_from_flag else "the workload's current_lr"
    batch = "--base-batch" if batch_from_flag else "the workload's current_batch_size"
    return f"{lr} at {batch}"


# -- the host ----------------------------------------------------------------------------------------------------

def _process_checks(nproc: int, host: HostDevices) -> tuple[list[Problem], list[str]]:
    nproc_flag = option_flag("nproc")
    if nproc < 1:
        return [Problem("nproc-below-one", (nproc_flag, f" must be at least 1, not {nproc}"))], []
    if host.type == "cuda" and nproc > host.count:
        return [Problem("nproc-past-gpus", (nproc_flag, f" {nproc} asks for more processes than the {host.count} "
                                            "GPU(s) here"),
                        ("use ", nproc_flag, f" {host.count} or fewer (and ", option_flag("nodes"),
                         " for a bigger target cluster)"), joiner="; ")], []
    cores = host.cpu_count
    if host.type == "cpu" and nproc > MAX_CPU_OVERSUBSCRIPTION * cores:
        return [Problem("nproc-past-cores", (nproc_flag, f" {nproc} on this CPU host's {cores} core(s) would share "
                                             f"each core among {nproc / cores:.0f} processes: every run would take "
                                             "about that many times longer and its speed would measure the "
                                             "contention, not the model"),
                        ("use ", nproc_flag, f" {MAX_CPU_OVERSUBSCRIPTION * cores} or fewer (", option_flag("nodes"),
                         " / ", option_flag("world_size"), " still plan for a bigger target cluster)"), joiner="; ")], []
    if host.type == "cpu" and nproc > cores:
        return [], [f"{nproc} processes on {cores} CPU core(s): they share cores, so every run takes about "
                    f"{nproc / cores:.1f}x as long and its samples/s measure that sharing, not separate devices."]
    return [], []


def _memory_checks(nproc: int, budget_bytes: int | None, host: HostDevices) -> list[Problem]:
    from .units import format_bytes

    memory_flag = option_flag("device_memory")
    if not budget_bytes or budget_bytes <= 0:
        return [Problem("no-memory-budget", ("the device memory budget must be larger than zero (",
                                             option_flag("device_memory", metavar="SIZE"), ")"))]
    if host.type == "cuda" and host.memories and budget_bytes > min(host.memories):
        return [Problem("budget-past-gpu", (memory_flag, f" {format_bytes(budget_bytes)} is more than the smallest "
                                            f"GPU here has ({format_bytes(min(host.memories))}); a probe cannot "
                                            "measure memory the card lacks"))]
    ram = host.physical_memory
    if host.type == "cpu" and ram and nproc >= 1 and nproc * budget_bytes > ram:
        fewer = (", or ", option_flag("nproc"), f" {ram // budget_bytes} or fewer (", option_flag("nodes"), "/",
                 option_flag("world_size"), " still plan for a bigger cluster)") if budget_bytes <= ram else ()
        return [Problem("budget-past-ram", (option_flag("nproc"), f" {nproc} x ", memory_flag,
                                            f" {format_bytes(budget_bytes)} = {format_bytes(nproc * budget_bytes)} "
                                            f"is more than this host's {format_bytes(ram)} of RAM: trials run every "
                                            "process at once, each allowed its whole budget, so the host would swap "
                                            "or kill them before a real out-of-memory shows"),
                        ("use ", memory_flag, f" {format_bytes(ram // nproc)} or less") + fewer, joiner="; ")]
    return []


def host_checks(nproc: int, budget_bytes: int | None, host: HostDevices) -> tuple[list[Problem], list[str]]:
    """What this host cannot run: ``nproc`` processes each with ``budget_bytes`` of device memory (problems), and
    what it can but slowly (notes). One owner for `advisor plan` and for a re-plan confirmed on this host."""
    problems, notes = _process_checks(nproc, host)
    return problems + _memory_checks(nproc, budget_bytes, host), notes


def host_problems(nproc: int, budget_bytes: int | None, host: HostDevices) -> tuple[list[str], list[str]]:
    """host_checks in the command line's words."""
    problems, notes = host_checks(nproc, budget_bytes, host)
    return [p.text() for p in problems], notes


# -- the adapter and the numbers -----------------------------------------------------------------------------------

def _adapter_checks(adapter: Adapter) -> list[Problem]:
    reason = adapter.unavailable_reason()  # load_adapter gives every adapter AdapterBase's defaults
    return [Problem("adapter-unavailable", (f"the adapter {adapter.name!r} cannot run here: {reason}",))] if reason \
        else []


def _capability_checks(s: MethodSettings, adapter: Adapter, host: HostDevices) -> list[Problem]:
    problems, caps = [], adapter.capabilities
    if s.nproc > 1 and not caps.multi_process:
        problems.append(Problem("adapter-single-process", (f"the adapter {adapter.name!r} runs a single process "
                                                           "only",), ("use ", option_flag("nproc"), " 1"), joiner="; "))
    if caps.needs_cuda and host.type != "cuda":
        problems.append(Problem("adapter-needs-cuda", (f"the adapter {adapter.name!r} needs a CUDA GPU and this host "
                                                       "has none",)))
    return problems


def _number_checks(s: MethodSettings) -> list[Problem]:
    """The plan's numbers, each in its range."""
    problems = []
    if s.nodes < 1:
        problems.append(Problem("nodes-below-one", (option_flag("nodes"), f" must be at least 1, not {s.nodes}")))
    if s.target_world_size is not None and s.target_world_size < 1:
        problems.append(Problem("world-size-below-one", ("the target world size must be at least 1, not "
                                                         f"{s.target_world_size}",)))
    if not 0 <= s.headroom < 1:
        problems.append(Problem("headroom-range", (option_flag("headroom"), " must be a fraction in [0, 1) (0.10-0.20 is "
                                                   f"the method's range), not {s.headroom}")))
    for name, steps in (("trial_steps", s.trial_steps), ("sweep_steps", s.sweep_steps)):
        if steps < MIN_STEPS:
            problems.append(Problem("steps-too-few", (option_flag(name), f" must be at least {MIN_STEPS} (the first two "
                                                      f"steps pay one-time costs), not {steps}")))
    if s.sweep_extensions < 0:
        problems.append(Problem("sweep-extensions-negative", (option_flag("sweep_extensions"), " must be 0 or more "
                                                              f"extra sweep candidates, not {s.sweep_extensions}")))
    if s.sweep_seeds < 1:
        problems.append(Problem("sweep-seeds-below-one", (option_flag("sweep_seeds"), " must be 1 or more paired seeds "
                                                          "per sweep candidate (3 is the default: 2 degrees of "
                                                          "freedom for the paired t-interval), not "
                                                          f"{s.sweep_seeds}")))
    for name, seconds in (("trial_timeout", s.trial_timeout_s), ("idle_timeout", s.idle_timeout_s)):
        if not seconds > 0:
            problems.append(Problem("timeout-not-positive", (option_flag(name), " must be a positive number of seconds, "
                                                             f"not {seconds}")))
    return problems + _batch_number_checks(s)


def _batch_number_checks(s: MethodSettings) -> list[Problem]:
    problems = []
    if s.global_batch is not None and s.global_batch < 1:
        problems.append(Problem("global-batch-below-one", (option_flag("global_batch"), " must be at least 1, not "
                                                           f"{s.global_batch}")))
    if s.start_per_device is not None and s.start_per_device < 1:
        problems.append(Problem("start-below-one", (option_flag("start"), " must be at least 1 sample per device, not "
                                                    f"{s.start_per_device}")))
    if s.base_lr is not None and not 0 < s.base_lr < math.inf:  # `--base-lr inf` ran a whole plan at an infinite LR
        problems.append(Problem("base-lr-not-positive", (option_flag("base_lr"), " must be positive and finite, not "
                                                         f"{s.base_lr}")))
    if s.base_batch is not None and s.base_batch < 1:
        problems.append(Problem("base-batch-below-one", (option_flag("base_batch"), " must be at least 1, not "
                                                         f"{s.base_batch}")))
    return problems


def _precision_checks(s: MethodSettings, adapter: Adapter, host: HostDevices) -> list[Problem]:
    precision = option_flag("precision")
    if s.precision not in ("auto", "fp32", "bf16", "fp16"):
        return [Problem("precision-unknown", (precision, f" must be auto, fp32, bf16 or fp16, not {s.precision!r}"))]
    if s.precision == "fp16" and host.type != "cuda":
        return [Problem("fp16-needs-cuda", ("fp16 mixed precision needs a CUDA GPU (loss scaling, fp16 kernels)",),
                        ("on CPU use ", precision, " bf16 or fp32"), joiner="; ")]
    if not adapter.capabilities.supports(s.precision):
        return [Problem("precision-unsupported", (f"the adapter {adapter.name!r} does not support {s.precision}",))]
    if s.precision == "bf16" and host.type == "cuda" and not host.bf16:
        return [Problem("bf16-emulated", ("bf16 needs a GPU with compute capability 8.0 or newer (Ampere); this one "
                                          "only emulates it, slowly",),
                        ("use ", precision, " fp16 (AMP with a GradScaler) or fp32"), joiner=": ")]
    return []


# -- the workload, its task and optimizer ------------------------------------------------------------------------

def _task_checks(s: MethodSettings, workload) -> list[Problem]:
    if s.task is None:
        return []
    from .tasks import TASKS

    if s.task not in TASKS:
        return [Problem("task-unknown", (option_flag("task"), f" {s.task!r} is not one of {', '.join(sorted(TASKS))}"))]
    if workload is not None:
        workload.task = s.task  # the user's task type replaces the workload's for this plan
    return []


def _optimizer_checks(optimizer: str, adapter: Adapter) -> list[Problem]:
    caps, name = adapter.capabilities, adapter.name
    if optimizer not in KNOWN_OPTIMIZERS:
        return [Problem("optimizer-unknown", (option_flag("optimizer"), f" {optimizer!r} is not one of "
                                              f"{', '.join(sorted(KNOWN_OPTIMIZERS))}"))]
    if caps.optimizers is not None and optimizer not in caps.optimizers:
        return [Problem("optimizer-not-run", (f"the adapter {name!r} cannot run the optimizer {optimizer!r} (it runs "
                                              f"{', '.join(sorted(caps.optimizers))})",),
                        ("choose another ", option_flag("optimizer"), " or adapter"), joiner="; ")]
    if optimizer == "lamb" and not caps.supports_lamb:
        return [Problem("lamb-unsupported", (f"the adapter {name!r} does not declare LAMB support "
                                             "(capabilities.supports_lamb)",),
                        ("choose another ", option_flag("optimizer"), " or adapter"), joiner="; ")]
    from .optimizers import unavailable_reason as optimizer_unavailable

    reason = optimizer_unavailable(optimizer)
    return [Problem("optimizer-missing-package", (reason,))] if reason else []


@dataclass
class _Base:
    """The base LR and the global batch it was tuned at, with where they came from."""

    lr: float | None = None
    batch: int | None = None
    source: str | None = None


def _base_checks(s: MethodSettings, workload) -> tuple[_Base, list[Problem]]:
    if workload is None:
        return _Base(), []
    base = _Base(s.base_lr or workload.current_lr,
                 # The base batch is the global batch the base LR was tuned at; never a guess (a task's per-device
                 # starting value taken as a global batch put every scaled LR off by that factor).
                 s.base_batch or workload.current_batch_size, base_source(s.base_lr is not None,
                                                                           s.base_batch is not None))
    if base.lr is None:
        return base, [Problem("no-base-lr", (f"the workload {s.workload!r} gives no learning rate",),
                              (option_flag("base_lr", verb="pass"), " (the LR you use today) and ", option_flag("base_batch"),
                               " (the global batch it was tuned for)"))]
    if base.batch is None:
        given = (option_flag("base_lr"),) if s.base_lr else ("the workload's current_lr",)
        return base, [Problem("no-base-batch", given + (f" ({base.lr:g}) comes without the global batch it was tuned "
                                                        f"for, and the workload {s.workload!r} sets no "
                                                        "current_batch_size",),
                              (option_flag("base_batch", verb="pass", metavar="N"), " (today's global batch: per-device x "
                               "processes x accumulation), or set current_batch_size in the workload; every scaled "
                               "LR depends on it"))]
    return base, []


def _warmup_checks(s: MethodSettings, workload, base_batch) -> tuple[tuple[float, str], list[Problem]]:
    if s.base_warmup is not None and not s.base_warmup[0] >= 0:
        return (DEFAULT_BASE_WARMUP_EPOCHS, "the advisor's default"), [
            Problem("base-warmup-negative", (option_flag("base_warmup"), f" must be 0 or more, not {s.base_warmup[0]:g}"))]
    if workload is not None and base_batch:
        return base_warmup_epochs(s.base_warmup, workload.current_warmup_steps, base_batch, workload.train_length), []
    return (DEFAULT_BASE_WARMUP_EPOCHS, "the advisor's default"), []


def _run_length_checks(s: MethodSettings, workload) -> tuple[float | None, list[Problem]]:
    problems = []
    if s.run_epochs is not None and not 0 < s.run_epochs < math.inf:
        problems.append(Problem("epochs-not-positive", (option_flag("epochs"), " must be positive and finite (the "
                                                        f"length of the planned run), not {s.run_epochs:g}")))
    run_epochs = s.run_epochs or (workload.epochs if workload is not None else None)
    if workload is not None and s.global_batch and not s.allow_few_steps:
        from .method.plan import few_steps_cost, largest_learnable_global

        epochs = run_epochs if run_epochs and run_epochs > 0 else None
        if s.global_batch > largest_learnable_global(workload.train_length, epochs):
            problems.append(Problem("global-batch-past-data", (
                option_flag("global_batch"), f" {s.global_batch} is past what the data can train: "
                f"{few_steps_cost(workload.train_length, s.global_batch, epochs)}. Ask for at most that, or add ",
                Flag("--force"), " to plan it anyway (the recipe then warns few-steps-per-epoch)")))
    return run_epochs, problems


def _resolved(s: MethodSettings, workload) -> tuple[object, list[Problem]]:
    from .workload import resolve_workload

    if workload is not None:
        return workload, []
    try:
        return resolve_workload(s.workload), []  # a bad workload fails here, before any process starts
    except AdvisorError as exc:
        return None, [said("workload-unresolved", str(exc))]


def _plan_options(s: MethodSettings, adapter: Adapter, optimizer: str) -> tuple[dict | None, list[Problem]]:
    try:  # after the optimizer is known: an option can be wrong for it (a DeepSpeed ZeRO stage with LAMB)
        return adapter.plan_options(dict(s.adapter_options), optimizer, s.precision), []
    except AdvisorError as exc:
        return None, [said("adapter-option", str(exc))]


def settings_problems(settings: MethodSettings, adapter: Adapter, host: HostDevices) -> tuple[list[Problem], list[str]]:
    """The checks that need no workload (the adapter, the host, the counts, the precision): (problems, notes). The
    script door runs them before its first look, which runs the script for seconds to a minute."""
    problems = _adapter_checks(adapter)
    host_said, notes = host_checks(settings.nproc, settings.memory_budget_bytes, host)
    problems += host_said + _capability_checks(settings, adapter, host) + _number_checks(settings)
    return problems + _precision_checks(settings, adapter, host), notes


def setup_problems(settings: MethodSettings, adapter: Adapter, host: HostDevices, workload=None
                   ) -> tuple[Setup | None, list[Problem]]:
    """Every checker in order: (the Setup, or None when a problem leaves none; the problems, typed)."""
    s = settings
    problems, notes = settings_problems(s, adapter, host)
    workload, unresolved = _resolved(s, workload)
    problems += unresolved + _task_checks(s, workload)
    optimizer = (s.optimizer or (workload.optimizer if workload else "sgd")).lower()
    problems += _optimizer_checks(optimizer, adapter)
    adapter_options, option_problems = _plan_options(s, adapter, optimizer)
    base, base_problems = _base_checks(s, workload)
    (warmup_epochs, warmup_source), warmup_problems = _warmup_checks(s, workload, base.batch)
    run_epochs, run_problems = _run_length_checks(s, workload)
    problems += option_problems + base_problems + warmup_problems + run_problems
    if problems:
        return None, problems
    run_source = "--epochs" if s.run_epochs else ("the workload's epochs" if run_epochs else "")
    return Setup(workload, host, base.lr, base.batch, base.source, optimizer, notes, adapter_options=adapter_options,
                 base_warmup_epochs=warmup_epochs, base_warmup_source=warmup_source, run_epochs=run_epochs,
                 run_source=run_source), []


def validate_setup(settings: MethodSettings, adapter: Adapter, host: HostDevices, workload=None) -> Setup:
    """Every input checked up front: one SetupRefused naming each problem and its fix (exit 2).

    ``workload``: one already resolved (the script door's ScriptWorkload); else ``settings.workload`` is."""
    setup, problems = setup_problems(settings, adapter, host, workload)
    if problems:
        raise SetupRefused(problems)
    return setup


def workload_precision(settings: MethodSettings, setup: Setup, supported: set[str]) -> PrecisionChoice | None:
    """Under ``--precision auto``, the mixed precision the workload says it trains in (a Trainer's bf16/fp16),
    when this device and adapter run it: the probes then measure what the training will hold. Else None."""
    wanted = getattr(setup.workload, "precision", None)
    if settings.precision != "auto" or wanted not in ("bf16", "fp16") or wanted not in supported:
        return None
    cuda = settings.device.startswith("cuda")
    if (wanted == "fp16" and not cuda) or (wanted == "bf16" and cuda and not setup.host.bf16):
        return None  # not runnable here: the auto rule decides, and its reason says what was measured
    return PrecisionChoice(wanted, None, cuda and setup.host.bf16, (
        f"{wanted}, as the workload trains (its precision = {wanted!r}, e.g. TrainingArguments {wanted}=True): the "
        f"ceiling probes, the trial and the sweep ran in {wanted} autocast. Pass --precision fp32 to measure fp32."))
