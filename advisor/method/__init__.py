"""The decisions of the four-step start method, as pure functions over an injected runner.

Step 3 (short trial: double / halve / stop, mixed precision before halving) and step 4
(comparison sweep: the pick, its tie-break and the chance check) decide from what a runner
measured, so they are tested against a stub runner in milliseconds; ``advisor.session``
drives them with the real runner. Every answer carries its reason.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable, Protocol

from ..ceiling import DEFAULT_HEADROOM, CeilingResult, ProbeTrial
from ..errors import AdvisorError
from ..health import UNSTABLE, Health, judge
from ..oom import is_primitive_failure
from ..ledger import TrialRecord
from ..noise import GradNormSample, NoiseEstimate, estimate_noise
from ..lr import (DEFAULT_BASE_WARMUP_EPOCHS, LRDecision, WarmupDecision, bound_past_validated, plan_warmup,
                  scale_lr)
from ..plan import Plan, Warning_, identical_batch_for, plan_data_parallel
from ..tasks import task_profile
from .sweep import DEFAULT_POLICY, SweepVerdict

HIGH_WATER = 0.60  # below this share of the ceiling's memory, double the trial batch
WORTH_DOUBLING = 1.10  # doubling must buy >= 10% more samples/s to be worth it
SWEEP_EVAL_POINTS = 4  # validation checkpoints per sweep run; the rule scores the mean of the last two
MIN_SWEEP_STEPS = 4  # a sweep run's floor, whatever the equal-samples rule gives (its eval points need steps)
SUBSET_SWEEP = (8, 16, 32, 64, 128)
NOISE_MARGIN = 2.0  # a global batch past this multiple of the noise scale buys little


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
    sweep_walk: int = DEFAULT_POLICY.extensions  # times the swept range may grow past an end that wins
    sweep_seeds: int = DEFAULT_POLICY.seeds  # paired seeds per sweep candidate
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
    allow_few_steps: bool = False  # --force: a --global-batch past largest_learnable_global is planned anyway

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
    from ..device import mixed_precision_for

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
class SweepOutcome:
    chosen: int  # the plan's per-device batch; the trial's choice when no candidate learned (verdict.failed)
    reason: str
    rows: list[TrialRecord]
    candidates: list[int]
    verdict: SweepVerdict | None = None
    samples: int | None = None  # training samples every candidate saw (equal samples)
    extended: list[int] = field(default_factory=list)  # candidates added because an end of the range won

    @property
    def failed(self) -> bool:
        """No candidate learned: the sweep validated nothing, and the plan must not repeat its setting."""
        return self.verdict is not None and self.verdict.failed

    def summary(self) -> dict:
        """What the recipe's [method.sweep] and `plan --json` say about the comparison."""
        out = {"samples_per_run": self.samples, "candidates": self.candidates, "extended": self.extended or None}
        if self.verdict:
            out.update(self.verdict.summary())
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
            blame = _blame_lr_or_batch(runner, batch, steps, lr, precision, info, tried, unhealthy)
            if blame:
                rows.append(blame[0])
                notes.append(blame[1])
                say(blame[1])
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
    chosen = _trial_choice(tried, unhealthy, ceiling, notes)
    return TrialOutcome(chosen, "; ".join(notes), precision, rows, decisions, unhealthy=unhealthy)


def _validated_lr(info: WorkloadInfo, batch: int, nproc: int, tried: dict[int, TrialRecord],
                  unhealthy: dict[int, Health]) -> tuple[float, str]:
    """The LR nearest below ``batch`` that a run trained healthily at: the largest healthy trial batch under it,
    else the base LR (the one the user validated, at the base global batch)."""
    below = [b for b, r in tried.items() if b < batch and r.status == "ok" and b not in unhealthy]
    if below:
        b = max(below)
        return lr_for(info, b * nproc).value, f"{b} per device's"
    return info.base_lr, "the base"


def _blame_lr_or_batch(runner: Runner, batch: int, steps: int, lr: float, precision: str, info: WorkloadInfo,
                       tried: dict[int, TrialRecord], unhealthy: dict[int, Health]) -> tuple[TrialRecord, str] | None:
    """An unstable run at a scaled-up LR blames the LR before the batch (DOMAIN 2): the same batch once more at the
    nearest validated LR. Its verdict says which was to blame; the batch is still never doubled from (the plan's
    LR at it is the scaled one) and the trial goes on as for any unstable run. None when the LR was not scaled up
    past a validated one (nothing to tell apart)."""
    validated, whose = _validated_lr(info, batch, runner.nproc, tried, unhealthy)
    if not lr > validated * (1 + 1e-9):
        return None
    warmup = min(warmup_for(info, lr_for(info, batch * runner.nproc)).steps, steps // 4)
    record = runner.train("trial", batch, steps, validated, warmup, precision=precision)
    verdict = judge(record)
    record.note = (record.note + "; " if record.note else "") + f"rerun at {whose} LR {validated:.3g}: {verdict.verdict}"
    if verdict.learned:
        return record, (f"{batch}: learned at {whose} LR {validated:.3g} but not at the scaled {lr:.3g}: the LR "
                        "scale-up, not the batch, is to blame")
    return record, (f"{batch}: unstable at {whose} LR {validated:.3g} too: the batch itself is to blame, not only "
                    "the LR scale-up")


def _trial_choice(tried: dict[int, TrialRecord], unhealthy: dict[int, Health], ceiling: CeilingResult,
                  notes: list[str]) -> int:
    """The trial's pick among its runs: the largest healthy batch each of whose doublings bought >= 10% more
    samples/s (an unstable run only when nothing else trained); the notes say why."""
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
    return chosen


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
              sweep_reason: str, precision: str, noise: float | None, amp_available: bool,
              healthy_global: int | None = None, noise_low: float | None = None
              ) -> tuple[Plan, LRDecision, WarmupDecision]:
    """The data-parallel plan for the target cluster, its LR and warmup, and the warnings that go with them.
    ``healthy_global``: the largest global batch a trial or sweep run trained healthily at (default: the
    sweep's); past it the LR is bounded (advisor.lr.bound_past_validated)."""
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
    lr = bound_past_validated(lr_for(info, plan.global_batch), max(healthy_global or 0, validated), info.optimizer,
                              noise_low)
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


def start_value(task: str, cap: int, cap_text: str = "", base_global: int | None = None, nproc: int = 1,
                base_source: str = "") -> tuple[int, str]:
    """Step 2, global batch first (DOMAIN 3): the user's base global batch (where the base LR was validated)
    divided over this host's processes; without one, the task table's per-device value. Capped (by the ceiling
    unless ``cap_text`` says what else)."""
    cap_text = cap_text or f"capped by the ceiling of {cap}."
    if base_global:
        wanted = max(1, base_global // nproc)
        start = min(wanted, cap)
        reason = (f"Global batch first: your base global batch {base_global} ({base_source or 'the base'}; the "
                  f"base LR was validated there) over {nproc} process(es) = {wanted} per device"
                  + (f", {cap_text}" if start < wanted else "."))
        return start, reason
    profile = task_profile(task)
    start = min(profile.start_per_device, cap)
    reason = (f"{profile.label}: start at {profile.start_per_device} per device ({profile.source})"
              + (f", {cap_text}" if start < profile.start_per_device else "."))
    return start, reason
