"""The decisions of the four-step start method, as pure functions over an injected runner.

Step 3 (short trial: double / halve / stop, mixed precision before halving) and step 4
(comparison sweep: the pick, its tie-break and the chance check) decide from what a runner
measured, so they are tested against a stub runner in milliseconds; ``advisor.session``
drives them with the real runner. Every answer carries its reason.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

from .ceiling import DEFAULT_HEADROOM, CeilingResult, ProbeTrial
from .errors import AdvisorError
from .health import UNSTABLE, Health, judge
from .oom import is_primitive_failure
from .ledger import TrialRecord
from .noise import GradNormSample, NoiseEstimate, estimate_noise
from .lr import DEFAULT_BASE_WARMUP_EPOCHS, LRDecision, WarmupDecision, plan_warmup, scale_lr
from .plan import Plan, Warning_, identical_batch_for, plan_data_parallel
from .tasks import task_profile

HIGH_WATER = 0.60  # below this share of the ceiling's memory, double the trial batch
WORTH_DOUBLING = 1.10  # doubling must buy >= 10% more samples/s to be worth it
TIE_Z = 1.96  # two runs tie when their validation differs by less than this many standard errors (95%)
SWEEP_EVAL_POINTS = 4  # validation checkpoints per sweep run, to time when each reached the metric
MIN_SWEEP_STEPS = 4  # a sweep run's floor, whatever the equal-samples rule gives (its eval points need steps)
TIE_SEEDS = 2  # a tie is rerun until each tied candidate has this many seeds, before time breaks it
SUBSET_SWEEP = (8, 16, 32, 64, 128)
NOISE_MARGIN = 2.0  # a global batch past this multiple of the noise scale buys little
# The walk's clock check: an edge that wins on validation is "slower" only past this ratio of its neighbour's
# time. On a shared machine the load alone moved it past 1.25x in one plan and not in the next (12 against 25
# per device on digits: 1.11x, then over 1.25x), and seeds of one batch took up to 1.8x each other's time to a
# target; a walk decided there sends two plans of the same seeds to different picks.
WALK_CLOCK_MARGIN = 2.0
SWEEP_WALK = 2  # extra sweep candidates, each half (or double) the last, while the edge of the swept range wins


@dataclass
class MethodSettings:
    workload: str
    adapter_name: str
    nproc: int
    device: str  # "cpu" | "cuda"
    memory_budget_bytes: int
    headroom: float = DEFAULT_HEADROOM
    trial_steps: int = 40
    sweep_steps: int = 200
    subset_sweep: bool = False
    sweep_walk: int = SWEEP_WALK
    global_batch: int | None = None  # a global target the user insists on; else the sweep decides
    base_lr: float | None = None
    base_batch: int | None = None
    precision: str = "auto"  # "auto": see choose_precision (bf16 on Ampere+ GPUs, else fp32 + mixed on OOM)
    trial_timeout_s: float = 900.0
    idle_timeout_s: float = 180.0
    collective_timeout_s: float = 120.0
    max_batch: int = 65536
    device_memories: list[int] | None = None  # every device's memory, when they differ (heterogeneous GPUs)
    workdir: str = field(default_factory=os.getcwd)
    base_warmup: tuple[float, str] | None = None  # --base-warmup: (amount, "steps" | "epochs"); else the workload's
    run_epochs: float | None = None  # --epochs: the planned run, which caps the warmup; else the workload's
    adapter_options: dict = field(default_factory=dict)  # e.g. a DeepSpeed ZeRO stage
    optimizer: str | None = None  # overrides the workload's optimizer
    task: str | None = None  # overrides the workload's task type (the task table row)
    nodes: int = 1  # the target cluster: nodes x nproc processes (probes run on this host)
    target_world_size: int | None = None  # the target cluster's processes; default nodes x nproc

    @property
    def world_size(self) -> int:
        return self.target_world_size or self.nodes * self.nproc

    @property
    def start_precision(self) -> str:
        """The precision asked for, with auto read as fp32; on a GPU the session's ``precision.measure`` is the
        one that runs (choose_precision)."""
        return "fp32" if self.precision == "auto" else self.precision


@dataclass
class WorkloadInfo:
    name: str
    task: str
    num_classes: int | None
    optimizer: str
    train_size: int
    val_size: int
    parameters: int
    has_batchnorm: bool
    base_lr: float
    base_global_batch: int
    base_source: str
    base_warmup_epochs: float = DEFAULT_BASE_WARMUP_EPOCHS
    base_warmup_source: str = "the advisor's default"
    run_epochs: float | None = None
    run_source: str = ""


@dataclass
class PrecisionChoice:
    """What the probes, trial and sweep run in, what to try before halving or accumulating, and why."""

    measure: str  # "fp32" | "bf16" | "fp16": the ceiling probes, the trial and the sweep run in it
    mixed: str | None  # tried before halving (trial) and before accumulation (plan); None if fixed or already mixed
    tf32: bool  # fp32 matmuls may use TF32 Tensor Cores (workers and the user's run)
    reason: str


def choose_precision(requested: str, device_type: str, bf16_native: bool, adapter_supports: set[str]
                     ) -> PrecisionChoice:
    """``--precision`` resolved for this device. auto measures in what the user will train in: bf16 autocast
    with TF32 on a GPU with bf16 Tensor Cores; fp32 elsewhere, with mixed precision tried before halving and
    before accumulation (on CPU bf16 is slow without AMX; fp16 on older GPUs needs a GradScaler and can
    overflow, so it is not a silent default)."""
    from .device import mixed_precision_for

    cuda = device_type.startswith("cuda")
    tf32 = cuda and bf16_native and requested != "fp32"
    if requested != "auto":
        note = ""
        if cuda and bf16_native:
            note = (" TF32 stays off: fp32 was asked for." if requested == "fp32"
                    else " TF32 is allowed for the fp32 matmuls outside autocast.")
        return PrecisionChoice(requested, None, tf32, f"{requested}, as asked (--precision {requested}).{note}")
    mixed = mixed_precision_for(device_type, bf16_native)
    if mixed not in adapter_supports:
        mixed = None
    if cuda and mixed == "bf16":
        return PrecisionChoice("bf16", None, True, (
            "--precision auto on a GPU with bf16 Tensor Cores (compute capability >= 8.0): the ceiling probes, the "
            "trial and the sweep ran in bf16 autocast with TF32 matmuls allowed, as the training will run. Pass "
            "--precision fp32 to measure plain fp32."))
    if cuda:
        reason = ("--precision auto on a GPU without bf16 Tensor Cores (compute capability < 8.0): measured in fp32"
                  + (", with fp16 AMP (and a GradScaler) tried before halving a batch or accumulating; pass "
                     "--precision fp16 to measure in fp16." if mixed else "; the adapter runs no fp16."))
    else:
        reason = ("--precision auto on CPU: measured in fp32 (CPU bf16 is slow without AMX)"
                  + (", with bf16 autocast tried before halving a batch or accumulating." if mixed else "."))
    return PrecisionChoice("fp32", mixed, False, reason)


def accumulation_for(target_global: int, world_size: int, per_device_cap: int) -> int:
    """The accumulation steps a plan needs (plan_data_parallel's rule): 1 when the target fits the cap."""
    return max(1, math.ceil(target_global / (max(1, per_device_cap) * world_size)))


def mixed_before_accumulation(target_global: int, world_size: int, cap: int, precision: PrecisionChoice,
                              mixed_cap: Callable[[str], tuple[int | None, str]]) -> tuple[str, int, str]:
    """DOMAIN 3: when memory is short, mixed precision comes before accumulation. If the plan needs accumulation
    in fp32 and a mixed precision may be tried, ``mixed_cap(mixed)`` measures the per-device cap in it (None
    and why when it cannot run); the plan takes it when it needs fewer accumulation steps.

    Returns (precision, per-device cap, what was decided; "" when nothing was tried)."""
    needed = accumulation_for(target_global, world_size, cap)
    if needed == 1 or precision.measure != "fp32" or not precision.mixed:
        return precision.measure, cap, ""
    mixed = precision.mixed
    other, why = mixed_cap(mixed)
    if other is None:
        return "fp32", cap, (f"fp32 needs {needed} accumulation steps for the global target {target_global}; "
                             f"{mixed} was tried first and cannot run: {why}")
    fewer = accumulation_for(target_global, world_size, other)
    if fewer < needed:
        return mixed, other, (f"fp32 fits {cap} per device and needs {needed} accumulation steps for the global "
                              f"target {target_global}; the ceiling re-probed in {mixed} is {other} per device, "
                              f"which needs {fewer}: the plan uses {mixed} (mixed precision before accumulation).")
    return "fp32", cap, (f"fp32 needs {needed} accumulation steps for the global target {target_global}; in {mixed} "
                         f"the ceiling is {other} per device, which needs as many, so the plan keeps fp32.")


MIXED_PRECISIONS = ("bf16", "fp16")


def trained_cap(rows: list[TrialRecord], precision: str) -> tuple[int | None, str]:
    """The per-device cap the plan's own training runs set in ``precision`` (None and "" when none ran out of
    memory): a trial or sweep run that ran out of memory at b caps the plan at the largest batch below b that
    trained (the probes' ceiling is two steps on the probe's processes; a longer N-process run can hold more).
    A run that trained in fp32 counts for a mixed-precision plan too (mixed precision holds less), not the
    other way round. A recipe never advises a batch its own runs saw run out of memory."""
    runs = [r for r in rows if r.phase in ("trial", "noise", "sweep")]
    ooms = [r for r in runs if r.status == "oom" and r.precision == precision]
    if not ooms:
        return None, ""
    smallest = min(r.per_device for r in ooms)
    holds_as_much = {precision} | ({"fp32"} if precision in MIXED_PRECISIONS else set())
    trained = [r.per_device for r in runs if r.status == "ok" and r.precision in holds_as_much
               and r.per_device < smallest]
    phase = next(r.phase for r in ooms if r.per_device == smallest)
    if trained:
        cap = max(trained)
        return cap, (f"the {phase} run at {smallest} per device ran out of memory in {precision}; the largest that "
                     f"trained is {cap} per device")
    return smallest - 1, (f"the {phase} run at {smallest} per device ran out of memory in {precision} and nothing "
                          f"smaller trained in it: capped just below it, {smallest - 1} per device, unmeasured "
                          "(rerun the plan with a smaller --device-memory headroom to measure it)")


class Runner(Protocol):
    """What the decisions need from whoever runs the jobs (the real launcher, or a stub in tests)."""

    nproc: int

    def probe(self, batch: int, purpose: str, precision: str = "fp32") -> ProbeTrial: ...

    def train(self, phase: str, per_device: int, steps: int, lr: float, warmup_steps: int = 0,
              accumulation: int = 1, evaluate: bool = False, precision: str = "fp32",
              eval_points: int = 1, seed: int = 0) -> TrialRecord: ...


Decide = Callable[[str], None]  # a decision, said as it is made (the UI shows them live)


@dataclass
class TrialOutcome:
    chosen: int
    reason: str
    precision: str  # what the trial ended up running: mixed precision if it was needed to fit
    rows: list[TrialRecord]
    decisions: list[str]
    # One device: the run with accumulation 2 at ``chosen`` that measures the noise scale (not a trial candidate).
    noise_run: TrialRecord | None = None
    unhealthy: dict[int, Health] = field(default_factory=dict)  # per batch: the unstable runs, and why


@dataclass
class CandidateSummary:
    """One sweep candidate over its seeds: the ranked validation value, its spread, and when it got there."""

    per_device: int
    status: str  # "ok" | "oom" | "diverged" (a run unstable by advisor.health: it can never win)
    values: list[float] = field(default_factory=list)  # the ranked value, one per seed
    mean: float | None = None
    spread: float | None = None  # half-width of its ~95% interval: validation-set size, checkpoints, seeds
    seconds_to_target: float | None = None  # mean training seconds to reach the tied target (ties only)

    def to_dict(self) -> dict:
        out = {"per_device": self.per_device, "status": self.status, "seeds": len(self.values),
               "values": [round(v, 6) for v in self.values],
               "mean": None if self.mean is None else round(self.mean, 6),
               "spread": None if self.spread is None else round(self.spread, 6),
               "seconds_to_target": None if self.seconds_to_target is None else round(self.seconds_to_target, 3)}
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class SweepVerdict:
    """decide_sweep's answer: the pick, why, and whether the data could tell the tied candidates apart."""

    chosen: int
    reason: str
    metric: str = ""
    tied: list[int] = field(default_factory=list)  # per-device batches within noise of the best (2+ = a tie)
    equal_within_noise: bool = False  # the tie stood after every tied candidate ran TIE_SEEDS seeds
    tie_rule: str = ""  # what picked among the equal ones
    candidates: list[CandidateSummary] = field(default_factory=list)
    # -1 / +1: the optimum may lie past the smallest / largest batch swept (``edge_from``), see _edge; 0: inside
    edge: int = 0
    edge_from: int | None = None
    edge_why: str = ""  # why the edge may not be the optimum, in words (the walk's sentence)

    @property
    def edge_side(self) -> str:
        """Which end of the swept range ``edge_from`` is, in words ('' inside)."""
        return {-1: "smallest", 1: "largest"}.get(self.edge, "")

    @property
    def headline(self) -> str:
        """The verdict in a few words, for the recipe and --json."""
        if self.equal_within_noise:
            return f"equal within noise; picked by: {self.tie_rule}"
        if len(self.tied) > 1:
            return "within noise of each other after one seed; not rerun"
        if len(self.tied) == 1:
            return "best, outside the others' noise"
        return "the comparison could not decide; the trial's choice kept"

    @property
    def diverged(self) -> list[int]:
        return [c.per_device for c in self.candidates if c.status == "diverged"]


@dataclass
class SweepOutcome:
    chosen: int
    reason: str
    rows: list[TrialRecord]
    candidates: list[int]
    verdict: SweepVerdict | None = None
    samples: int | None = None  # training samples every candidate saw (equal samples)
    walked: list[int] = field(default_factory=list)  # candidates added because the range's edge won

    def summary(self) -> dict:
        """What the recipe's [method.sweep] and `plan --json` say about the comparison."""
        verdict = self.verdict
        out = {"samples_per_run": self.samples, "candidates": self.candidates, "walked": self.walked or None}
        if verdict:
            out.update(verdict=verdict.headline, metric=verdict.metric or None,
                       equal_within_noise=verdict.equal_within_noise,
                       tie_rule=verdict.tie_rule or None, tied=verdict.tied if len(verdict.tied) > 1 else None,
                       diverged=verdict.diverged or None, spread=[c.to_dict() for c in verdict.candidates])
        return {k: v for k, v in out.items() if v is not None}


def lr_for(info: WorkloadInfo, global_batch: int) -> LRDecision:
    return scale_lr(info.base_lr, info.base_global_batch, global_batch, info.optimizer)


def warmup_for(info: WorkloadInfo, lr: LRDecision) -> WarmupDecision:
    return plan_warmup(lr.scale, info.train_size, lr.global_batch, info.base_warmup_epochs, info.base_warmup_source,
                       info.run_epochs, info.run_source)


def lr_and_warmup(info: WorkloadInfo, global_batch: int, steps: int) -> tuple[float, int]:
    """The scaled LR for a short trial (it measures speed and memory), with the planned warmup squeezed into
    its first quarter."""
    lr = lr_for(info, global_batch)
    return lr.value, min(warmup_for(info, lr).steps, steps // 4)


def sweep_run_settings(info: WorkloadInfo, global_batch: int, samples: int) -> tuple[int, float, int]:
    """(steps, LR, warmup steps) of one comparison-sweep run: ``samples`` training samples whatever its batch
    (equal samples, so a bigger batch gets fewer steps, not more data), with the LR and the whole warmup the
    plan would give that global batch."""
    lr = lr_for(info, global_batch)
    steps = max(MIN_SWEEP_STEPS, round(samples / global_batch))
    return steps, lr.value, warmup_for(info, lr).steps


def data_cap(train_size: int, world_size: int) -> int:
    """A per-device batch never exceeds one device's share of the training set."""
    return max(1, train_size // world_size)


def short_trial(runner: Runner, start: int, ceiling: CeilingResult, steps: int, info: WorkloadInfo,
                precision: str, mixed: str | None, decide: Decide = lambda message: None,
                cap: int | None = None, cap_reason: str = "") -> TrialOutcome:
    """Step 3: run at ``start``; double while memory stays under 60% of the ceiling's; on OOM try ``mixed``
    precision at the same batch (when the user left the precision open), then halve. No run passes ``cap``
    (default: the ceiling), the first included; its reason is said when it binds. Every run is judged
    (advisor.health): the trial never doubles from a run that did not learn, halves from an unstable one (a
    smaller global batch, a smaller scaled LR) and never chooses one while another run exists; a flat run is
    noted in its ledger row (a short trial in its warmup often is)."""
    ceiling_bytes = ceiling.estimated_peak_bytes
    cap = ceiling.per_device_max if cap is None else cap
    batch, rows, notes = min(start, cap), [], []
    tried: dict[int, TrialRecord] = {}
    unhealthy: dict[int, Health] = {}
    decisions: list[str] = []

    def say(message: str) -> None:
        decisions.append(message)
        decide(message)

    if batch < start:  # the cap bounds the first run too, not only doubling
        say(f"{start}: above the cap of {cap} ({cap_reason or 'the memory ceiling'}): starting at {batch}")

    while batch >= 1 and batch not in tried:
        lr, warmup = lr_and_warmup(info, batch * runner.nproc, steps)
        record = runner.train("trial", batch, steps, lr, warmup, precision=precision)
        rows.append(record)
        if record.status == "oom" and mixed and precision == "fp32":
            say(f"{batch}: out of memory in fp32; re-running it in {mixed} mixed precision before halving "
                "(mixed precision comes before a smaller batch)")
            retry = runner.train("trial", batch, steps, lr, warmup, precision=mixed)
            rows.append(retry)
            if retry.status == "ok":
                precision = mixed
                record = retry
                notes.append(f"{batch}: OOM in fp32, fits in {mixed}: switched to {mixed}")
            elif is_primitive_failure(retry.note or ""):
                say(f"{batch}: {mixed} failed too, with oneDNN's 'could not create a primitive': this CPU may not "
                    f"support {mixed} at all (not only memory); staying in fp32")
        tried[batch] = record
        if record.status == "oom":
            notes.append(f"{batch}: OOM, halving")
            say(f"{batch}: out of memory in {precision}: halving to {batch // 2}")
            batch //= 2
            continue
        health = judge(record)
        if not health.learned:
            record.note = (record.note + "; " if record.note else "") + f"{health.verdict}: {health.reason}"
        if health.verdict == UNSTABLE:
            unhealthy[batch] = health
            notes.append(f"{batch}: unstable at LR {lr:.3g}, never doubled from")
            if batch // 2 >= 1 and batch // 2 not in tried:
                say(f"{batch}: unstable at LR {lr:.3g} ({health.reason}): halving to {batch // 2}, a smaller global "
                    "batch at a smaller scaled LR")
                batch //= 2
                continue
            say(f"{batch}: unstable at LR {lr:.3g} ({health.reason}): stop")
            break
        share = (record.peak_bytes or 0) / ceiling_bytes if ceiling_bytes else 1.0
        notes.append(f"{batch}: {share:.0%} of the ceiling's memory, {record.throughput:.0f} samples/s")
        previous = tried.get(batch // 2)
        if previous and previous.status == "ok" and record.throughput < previous.throughput * WORTH_DOUBLING:
            say(f"{batch}: {record.throughput:.0f} samples/s, under +10% over {batch // 2}: stop doubling")
            break
        if batch * 2 in unhealthy:
            say(f"{batch}: learned; {batch * 2} did not ({unhealthy[batch * 2].verdict}): stop")
            break
        if share < HIGH_WATER and batch * 2 <= cap:
            say(f"{batch}: {share:.0%} of the ceiling's memory (< 60%): doubling to {batch * 2}")
            batch *= 2
        else:
            why = (f"{share:.0%} of the ceiling's memory" if share >= HIGH_WATER
                   else f"doubling would pass the cap of {cap} ({cap_reason or 'the memory ceiling'})")
            say(f"{batch}: {why}: stop")
            break
    fitted = sorted((b, r) for b, r in tried.items() if r.status == "ok")
    ok = [(b, r) for b, r in fitted if b not in unhealthy] or fitted
    if fitted and all(b in unhealthy for b, _ in fitted):
        notes.append("every trial run was unstable: " + "; ".join(f"{b} {h.verdict}" for b, h in sorted(unhealthy.items())))
    if not ok:
        raise AdvisorError(f"Every trial batch down to 1 ran out of memory, although the ceiling probes fit "
                           f"{ceiling.per_device_max}. Multi-process training can need more memory per device than "
                           "one process: raise --headroom, or plan for a device with more --device-memory.")
    chosen = ok[0][0]
    for (small, small_rec), (big, big_rec) in zip(ok, ok[1:]):
        gain = big_rec.throughput / small_rec.throughput
        if gain >= WORTH_DOUBLING:
            chosen = big
            notes.append(f"{small} -> {big} bought {gain - 1:+.0%} throughput: worth it")
        else:
            notes.append(f"{small} -> {big} bought only {gain - 1:+.0%} throughput: the bigger batch is not worth "
                         "it (bandwidth-bound)")
            break
    return TrialOutcome(chosen, "; ".join(notes), precision, rows, decisions, unhealthy=unhealthy)


def sweep_candidates(chosen: int, cap: int, subset: bool) -> tuple[list[int], str]:
    """The per-device batches step 4 compares, and a note when the asked-for set had to change."""
    if subset:
        fitting = [b for b in SUBSET_SWEEP if b <= cap]
        if len(fitting) >= 2:
            return fitting, ""
        note = (f"The subset sweep ({', '.join(map(str, SUBSET_SWEEP))}) needs a ceiling of at least 16; it is "
                f"{cap}, so half / chosen / double is compared instead.")
    else:
        note = ""
    candidates = sorted({b for b in (chosen // 2, chosen, chosen * 2) if 1 <= b <= cap})
    return candidates, note


def ranked_metric(rows: list[TrialRecord]) -> tuple[str, bool]:
    """(name, higher_is_better) the sweep ranks ``rows`` by: the workload's metric when every run computed
    it, else the validation loss (never a metric a run did not compute)."""
    ok = [r for r in rows if r.status == "ok"]
    if ok and all(r.val_metric is not None for r in ok):
        higher = ok[0].higher_is_better
        return ok[0].val_metric_name or "accuracy", True if higher is None else higher
    return "loss", False


def diverged(record: TrialRecord) -> bool:
    """A run the health verdict calls unstable (advisor.health: a NaN/inf loss or metric, a loss that ended above
    its start or gave back most of its decrease): it diverged, whatever its validation says, and never wins."""
    return record.status == "ok" and judge(record).verdict == UNSTABLE


def time_to_reach(record: TrialRecord, target: float, higher_is_better: bool, by_loss: bool | None = None) -> float:
    """Training seconds until the run's validation first reached ``target`` (its end if only measured there)."""
    point = _first_reaching(record, target, higher_is_better, not higher_is_better if by_loss is None else by_loss)
    if point is not None:
        return point["train_seconds"]
    return record.train_seconds if record.train_seconds is not None else math.inf


def steady_seconds_to_reach(record: TrialRecord, target: float, higher_is_better: bool, by_loss: bool) -> float:
    """Training time until the run's validation first reached ``target`` (its end if it never did), counted in
    steps at the run's median step time plus its median wait for data: the clock without the bursts a shared
    machine adds to one run and not to the next. The recorded seconds when the run has no step time."""
    point = _first_reaching(record, target, higher_is_better, by_loss)
    steps = point["step"] if point is not None else record.steps
    if record.step_seconds is None or steps is None:
        return time_to_reach(record, target, higher_is_better, by_loss)
    return steps * (record.step_seconds + (record.data_seconds or 0.0))


def _first_reaching(record: TrialRecord, target: float, higher_is_better: bool, by_loss: bool) -> dict | None:
    """The run's first validation checkpoint at or past ``target``, or None."""
    key = "val_loss" if by_loss else "val_metric"
    for point in record.evals:
        value = point.get(key)
        if value is not None and (value >= target if higher_is_better else value <= target):
            return point
    return None


def _ranked_value(record: TrialRecord, by_loss: bool) -> float:
    return record.val_loss if by_loss else record.val_metric


def _checkpoint_variance(record: TrialRecord, by_loss: bool) -> float:
    """The ranked value's variance across the run's last checkpoints (the later half, at least two): how much
    it still moves between evaluations, the noise a single end value carries."""
    key = "val_loss" if by_loss else "val_metric"
    points = [p[key] for p in record.evals if p.get(key) is not None]
    tail = points[-max(2, math.ceil(len(points) / 2)):]
    return statistics.variance(tail) if len(tail) >= 2 else 0.0


def _training_tail(record: TrialRecord) -> tuple[float, float] | None:
    """(mean, variance of that mean) of the run's last quarter of training losses: what a run with no validation
    is ranked by. One step's loss is one mini-batch's, as noisy as the batch is small; the tail's mean is not."""
    losses = [v for v in record.losses if v is not None and math.isfinite(v)]
    if not losses:
        return None
    tail = losses[-max(1, len(losses) // 4):]
    return statistics.fmean(tail), (statistics.variance(tail) / len(tail) if len(tail) >= 2 else 0.0)


def _summarise(batch: int, runs: list[TrialRecord], by_loss: bool, binomial_n: int | None,
               unvalidated: bool = False) -> CandidateSummary:
    """One candidate over its seeds. Its variance: the validation set's (binomial, for accuracy), the
    checkpoints' (anything else) or, with no validation, the training-loss tail's; plus the seeds' own spread
    when there are several; spread = TIE_Z x sqrt."""
    if any(r.status == "ok" and diverged(r) for r in runs):
        return CandidateSummary(batch, "diverged")
    ok = [r for r in runs if r.status == "ok"]
    if not ok:
        return CandidateSummary(batch, "oom")
    values = [_ranked_value(r, by_loss) for r in ok]
    mean = statistics.fmean(values)
    if binomial_n:
        p = min(max(mean, 0.0), 1.0)
        variance = p * (1 - p) / binomial_n  # one validation set: more seeds do not shrink this part
    elif unvalidated:
        variance = statistics.fmean((_training_tail(r) or (0.0, 0.0))[1] for r in ok) / len(ok)
    else:
        variance = statistics.fmean(_checkpoint_variance(r, by_loss) for r in ok) / len(ok)
    if len(values) >= 2:
        variance += statistics.variance(values) / len(values)
    return CandidateSummary(batch, "ok", values, mean, TIE_Z * math.sqrt(variance))


def decide_sweep(rows: list[TrialRecord], chosen: int, num_classes: int | None, steps: int,
                 noise_scale: float | None = None, world_size: int = 1, val_size: int | None = None
                 ) -> SweepVerdict:
    """Step 4's pick: the best mean validation over each candidate's seeds wins when the others are outside
    the noise (a binomial interval from ``val_size`` for accuracy, the spread across checkpoints otherwise,
    plus the seeds' spread). Runs within it are tied; ``tied_needs_seeds`` says which to rerun with another
    seed; once every tied one has TIE_SEEDS, they are equal within noise and the one inside the noise scale
    that reached the tied value (within its noise) in the least training time wins, counted at each run's
    median step time (steady_seconds_to_reach: a load burst in one run does not pick). A diverged run never
    wins."""
    if not rows:
        return SweepVerdict(chosen, "No sweep run could be made (no candidate batch fits); keeping the trial's "
                                    "choice.")
    batches = sorted({r.per_device for r in rows})
    usable = [r for r in rows if r.status == "ok" and not diverged(r)]
    name, higher_is_better = ranked_metric(usable)
    by_loss = name == "loss"
    unvalidated = by_loss and any(r.val_loss is None for r in usable)
    if unvalidated:  # a script that prints no validation (the script door): rank copies by their training loss
        rows = [replace(r, val_loss=(_training_tail(r) or (r.final_loss,))[0])
                if r.status == "ok" and r.val_loss is None else r for r in rows]
        usable = [r for r in rows if r.status == "ok" and not diverged(r) and r.val_loss is not None]
        if not usable:
            return SweepVerdict(chosen, "No sweep run reported a validation or training loss; keeping the trial's "
                                        "choice.")
    binomial_n = val_size if name == "accuracy" and higher_is_better and val_size else None
    summaries = [_summarise(b, [r for r in rows if r.per_device == b], by_loss, binomial_n, unvalidated)
                 for b in batches]
    lost = [c.per_device for c in summaries if c.status == "diverged"]
    lost_note = (f" Diverged (unstable: a NaN/inf loss, or a loss that rose or gave back most of its decrease, "
                 f"in at least one seed; never a pick): {', '.join(map(str, lost))} per device." if lost else "")
    if not usable:
        why = ("Every sweep run ran out of memory" if not lost else "Every sweep run diverged"
               if len(lost) == len(summaries) else "Every sweep run ran out of memory or diverged")
        return SweepVerdict(chosen, f"{why}; keeping the trial's choice.{lost_note}", candidates=summaries)
    alive = [c for c in summaries if c.status == "ok"]
    metric = f"validation {name}" + ("" if higher_is_better or by_loss else " (lower is better)")
    if unvalidated:
        metric = "training loss, mean of each run's last quarter (the runs reported no validation metric)"
    if name == "accuracy" and num_classes and max(c.mean for c in alive) < 1.5 / num_classes:
        return SweepVerdict(chosen, (
            f"No sweep run got clearly above chance (1/{num_classes}) in {steps} steps, so the comparison says "
            "nothing: keeping the trial's choice. Run a longer sweep (--sweep-steps) or check the base LR."
            + lost_note), metric, candidates=summaries)

    def score(c: CandidateSummary) -> float:
        return c.mean if higher_is_better else -c.mean

    best = max(alive, key=score)
    tied = [c for c in alive
            if score(best) - score(c) <= math.hypot(best.spread, c.spread) or c is best]
    fmt = (lambda v: f"{v:.4f}") if by_loss else (lambda v: f"{v:.3f}")
    table = ", ".join(f"{c.per_device}: {fmt(c.mean)} ± {fmt(c.spread)}"
                      + (f" ({len(c.values)} seeds)" if len(c.values) > 1 else "") for c in alive)
    noise_source = (f"a binomial interval over the {binomial_n} validation samples" if binomial_n
                    else "the spread of each run's last quarter of training losses" if unvalidated
                    else "the spread across each run's last checkpoints")
    said = f"By {metric} at equal training samples ({table}; ± is ~95%, from {noise_source}"
    said += " and the seeds' spread)" if any(len(c.values) > 1 for c in alive) else ")"
    verdict = SweepVerdict(best.per_device, "", metric, [c.per_device for c in tied], candidates=summaries)
    if len(tied) == 1:
        verdict.reason = f"{said}, {best.per_device} per device is best, outside the others' noise.{lost_note}"
        verdict.edge, verdict.edge_from, verdict.edge_why = _edge(best, summaries, usable, higher_is_better, by_loss,
                                                                  verdict.tied, num_classes)
        return verdict
    if any(len(c.values) < TIE_SEEDS for c in tied):
        verdict.reason = (f"{said}, {', '.join(str(c.per_device) for c in tied)} per device are within noise of "
                          f"each other: rerun with another seed before breaking the tie.{lost_note}")
        return verdict
    pool, noise_note = tied, ""
    if noise_scale:
        inside = [c for c in tied if c.per_device * world_size <= NOISE_MARGIN * noise_scale]
        if inside and len(inside) < len(tied):
            pool = inside
            noise_note = (f" Only runs with a global batch within {NOISE_MARGIN:g}x the estimated noise scale "
                          f"(~{noise_scale:.0f}) were kept among the equal ones.")
    # The tied value, within its noise: the lowest tied value less its spread. Runs that level off at the end
    # of a short sweep reach the value itself only at their last checkpoint, all alike, and the time to it is
    # then each run's length; reaching it within noise tells which got there first.
    worst = min(tied, key=score)
    target_score = score(worst) - worst.spread
    target = target_score if higher_is_better else -target_score
    within = f"{fmt(target)} ({fmt(worst.mean)} within its noise)" if worst.spread else fmt(target)
    for c in pool:
        runs = [r for r in usable if r.per_device == c.per_device]
        c.seconds_to_target = statistics.fmean(steady_seconds_to_reach(r, target, higher_is_better, by_loss)
                                               for r in runs)
    winner = min(pool, key=lambda c: (c.seconds_to_target, c.per_device))
    reached = ", ".join(f"{c.per_device}: {c.seconds_to_target:.2f} s" for c in pool)
    verdict.chosen, verdict.equal_within_noise = winner.per_device, True
    verdict.edge, verdict.edge_from, verdict.edge_why = _edge(winner, summaries, usable, higher_is_better, by_loss,
                                                              verdict.tied, num_classes, target)
    verdict.tie_rule = (f"fastest to {within} (training seconds at each run's median step time, mean over "
                        f"{TIE_SEEDS} seeds)")
    verdict.reason = (f"{said}, {', '.join(str(c.per_device) for c in tied)} per device are equal within noise "
                      f"after {TIE_SEEDS} seeds each.{noise_note} Rule among equals: the fastest to reach "
                      f"{within} in training time at each run's median step time ({reached}): {winner.per_device} per "
                      f"device.{lost_note}")
    return verdict


def samples_to_reach(record: TrialRecord, target: float, higher_is_better: bool, by_loss: bool) -> float:
    """Training samples until the run's validation first reached ``target`` (inf if it never did): like
    ``time_to_reach`` but free of the clock, so the same seeds give the same answer on a loaded machine."""
    point = _first_reaching(record, target, higher_is_better, by_loss)
    return point["step"] * record.global_batch if point is not None else math.inf


def _edge(best: CandidateSummary, summaries: list[CandidateSummary], usable: list[TrialRecord],
          higher_is_better: bool, by_loss: bool, tied: list[int], num_classes: int | None = None,
          tie_target: float | None = None) -> tuple[int, int | None, str]:
    """(direction, from, why): -1 / +1 and the smallest / largest batch swept when the optimum may lie beyond
    it, with the reason in words; (0, None, "") otherwise.

    An edge that is the best outright walks on when its neighbour did not learn (accuracy under 1.5x chance,
    or, downwards from the only run that learned, a run that diverged or ran out of memory: a run that learned
    nothing says nothing about time), or when it reached the neighbour's mean validation value in no more
    training samples and was not clearly slower to it: at equal samples a smaller batch makes more updates and
    often wins on validation while being slower on the clock. "Clearly" is past WALK_CLOCK_MARGIN, on each
    run's median step time (steady_seconds_to_reach): within it the clock measures the machine's load, not the
    batch. An edge tied with the best (equal within noise) walks on when it reached the tied value
    (``tie_target``, given for a tie only: within its noise) in fewer training samples than its neighbour, a
    count the seeds fix, so two plans of one workload walk alike: breaking a tie by the clock is left to the
    pick among equals."""
    alive = [c for c in summaries if c.status == "ok"]
    if len(summaries) < 2:
        return 0, None, ""
    batches = [c.per_device for c in summaries]

    def runs(c: CandidateSummary) -> list[TrialRecord]:
        return [r for r in usable if r.per_device == c.per_device]

    def samples(c: CandidateSummary, target: float) -> float:
        return statistics.fmean(samples_to_reach(r, target, higher_is_better, by_loss) for r in runs(c))

    def closest(pool: list[CandidateSummary], to: CandidateSummary) -> CandidateSummary:
        """The swept batch nearest ``to`` on a log scale (the next one up or down)."""
        return min((c for c in pool if c is not to), key=lambda c: abs(math.log(c.per_device / to.per_device)))

    for edge, direction in ((min(batches), -1), (max(batches), 1)):
        candidate = next(c for c in summaries if c.per_device == edge)
        if candidate.status != "ok" or (candidate is not best and edge not in tied):
            continue
        if len(alive) < 2:
            # The only run that learned. A larger neighbour that diverged or ran out of memory measured nothing
            # (like one at chance), so smaller batches are unmeasured, not beaten. Never upwards: past a smaller
            # batch that ran out of memory or diverged, a larger one (and its larger LR) would do the same.
            nearest = closest(summaries, candidate)
            if direction < 0:
                what = "diverged" if nearest.status == "diverged" else "ran out of memory"
                return direction, edge, (f"won, and the next one ({nearest.per_device} per device) {what}: it "
                                         f"says nothing about time")
            continue
        neighbour = closest(alive, candidate)
        if candidate is best and neighbour.per_device not in tied:
            if higher_is_better and not by_loss and num_classes and neighbour.mean < 1.5 / num_classes:
                return direction, edge, (f"won, and the next one ({neighbour.per_device} per device) stayed at "
                                         f"chance, so its clock says nothing")

            def seconds(c: CandidateSummary) -> float:
                return statistics.fmean(steady_seconds_to_reach(r, neighbour.mean, higher_is_better, by_loss)
                                        for r in runs(c))

            mine, theirs = seconds(candidate), seconds(neighbour)
            if samples(candidate, neighbour.mean) <= samples(neighbour, neighbour.mean) and \
                    mine <= WALK_CLOCK_MARGIN * theirs:
                clock = ("sooner" if mine <= theirs else
                         f"within the clock's noise (under {WALK_CLOCK_MARGIN:g}x)")
                return direction, edge, (f"won and reached the next one's validation value in no more samples and "
                                         f"{clock} in training time ({mine:.2f} s against {theirs:.2f} s)")
        elif tie_target is not None and (neighbour.per_device in tied or neighbour is best):
            if samples(candidate, tie_target) < samples(neighbour, tie_target):
                return direction, edge, ("was equal within noise to the best and reached the tied value, within "
                                         "its noise, in fewer training samples than the next one")
    return 0, None, ""


def walk_candidate(verdict: SweepVerdict, swept: list[int], cap: int, world_size: int,
                   noise_scale: float | None = None) -> tuple[int | None, str]:
    """The next sweep candidate when the optimum may lie past the swept range's edge (``verdict.edge``): half
    the smallest or double the largest, within 1..``cap`` and, upwards, within NOISE_MARGIN x the noise scale;
    (None, why not) otherwise. Half / chosen / double only brackets the optimum when the middle wins."""
    edge = verdict.edge_from
    if not verdict.edge or edge not in swept:
        return None, ""
    how, side = verdict.edge_why, verdict.edge_side
    if verdict.edge < 0:
        nxt = edge // 2
        if nxt < 1 or nxt in swept:
            return None, ""
        return nxt, f"{edge} per device, then the {side} swept, {how}, so {nxt} was swept too."
    nxt = edge * 2
    if nxt > cap or nxt in swept:
        return None, (f"{edge} per device, the {side} swept, {how}; {nxt} is past the cap of {cap}."
                      if nxt > cap else "")
    if noise_scale and nxt * world_size > NOISE_MARGIN * noise_scale:
        return None, (f"{edge} per device, the {side} swept, {how}; not sweeping {nxt}: a global batch of "
                      f"{nxt * world_size} is past {NOISE_MARGIN:g}x the estimated noise scale (~{noise_scale:.0f}).")
    return nxt, f"{edge} per device, then the {side} swept, {how}, so {nxt} was swept too."


def noise_estimate(rows: list[TrialRecord], optimizer: str = "sgd") -> NoiseEstimate:
    """B_simple with its bootstrap interval over the measured steps of every trial, noise and sweep run whose
    loss fell."""
    # An unstable run's gradients are dominated by the blow-up, not by sampling noise.
    measured = [r for r in rows if r.status == "ok" and r.gradient_norms.get("small_sq_steps")]
    verdicts = {id(r): judge(r) for r in measured}
    healthy = [r for r in measured if verdicts[id(r)].verdict != UNSTABLE]
    unlearned = [r for r in measured if r not in healthy]
    left_out = ""
    if unlearned:
        named = ", ".join(f"the {r.phase} run at {r.per_device} per device"
                          + (f" x {r.accumulation} accumulation" if r.accumulation > 1 else "")
                          + f" ({verdicts[id(r)].verdict})" for r in unlearned)
        left_out = (f"Left out: {named}, whose training loss did not fall and hold (the gradients of an unstable "
                    "run measure the blow-up, not sampling noise).")
    fields = GradNormSample.__dataclass_fields__
    samples = [GradNormSample(**{k: (tuple(v) if isinstance(v, list) else v)
                                 for k, v in r.gradient_norms.items() if k in fields})
               for r in healthy]
    return estimate_noise(samples, optimizer, accumulation_run=any(r.phase == "noise" for r in rows),
                          left_out=left_out)


def noise_summary(rows: list[TrialRecord], optimizer: str = "sgd") -> tuple[float | None, str]:
    """The noise scale (None when unknown) and the sentence that explains it."""
    estimate = noise_estimate(rows, optimizer)
    return estimate.value, estimate.reason


def heterogeneous_devices_note(ceiling: CeilingResult, device_memories: list[int] | None):
    """With cards of different sizes, say what identical batches leave unused (probes ran on the smallest)."""
    if not device_memories or len(set(device_memories)) < 2 or ceiling.fit is None:
        return None
    usable_share = ceiling.usable_bytes / ceiling.budget_bytes
    ceilings = [ceiling.fit.batch_for((1 - ceiling.headroom) * usable_share * m) for m in device_memories]
    return identical_batch_for(ceilings)[1]


def validated_global(settings: MethodSettings, per_device: int) -> int:
    """The global batch a trial or sweep run at ``per_device`` validates: this host's processes, whatever the
    target cluster."""
    return per_device * settings.nproc


def make_plan(settings: MethodSettings, info: WorkloadInfo, per_device_cap: int, sweep_choice: int,
              sweep_reason: str, precision: str, noise: float | None, amp_available: bool
              ) -> tuple[Plan, LRDecision, WarmupDecision]:
    """The data-parallel plan for the target cluster, its LR and warmup, and the warnings that go with them."""
    world, nproc = settings.world_size, settings.nproc
    validated = validated_global(settings, sweep_choice)
    target = settings.global_batch or validated
    plan = plan_data_parallel(target, world, per_device_cap, info.task, info.num_classes, info.has_batchnorm,
                              settings.device, precision, amp_available=amp_available, train_size=info.train_size)
    plan.validated_global = validated
    if not settings.global_batch:
        on_target = f"; the plan keeps it on the target's {world} device(s)" if world != nproc else ""
        plan.reason = (f"The sweep's winner, {sweep_choice} per device x {nproc} process(es) = global "
                       f"{validated}{on_target}. " + plan.reason)
    if plan.global_batch != validated:
        why = ("you asked for it (--global-batch)" if settings.global_batch
               else f"identical per-device batches on {world} device(s) round it")
        plan.warnings.append(Warning_(
            "global-not-validated",
            f"The global batch {plan.global_batch} was not validated: it is {plan.global_batch / validated:.3g}x "
            f"the {validated} the comparison sweep ran ({sweep_choice} per device x {nproc} process(es)), because "
            f"{why}. Its LR is scaled by the rules, but how it trains is an extrapolation: sweep it on the target "
            "before a long run."))
    elif world > nproc and plan.per_device < per_device_cap:
        plan.warnings.append(Warning_(
            "target-memory-unused",
            f"On the target's {world} devices the validated global batch {validated} leaves {plan.per_device} per "
            f"device, below the per-device cap of {per_device_cap}. A bigger global batch (up to "
            f"{per_device_cap * world}) would use the memory but was not validated here: sweep it on the target, "
            "or pass --global-batch N (the LR is scaled for it; the recipe then says it is extrapolated)."))
    if settings.global_batch:
        for warning in plan.warnings:
            if warning.code == "few-steps-per-epoch":
                warning.message += f" It stands because you asked for a global batch of {settings.global_batch} " \
                                   "(--global-batch)."
    lr = lr_for(info, plan.global_batch)
    warmup = warmup_for(info, lr)
    if noise and plan.global_batch > NOISE_MARGIN * noise:
        why = (f"It stands because you asked for a global batch of {settings.global_batch} (--global-batch)."
               if settings.global_batch else
               f"It stands because the comparison sweep chose it on validation, not on the noise scale: "
               f"{sweep_reason} Compare a smaller global batch before a long run.")
        plan.warnings.append(Warning_(
            "beyond-noise-scale",
            f"Global batch {plan.global_batch} is over {NOISE_MARGIN:g}x the estimated gradient noise scale "
            f"(~{noise:.0f}): more batch buys little statistical progress. {why}"))
    return plan, lr, warmup


def start_value(task: str, cap: int, cap_text: str = "") -> tuple[int, str]:
    """Step 2: the task table's per-device starting value, capped (by the ceiling unless ``cap_text`` says
    what else)."""
    profile = task_profile(task)
    start = min(profile.start_per_device, cap)
    cap_text = cap_text or f"capped by the ceiling of {cap}."
    reason = (f"{profile.label}: start at {profile.start_per_device} per device ({profile.source})"
              + (f", {cap_text}" if start < profile.start_per_device else "."))
    return start, reason
