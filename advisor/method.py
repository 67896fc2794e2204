"""The four-step start method, end to end, through any adapter.

1. memory ceiling (real probes in fresh processes), 2. starting value from the
task table, 3. short trial with doubling/halving, 4. comparison sweep of half /
chosen / double with the LR scaled for each. Then the data-parallel plan, LR and
warmup. Progress goes to a callback, so the CLI and the TUI render it their way.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from .adapters import Adapter
from .ceiling import DEFAULT_HEADROOM, CeilingResult, ProbeTrial, search_ceiling
from .errors import AdvisorError
from .job import TrialJob
from .launch import JobOutcome, run_job
from .ledger import TrialRecord
from .lr import LRDecision, WarmupDecision, plan_warmup, scale_lr
from .plan import Plan, identical_batch_for, plan_data_parallel
from .tasks import task_profile

HIGH_WATER = 0.60  # below this share of the ceiling's memory, double the trial batch
WORTH_DOUBLING = 1.10  # doubling must buy >= 10% more samples/s to be worth it
METRIC_TIE = 0.005  # validation metrics within this are a tie; then the faster one wins


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
    global_batch: int | None = None  # a global target the user insists on; else the sweep decides
    base_lr: float | None = None
    base_batch: int | None = None
    precision: str = "fp32"
    trial_timeout_s: float = 900.0
    idle_timeout_s: float = 180.0
    collective_timeout_s: float = 120.0
    max_batch: int = 65536
    device_memories: list[int] | None = None  # every device's memory, when they differ (heterogeneous GPUs)
    workdir: str = field(default_factory=os.getcwd)
    base_warmup_epochs: float = 1.0


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


@dataclass
class StepTiming:
    name: str
    seconds: float
    trials: int


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


Progress = Callable[[str, dict], None]  # (kind, payload): "step", "trial", "progress", "info"


class Runner:
    """Runs jobs through one adapter and turns outcomes into ledger rows."""

    def __init__(self, adapter: Adapter, settings: MethodSettings, progress: Progress):
        self.adapter, self.s, self.progress = adapter, settings, progress
        self.ledger: list[TrialRecord] = []
        self.model_info: dict | None = None

    def _job(self, **kw) -> TrialJob:
        return TrialJob(workload=self.s.workload, device=self.s.device, memory_budget_bytes=self.s.memory_budget_bytes,
                        collective_timeout_s=self.s.collective_timeout_s, precision=self.s.precision,
                        workdir=self.s.workdir, **kw)

    def _run(self, job: TrialJob, nproc: int, label: str) -> JobOutcome:
        def relay(event):
            if event["event"] == "model" and self.model_info is None:
                self.model_info = event
            elif event["event"] == "progress":
                self.progress("progress", event)

        return run_job(self.adapter.command, job, nproc, self.s.trial_timeout_s, self.s.idle_timeout_s, relay, label)

    def probe(self, batch: int, purpose: str) -> ProbeTrial:
        outcome = self._run(self._job(kind="probe", per_device_batch=batch, steps=2), 1,
                            f"ceiling probe at batch {batch}")
        event = outcome.first("probe") or {}
        trial = ProbeTrial(batch, "ok" if outcome.status == "ok" and event.get("status") == "ok" else "oom",
                           event.get("peak_bytes"), outcome.seconds, purpose, event.get("message", ""))
        self.ledger.append(TrialRecord("ceiling", batch, 1, 1, batch, trial.status, round(outcome.seconds, 3),
                                       precision=self.s.precision, peak_bytes=trial.peak_bytes,
                                       note=f"{purpose} probe" + (f": {trial.message}" if trial.message else "")))
        self.progress("trial", {"phase": "ceiling", "batch": batch, "status": trial.status,
                                "peak_bytes": trial.peak_bytes, "seconds": outcome.seconds, "purpose": purpose})
        return trial

    def train(self, phase: str, per_device: int, steps: int, lr: float, warmup_steps: int = 0,
              accumulation: int = 1, evaluate: bool = False) -> TrialRecord:
        job = self._job(kind="train", per_device_batch=per_device, steps=steps, lr=lr, warmup_steps=warmup_steps,
                        accumulation_steps=accumulation, evaluate=evaluate, loss_every=max(1, steps // 20))
        self.progress("info", {"message": f"{phase}: {self.s.nproc} x {per_device} for {steps} steps"})
        outcome = self._run(job, self.s.nproc, f"{phase} at {per_device} per device")
        global_batch = per_device * self.s.nproc * accumulation
        if outcome.status == "oom":
            oom = outcome.first("oom") or {}
            record = TrialRecord(phase, per_device, self.s.nproc, accumulation, global_batch, "oom",
                                 round(outcome.seconds, 3), lr=lr, warmup_steps=warmup_steps,
                                 precision=self.s.precision, steps=steps, note=oom.get("message", "out of memory"))
        else:
            results = outcome.all("result")
            if not results:
                raise AdvisorError(f"The {phase} at {per_device} per device ended without a result. "
                                   "Worker output:\n" + "\n".join(outcome.output_tail[-10:]))
            lead = next((r for r in results if r.get("rank") == 0), results[0])
            peak = max((r.get("peak_bytes") or 0) for r in results) or None
            noise = (lead.get("noise") or {}).get("b_simple")
            record = TrialRecord(phase, per_device, self.s.nproc, accumulation, global_batch, "ok",
                                 round(outcome.seconds, 3), lr=lr, warmup_steps=warmup_steps,
                                 precision=self.s.precision, steps=steps, peak_bytes=peak,
                                 step_seconds=statistics.median(r["step_seconds"] for r in results),
                                 throughput=min(r["throughput"] for r in results), final_loss=lead.get("final_loss"),
                                 val_loss=lead.get("val_loss"), val_metric=lead.get("val_metric"),
                                 noise_scale=noise, losses=lead.get("losses") or [])
        self.ledger.append(record)
        self.progress("trial", {"phase": phase, **record.to_dict()})
        return record


def _workload_info(settings: MethodSettings, w, model_info: dict) -> WorkloadInfo:
    base_global = settings.base_batch or w.current_batch_size or task_profile(w.task).start_per_device
    base_lr = settings.base_lr or w.current_lr
    if base_lr is None:
        raise AdvisorError(f"The workload {settings.workload!r} gives no learning rate. Pass --base-lr (the LR "
                           "you use today) and --base-batch (the global batch it was tuned for).")
    source = ("--base-lr/--base-batch" if settings.base_lr or settings.base_batch
              else "the workload's current_lr/current_batch_size")
    return WorkloadInfo(w.name, w.task, w.num_classes, w.optimizer, len(w.train_data), len(w.val_data),
                        model_info.get("parameters", 0), bool(model_info.get("has_batchnorm")), base_lr, base_global,
                        source)


def _lr_for(info: WorkloadInfo, global_batch: int) -> LRDecision:
    return scale_lr(info.base_lr, info.base_global_batch, global_batch, info.optimizer)


def _lr_and_warmup(info: WorkloadInfo, global_batch: int, steps: int) -> tuple[float, int]:
    """The scaled LR for a short run, with the planned warmup squeezed into its first quarter."""
    lr = _lr_for(info, global_batch)
    warmup = plan_warmup(lr.scale, info.train_size, global_batch).steps
    return lr.value, min(warmup, steps // 4)


def short_trial(runner: Runner, start: int, ceiling: CeilingResult, steps: int, info: WorkloadInfo
                ) -> tuple[int, str, list[TrialRecord]]:
    """Step 3: run at ``start``; double while memory stays under 60% of the ceiling's; halve on OOM."""
    ceiling_bytes = ceiling.estimated_peak_bytes
    batch, rows, notes = start, [], []
    tried: dict[int, TrialRecord] = {}
    while batch >= 1 and batch not in tried:
        record = runner.train("trial", batch, steps, *_lr_and_warmup(info, batch * runner.s.nproc, steps))
        tried[batch] = record
        rows.append(record)
        if record.status == "oom":
            notes.append(f"{batch}: OOM, halving")
            batch //= 2
            continue
        share = (record.peak_bytes or 0) / ceiling_bytes if ceiling_bytes else 1
        notes.append(f"{batch}: {share:.0%} of the ceiling's memory, {record.throughput:.0f} samples/s")
        previous = tried.get(batch // 2)
        if previous and previous.status == "ok" and record.throughput < previous.throughput * WORTH_DOUBLING:
            break  # doubling stopped paying: no point in doubling again
        if share < HIGH_WATER and batch * 2 <= ceiling.per_device_max:
            batch *= 2
        else:
            break
    ok = sorted((b, r) for b, r in tried.items() if r.status == "ok")
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
    return chosen, "; ".join(notes), rows


def comparison_sweep(runner: Runner, chosen: int, ceiling: CeilingResult, steps: int, info: WorkloadInfo,
                     subset: bool) -> tuple[int, str, list[TrialRecord]]:
    """Step 4: half / chosen / double (or the 8..128 subset sweep) for the same steps; best validation wins."""
    if subset:
        candidates = [b for b in (8, 16, 32, 64, 128) if b <= ceiling.per_device_max]
    else:
        candidates = [b for b in (chosen // 2, chosen, chosen * 2) if 1 <= b <= ceiling.per_device_max]
    rows = []
    for batch in sorted(set(candidates)):
        rows.append(runner.train("sweep", batch, steps, *_lr_and_warmup(info, batch * runner.s.nproc, steps),
                                 evaluate=True))
    ok = [r for r in rows if r.status == "ok"]
    if not ok:
        return chosen, "Every sweep run ran out of memory; keeping the trial's choice.", rows
    higher_is_better = ok[0].val_metric is not None

    def score(r: TrialRecord) -> float:
        return r.val_metric if higher_is_better else -(r.val_loss if r.val_loss is not None else math.inf)

    if higher_is_better and info.num_classes and max(r.val_metric for r in ok) < 1.5 / info.num_classes:
        return chosen, (f"No sweep run got clearly above chance (1/{info.num_classes}) in {steps} steps, so the "
                        "comparison says nothing: keeping the trial's choice. Run a longer sweep (--sweep-steps) "
                        "or check the base LR."), rows
    best = max(score(r) for r in ok)
    tied = [r for r in ok if best - score(r) <= (METRIC_TIE if higher_is_better else METRIC_TIE * abs(best))]
    winner = max(tied, key=lambda r: r.throughput or 0)
    metric = "validation accuracy" if higher_is_better else "validation loss"
    table = ", ".join(f"{r.per_device}: {('%.3f' % r.val_metric) if higher_is_better else ('%.4f' % r.val_loss)}"
                      for r in ok)
    why = (f"By {metric} after {steps} steps ({table}), {winner.per_device} per device"
           + (f" ties the best within {METRIC_TIE} and is the fastest ({winner.throughput:.0f} samples/s)."
              if len(tied) > 1 else " is best."))
    return winner.per_device, why, rows


def heterogeneous_devices_note(ceiling: CeilingResult, device_memories: list[int] | None):
    """With cards of different sizes, say what identical batches leave unused (probes ran on the smallest)."""
    if not device_memories or len(set(device_memories)) < 2:
        return None
    usable_share = ceiling.usable_bytes / ceiling.budget_bytes
    ceilings = [ceiling.fit.batch_for((1 - ceiling.headroom) * usable_share * m) for m in device_memories]
    return identical_batch_for(ceilings)[1]


def _noise_summary(rows: list[TrialRecord]) -> tuple[float | None, str]:
    # A run whose loss rose has gradients dominated by the blow-up, not by sampling noise.
    healthy = [r for r in rows if r.status == "ok" and r.losses and r.losses[-1] < r.losses[0]]
    estimates = [r.noise_scale for r in healthy if r.noise_scale and r.noise_scale > 0]
    if not estimates:
        return None, ("Gradient noise scale: not estimated (needs 2+ processes and gradients whose noise "
                      "dominates; the estimate came out non-positive).")
    value = statistics.median(estimates)
    return value, (f"Estimated gradient noise scale B_simple ~ {value:.0f} (median of {len(estimates)} runs whose "
                   "loss fell, over the second half of each run, from "
                   "per-process vs all-reduced gradient norms; McCandlish et al. 2018). Past it, a bigger global "
                   "batch buys little. This is an estimate from short, noisy runs.")


def run_method(adapter: Adapter, settings: MethodSettings, progress: Progress | None = None) -> MethodResult:
    from .workload import resolve_workload

    progress = progress or (lambda kind, payload: None)
    workload = resolve_workload(settings.workload)  # a bad workload fails here, before any process starts
    runner = Runner(adapter, settings, progress)
    timings: list[StepTiming] = []

    def step(name: str):
        progress("step", {"name": name})
        return time.monotonic(), len(runner.ledger)

    t0, n0 = step("1. memory ceiling")
    ceiling = search_ceiling(runner.probe, settings.memory_budget_bytes, settings.headroom, settings.max_batch)
    timings.append(StepTiming("memory ceiling", time.monotonic() - t0, len(runner.ledger) - n0))
    info = _workload_info(settings, workload, runner.model_info or {})
    profile = task_profile(info.task)

    t0, n0 = step("2. starting value")
    start = min(profile.start_per_device, ceiling.per_device_max)
    start_reason = (f"{profile.label}: start at {profile.start_per_device} per device ({profile.source})"
                    + (f", capped by the ceiling of {ceiling.per_device_max}." if start < profile.start_per_device
                       else "."))
    timings.append(StepTiming("starting value", time.monotonic() - t0, 0))

    t0, n0 = step("3. short trial")
    trial_choice, trial_reason, _ = short_trial(runner, start, ceiling, settings.trial_steps, info)
    timings.append(StepTiming("short trial", time.monotonic() - t0, len(runner.ledger) - n0))

    t0, n0 = step("4. comparison sweep")
    sweep_choice, sweep_reason, _ = comparison_sweep(runner, trial_choice, ceiling, settings.sweep_steps, info,
                                                     settings.subset_sweep)
    timings.append(StepTiming("comparison sweep", time.monotonic() - t0, len(runner.ledger) - n0))

    target = settings.global_batch or sweep_choice * settings.nproc
    plan = plan_data_parallel(target, settings.nproc, ceiling.per_device_max, info.task, info.num_classes,
                              info.has_batchnorm, settings.device, settings.precision,
                              amp_available=settings.device == "cuda")
    if not settings.global_batch:
        plan.reason = (f"The sweep's winner, {sweep_choice} per device x {settings.nproc} device(s) = global "
                       f"{plan.global_batch}; it fits the ceiling, so no accumulation. " + plan.reason)
    note = heterogeneous_devices_note(ceiling, settings.device_memories)
    if note:
        plan.warnings.append(note)
    lr = _lr_for(info, plan.global_batch)
    warmup = plan_warmup(lr.scale, info.train_size, plan.global_batch, settings.base_warmup_epochs)
    noise, noise_reason = _noise_summary([r for r in runner.ledger if r.phase in ("trial", "sweep")])
    if noise and plan.global_batch > 2 * noise:
        from .plan import Warning_

        plan.warnings.append(Warning_("beyond-noise-scale",
                                      f"Global batch {plan.global_batch} is over twice the estimated gradient noise "
                                      f"scale (~{noise:.0f}): more batch buys little statistical progress."))
    return MethodResult(settings, info, ceiling, start, start_reason, trial_choice, trial_reason, sweep_choice,
                        sweep_reason, plan, lr, warmup, runner.ledger, timings, noise, noise_reason)
