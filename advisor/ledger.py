"""The trial ledger (DOMAIN section 7): one row per real run, kept in the recipe."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class TrialRecord:
    phase: str  # "ceiling" | "trial" | "sweep"
    per_device: int
    world_size: int
    accumulation: int
    global_batch: int
    status: str  # "ok" | "oom"
    seconds: float
    lr: float | None = None
    warmup_steps: int | None = None
    precision: str = "fp32"
    steps: int | None = None
    peak_bytes: int | None = None
    step_seconds: float | None = None
    throughput: float | None = None
    final_loss: float | None = None
    val_loss: float | None = None
    val_metric: float | None = None
    noise_scale: float | None = None
    train_seconds: float | None = None  # training time of the run, evaluation excluded
    note: str = ""
    losses: list[float] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)  # validation checkpoints: step, train_seconds, val_loss, ...

    def to_dict(self) -> dict:
        # TOML has no null: drop what was not measured.
        return {k: v for k, v in asdict(self).items() if v is not None and v != "" and v != []}
