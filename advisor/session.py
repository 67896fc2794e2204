"""The four-step method one step at a time: a Session a UI (or the CLI's loop) drives.

Each step is a call that returns a typed result and reports typed events as it works; an
earlier step's new answer invalidates the later ones; ``cancel()`` from any thread stops the
running job's process group within a second and raises ``CancelledError``. Set-up is checked
here, before the first process starts, so every front end gets the same answers.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from .adapters import Adapter
from .method.ceiling import CeilingResult, ProbeTrial, search_ceiling
from .device import HostDevices
from .errors import AdvisorError, CancelledError, SetupError, TrialError
from .events import Decision, Event, Note, StepFinished, StepStarted
from .launch import CancelToken
from .ledger import NOT_A_CANDIDATE, TrialRecord
from .method import (SWEEP_EVAL_POINTS, MethodSettings, PrecisionChoice, SweepOutcome, TrialOutcome, WorkloadInfo,
                     choose_precision, data_cap, heterogeneous_devices_note, lr_and_warmup, make_plan,
                     mixed_before_accumulation, nearest_validated_lr, noise_estimate, short_trial, start_value,
                     sweep_candidates, sweep_run_settings, sweep_samples, trained_cap, validated_global)
from .method.goodput import GoodputResult, fit_step_time, goodput_optimum, timed_points
from .method.health import judge, unstable
from .method.inputs import lr_for, lr_seen_failing, validated_at_rule_lr, warmup_for
from .method.lr import DEFAULT_BASE_WARMUP_EPOCHS, KNOWN_OPTIMIZERS, LRDecision, WarmupDecision, base_warmup_epochs
from .method.noise import NoiseEstimate
from .method.plan import Plan, Warning_, plan_data_parallel
from .method.candidates import your_setting
from .method.speed import MIN_TIMING_SECONDS, timing_steps
from .method.sweep import DEFAULT_POLICY, SweepPolicy, SweepVerdict, decide_sweep, needs_timing, smallest_sweepable

# Past this many processes per CPU core a plan measures contention and takes hours: refused.
MAX_CPU_OVERSUBSCRIPTION = 4
# A stream cannot be scanned for its longest samples: its ceiling holds only for batches like those the probes met.
STREAM_PROBE_WARNING = ("The memory probes fed the training stream's batches as they came (an IterableDataset "
                        "cannot be scanned for its longest samples): if its samples vary in size, a later, longer "
                        "batch can exceed this ceiling. Give the workload probe_batch(n) (n samples at your "
                        "maximum length) for a worst-case ceiling, or keep more headroom.")

STEP_TITLES = {1: "Memory ceiling", 2: "Starting value", 3: "Trial run", 4: "Sweep"}
STEP_NAMES = {1: "memory ceiling", 2: "starting value", 3: "short trial", 4: "comparison sweep"}  # recipe keys
MIN_STEPS = 4  # a short run's first two steps pay one-time and tracking costs; time at least two more
NOISE_ACCUMULATION = 2  # one device: the noise run's micro-batches per step (first micro-batch vs accumulated)


@dataclass
class StepTiming:
    name: str
    seconds: float
    trials: int


@dataclass
class StartChoice:
    per_device: int
    reason: str


@dataclass
class MethodResult:
    settings: MethodSettings
    workload: WorkloadInfo
    ceiling: CeilingResult
    start_value: int
    start_reason: str
    trial_choice: int
    trial_reason: str
    sweep_choice: int
    sweep_reason: str
    plan: Plan
    lr: LRDecision
    warmup: WarmupDecision
    ledger: list[TrialRecord]
    timings: list[StepTiming]
    noise_scale: float | None
    noise_reason: str
    precision_reason: str = ""
    launch_env: dict = field(default_factory=dict)
    launch_command: list[str] = field(default_factory=list)
    adapter_extras: dict = field(default_factory=dict)
    per_device_cap: int = 0
    cap_reason: str = ""
    optimizer_implementation: str | None = None  # what the workers ran, as they reported it
    optimizer_hyperparameters: dict = field(default_factory=dict)  # weight decay, momentum, betas, eps
    optimizer_hyperparameters_source: str = ""
    tf32: bool = False  # the probes ran with TF32 matmuls allowed; the user's run must allow them too
    host: HostDevices | None = None  # what detect() found before the plan
    cluster: dict | None = None  # the nodes a plan across nodes ran on (advisor.cluster.ClusterFacts), or None
    workload_notes: dict = field(default_factory=dict)  # the recipe's [workload] additions: metric, what was probed
    sweep_summary: dict = field(default_factory=dict)  # SweepOutcome.summary(): spread, ties, diverged runs
    trial_summary: dict = field(default_factory=dict)  # TrialOutcome.summary(): each decision's rule code
    noise: NoiseEstimate | None = None  # the noise scale with its interval (noise_scale is its value)
    goodput: GoodputResult | None = None  # the goodput-optimal batch beside the advised plan
    # Set when no sweep candidate learned: the plan is the user's base setting, not one the advisor validated
    # (the summary's first line, the recipe's top-level [[warnings]], `advisor plan`'s exit code NOT_VALIDATED).
    headline: str = ""


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


def host_problems(nproc: int, budget_bytes: int | None, host: HostDevices) -> tuple[list[str], list[str]]:
    """What this host cannot run: ``nproc`` processes each with ``budget_bytes`` of device memory (problems), and
    what it can but slowly (notes). One owner for `advisor plan` and for a re-plan confirmed on this host."""
    problems: list[str] = []
    notes: list[str] = []
    if nproc < 1:
        problems.append(f"--nproc must be at least 1, not {nproc}")
    elif host.type == "cuda" and nproc > host.count:
        problems.append(f"--nproc {nproc} asks for more processes than the {host.count} GPU(s) here; "
                        f"use --nproc {host.count} or fewer (and --nodes for a bigger target cluster)")
    elif host.type == "cpu" and nproc > MAX_CPU_OVERSUBSCRIPTION * host.cpu_count:
        problems.append(f"--nproc {nproc} on this CPU host's {host.cpu_count} core(s) would share each core among "
                        f"{nproc / host.cpu_count:.0f} processes: every run would take about that many times longer "
                        "and its speed would measure the contention, not the model; use --nproc "
                        f"{MAX_CPU_OVERSUBSCRIPTION * host.cpu_count} or fewer (--nodes / --world-size still plan for "
                        "a bigger target cluster)")
    elif host.type == "cpu" and nproc > host.cpu_count:
        notes.append(f"{nproc} processes on {host.cpu_count} CPU core(s): they share cores, so every run takes "
                     f"about {nproc / host.cpu_count:.1f}x as long and its samples/s measure that sharing, not "
                     "separate devices.")
    if not budget_bytes or budget_bytes <= 0:
        problems.append("the device memory budget must be larger than zero (--device-memory SIZE)")
    elif host.type == "cuda" and host.memories and budget_bytes > min(host.memories):
        from .units import format_bytes

        problems.append(f"--device-memory {format_bytes(budget_bytes)} is more than the smallest GPU here "
                        f"has ({format_bytes(min(host.memories))}); a probe cannot measure memory the card lacks")
    elif host.type == "cpu" and host.physical_memory and nproc >= 1 \
            and nproc * budget_bytes > host.physical_memory:
        from .units import format_bytes

        ram, budget = host.physical_memory, budget_bytes
        problems.append(f"--nproc {nproc} x --device-memory {format_bytes(budget)} = "
                        f"{format_bytes(nproc * budget)} is more than this host's {format_bytes(ram)} of RAM: trials "
                        "run every process at once, each allowed its whole budget, so the host would swap or kill "
                        "them before a real out-of-memory shows; use --device-memory "
                        f"{format_bytes(ram // nproc)} or less"
                        + (f", or --nproc {ram // budget} or fewer (--nodes/--world-size still plan for a bigger "
                           "cluster)" if budget <= ram else ""))
    return problems, notes


def validate_setup(settings: MethodSettings, adapter: Adapter, host: HostDevices, workload=None) -> Setup:  # noqa: C901 -- complexity debt, a list of independent cases; split when next changed
    """Every input checked up front: one SetupError naming each problem and its fix (exit 2).

    ``workload``: one already resolved (the script door's ScriptWorkload); else ``settings.workload`` is."""
    from .workload import resolve_workload

    problems: list[str] = []
    notes: list[str] = []
    s = settings
    caps = adapter.capabilities
    reason = adapter.unavailable_reason()  # load_adapter gives every adapter AdapterBase's defaults
    if reason:
        problems.append(f"the adapter {adapter.name!r} cannot run here: {reason}")
    host_said, host_notes = host_problems(s.nproc, s.memory_budget_bytes, host)
    problems += host_said
    notes += host_notes
    if s.nproc > 1 and not caps.multi_process:
        problems.append(f"the adapter {adapter.name!r} runs a single process only; use --nproc 1")
    if caps.needs_cuda and host.type != "cuda":
        problems.append(f"the adapter {adapter.name!r} needs a CUDA GPU and this host has none")
    if s.nodes < 1:
        problems.append(f"--nodes must be at least 1, not {s.nodes}")
    if s.target_world_size is not None and s.target_world_size < 1:
        problems.append(f"the target world size must be at least 1, not {s.target_world_size}")
    if not 0 <= s.headroom < 1:
        problems.append(f"--headroom must be a fraction in [0, 1) (0.10-0.20 is the method's range), not {s.headroom}")
    for name, steps in (("--trial-steps", s.trial_steps), ("--sweep-steps", s.sweep_steps)):
        if steps < MIN_STEPS:
            problems.append(f"{name} must be at least {MIN_STEPS} (the first two steps pay one-time costs), "
                            f"not {steps}")
    if s.sweep_walk < 0:
        problems.append(f"--sweep-walk must be 0 or more extra sweep candidates, not {s.sweep_walk}")
    if s.sweep_seeds < 1:
        problems.append(f"--sweep-seeds must be 1 or more paired seeds per sweep candidate (3 is the default: 2 "
                        f"degrees of freedom for the paired t-interval), not {s.sweep_seeds}")
    for name, seconds in (("--trial-timeout", s.trial_timeout_s), ("--idle-timeout", s.idle_timeout_s)):
        if not seconds > 0:
            problems.append(f"{name} must be a positive number of seconds, not {seconds}")
    if s.global_batch is not None and s.global_batch < 1:
        problems.append(f"--global-batch must be at least 1, not {s.global_batch}")
    if s.start_per_device is not None and s.start_per_device < 1:
        problems.append(f"--start must be at least 1 sample per device, not {s.start_per_device}")
    if s.base_lr is not None and not s.base_lr > 0:
        problems.append(f"--base-lr must be positive, not {s.base_lr}")
    if s.base_batch is not None and s.base_batch < 1:
        problems.append(f"--base-batch must be at least 1, not {s.base_batch}")
    if s.precision not in ("auto", "fp32", "bf16", "fp16"):
        problems.append(f"--precision must be auto, fp32, bf16 or fp16, not {s.precision!r}")
    elif s.precision == "fp16" and host.type != "cuda":
        problems.append("fp16 mixed precision needs a CUDA GPU (loss scaling, fp16 kernels); on CPU use "
                        "--precision bf16 or fp32")
    elif s.precision in ("bf16", "fp16") and not getattr(caps, f"supports_{s.precision}", False):
        problems.append(f"the adapter {adapter.name!r} does not support {s.precision}")
    elif s.precision == "bf16" and host.type == "cuda" and not host.bf16:
        problems.append("bf16 needs a GPU with compute capability 8.0 or newer (Ampere); this one only emulates it, "
                        "slowly: use --precision fp16 (AMP with a GradScaler) or fp32")
    try:
        if workload is None:
            workload = resolve_workload(s.workload)  # a bad workload fails here, before any process starts
    except AdvisorError as exc:
        problems.append(str(exc).rstrip("."))
    if s.task is not None:
        from .tasks import TASKS

        if s.task not in TASKS:
            problems.append(f"--task {s.task!r} is not one of {', '.join(sorted(TASKS))}")
        elif workload is not None:
            workload.task = s.task  # the user's task type replaces the workload's for this plan
    optimizer = (s.optimizer or (workload.optimizer if workload else "sgd")).lower()
    if optimizer not in KNOWN_OPTIMIZERS:
        problems.append(f"--optimizer {optimizer!r} is not one of {', '.join(sorted(KNOWN_OPTIMIZERS))}")
    elif caps.optimizers is not None and optimizer not in caps.optimizers:
        problems.append(f"the adapter {adapter.name!r} cannot run the optimizer {optimizer!r} "
                        f"(it runs {', '.join(sorted(caps.optimizers))}); choose another --optimizer or adapter")
    elif optimizer == "lamb" and not caps.supports_lamb:
        problems.append(f"the adapter {adapter.name!r} does not declare LAMB support (capabilities.supports_lamb); "
                        "choose another --optimizer or adapter")
    else:
        from .optimizers import unavailable_reason as optimizer_unavailable

        if optimizer_unavailable(optimizer):
            problems.append(optimizer_unavailable(optimizer))
    adapter_options = None
    try:  # after the optimizer is known: an option can be wrong for it (a DeepSpeed ZeRO stage with LAMB)
        adapter_options = adapter.plan_options(dict(s.adapter_options), optimizer, s.precision)
    except AdvisorError as exc:
        problems.append(str(exc).rstrip("."))
    base_lr = base_batch = None
    source = ""
    if workload is not None:
        base_lr = s.base_lr or workload.current_lr
        # The base batch is the global batch the base LR was tuned at; never a guess (a task's per-device
        # starting value taken as a global batch put every scaled LR off by that factor).
        base_batch = s.base_batch or workload.current_batch_size
        if base_lr is None:
            problems.append(f"the workload {s.workload!r} gives no learning rate: pass --base-lr (the LR you use "
                            "today) and --base-batch (the global batch it was tuned for)")
        elif base_batch is None:
            given = "--base-lr" if s.base_lr else "the workload's current_lr"
            problems.append(f"{given} ({base_lr:g}) comes without the global batch it was tuned for, and the "
                            f"workload {s.workload!r} sets no current_batch_size: pass --base-batch N (today's "
                            "global batch: per-device x processes x accumulation), or set current_batch_size in "
                            "the workload; every scaled LR depends on it")
        source = base_source(s.base_lr is not None, s.base_batch is not None)
    warmup_epochs, warmup_source = DEFAULT_BASE_WARMUP_EPOCHS, "the advisor's default"
    if s.base_warmup is not None and not s.base_warmup[0] >= 0:
        problems.append(f"--base-warmup must be 0 or more, not {s.base_warmup[0]:g}")
    elif workload is not None and base_batch:
        warmup_epochs, warmup_source = base_warmup_epochs(s.base_warmup, workload.current_warmup_steps, base_batch,
                                                          workload.train_length)
    if s.run_epochs is not None and not s.run_epochs > 0:
        problems.append(f"--epochs must be positive (the length of the planned run), not {s.run_epochs:g}")
    run_epochs = s.run_epochs or (workload.epochs if workload is not None else None)
    if workload is not None and s.global_batch and not s.allow_few_steps:
        from .method.plan import few_steps_cost, largest_learnable_global

        epochs = run_epochs if run_epochs and run_epochs > 0 else None
        if s.global_batch > largest_learnable_global(workload.train_length, epochs):
            problems.append(f"--global-batch {s.global_batch} is past what the data can train: "
                            f"{few_steps_cost(workload.train_length, s.global_batch, epochs)}. Ask for at most "
                            "that, or add --force to plan it anyway (the recipe then warns few-steps-per-epoch)")
    run_source = "--epochs" if s.run_epochs else ("the workload's epochs" if run_epochs else "")
    if problems:
        raise SetupError("Cannot start the plan: " + "; ".join(problems) + ". Nothing was run.")
    return Setup(workload, host, base_lr, base_batch, source, optimizer, notes, adapter_options=adapter_options,
                 base_warmup_epochs=warmup_epochs, base_warmup_source=warmup_source, run_epochs=run_epochs,
                 run_source=run_source)


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


class Session:
    """The four steps over one adapter. Call ``ceiling()``, ``choose_start()``, ``trial()``, ``sweep()``,
    ``finish()`` in order; redo any of them; ``cancel()`` from another thread stops the running one."""

    def __init__(self, adapter: Adapter, settings: MethodSettings, setup: Setup,
                 on_event: Callable[[Event], None] | None = None, runner=None, known=None, cluster=None):
        from .runner import JobRunner

        self.adapter, self.settings, self.setup = adapter, settings, setup
        self.on_event = on_event or (lambda event: None)
        self.cancel_token = CancelToken()
        supported = {p for p in ("bf16", "fp16") if getattr(adapter.capabilities, f"supports_{p}", False)}
        self.precision = workload_precision(settings, setup, supported) or choose_precision(
            settings.precision, settings.device, setup.host.bf16, supported)
        self.mixed = self.precision.mixed  # tried before halving and before accumulation
        # Tests hand in a stub runner with the same probe/train/ledger/model_info/env/options surface.
        if runner is None and cluster is not None:  # `advisor plan --nnodes`: every job on every node
            from .cluster_runner import ClusterRunner

            runner = ClusterRunner(adapter, settings, self._emit, self.cancel_token, setup.adapter_options,
                                   tf32=self.precision.tf32, link=cluster)
        self.runner = runner or JobRunner(adapter, settings, self._emit, self.cancel_token, setup.adapter_options,
                                          tf32=self.precision.tf32)
        if runner is not None and setup.adapter_options is not None:
            runner.options = setup.adapter_options  # a handed-in runner (tests, the app's stub) runs the checked ones
        self._mixed_ceilings: dict[str, CeilingResult | str] = {}  # per mixed precision: its ceiling, or why none
        self.timings: dict[int, StepTiming] = {}
        self._probes: dict[int, ProbeTrial] = {}
        # Which step ran each ledger row (parallel to runner.ledger), and the rows a redo replaced: the recipe's
        # ledger and the noise-scale median count only the walk that produced the plan.
        self._row_steps: list[int] = []
        self._running_step = 1
        self._superseded: set[int] = set()  # id() of superseded rows
        self.ceiling_result: CeilingResult | None = None
        self.start: StartChoice | None = None
        self.trial_outcome: TrialOutcome | None = None
        self.sweep_outcome: SweepOutcome | None = None
        self.result: MethodResult | None = None
        self.known = known  # history.Known: what earlier runs of this workload on this device class measured
        for note in setup.notes:
            self._emit(Note(note))

    # -- plumbing -----------------------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        self.on_event(event)

    def cancel(self) -> None:
        """Thread-safe: the running step's workers are stopped and it raises CancelledError."""
        self.cancel_token.cancel()

    def _attribute_rows(self, step: int) -> None:
        """The ledger rows added since the last call were run by ``step``."""
        added = len(self.runner.ledger) - len(self._row_steps)
        self._row_steps += [step] * max(0, added)

    def _supersede_from(self, step: int, keep=lambda row: False) -> None:
        """A redo of ``step``: the rows of its earlier runs and of every later step no longer count."""
        self._attribute_rows(self._running_step)
        for row, ran_in in zip(self.runner.ledger, self._row_steps):
            if ran_in >= step and not keep(row):
                self._superseded.add(id(row))

    @property
    def ledger(self) -> list[TrialRecord]:
        """The runs of the current walk: every row except those a redo superseded."""
        return [row for row in self.runner.ledger if id(row) not in self._superseded]

    def _begin(self, step: int, keep=lambda row: False) -> tuple[float, int]:
        self._supersede_from(step, keep)
        self._running_step = step
        self.cancel_token.reset()
        self._emit(StepStarted(step, STEP_TITLES[step]))
        return time.monotonic(), len(self.runner.ledger)

    def _end(self, step: int, began: tuple[float, int]) -> None:
        timing = StepTiming(STEP_NAMES[step], time.monotonic() - began[0], len(self.runner.ledger) - began[1])
        self.timings[step] = timing
        self._emit(StepFinished(step, STEP_TITLES[step], timing.seconds, timing.trials))

    def invalidate_after(self, step: int) -> None:
        """An earlier answer changed: later results no longer hold."""
        if step < 2:
            self.start = None
        if step < 3:
            self.trial_outcome = None
        if step < 4:
            self.sweep_outcome = None
        self.result = None
        for later in [k for k in self.timings if k > step]:
            del self.timings[later]

    @property
    def info(self) -> WorkloadInfo:
        w = self.setup.workload
        model = self.runner.model_info or {}
        return WorkloadInfo(w.name, w.task, w.num_classes, self.setup.optimizer, w.train_length, len(w.val_data),
                            model.get("parameters", 0), bool(model.get("has_batchnorm")), self.setup.base_lr,
                            self.setup.base_global_batch, self.setup.base_source, self.setup.base_warmup_epochs,
                            self.setup.base_warmup_source, self.setup.run_epochs, self.setup.run_source)

    @property
    def data_cap(self) -> int:
        return data_cap(self.setup.workload.train_length, self.settings.world_size)

    @property
    def cap_reason(self) -> str:
        return (f"the training set's share per device: {self.setup.workload.train_length} samples / "
                f"{self.settings.world_size} process(es)")

    @property
    def per_device_cap(self) -> int:
        """The largest per-device batch any later step may use: memory ceiling and data share."""
        if self.ceiling_result is None:
            raise AdvisorError("Run the memory ceiling (step 1) first.")
        return min(self.ceiling_result.per_device_max, self.data_cap)

    @property
    def learnable_cap(self) -> tuple[int, str]:
        """The largest per-device batch the start, the trial and the sweep use: within memory and data, and
        leaving at least MIN_STEPS_PER_RUN optimizer steps in the planned run at the global batch those runs
        validate (per-device x this host's processes; the plan keeps that global batch on any target cluster)."""
        from .method.plan import MIN_STEPS_PER_RUN, largest_learnable_global

        cap = self.per_device_cap
        train_size, nproc, epochs = self.setup.workload.train_length, self.settings.run_processes, self.info.run_epochs
        by_run = max(1, largest_learnable_global(train_size, epochs) // nproc)
        if by_run < cap:
            run = f"the {epochs:g}-epoch run ({self.info.run_source})" if epochs else "a 1-epoch run (no --epochs)"
            return by_run, (f"{train_size} training samples leave at least {MIN_STEPS_PER_RUN} optimizer steps in "
                            f"{run} on {nproc} process(es) only up to {by_run} per device")
        return cap, ""

    # -- step 1 -------------------------------------------------------------------------------------------
    def ceiling(self, headroom: float | None = None, reuse_probes: bool = False) -> CeilingResult:
        """Step 1. With ``reuse_probes`` a batch already probed is not run again (a new headroom is cheap)."""
        if headroom is not None:
            if not 0 <= headroom < 1:
                raise SetupError(f"Headroom must be a fraction in [0, 1), not {headroom}.")
            self.settings.headroom = headroom
        measure = self.precision.measure
        began = self._begin(1, keep=lambda row: reuse_probes and row.phase == "ceiling" and row.precision == measure
                            and row.per_device in self._probes)
        if getattr(self.runner, "probe_selection", "absent") is None:  # the worst case, measured once
            from .batches import select_probe_samples

            self.runner.probe_selection = select_probe_samples(self.setup.workload)
            self._emit(Note(f"Memory probes feed {self.runner.probe_selection.reason}."))
        if not reuse_probes:
            self._probes.clear()
        self._mixed_ceilings.clear()
        self.ceiling_result = self._search_ceiling(self.precision.measure, self._probes)
        self.invalidate_after(1)
        self._end(1, began)
        return self.ceiling_result

    def _search_ceiling(self, precision: str, probes: dict[int, ProbeTrial]) -> CeilingResult:
        def probe(batch: int, purpose: str) -> ProbeTrial:
            if batch not in probes:
                probes[batch] = self.runner.probe(batch, purpose, precision)
            return probes[batch]

        max_batch = min(self.settings.max_batch, self.data_cap)
        cap_reason = self.cap_reason if max_batch == self.data_cap else "the search's upper limit"
        seed = self.known.ceiling_seed(precision, self.settings.memory_budget_bytes) if self.known else None
        if seed:
            from .history import seeded_ceiling

            found, why = seeded_ceiling(probe, seed, self.settings.memory_budget_bytes, self.settings.headroom,
                                        max_batch, lambda: (self.runner.model_info or {}).get("parameters"))
            if found is not None:
                return found
            self._emit(Note(f"History: {why}."))
        hardware = None
        if self.settings.device == "cpu":
            from .device import cpu_runs_precision

            hardware = lambda: cpu_runs_precision(precision)  # noqa: E731 -- asked only when probes fail at 1-2
        return search_ceiling(probe, self.settings.memory_budget_bytes, self.settings.headroom, max_batch,
                              cap_reason=cap_reason, precision=precision, hardware_runs=hardware)

    def close(self) -> None:
        """End what the session holds between steps: the warm fork server the plan's jobs (probes, trial, sweep)
        share. It holds an imported torch and the workload's module, so it ends with the sweep, the last step
        that runs jobs, or with the session; a later step starts it again."""
        close = getattr(self.runner, "close", None)
        if close:
            close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _mixed_cap(self, mixed: str) -> tuple[int | None, str]:
        """The per-device cap with the ceiling re-probed in ``mixed`` precision, or None and why it cannot run."""
        if mixed not in self._mixed_ceilings:
            self._emit(Note(f"The plan needs accumulation in {self.precision.measure}: re-probing the memory "
                            f"ceiling in {mixed} first (mixed precision before accumulation)."))
            self._attribute_rows(self._running_step)
            try:
                self._mixed_ceilings[mixed] = self._search_ceiling(mixed, {})
            except CancelledError:
                raise
            except AdvisorError as exc:
                self._mixed_ceilings[mixed] = str(exc)  # asked again (a new global target), the answer stands
            finally:
                self._attribute_rows(1)  # kept, like the answer, until the ceiling is redone
        found = self._mixed_ceilings[mixed]
        if isinstance(found, str):
            return None, found
        return min(found.per_device_max, self.data_cap), ""

    # -- step 2 -------------------------------------------------------------------------------------------
    def choose_start(self, per_device: int | None = None) -> StartChoice:
        """Step 2: the task table's value or the user's own, capped by the ceiling, the data and the steps per
        epoch (``learnable_cap``), whichever binds; the reason names it."""
        if per_device is None:
            per_device = self.settings.start_per_device  # --start, or a value typed on the app's screen
        began = self._begin(2)
        cap, why = self.learnable_cap
        why = why or (self.cap_reason if cap < self.ceiling_result.per_device_max else "")
        cap_text = f"capped at {cap}: {why}." if why else f"capped by the ceiling of {cap}."
        if per_device is not None:
            if per_device < 1:
                raise SetupError(f"The starting value must be at least 1, not {per_device}.")
            chosen = min(per_device, cap)
            reason = f"Your starting value of {per_device} per device" + (
                f", {cap_text}" if chosen < per_device else ".")
        elif self.known and self.known.best_start(self.settings.nproc):
            known, why = self.known.best_start(self.settings.nproc)
            chosen = min(known, cap)
            reason = f"Start at {why}" + (f", {cap_text}" if chosen < known else ".")
        else:
            chosen, reason = start_value(self.info.task, cap, cap_text, self.info.base_global_batch,
                                         self.settings.nproc, self.info.base_source,
                                         cap_is_memory=cap == self.ceiling_result.per_device_max)
        self.start = StartChoice(chosen, reason)
        self.invalidate_after(2)
        self._end(2, began)
        return self.start

    @property
    def amp_available(self) -> bool:
        """Whether the plan may advise mixed precision: a mixed one is tried on this device, or it is a CPU."""
        return self.mixed is not None or self.settings.device == "cpu"

    def preview_plan(self, per_device: int) -> tuple[Plan, str]:
        """The plan ``per_device`` (a starting value) gives before the trial and sweep run, and why its global
        target is what it is: the user's --global-batch, else that value over the target's processes."""
        s, info = self.settings, self.info
        target = s.global_batch or validated_global(s, per_device)
        plan = plan_data_parallel(target, s.world_size, self.per_device_cap, info.task, info.num_classes,
                                  info.has_batchnorm, s.device, self.precision.measure,
                                  amp_available=self.amp_available, train_size=info.train_size,
                                  run_epochs=info.run_epochs)
        why = (f"You asked for a global batch of {s.global_batch}." if s.global_batch else
               f"{per_device} per device x {s.nproc} process(es); the sweep (step 4) decides the final value.")
        return plan, why

    # -- step 3 -------------------------------------------------------------------------------------------
    def trial(self) -> TrialOutcome:
        if self.start is None:
            self.choose_start()
        began = self._begin(3)
        ceiling = self.ceiling_result
        cap, why = self.learnable_cap
        self.trial_outcome = short_trial(self.runner, self.start.per_device, ceiling, self.settings.trial_steps,
                                         self.info, self.precision.measure, self.mixed,
                                         lambda message: self._emit(Decision(3, message)), cap=max(cap, 1),
                                         cap_reason=why or ("the memory ceiling" if cap == ceiling.per_device_max
                                                            else self.cap_reason))
        self.trial_outcome.noise_run = self._noise_run(self.trial_outcome)
        self.invalidate_after(3)
        self._end(3, began)
        return self.trial_outcome

    def _noise_run(self, trial: TrialOutcome) -> TrialRecord | None:
        """One device has no replicas to compare: when the adapter's worker can meter it, one short run with
        accumulation 2 gives the two gradients instead (first micro-batch, accumulated). It runs half the trial's
        choice per micro-batch, so its global batch, and so its LR, are the trial's own, which the trial just
        showed to train (at twice the global batch the scaled LR can blow the run up, and a run whose loss rose
        says nothing about sampling noise)."""
        if self.runner.nproc != 1 or not getattr(self.adapter.capabilities, "noise_by_accumulation", False):
            return None
        batch, steps = max(1, trial.chosen // NOISE_ACCUMULATION), self.settings.trial_steps
        lr, warmup = lr_and_warmup(self.info, batch * NOISE_ACCUMULATION, steps)
        self._emit(Decision(3, f"One device: a short run of {batch} per device x {NOISE_ACCUMULATION} accumulation "
                            "measures the noise scale (micro-batch vs accumulated gradient)."))
        try:
            return self.runner.train("noise", batch, steps, lr, warmup, accumulation=NOISE_ACCUMULATION,
                                     precision=trial.precision)
        except CancelledError:
            raise
        except TrialError as exc:  # the plan stands without it: the noise scale is then unknown, and says why
            self._emit(Note(f"The noise-scale run (accumulation {NOISE_ACCUMULATION} at {batch} per device) failed, "
                            f"so the noise scale stays unknown: {exc}"))
            return None

    # -- step 4 -------------------------------------------------------------------------------------------
    def sweep(self, chosen: int | None = None) -> SweepOutcome:
        try:
            return self._sweep(chosen)
        finally:
            self.close()  # the last step that runs jobs

    def _sweep(self, chosen: int | None) -> SweepOutcome:
        if self.trial_outcome is None and chosen is None:
            raise AdvisorError("Run the short trial (step 3) first, or give the batch to sweep around.")
        began = self._begin(4)
        chosen = chosen or self.trial_outcome.chosen
        precision = self.trial_outcome.precision if self.trial_outcome else self.precision.measure
        cap, _ = self.learnable_cap
        chosen, candidates, note = self._sweep_range(chosen, cap)
        yours = your_setting(self.info.base_global_batch, self.runner.nproc, cap, self.info.has_batchnorm)[0]
        # Equal samples: every candidate trains on what the centre sees in --sweep-steps steps (at most the planned
        # run), each with the warmup the plan would give its batch, so a bigger batch is not credited with more data.
        samples, budget_note = sweep_samples(self.settings.sweep_steps, chosen, self.runner.nproc,
                                             self.info.train_size, self.info.run_epochs, self.info.run_source)
        if budget_note:
            self._emit(Note(budget_note))
            note = " ".join(filter(None, (note, budget_note)))
        policy = SweepPolicy(seeds=self.settings.sweep_seeds, extensions=self.settings.sweep_walk,
                             max_seeds=max(self.settings.sweep_seeds, DEFAULT_POLICY.max_seeds))
        reruns: dict[int, TrialRecord] = {}
        rows = self._sweep_candidates(candidates, samples, precision, range(policy.seeds), reruns)
        extended: list[int] = []
        timing: dict[int, dict[int, float]] = {}

        def verdict_now() -> SweepVerdict:
            return decide_sweep(rows, self.info.num_classes, cap, policy.extensions - len(extended), policy, reruns,
                                timing, batchnorm=self.info.has_batchnorm, yours=yours)

        def decide() -> SweepVerdict:
            """The verdict once it stands: inconclusive pairs given their extra seeds (each run once), then the
            equals (and your setting beside the pick) timed side by side."""
            while True:
                verdict = verdict_now()
                ran = {(r.per_device, r.seed or 0) for r in rows}
                extra = [pair for pair in verdict.extra_seeds if pair not in ran]
                if extra:
                    rows.extend(self._extra_seed_runs(verdict, extra, samples, precision, reruns))
                    continue
                to_time = needs_timing(verdict)
                if not to_time:
                    return verdict
                timing.clear()
                timing.update(self._time_side_by_side(to_time, samples, precision, policy.seeds))

        verdict = decide()
        while verdict.extend_to is not None:
            batch = verdict.extend_to
            self._emit(Decision(4, f"{verdict.chosen} per device won at an end of the range: sweeping {batch} "
                                   "per device too, with the same seeds."))
            extended.append(batch)
            candidates = sorted(candidates + [batch])
            rows += self._sweep_candidates([batch], samples, precision, range(policy.seeds), reruns)
            verdict = decide()
        reason = " ".join(filter(None, (note, verdict.reason, self._warmup_note(candidates, samples))))
        self._emit(Decision(4, reason, verdict=True))
        self.sweep_outcome = SweepOutcome(verdict.chosen if not verdict.failed else chosen, reason, rows, candidates,
                                          verdict, samples, extended)
        self.invalidate_after(4)
        self._end(4, began)
        return self.sweep_outcome

    def _extra_seed_runs(self, verdict: SweepVerdict, pairs: list[tuple[int, int]], samples: int, precision: str,
                         reruns: dict[int, TrialRecord]) -> list[TrialRecord]:
        """The extra paired seeds an inconclusive comparison asks for (``SweepVerdict.extra_seeds``), seed by seed
        across the batches that need each, as the sweep's own runs go."""
        batches = sorted({b for b, _ in pairs})
        seeds = sorted({s for _, s in pairs})
        self._emit(Decision(4, f"{' and '.join(map(str, batches))} per device: the gap is over the margin of "
                               f"{verdict.fmt(verdict.margin)} but its interval holds 0 (inconclusive): running "
                               f"paired seed(s) {', '.join(map(str, seeds))} (at most {verdict.policy.max_seeds} "
                               "seeds in all)."))
        runs: list[TrialRecord] = []
        for seed in seeds:
            runs += self._sweep_candidates([b for b, s in pairs if s == seed], samples, precision,
                                           range(seed, seed + 1), reruns)
        return runs

    def _sweep_range(self, chosen: int, cap: int) -> tuple[int, list[int], str]:
        """(centre, candidates, note): half / chosen / double (or the subset) within the cap, and what changed."""
        _, why = self.learnable_cap
        cap_text = why or ("the memory ceiling" if cap == self.ceiling_result.per_device_max else self.cap_reason)
        notes = []
        if chosen > cap:  # the cap bounds every sweep point, the centre included
            notes.append(f"{chosen} per device is above the cap of {cap} ({cap_text}): sweeping around {cap}.")
            chosen = cap
        candidates, subset_note = sweep_candidates(chosen, cap, self.settings.subset_sweep,
                                                   smallest_sweepable(self.info.has_batchnorm))
        notes += [subset_note] if subset_note else []
        yours, not_yours = your_setting(self.info.base_global_batch, self.runner.nproc, cap, self.info.has_batchnorm)
        if yours is not None and yours not in candidates:  # the advice is measured against what you run today
            candidates = sorted(candidates + [yours])
            notes.append(f"Sweeping your own setting too ({yours} per device at the base LR), to compare the "
                         "advice with it on the same seeds.")
        elif not_yours:
            notes.append(f"Not compared with your own setting: {not_yours}.")
        if why and chosen * 2 > cap:
            notes.append(f"Not sweeping above {cap}: {why}.")
        note = " ".join(notes)
        if note:
            self._emit(Note(note))
        return chosen, candidates, note

    def _sweep_candidates(self, batches: list[int], samples: int, precision: str, seeds: range,
                          reruns: dict[int, TrialRecord]) -> list[TrialRecord]:
        """Every paired seed at each of ``batches``, seed by seed across them (load on a shared machine then falls
        on every candidate alike, so their samples/s compare); a candidate's later seeds are skipped once one rules
        it out (out of memory or unstable: the rule never lets it lead or tie, whatever the other seeds do). An
        unstable run at a scaled-up LR is rerun once at the nearest validated LR, into ``reruns`` (not a
        candidate's run: it says whether the LR or the batch is to blame)."""
        runs, out = [], set()
        for seed in seeds:
            for batch in batches:
                if batch in out:
                    continue
                record = self._sweep_run(batch, seed, samples, precision)
                runs.append(record)
                if record.status != "ok" or unstable(record):
                    out.add(batch)
                if record.status == "ok" and unstable(record) and batch not in reruns:
                    rerun = self._rerun_at_validated_lr(record, precision)
                    if rerun is not None:
                        reruns[batch] = rerun
        return runs

    def _time_side_by_side(self, batches: list[int], samples: int, precision: str, rounds: int
                           ) -> dict[int, dict[int, float]]:
        """Samples/s of ``batches`` timed again side by side: ``rounds`` rounds of one run each at the trial's
        length (its settings otherwise the candidate's sweep run's), the order reversed every other round, so that
        a machine's load and drift fall on every candidate alike. Per batch, round -> samples/s (a run that fails
        gives none, and the tie-break then has no paired speed for it). Phase "timing": never reused from the
        history (a reused timing was not side by side), and never read as a result."""
        self._emit(Decision(4, f"{', '.join(map(str, batches))} per device: timing them side by side ({rounds} "
                               f"round(s) of {self.settings.trial_steps} steps or more, to last {MIN_TIMING_SECONDS:g} s, interleaved) "
                               "before a speed is read "
                               "(the sweep's long runs each met the machine's load at a different time)."))
        timed: dict[int, dict[int, float]] = {b: {} for b in batches}
        for round_ in range(rounds):
            for batch in (batches if round_ % 2 == 0 else batches[::-1]):
                _, lr, warmup = sweep_run_settings(self.info, batch * self.runner.nproc, samples)
                steps = timing_steps(self.settings.trial_steps, self._swept_speed(batch), batch * self.runner.nproc)
                try:
                    record = self.runner.train("timing", batch, steps, lr, warmup,
                                               precision=precision, **({"seed": round_} if round_ else {}))
                except CancelledError:
                    raise
                except TrialError as exc:  # the sweep's verdict stands; this batch has no paired speed
                    self._emit(Note(f"Timing round {round_ + 1} at {batch} per device failed: {exc}"))
                    continue
                record.seed = round_
                record.note = (record.note + "; " if record.note else "") + (
                    f"{NOT_A_CANDIDATE}: timing round {round_ + 1} of {rounds}, side by side")
                if record.status == "ok" and (speed := record.samples_per_s):
                    timed[batch][round_] = speed
        return timed

    def _swept_speed(self, batch: int) -> float | None:
        """The median samples/s of ``batch``'s sweep runs so far (the timing runs' length is set from it)."""
        speeds = [r.samples_per_s for r in self.runner.ledger if r.phase == "sweep" and r.per_device == batch
                  and r.status == "ok" and r.samples_per_s]
        return statistics.median(speeds) if speeds else None

    def _rerun_at_validated_lr(self, record: TrialRecord, precision: str) -> TrialRecord | None:
        """The unstable sweep run again, same seed and steps, at the nearest validated LR (None when its LR was
        not scaled up past one: nothing to tell apart)."""
        validated, whose = nearest_validated_lr(self.info, record.global_batch, self._trained_rows())
        if record.lr is None or not record.lr > validated * (1 + 1e-9):
            return None
        extra = {"seed": record.seed} if record.seed else {}
        rerun = self.runner.train("sweep", record.per_device, record.steps, validated, record.warmup_steps or 0,
                                  evaluate=True, precision=precision, eval_points=SWEEP_EVAL_POINTS, **extra)
        rerun.seed = record.seed
        verdict = judge(rerun)
        rerun.note = (rerun.note + "; " if rerun.note else "") + (
            f"{NOT_A_CANDIDATE}: unstable at LR {record.lr:.3g}, rerun at {whose} LR {validated:.3g}: "
            f"{verdict.verdict}")
        self._emit(Decision(4, f"{record.per_device} per device was unstable at LR {record.lr:.3g}; at {whose} LR "
                               f"{validated:.3g} it " + ("learned: the LR scale-up, not the batch, is to blame."
                                                         if verdict.learned else "was not healthy either: the batch "
                                                         "itself is to blame.")))
        return rerun

    def _sweep_run(self, batch: int, seed: int, samples: int, precision: str) -> TrialRecord:
        """One sweep run (or the history's run at exactly its settings), with the health verdict in its note."""
        run_steps, lr, warmup = sweep_run_settings(self.info, batch * self.runner.nproc, samples)
        reused = self._reused_run("sweep", batch, run_steps, precision, lr, warmup, seed)
        if reused:
            return reused
        extra = {"seed": seed} if seed else {}  # seed 0 is every runner's default
        record = self.runner.train("sweep", batch, run_steps, lr, warmup, evaluate=True, precision=precision,
                                   eval_points=SWEEP_EVAL_POINTS, **extra)
        record.seed = seed
        if unstable(record):
            record.note = (record.note + "; " if record.note else "") + f"unstable: {judge(record).reason}"
        return record

    def _warmup_note(self, candidates: list[int], samples: int) -> str:
        """The candidates whose planned warmup is as long as their sweep run, or longer."""
        in_warmup = [b for b in candidates
                     if (run := sweep_run_settings(self.info, b * self.runner.nproc, samples))[2] >= run[0]]
        if not in_warmup:
            return ""
        return (f"At {', '.join(map(str, in_warmup))} per device the planned warmup outlasts the sweep run "
                f"({samples} samples each): the comparison covers the start of training only; a longer "
                "--sweep-steps covers more of it.")

    def _reused_run(self, phase: str, batch: int, steps: int, precision: str, lr: float, warmup: int,
                    seed: int = 0) -> TrialRecord | None:
        """A run the history measured at exactly these settings: reused, not re-run, and said so in the ledger."""
        if not self.known:
            return None
        from .events import TrialFinished
        from .history import record_from_row

        row = self.known.measured_run(phase, {"per_device": batch, "world_size": self.runner.nproc,
                                              "accumulation": 1, "steps": steps, "precision": precision, "lr": lr,
                                              "warmup_steps": warmup, "seed": seed})
        if row is None:
            return None
        record = record_from_row(row)
        self._emit(Note(f"{phase} at {batch} per device: {record.note}."))
        self.runner.ledger.append(record)
        self._emit(TrialFinished(record))
        return record

    def _trained_rows(self) -> list[TrialRecord]:
        return [r for r in self.ledger if r.phase in ("trial", "noise", "sweep")]

    def noise_estimate(self) -> NoiseEstimate:
        """The noise scale and its interval: from the sweep's chosen candidate once the sweep ran (the trial's runs
        then a lower bound beside it), from the trial's runs before; not estimated when no candidate learned."""
        sweep = self.sweep_outcome
        return noise_estimate(self._trained_rows(), self.setup.optimizer,
                              pick=sweep.chosen if sweep is not None and not sweep.failed else None,
                              validated=sweep is None or not sweep.failed)

    def goodput(self, estimate: NoiseEstimate, per_device: int, accumulation: int, world_size: int,
                cap: int, precision: str | None) -> GoodputResult:
        """The goodput-optimal batch from the runs' step times and ``estimate``, against the rule-of-thumb
        ``per_device`` x ``accumulation`` on ``world_size`` devices."""
        from .method.plan import largest_learnable_global

        model = fit_step_time(timed_points(self.ledger, precision))
        return goodput_optimum(model, estimate.value, estimate.reason, self.info.base_global_batch, world_size, cap,
                               self.setup.optimizer, rule_of_thumb=(per_device, accumulation),
                               max_global=largest_learnable_global(self.info.train_size, self.info.run_epochs))

    # -- the plan -----------------------------------------------------------------------------------------
    def finish(self, global_batch: int | None = None) -> MethodResult:
        """The plan for the target cluster, LR, warmup and launch line, from the steps run so far."""
        from .adapters import LaunchSpec

        if self.sweep_outcome is None:
            raise AdvisorError("Run the comparison sweep (step 4) first.")
        s = self.settings
        if global_batch is not None:
            if global_batch < 1:
                raise SetupError(f"The global batch target must be at least 1, not {global_batch}.")
            s.global_batch = global_batch
        info = self.info
        trial, sweep = self.trial_outcome, self.sweep_outcome
        precision, cap, ceiling, accumulation_note = self._plan_precision_and_cap(self._mixed_cap)
        cap, ran_why = self._cap_by_training_runs(precision, cap)
        estimate = self.noise_estimate()
        noise, noise_reason = estimate.value, estimate.reason
        plan, lr, warmup, goodput = self._plan_and_goodput(precision, cap, estimate)
        if ran_why:
            plan.warnings.append(Warning_("capped-by-training-oom", f"The per-device batch is capped at {cap}: "
                                          f"{ran_why}. The memory ceiling's probes allowed more; the training runs "
                                          "did not."))
        note = heterogeneous_devices_note(ceiling, s.device_memories)
        if note:
            plan.warnings.append(note)
        plan.warnings += [Warning_(code, w) for code, w in zip(goodput.warning_codes, goodput.warnings)]
        selection = getattr(self.runner, "probe_selection", None)
        if selection is not None and selection.kind == "stream":
            plan.warnings.append(Warning_("stream-probed-as-it-came", STREAM_PROBE_WARNING))
        precision_reason = self._precision_reason(accumulation_note)
        if self.precision.tf32:
            plan.precision_advice += (" TF32: the probes ran with torch.backends.cuda.matmul.allow_tf32 = True and "
                                      "torch.backends.cudnn.allow_tf32 = True; set them in the training script (or "
                                      "torch.set_float32_matmul_precision('high')), or keep the launch line's "
                                      "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1.")
        env = self.runner.env
        nproc_per_node = s.nproc if s.target_world_size is None else max(1, math.ceil(plan.world_size / s.nodes))
        ran = getattr(self.runner, "optimizer_info", None) or {}
        hyper, hyper_source = self._optimizer_hyperparameters(ran)
        launch = self.adapter.launch_command(LaunchSpec(nproc_per_node, s.nodes, plan.per_device,
                                                        plan.accumulation_steps, lr.value, warmup.steps,
                                                        plan.precision, env, optimizer=self.setup.optimizer,
                                                        optimizer_hyperparameters=hyper))
        timings = [self.timings[k] for k in sorted(self.timings)]
        self.result = MethodResult(
            s, info, ceiling, self.start.per_device if self.start else sweep.chosen,
            self.start.reason if self.start else "", trial.chosen if trial else sweep.chosen,
            trial.reason if trial else "", sweep.chosen, sweep.reason, plan, lr, warmup, self.ledger,
            timings, noise, noise_reason, precision_reason, dict(env), launch,
            self.adapter.recipe_extras(self.runner.options), cap,
            self.cap_reason if cap < ceiling.per_device_max else "")
        self.result.optimizer_implementation = ran.get("implementation")
        self.result.adapter_extras.update(ran.get("adapter_extras") or {})
        self.result.optimizer_hyperparameters, self.result.optimizer_hyperparameters_source = hyper, hyper_source
        self.result.tf32 = self.precision.tf32
        self.result.host = self.setup.host
        self.result.workload_notes = self.workload_notes()
        self.result.sweep_summary = sweep.summary()
        self.result.trial_summary = trial.summary() if trial else {}
        self.result.noise, self.result.goodput = estimate, goodput
        if sweep.failed:
            self.result.headline = (f"No sweep candidate learned: check the base LR ({info.base_lr:g} at global "
                                    f"batch {info.base_global_batch}). This plan is that base setting, not a "
                                    "validated one.")
        return self.result

    def _plan_precision_and_cap(self, mixed_cap) -> tuple[str, int, CeilingResult, str]:
        """(precision, per-device cap before the training runs' own OOM cap, the ceiling it came from, what mixed
        precision before accumulation decided): mixed precision is measured with ``mixed_cap`` when the plan
        needs accumulation in the measured precision."""
        s, measured = self.settings, self.precision.measure
        precision = self.trial_outcome.precision if self.trial_outcome else measured
        ceiling, cap, accumulation_note = self.ceiling_result, self.per_device_cap, ""
        if precision == measured:
            target = s.global_batch or self.sweep_outcome.chosen * s.world_size
            precision, cap, accumulation_note = mixed_before_accumulation(target, s.world_size, cap, self.precision,
                                                                          mixed_cap)
            if precision != measured:
                mixed_ceiling = self._mixed_ceilings[precision]
                ceiling = replace(mixed_ceiling, reason=f"In {precision} (re-probed: {measured} needed accumulation). "
                                  + mixed_ceiling.reason)
        return precision, cap, ceiling, accumulation_note

    def _cap_by_training_runs(self, precision: str, cap: int) -> tuple[int, str]:
        """``cap`` lowered to what the plan's own training runs held (trained_cap), and why ("" when they did not
        lower it)."""
        ran_cap, why = trained_cap(self._trained_rows(), precision)
        if ran_cap is not None and ran_cap < cap:
            return max(1, ran_cap), why
        return cap, ""

    def _plan_and_goodput(self, precision: str, cap: int, estimate: NoiseEstimate):
        """(plan, LR, warmup, goodput) at ``cap`` (already lowered by _cap_by_training_runs): the one computation
        behind finish() and plan_goodput(), so the app's Sweep screen and the recipe agree."""
        info, s, sweep = self.info, self.settings, self.sweep_outcome
        if sweep.failed:  # NOT VALIDATED: nothing noise-based (no goodput, no noise bound, no noise warning)
            plan, lr, warmup = self._base_fallback_plan(cap, precision)
            return plan, lr, warmup, GoodputResult(None, "Goodput-optimal batch: not computed, the plan is NOT "
                                                         "VALIDATED (no sweep candidate learned), so there is no "
                                                         "noise scale to weigh the step times with.")
        # Validated means validated at the rules' LR: a rerun at a lower LR does not extend the bound.
        healthy = [r.global_batch for r in validated_at_rule_lr(info, self._trained_rows())]
        plan, lr, warmup = make_plan(s, info, cap, sweep.chosen, sweep.reason, precision, estimate.value,
                                     amp_available=self.amp_available, healthy_global=max(healthy, default=None),
                                     noise_low=estimate.low if estimate.value else None)
        failed = lr_seen_failing(info, plan.global_batch, lr.value, self._trained_rows())
        if failed is not None:
            plan.warnings.append(Warning_(failed.code, failed.message))
            if failed.lr != lr.value:
                lr = replace(lr, value=failed.lr, capped=True, reason=f"{lr.reason} {failed.message}",
                             warnings=lr.warnings + [failed.message], seen_failing_at=lr.value)
        goodput = self.goodput(estimate, plan.per_device, plan.accumulation_steps, plan.world_size, cap, precision)
        return plan, lr, warmup, goodput

    def plan_goodput(self) -> GoodputResult:
        """The goodput finish() will report, computed after the sweep without running anything (the app's Sweep
        screen shows it). When the plan must first re-probe memory in mixed precision (a global target that needs
        accumulation), the value waits for the plan, and says so."""
        if self.sweep_outcome is None:
            raise AdvisorError("Run the comparison sweep (step 4) first.")
        not_probed = object()

        def known_mixed_cap(mixed: str):
            if mixed not in self._mixed_ceilings:
                raise LookupError(not_probed)
            return self._mixed_cap(mixed)

        try:
            precision, cap, _, _ = self._plan_precision_and_cap(known_mixed_cap)
        except LookupError:
            return GoodputResult(None, "Goodput-optimal batch: computed with the plan, which first re-probes the "
                                       "memory ceiling in mixed precision (the global target needs accumulation).")
        cap, _ = self._cap_by_training_runs(precision, cap)
        return self._plan_and_goodput(precision, cap, self.noise_estimate())[3]

    def _precision_reason(self, accumulation_note: str) -> str:
        """Why the plan runs in its precision: the choice made before the probes, then what the runs showed."""
        trial, measured = self.trial_outcome, self.precision.measure
        if trial and trial.precision != measured:
            outcome = (f"The trial ran out of memory in {measured} and fit in {trial.precision}, so the plan uses "
                       f"{trial.precision} (mixed precision before shrinking the batch).")
        elif accumulation_note:
            outcome = accumulation_note
        elif self.precision.mixed:
            outcome = f"Nothing ran out of memory in {measured} and no accumulation was needed, so the plan keeps it."
        else:
            outcome = ""
        return (self.precision.reason + " " + outcome).strip()

    def _optimizer_hyperparameters(self, ran: dict) -> tuple[dict, str]:
        """The optimizer's weight decay, momentum, betas and eps for the launch line, and where they came from."""
        if ran.get("hyperparameters") is not None:
            return ran["hyperparameters"], "what the workers' optimizer held (its param_groups)"
        from .optimizers import hyperparameters

        workload = self.setup.workload
        return (hyperparameters(self.setup.optimizer, workload.momentum, workload.weight_decay, workload.betas,
                                workload.eps), "the workload's settings")

    def _base_fallback_plan(self, cap: int, precision: str):
        """The plan when no sweep candidate learned: the user's base global batch at the base LR (no scale-up of
        an LR nothing validated), with the warning that says so. Never the setting the sweep saw fail."""
        info, s = self.info, self.settings
        base = replace(s, global_batch=info.base_global_batch)
        plan, lr, warmup = make_plan(base, info, cap, self.sweep_outcome.chosen, self.sweep_outcome.reason,
                                     precision, None, amp_available=self.amp_available)
        plan.warnings = [w for w in plan.warnings if w.code != "global-not-validated"]
        plan.validated_global = None  # nothing was validated: no global batch may be claimed as such
        # The base LR at the base batch, as the headline says: no bound from a sweep "pick" nothing validated (it
        # gave "LR 0.025 (unchanged; base 0.1)").
        lr = lr_for(info, plan.global_batch)
        warmup = warmup_for(info, lr)
        for warning in plan.warnings:  # the base batch is the fallback's, not one the user asked for
            warning.message = warning.message.replace(
                f" It stands because you asked for a global batch of {info.base_global_batch} (--global-batch).",
                " It stands because it is your base setting, the fallback when nothing learned.")
        plan.reason = (f"No sweep candidate learned, so the plan falls back to the base setting: global batch "
                       f"{info.base_global_batch} ({info.base_source}) at the base LR. " + plan.reason)
        plan.warnings.insert(0, Warning_(
            "no-candidate-learned",
            f"{self.sweep_outcome.verdict.reason} The plan is the base setting (global batch "
            f"{info.base_global_batch}, LR {lr.value:.4g}), which this plan did not validate either: check that "
            "the base LR trains at the base batch in a plain run before planning again."))
        return plan, lr, warmup

    def workload_notes(self) -> dict:
        """What the recipe's [workload] says about validation (the metric the sweep ranked by) and the probes."""
        notes: dict = {}
        ranking = getattr(self.runner, "ranking_info", None)
        if ranking:
            notes.update(metric=ranking["metric"], higher_is_better=ranking["higher_is_better"],
                         metric_reason=ranking["reason"])
        probed = getattr(self.runner, "probe_batches", None) or {}
        largest = self.ceiling_result.largest_ok if self.ceiling_result else None
        if largest in probed:
            notes["probed"] = probed[largest]
        return notes

    def run_all(self) -> MethodResult:
        """All four steps with the defaults, then the plan: what `advisor plan` does."""
        try:
            self.ceiling()
            self.choose_start()
            self.trial()
            self.sweep()
        finally:
            self.close()  # a step that failed leaves no warm server behind
        return self.finish()

