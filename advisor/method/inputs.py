"""What every step of the method reads: the user's settings, the workload's facts, the runner the steps drive
(the real launcher or a stub in tests), and the workload's LR and warmup at a global batch."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

from ..ledger import TrialRecord
from .ceiling import DEFAULT_HEADROOM, ProbeTrial
from .health import UNSTABLE, judge
from .lr import DEFAULT_BASE_WARMUP_EPOCHS, LRDecision, WarmupDecision, plan_warmup, scale_lr
from .sweep import DEFAULT_POLICY


SWEEP_EVAL_POINTS = 4  # validation checkpoints per sweep run; the rule scores the mean of the last two



MIN_SWEEP_STEPS = 4  # a sweep run's floor, whatever the equal-samples rule gives (its eval points need steps)



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
    sweep_extensions: int = DEFAULT_POLICY.extensions  # times the swept range may grow past an end that wins
    sweep_seeds: int = DEFAULT_POLICY.seeds  # paired seeds per sweep candidate
    global_batch: int | None = None  # a global target the user insists on; else the sweep decides
    start_per_device: int | None = None  # --start: step 2's value, instead of the base batch's or the task table's
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
    cluster_nodes: int = 1  # nodes the runs themselves span (`advisor plan --nnodes`): measured, not extrapolated

    @property
    def world_size(self) -> int:
        return self.target_world_size or self.nodes * self.nproc

    @property
    def run_processes(self) -> int:
        """The processes every trial and sweep run has: this host's --nproc, times the nodes when the plan runs on
        the cluster itself."""
        return self.nproc * self.cluster_nodes

    @property
    def base_warmup_text(self) -> str | None:
        """--base-warmup as the recipe's [inputs] records it ("2 epochs", "500 steps"); None when not given."""
        return f"{self.base_warmup[0]:g} {self.base_warmup[1]}" if self.base_warmup else None

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



class Runner(Protocol):
    """What the decisions need from whoever runs the jobs (the real launcher, or a stub in tests)."""

    nproc: int

    def probe(self, batch: int, purpose: str, precision: str = "fp32") -> ProbeTrial: ...

    def train(self, phase: str, per_device: int, steps: int, lr: float, warmup_steps: int = 0,
              accumulation: int = 1, evaluate: bool = False, precision: str = "fp32",
              eval_points: int = 1, seed: int = 0) -> TrialRecord: ...


class ReusingRunner(Runner, Protocol):
    """A runner the sweep asks first for a run already measured at the same settings (the session's history)."""

    def reused_run(self, phase: str, per_device: int, steps: int, precision: str, lr: float, warmup_steps: int,
                   seed: int = 0) -> TrialRecord | None: ...


class SessionRunner(Runner, Protocol):
    """What ``advisor.session.Session`` reads besides the runs: every runner has these (the launcher, the stubs)."""

    ledger: list[TrialRecord]  # every run in the order made, probes included
    model_info: dict | None  # the workers' report on the model (parameters, has_batchnorm), once one ran
    env: dict  # the launch environment the runs used (the recipe's launch line repeats it)
    options: dict  # the adapter's options, as checked (adapter.plan_options)


@runtime_checkable
class LauncherReports(Protocol):
    """What the real launcher (advisor.runner.JobRunner) also reports, and stubs need not: the session reads them
    when its runner has them (``isinstance(runner, LauncherReports)``)."""

    probe_selection: object | None  # advisor.batches.ProbeSelection: the samples probes feed, set by the session
    probe_batches: dict[int, dict]  # per probed batch: what the probe fed
    optimizer_info: dict | None  # which optimizer implementation the workers ran, with its hyperparameters
    ranking_info: dict | None  # which validation metric ranked the sweep, and why

    def close(self) -> None: ...


Decide = Callable[[str], None]  # a decision, said as it is made (the UI shows them live)



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


def at_rule_lr(info: WorkloadInfo, record: TrialRecord) -> bool:
    """Whether ``record`` ran at the LR the scaling rules give its global batch (a rerun at a lower LR did not: it
    validates its own LR, not the rule's)."""
    return record.lr is not None and math.isclose(record.lr, lr_for(info, record.global_batch).value, rel_tol=1e-6)


