"""Typed events a session reports while it works; the CLI prints them, the TUI turns them into messages."""

from __future__ import annotations

from dataclasses import dataclass

from .method.ceiling import ProbeTrial
from .ledger import TrialRecord


@dataclass(frozen=True)
class StepStarted:
    step: int  # 1 ceiling, 2 starting value, 3 short trial, 4 sweep
    title: str


@dataclass(frozen=True)
class StepFinished:
    step: int
    title: str
    seconds: float
    runs: int


@dataclass(frozen=True)
class ProbeStarted:
    batch: int
    purpose: str  # "fit" | "edge" | "confirm"
    processes: int


@dataclass(frozen=True)
class ProbeFinished:
    trial: ProbeTrial


@dataclass(frozen=True)
class RunStarted:
    phase: str  # "trial" | "noise" | "sweep" | "timing"
    per_device: int
    world_size: int
    accumulation: int
    steps: int
    precision: str
    lr: float


@dataclass(frozen=True)
class TrialProgress:
    phase: str
    per_device: int
    step: int
    steps: int
    loss: float
    seconds: float  # this step's wall time, the wait for its batches excluded
    data_seconds: float | None = None  # the wait for this step's batches


@dataclass(frozen=True)
class EvalPoint:
    phase: str
    per_device: int
    step: int
    train_seconds: float
    val_loss: float | None
    val_metric: float | None


@dataclass(frozen=True)
class TrialFinished:
    record: TrialRecord


@dataclass(frozen=True)
class Decision:
    step: int
    message: str  # e.g. "64: 31% of the ceiling's memory (< 60%): doubling to 128"
    verdict: bool = False  # the step's closing reason (the summary and the recipe carry it), not one on the way


@dataclass(frozen=True)
class Note:
    message: str


Event = StepStarted | StepFinished | ProbeStarted | ProbeFinished | RunStarted | TrialProgress | EvalPoint | TrialFinished | Decision | Note
