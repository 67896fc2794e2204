"""The trial ledger (DOMAIN section 7): one row per real run, kept in the recipe."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


# The note that marks a run in the sweep no candidate's score reads (an unstable run's rerun at the validated LR, a
# timing round).
NOT_A_CANDIDATE = "not a candidate's run"
REUSED_NOTE = "reused from the history"  # the note of a run the history measured earlier (record_from_row)
# The phases whose runs trained a candidate or the noise scale: what the caps, the noise scale and the validated LR
# read (never a probe or a timing round).
TRAINED_PHASES = ("trial", "noise", "sweep")


@dataclass
class TrialRecord:
    # "ceiling" | "trial" | "noise" (one device, accumulation 2, for the noise scale) | "sweep" | "timing" (step 4's
    # tied candidates timed again side by side: speed only; never a result the history, the noise scale, the caps
    # or the validated LR read)
    phase: str
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
    seed: int | None = None  # the training run's seed (init and data order); sweep ties rerun with another
    peak_bytes: int | None = None
    step_seconds: float | None = None  # one optimizer step on the device, the loader's wait excluded
    data_seconds: float | None = None  # per step, waiting for the next batches (the slowest rank's loader)
    throughput: float | None = None
    final_loss: float | None = None
    val_loss: float | None = None
    val_metric: float | None = None  # the metric the sweep ranks by (val_metric_name), when not the loss
    val_metric_name: str | None = None
    higher_is_better: bool | None = None
    val_metrics: dict = field(default_factory=dict)  # every metric validation computed, by name
    noise_scale: float | None = None
    train_seconds: float | None = None  # training time of the run, evaluation excluded
    note: str = ""
    losses: list[float] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)  # validation checkpoints: step, train_seconds, val_loss, ...
    # The worker's gradient norms (advisor.method.noise.GradNormSample as a dict, per-step values included): the
    # noise scale's interval is bootstrapped over them. Too long for the recipe's ledger, so to_dict leaves it out.
    gradient_norms: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        # TOML has no null: drop what was not measured.
        return {k: v for k, v in asdict(self).items()
                if v is not None and v != "" and v != [] and v != {} and k != "gradient_norms"}

    def validation_text(self) -> str:
        """The run's validation result in a few words: ``val acc 0.912``, ``val f1 0.830``, ``val loss 0.4123``."""
        if self.val_metric is not None:
            name = self.val_metric_name or "accuracy"
            return f"val {'acc' if name == 'accuracy' else name} {self.val_metric:.3f}"
        return f"val loss {self.val_loss:.4f}" if self.val_loss is not None else ""

    @property
    def samples_per_s(self) -> float | None:
        """The run's samples/s as every rule and screen reads it: the global batch over the median step time plus
        the slowest rank's median wait for data (a load burst is not the batch; a loader that holds the step back
        is). ``throughput``, the worker's own figure, leaves the loader out."""
        if self.step_seconds:
            return self.global_batch / self.wall_step_seconds
        return self.throughput

    @property
    def wall_step_seconds(self) -> float | None:
        """One optimizer step as training sees it: the device's median step time plus the slowest rank's median
        wait for data (the time samples_per_s divides by; goodput's step-time fit reads it too)."""
        return self.step_seconds + (self.data_seconds or 0.0) if self.step_seconds else None

    @property
    def data_share(self) -> float | None:
        """The loader's share of a step's wall time (data wait + step), when both were measured."""
        if self.data_seconds is None or not self.step_seconds:
            return None
        return self.data_seconds / (self.data_seconds + self.step_seconds)


def trained_rows(rows: list[TrialRecord]) -> list[TrialRecord]:
    """The runs that trained (TRAINED_PHASES), in order."""
    return [r for r in rows if r.phase in TRAINED_PHASES]


LOADER_BOTTLENECK_SHARE = 0.25  # above this share of a step spent waiting for data, the loader sets the pace


def loader_bottleneck(rows: list[TrialRecord], threshold: float = LOADER_BOTTLENECK_SHARE) -> str | None:
    """A note when the runs waited for their data loader a large share of each step, else None."""
    slow = [r for r in trained_rows(rows) if r.status == "ok" and (r.data_share or 0) > threshold]
    if not slow:
        return None
    worst = max(slow, key=lambda r: r.data_share)
    return (f"The data loader, not the model, is the bottleneck: at {worst.per_device} per device each step waited "
            f"{worst.data_seconds * 1000:.1f} ms for its batches against {worst.step_seconds * 1000:.1f} ms of "
            f"compute ({worst.data_share:.0%} of the step; {len(slow)} of the runs above {threshold:.0%}). The "
            "samples/s in this recipe count that wait, as training will see it; the batch choice is the loader's "
            "until loading keeps up: more DataLoader workers, pin_memory on GPU, cheaper decoding/augmentation, "
            "or pre-processed data, then plan again.")
