"""The plan assembled from the four steps' results: ``MethodResult`` (what the summary, the recipe and the app
read), built in one place with keywords (``assemble``), and the pieces of the plan no single step decides: the plan,
LR and goodput at the cap that binds (``plan_at_cap``), why its precision, the optimizer's hyperparameters, the
fallback when no sweep candidate learned, the launch line, what the recipe's [workload] adds about the probes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import math

from .adapters import Adapter
from .device import HostDevices
from .launch_line import LaunchSpec
from .ledger import TrialRecord, trained_rows
from .method import MethodSettings, PrecisionChoice, SweepOutcome, TrialOutcome, WorkloadInfo, make_plan
from .method.ceiling import CeilingResult
from .method.goodput import GoodputResult, fit_step_time, goodput_optimum, timed_points
from .method.inputs import LauncherReports, lr_for, warmup_for
from .method.validated import largest_validated_global, never_a_failed_lr
from .method.lr import DEFAULT_WARMUP_SOURCE, LRDecision, WarmupDecision
from .method.noise import NoiseEstimate
from .method.plan import Plan, Warning_, largest_learnable_global

# A stream cannot be scanned for its longest samples: its ceiling holds only for batches like those the probes met.
STREAM_PROBE_WARNING = ("The memory probes fed the training stream's batches as they came (an IterableDataset "
                        "cannot be scanned for its longest samples): if its samples vary in size, a later, longer "
                        "batch can exceed this ceiling. Give the workload probe_batch(n) (n samples at your "
                        "maximum length) for a worst-case ceiling, or keep more headroom.")
TF32_ADVICE = (" TF32: the probes ran with torch.backends.cuda.matmul.allow_tf32 = True and "
               "torch.backends.cudnn.allow_tf32 = True; set them in the training script (or "
               "torch.set_float32_matmul_precision('high')), or keep the launch line's "
               "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1.")
NO_GOODPUT_NOT_VALIDATED = ("Goodput-optimal batch: not computed, the plan is NOT VALIDATED (no sweep candidate "
                            "learned), so there is no noise scale to weigh the step times with.")


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


@dataclass(frozen=True)
class StepResults:
    """What the four steps answered, as the plan reads them."""

    settings: MethodSettings
    info: WorkloadInfo
    start: StartChoice | None
    trial: TrialOutcome | None
    sweep: SweepOutcome
    ledger: list[TrialRecord]
    timings: list[StepTiming]


@dataclass(frozen=True)
class PlanParts:
    """The plan and what was computed beside it (finish's work before the result is built)."""

    ceiling: CeilingResult
    plan: Plan
    lr: LRDecision
    warmup: WarmupDecision
    cap: int
    cap_reason: str
    estimate: NoiseEstimate
    goodput: GoodputResult
    precision_reason: str


def assemble(steps: StepResults, parts: PlanParts, *, env: dict, launch: list[str], adapter_extras: dict,
             ran: dict, hyperparameters: tuple[dict, str], tf32: bool, host: HostDevices,
             workload_notes: dict) -> MethodResult:
    """The MethodResult, every field by name: the one place a plan's result is built."""
    sweep, trial, start, info = steps.sweep, steps.trial, steps.start, steps.info
    headline = ""
    if sweep.failed:
        blame = ("every sweep candidate ran out of memory in its sweep run: plan again with more --headroom"
                 if sweep.verdict.out_of_memory_only else
                 f"check the base LR ({info.base_lr:g} at global batch {info.base_global_batch})")
        headline = (f"No sweep candidate learned: {blame}. This plan is the base setting (global batch "
                    f"{info.base_global_batch}), not a validated one.")
    return MethodResult(
        settings=steps.settings, workload=info, ceiling=parts.ceiling,
        start_value=start.per_device if start else sweep.chosen, start_reason=start.reason if start else "",
        trial_choice=trial.chosen if trial else sweep.chosen, trial_reason=trial.reason if trial else "",
        sweep_choice=sweep.chosen, sweep_reason=sweep.reason, plan=parts.plan, lr=parts.lr, warmup=parts.warmup,
        ledger=steps.ledger, timings=steps.timings, noise_scale=parts.estimate.value,
        noise_reason=parts.estimate.reason, precision_reason=parts.precision_reason, launch_env=dict(env),
        launch_command=launch, adapter_extras={**adapter_extras, **(ran.get("adapter_extras") or {})},
        per_device_cap=parts.cap, cap_reason=parts.cap_reason,
        optimizer_implementation=ran.get("implementation"), optimizer_hyperparameters=hyperparameters[0],
        optimizer_hyperparameters_source=hyperparameters[1], tf32=tf32, host=host, workload_notes=workload_notes,
        sweep_summary=sweep.summary(), trial_summary=trial.summary() if trial else {}, noise=parts.estimate,
        goodput=parts.goodput, headline=headline)


def plan_at_cap(settings: MethodSettings, info: WorkloadInfo, sweep: SweepOutcome, cap: int, precision: str,
                estimate: NoiseEstimate, ledger: list[TrialRecord], amp_available: bool
                ) -> tuple[Plan, LRDecision, WarmupDecision, GoodputResult]:
    """(plan, LR, warmup, goodput) at ``cap`` (already lowered by the training runs' own OOMs), from the current
    walk's ``ledger``: the one computation behind Session.finish() and Session.plan_goodput(), so the app's Sweep
    screen and the recipe agree. The LR is never one the runs saw fail at the plan's batch."""
    if sweep.failed:  # NOT VALIDATED: nothing noise-based (no goodput, no noise bound, no noise warning)
        plan, lr, warmup = base_fallback_plan(settings, info, sweep, cap, precision, amp_available)
        return plan, lr, warmup, GoodputResult(None, NO_GOODPUT_NOT_VALIDATED)
    trained = trained_rows(ledger)
    # Validated means validated at the rules' LR (advisor.method.validated): a rerun at a lower LR does not extend
    # the bound, and a (global batch, LR) any run saw fail is never advised.
    plan, lr, warmup = make_plan(settings, info, cap, sweep.chosen, sweep.reason, precision, estimate.value,
                                 amp_available=amp_available, healthy_global=largest_validated_global(info, trained),
                                 noise_low=estimate.low if estimate.value else None)
    lr, lowered = never_a_failed_lr(info, lr, trained)
    if lowered is not None:
        plan.warnings.append(Warning_(lowered.code, lowered.message))
    if sweep.verdict.against_yours is not None and info.base_warmup_source.startswith(DEFAULT_WARMUP_SOURCE):
        # A newcomer's script had no warmup: with the default one, yours tied with a smaller batch and lost the pick;
        # with --base-warmup 0 the advice was "keep yours".
        plan.warnings.append(Warning_("yours-ran-with-default-warmup", (
            f"The sweep ran your setting ({sweep.verdict.against_yours.yours} per device), like every candidate, "
            f"with the advisor's default warmup ({info.base_warmup_epochs:g} epoch(s) at the base batch): the "
            "comparison with yours holds for a job that warms up so. If yours warms up otherwise, plan again "
            "with --base-warmup (0 for none) to compare with the job you run.")))
    # The goodput-optimal batch from the runs' step times, against the rule of thumb's per-device x accumulation.
    goodput = goodput_optimum(fit_step_time(timed_points(ledger, precision)), estimate.value, estimate.reason,
                              info.base_global_batch, plan.world_size, cap, info.optimizer,
                              rule_of_thumb=(plan.per_device, plan.accumulation_steps),
                              max_global=largest_learnable_global(info.train_size, info.run_epochs))
    return plan, lr, warmup, goodput


def launch_line(adapter: Adapter, settings: MethodSettings, parts: PlanParts, env: dict, optimizer: str,
                hyperparameters: dict) -> list[str]:
    """The adapter's launch command for the plan on the target cluster (--nproc per node unless a target world
    size spreads the plan's processes over its nodes)."""
    plan = parts.plan
    per_node = settings.nproc if settings.target_world_size is None else max(1, math.ceil(plan.world_size
                                                                                         / settings.nodes))
    return adapter.launch_command(LaunchSpec(per_node, settings.nodes, plan.per_device, plan.accumulation_steps,
                                             parts.lr.value, parts.warmup.steps, plan.precision, env,
                                             optimizer=optimizer, optimizer_hyperparameters=hyperparameters))


def precision_reason(choice: PrecisionChoice, trial: TrialOutcome | None, accumulation_note: str,
                     training_oom: str, accumulation_steps: int) -> str:
    """Why the plan runs in its precision: the choice made before the probes, then what the runs showed.
    ``training_oom``: why the plan's own training runs capped the batch (their OOM), if they did;
    ``accumulation_steps``: the plan's, so the text never says none was needed where the plan has some."""
    measured = choice.measure
    if trial and trial.precision != measured:
        outcome = (f"The trial ran out of memory in {measured} and fit in {trial.precision}, so the plan uses "
                   f"{trial.precision} (mixed precision before shrinking the batch).")
    elif accumulation_note:
        outcome = accumulation_note
    elif training_oom:
        outcome = (f"It stays {measured}: {training_oom}, after the precision was chosen"
                   + (f" ({choice.mixed} was not measured at that length)." if choice.mixed else "."))
    elif choice.mixed and accumulation_steps == 1:
        outcome = f"Nothing ran out of memory in {measured} and no accumulation was needed, so the plan keeps it."
    else:
        outcome = ""
    return (choice.reason + " " + outcome).strip()


def optimizer_hyperparameters(ran: dict, optimizer: str, workload) -> tuple[dict, str]:
    """The optimizer's weight decay, momentum, betas and eps for the launch line, and where they came from."""
    if ran.get("hyperparameters") is not None:
        return ran["hyperparameters"], "what the workers' optimizer held (its param_groups)"
    from .optimizers import hyperparameters

    return (hyperparameters(optimizer, workload.momentum, workload.weight_decay, workload.betas, workload.eps),
            "the workload's settings")


def base_fallback_plan(settings: MethodSettings, info: WorkloadInfo, sweep: SweepOutcome, cap: int, precision: str,
                       amp_available: bool) -> tuple[Plan, LRDecision, WarmupDecision]:
    """The plan when no sweep candidate learned: the user's base global batch at the base LR (no scale-up of an LR
    nothing validated), with the warning that says so. Never the setting the sweep saw fail."""
    base = replace(settings, global_batch=info.base_global_batch)
    plan, lr, warmup = make_plan(base, info, cap, sweep.chosen, sweep.reason, precision, None,
                                 amp_available=amp_available)
    plan.warnings = [w for w in plan.warnings if w.code != "global-not-validated"]
    plan.validated_global = None  # nothing was validated: no global batch may be claimed as such
    # The base LR at the base batch, as the headline says: no bound from a sweep "pick" nothing validated (it gave
    # "LR 0.025 (unchanged; base 0.1)").
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
        # The verdict's reason ends in what to do (memory or the LR): said once, here too.
        f"{sweep.verdict.reason} The plan is the base setting (global batch {info.base_global_batch}, LR "
        f"{lr.value:.4g}), which this plan did not validate either."))
    return plan, lr, warmup


def workload_notes(reports: LauncherReports | None, ceiling: CeilingResult | None) -> dict:
    """What the recipe's [workload] says about validation (the metric the sweep ranked by) and the probes."""
    notes: dict = {}
    ranking = reports.ranking_info if reports else None
    if ranking:
        notes.update(metric=ranking["metric"], higher_is_better=ranking["higher_is_better"],
                     metric_reason=ranking["reason"])
    probed = (reports.probe_batches if reports else None) or {}
    largest = ceiling.largest_ok if ceiling else None
    if largest in probed:
        notes["probed"] = probed[largest]
    return notes


def stream_warning(reports: LauncherReports | None) -> Warning_ | None:
    """The memory probes fed a stream as it came: its ceiling holds only for batches like those they met."""
    selection = reports.probe_selection if reports else None
    if selection is not None and selection.kind == "stream":
        return Warning_("stream-probed-as-it-came", STREAM_PROBE_WARNING)
    return None