def validated_at_rule_lr(info: WorkloadInfo, rows: list[TrialRecord]) -> list[TrialRecord]:
    """The trial, noise and sweep runs that learned at their global batch's rule LR: what "validated" means for a
    global batch (the LR bound past it, `--global-batch`, replan)."""
    return [r for r in rows if r.phase in ("trial", "noise", "sweep") and r.status == "ok" and at_rule_lr(info, r)
            and judge(r).learned]


def nearest_validated_lr(info: WorkloadInfo, global_batch: int, rows: list[TrialRecord]) -> tuple[float, str]:
    """(LR, whose) nearest below ``global_batch`` that a run trained healthily at: the largest global batch under
    it whose trial or sweep run, at that batch's own scaled LR, was not unstable; else the base LR (the one the user
    validated, at the base global batch). An unstable run at a scaled-up LR is rerun at it to tell the LR from the
    batch (DOMAIN 2: blame the LR before the batch)."""
    healthy = [r for r in rows if r.phase in ("trial", "sweep") and r.status == "ok" and r.accumulation == 1
               and r.global_batch < global_batch and at_rule_lr(info, r) and judge(r).verdict != UNSTABLE]
    if healthy:
        best = max(healthy, key=lambda r: r.global_batch)
        return best.lr, f"{best.per_device} per device's"
    return info.base_lr, "the base"


@dataclass(frozen=True)
class FailedLR:
    """The planned (global batch, LR) some of the plan's own runs were unstable at, and what the plan does."""

    lr: float  # the LR to advise instead (unchanged when the sweep's own seeds at the setting learned)
    code: str  # the warning's code
    message: str


def lr_seen_failing(info: WorkloadInfo, global_batch: int, lr: float, rows: list[TrialRecord]) -> FailedLR | None:
    """None when no run at ``global_batch`` was unstable at ``lr`` or below; else what stands (DOMAIN 2: a recipe
    never advises a setting its own runs saw fail).

    - A sweep run there was unstable: the LR is refused; the advice falls back to the largest LR a run at this
      global batch learned at (a rerun at a lower LR), else the nearest validated LR below it.
    - Only the short trial was unstable there and every sweep seed at exactly this setting learned: the sweep's
      evidence stands (its runs are longer, carry the planned warmup, and are several seeds), said so.
    - Only the trial was unstable and no sweep run checked the setting: the validated LR, as above.
    """
    here = [r for r in rows if r.phase in ("trial", "sweep") and r.status == "ok" and r.global_batch == global_batch
            and r.lr is not None]
    failed = [r for r in here if r.lr <= lr * (1 + 1e-6) and judge(r).verdict == UNSTABLE]
    if not failed:
        return None
    said = "; ".join(f"the {r.phase} run at {r.per_device} per device x {r.world_size}"
                     + (f" seed {r.seed}" if r.seed else "") + f" was unstable at LR {r.lr:.4g}" for r in failed)
    sweep_ok = [r for r in here if r.phase == "sweep" and math.isclose(r.lr, lr, rel_tol=1e-6) and judge(r).learned]
    if all(r.phase == "trial" for r in failed) and sweep_ok:
        return FailedLR(lr, "trial-unstable-sweep-learned", (
            f"At global batch {global_batch}, LR {lr:.4g}: {said}, but the sweep's {len(sweep_ok)} seed(s) at this "
            "setting learned, with the planned warmup over a longer run. The sweep's evidence stands (the trial's "
            f"{'run is a short one' if len(failed) == 1 else f'{len(failed)} runs are short ones'} with the warmup "
            "squeezed into their first quarter); watch the first hundred "
            "steps of the real run."))
    lowest_failed = min(r.lr for r in failed)
    learned_here = [r.lr for r in here if r.lr < lowest_failed * (1 - 1e-6) and judge(r).learned]
    if learned_here:
        safe, whose = max(learned_here), f"the LR a run at global batch {global_batch} learned at"
    else:
        safe, whose = nearest_validated_lr(info, global_batch, rows)
        whose = f"{whose} LR, the nearest validated below it"
    return FailedLR(safe, "lr-seen-unstable", (
        f"The rules' LR {lr:.4g} at global batch {global_batch} is one this plan's own runs saw fail: {said}. A "
        f"recipe never advises a setting its runs saw fail, so the LR is {safe:.4g} ({whose}); it is validated at "
        "that LR only, not at the rules' one."))
