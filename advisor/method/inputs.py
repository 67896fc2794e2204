"""What every step of the method reads: the user's settings, the workload's facts, the runner the steps drive
(the real launcher or a stub in tests), and the workload's LR and warmup at a global batch."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

from ..ledger import TrialRecord
from .ceiling import DEFAULT_HEADROOM, ProbeTrial
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
