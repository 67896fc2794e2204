"""Records that cross the diagnosis modules: what readers extract and what detectors conclude."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

TRAIN_LOSS = "train_loss"
VAL_LOSS = "val_loss"


@dataclass
class Point:
    """One metric value read from a log line."""

    line: int
    name: str  # normalised: train_loss, val_loss, lr, grad_norm, ...
    value: float
    step: float | None = None
    epoch: float | None = None
    redraw: bool = False  # from a progress bar that redraws the same values: repeats collapse


@dataclass
class LogEvent:
    """Something that happened: an out-of-memory error, a killed worker, a crash, a skipped step."""

    line: int
    kind: str  # "oom" | "killed" | "signal" | "crash" | "overflow" | "loss-scale-floor"
    text: str
    details: dict = field(default_factory=dict)


@dataclass
class Finding:
    kind: str  # oom | crash | oscillation-jitter | oscillation-periodic | overfitting | slow-convergence | diverged
    #            | not-learning
    severity: str  # "error" | "warning"
    summary: str
    evidence: dict
    actions: list[str]
    secondary_to: str | None = None  # set by the co-finding rules: a weaker finding another one explains
    confidence: str = "high"  # low | medium | high: how much of the curve the finding stands on

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ReadStats:
    """What was read, so a partial diagnosis can say what it skipped."""

    sources: list[str] = field(default_factory=list)
    lines: int = 0
    parsed_lines: int = 0
    skipped_binary_lines: int = 0
    truncated_lines: int = 0
    formats: dict[str, int] = field(default_factory=dict)  # reader name -> lines it read
    sampling_stride: int = 1
    validation_sampled: bool = False  # validation lines too frequent to read all: sampled like training lines
    series_lengths: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
