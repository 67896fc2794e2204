"""Did a training run learn? The first question about every trial and sweep run (DOMAIN §2, "Judging a run").

One verdict a run, computed here and nowhere else: ``learned``, ``unstable`` (a NaN/inf loss, a loss that
ends above where it started, or the last quarter of the loss curve giving back more than half of the run's
best decrease: "much faster descent plus spikes: LR too high"), ``flat`` (the loss never fell by a tenth of
where it started: at chance, or a short run still in its warmup), or ``oom``. Unstable runs never feed a
decision (the trial halves from them, the noise scale leaves them out); a flat one is noted, not dropped:
eight steps of warmup often look flat, and their gradients still measure sampling noise.

Why these numbers, on the curves the ledger records (one training loss every ``steps // 20`` steps, each the
loss of one batch, so single points are noisy):
- The best decrease is read off a running median of 5 points, so one lucky batch is not a decrease and one
  spike is not a collapse; the end is the median of the last quarter, and nothing is given back when the best
  lies in the last quarter (a run still falling when it stops).
- Give-back > 0.5: the diverged digits-cnn trial at 64 per device (LR 0.04; 2.31 -> 1.05 -> 7.4 -> 7.8 -> 2.07)
  gave back 0.81 of its smoothed best decrease; its healthy sweep runs (16 and 32 per device, two seeds each,
  spikes of 4.6 and 3.9 early on) gave back 0.00-0.01. Half sits far from both.
- Flat: a decrease under 10% of the starting loss; a run at chance stays within a few percent of ln K.
- But validation overrules a flat training loss: when the run's validation shortfall (its loss, or one minus an
  accuracy-like metric) fell by the same 10% from its first checkpoint to its last, it learned. Early in training
  from ln K the softmax's loss moves slowly while its argmax already sorts the classes: a 24-step LAMB sweep of
  digits-mlp went from 2.31 to 2.19 in one-batch training loss (5%) while its validation accuracy rose 0.15 -> 0.72
  (error 0.85 -> 0.28), and the flat verdict had called every candidate "never learned" (CI, session 13). A model
  at chance or stuck on the majority class moves its validation error by a point or two, far under 10%.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LEARNED, UNSTABLE, FLAT, OOM = "learned", "unstable", "flat", "oom"
GIVE_BACK = 0.5  # the last quarter giving back more than this share of the best decrease: unstable
FLAT_DECREASE = 0.10  # a smoothed best decrease under this share of the starting loss: flat
SMOOTHING = 5  # points in the running median the best decrease is read from
MIN_POINTS = 8  # fewer loss points: too short for a shape; learned when the last quarter is below the first


@dataclass(frozen=True)
class Health:
    verdict: str  # LEARNED | UNSTABLE | FLAT | OOM
    reason: str
    gave_back: float | None = None  # share of the best decrease the last quarter gave back

    @property
    def learned(self) -> bool:
        return self.verdict == LEARNED


def non_finite(record) -> bool:
    """Any loss or metric of the run NaN/inf."""
    values = [record.final_loss, record.val_loss, record.val_metric, *record.losses]
    values += [p.get(k) for p in record.evals for k in ("val_loss", "val_metric")]
    return any(v is not None and not math.isfinite(v) for v in values)


def _shortfalls(record) -> tuple[str, list[float]]:
    """(what it is, the run's validation shortfall at each checkpoint, lower is better): one minus its ranked metric
    when that is an accuracy-like value in [0, 1] where higher is better, the metric itself when lower is better,
    else its validation loss. No values when a checkpoint lacks them."""
    metric = [p.get("val_metric") for p in record.evals]
    if metric and None not in metric:
        name = record.val_metric_name or "metric"
        if record.higher_is_better is False:
            return f"validation {name}", metric
        if all(0.0 <= v <= 1.0 for v in metric):
            return f"validation {name} short of 1", [1.0 - v for v in metric]
    losses = [p.get("val_loss") for p in record.evals]
    return "validation loss", (losses if losses and None not in losses else [])


def validation_improved(record) -> str | None:
    """How the run's validation shortfall fell by at least ``FLAT_DECREASE`` of its first checkpoint's, first
    checkpoint to last (``"validation accuracy short of 1 0.853 -> 0.282"``); None when it did not, or the run had
    under two checkpoints."""
    name, values = _shortfalls(record)
    if len(values) < 2 or values[0] <= 0 or values[-1] > (1 - FLAT_DECREASE) * values[0]:
        return None
    return f"{name} {values[0]:.3g} -> {values[-1]:.3g}"


def _flat(reason: str, record) -> Health:
    """Flat by the training loss, unless validation says the run learned."""
    improved = validation_improved(record)
    if improved:
        return Health(LEARNED, f"{reason}, but it learned: {improved} (the whole validation set, not one batch)")
    return Health(FLAT, reason)


def _running_median(values: list[float], width: int = SMOOTHING) -> list[float]:
    half = width // 2
    return [statistics.median(values[max(0, i - half):i + half + 1]) for i in range(len(values))]


def judge(record) -> Health:
    """The health verdict of one trial or sweep run (a ``TrialRecord``)."""
    if record.status == "oom":
        return Health(OOM, "ran out of memory")
    if non_finite(record):
        return Health(UNSTABLE, "a NaN/inf loss or metric: it diverged")
    losses = list(record.losses)
    if len(losses) < 2:
        return Health(LEARNED, f"{len(losses)} loss point(s): too few to judge the curve; every value finite")
    if len(losses) < MIN_POINTS:  # too short for a shape: did it fall, quarter against quarter?
        quarter = max(1, len(losses) // 4)
        first, last = statistics.median(losses[:quarter]), statistics.median(losses[-quarter:])
        if last < first:
            return Health(LEARNED, f"{len(losses)} loss points, too few for the curve's shape: it fell "
                                   f"{first:.3g} -> {last:.3g}")
        if last > (1 + FLAT_DECREASE) * first:
            return Health(UNSTABLE, f"{len(losses)} loss points: it rose ({first:.3g} -> {last:.3g})")
        return _flat(f"{len(losses)} loss points: it did not fall ({first:.3g} -> {last:.3g})", record)
    start = losses[0]
    smoothed = _running_median(losses)
    at_best = min(range(len(smoothed)), key=smoothed.__getitem__)
    best = smoothed[at_best]
    # The end: the median of the last quarter; but when the (smoothed) best lies in the last quarter the run was
    # still at or near its best when it stopped and gave nothing back. A run still falling steeply has its best
    # there, and the quarter's median sits on the slope above it (seen on 20-step digits-cnn sweep runs ending
    # 2.0 -> 1.0 -> 0.66); a single last-step spike is one point of a median, not a collapse.
    last_quarter = len(losses) - max(1, len(losses) // 4)
    end = best if at_best >= last_quarter else statistics.median(losses[last_quarter:])
    decrease = start - best
    if start > 0 and end > (1 + FLAT_DECREASE) * start:
        return Health(UNSTABLE, f"the loss rose above its start ({start:.3g} -> {end:.3g}): LR too high for this "
                                "batch")
    if start <= 0 or decrease < FLAT_DECREASE * start:
        return _flat(f"the loss never fell by {FLAT_DECREASE:.0%} of its start ({start:.3g} -> best {best:.3g}, "
                     "smoothed)", record)
    gave_back = max(0.0, (end - best) / decrease)
    if gave_back > GIVE_BACK:
        return Health(UNSTABLE, f"the last quarter gave back {gave_back:.0%} of the best decrease ({start:.3g} -> "
                                f"{best:.3g} -> {end:.3g}): LR too high for this batch", gave_back)
    return Health(LEARNED, f"the loss fell {start:.3g} -> {end:.3g} and held", gave_back)


def unstable(record) -> bool:
    """A finished run the verdict calls unstable (it diverged, whatever its validation says)."""
    return record.status == "ok" and judge(record).verdict == UNSTABLE


# Who is to blame when a run unstable at a scaled-up LR is rerun at a validated one (advisor.method.blame): the
# words every sentence about such a rerun uses (the trial's, the sweep's decisions and its candidates' reasons).
BLAME_WORDS = {"lr": "the LR scale-up, not the batch, is to blame", "batch": "the batch itself is to blame"}


def rerun_verdict(learned: bool) -> str:
    """What the rerun at the validated LR showed: 'learned: the LR scale-up, not the batch, is to blame'."""
    return "learned: " + BLAME_WORDS["lr"] if learned else "was not healthy either: " + BLAME_WORDS["batch"]
