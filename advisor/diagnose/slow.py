"""Slow convergence on a per-epoch curve, by a rule stated in numbers (issue 37).

The curves: the validation loss when the log has 5+ per-epoch validation points, then the per-epoch training loss
(validation that sits at training's level is not slow by itself: then training's own pace is judged).
Smoothed by a centred moving average of 3. The loss's own first value is where it started (an untrained model's
level, whatever the task: ln K for a classifier, the target's variance for a regression), so no class count is
guessed from an accuracy. The run is slow when all of these hold:

- it has come less than SLOW_PROGRESS (half) of the way from its start to zero;
- it is still falling: over the second half the smoothed curve fell more than its point-to-point noise and at a
  positive relative rate r per epoch (a curve flat against its noise has converged or is stuck: other rules);
- it falls at a steady pace: over its last quarter (median to median, in log terms) at least STEADY_PACE of the
  pace of its first quarter. A loss converging to a floor slows down as it nears it (a detection or regression
  loss levels off far above zero, a fine-tune flattens): slow is a loss still falling as it fell at the start,
  far from any floor, so no floor has to be known (a run without an accuracy is judged too);
- at that rate, reaching its target would take more epochs than the run has had so far
  (projected = ln(now / target) / -ln(1 - r)); the target is half its start, or for validation the level the
  training loss has reached when that is higher (validation is not expected below it), unless training came less
  than TRAIN_FLOOR_FALL of the way down from its first value in SLOW_FEW_EPOCHS+ epochs (then both creep and
  training is no floor); a curve of
  STRAIGHT_MIN_POINTS+ points falling along a straight line (R^2 STRAIGHT_R2+, its last quarter falling STRAIGHT_PACE+
  as much as its first, in loss units) is slow whatever this projection: it has not begun to bend towards a floor;
- the curve begins at the run's start (first epoch 0 or 1, where epochs are printed): a mid-run excerpt's first
  value is not the untrained level; nor is the first value of a curve whose smoothed first quarter climbs more than
  ABOVE_START above it (a fine-tune from trained weights that a warm-up set back first);
- for validation: the training loss has not come SLOW_PROGRESS of the way down from its first logged value (DOMAIN:
  slow is both falling slowly; validation lagging a training loss that fell is a gap, judged by other rules);
- for training: likewise, the per-epoch validation loss (5+ points) has not come SLOW_PROGRESS of the way down from
  its first value (a training loss creeping beside a validation loss that fell by half is no slow run);
- no printed accuracy says the model already does its job (last accuracy >= GOOD_ACCURACY: a fine-tune starts low
  and creeps, and is fine).
"""

from __future__ import annotations

import math

from .curves import cadence_of, epoch_loss_curve
from .records import TRAIN_LOSS, VAL_LOSS, Finding, Point
from .shortlog import median

SLOW_EPOCH_MIN_POINTS = 5
SLOW_PROGRESS = 0.5
ABOVE_START = 0.10  # a smoothed first quarter rising this share above the first value: that value is no untrained level
# The last quarter's fall over the first quarter's (log medians): slow runs in the world corpus (plain SGD at LR
# 0.004) 0.94-0.99, a geometric creep 1.0; healthy per-epoch curves converging to their floor 0.02-0.24 (validation)
# and up to 0.64 (training under a linearly decaying LR, which has come 65% of the way: not slow by SLOW_PROGRESS).
STEADY_PACE = 0.5
GOOD_ACCURACY = 0.7
SLOW_FEW_EPOCHS = 10  # below this many epochs, a slow verdict needs its target SLOW_FAR times the run away (medium
SLOW_FAR = 3.0  # confidence); a nearer one is the start of a run still improving (8 YOLO epochs, mAP 0.06 -> 0.27)
# A loss falling along a straight line, its last quarter falling (in loss units) as much as its first, has not begun to
# bend towards any floor: the step size, not the distance left, sets its pace (an SGD at a small LR far from the
# minimum). Slow however near its half-start target a straight line would take it. World corpus batches 1-9: slow
# runs R^2 0.98-1.000; healthy curves that keep their absolute pace at 20+ epochs R^2 0.95 at most.
STRAIGHT_MIN_POINTS = 20
TRAIN_FLOOR_FALL = 0.1  # a training loss down less than this share of its first value sets no floor for validation
STRAIGHT_R2 = 0.98
STRAIGHT_PACE = 0.8


def _per_epoch(series: dict[str, list[Point]]) -> list[tuple[str, list[Point]]]:
    """The curves to judge, in order: per-epoch validation, then per-epoch training."""
    curves = []
    val = [p for p in series.get(VAL_LOSS, []) if math.isfinite(p.value)]
    if len(val) >= SLOW_EPOCH_MIN_POINTS and cadence_of(val) == "epoch":
        curves.append((VAL_LOSS, val))
    train = epoch_loss_curve(series, SLOW_EPOCH_MIN_POINTS)
    if train is not None:
        curves.append(train)
    return curves


def _smoothed(values: list[float]) -> list[float]:
    return [sum(values[max(0, i - 1):i + 2]) / len(values[max(0, i - 1):i + 2]) for i in range(len(values))]


def _last_accuracy(series: dict[str, list[Point]]) -> float | None:
    accs = [p.value for p in series.get("val_acc", []) or series.get("train_acc", []) if math.isfinite(p.value)]
    if not accs:
        return None
    return accs[-1] / 100 if max(accs) > 1.0 else accs[-1]


def quarter_paces(values: list[float]) -> tuple[float, float] | None:
    """(first quarter's fall, last quarter's fall) in log terms, median to median of the quarters (robust to a
    noisy point), or None when the curve is too short or not positive."""
    quarter = len(values) // 4
    if quarter < 1 or min(values) <= 0:
        return None
    q1, q2, q3 = (median(values[i * quarter:(i + 1) * quarter]) for i in (0, 1, 2))
    q4 = median(values[3 * quarter:])
    return math.log(q1 / q2), math.log(q3 / q4)


def steady(paces: tuple[float, float]) -> bool:
    """The curve still falls as fast as it did at its start (quarter_paces): the last quarter's fall at least
    STEADY_PACE of the first quarter's, both falling. A curve that slows down as it goes is converging to a floor."""
    return paces[0] > 0 and paces[1] >= STEADY_PACE * paces[0]


def slow_pace(values: list[float], floor: float = 0.0) -> dict | None:
    """The numbers the rule stands on, or None when the curve is not slow by it. ``floor``: a level the curve cannot
    be expected to pass (for validation, the level the training loss has reached)."""
    start = values[0]
    smooth = _smoothed(values)
    now = smooth[-1]
    target = max(start / 2, floor)
    if start <= 0 or now <= 0 or now <= target:
        return None
    if max(smooth[:max(2, len(smooth) // 4)]) > (1 + ABOVE_START) * start:
        # The loss climbed well above its first value before falling: that value is no untrained model's level (a
        # fine-tune from trained weights that a warm-up at a high LR first set back), so there is no start to measure
        # the progress from.
        return None
    progress = (start - now) / start
    mid = len(smooth) // 2
    span = len(smooth) - 1 - mid
    diffs = [b - a for a, b in zip(values[mid:], values[mid + 1:])]
    centre = median(diffs)
    noise = 1.4826 * median([abs(d - centre) for d in diffs]) / math.sqrt(2) if diffs else 0.0
    fell = smooth[mid] - now
    paces = quarter_paces(values)
    if (progress >= SLOW_PROGRESS or span < 1 or fell <= noise or fell <= 0 or paces is None
            or not steady(paces)):
        return None
    rate = 1 - (now / smooth[mid]) ** (1 / span)
    projected = math.log(now / target) / -math.log(1 - rate)
    straight = straight_fall(values)
    if projected <= len(values) and straight is None:
        return None
    return {"start": round(start, 6), "now_smoothed": round(now, 6), "progress": round(progress, 4),
            "rate_per_epoch": round(rate, 5), "target": round(target, 6), "projected_epochs_to_target": round(projected, 1),
            "epochs_run": len(values), "second_half_fall": round(fell, 6), "second_half_noise": round(noise, 6),
            "pace_last_to_first_quarter": round(paces[1] / paces[0], 3),
            **({"straight_line_r2": round(straight, 4)} if straight is not None else {})}


def straight_fall(values: list[float]) -> float | None:
    """R^2 of a line fitted to the curve when it falls along a straight line (STRAIGHT_R2+, STRAIGHT_MIN_POINTS+
    points) with its last quarter falling STRAIGHT_PACE+ as much as its first (medians, in loss units), else None."""
    n = len(values)
    if n < STRAIGHT_MIN_POINTS:
        return None
    quarter = n // 4
    q1, q2, q3 = (median(values[i * quarter:(i + 1) * quarter]) for i in (0, 1, 2))
    q4 = median(values[3 * quarter:])
    if q1 - q2 <= 0 or q3 - q4 < STRAIGHT_PACE * (q1 - q2):
        return None
    mx, my = (n - 1) / 2, sum(values) / n
    sxx = sum((x - mx) ** 2 for x in range(n))
    slope = sum((x - mx) * (y - my) for x, y in enumerate(values)) / sxx
    total = sum((y - my) ** 2 for y in values)
    if slope >= 0 or total <= 0:
        return None
    r2 = 1 - sum((y - my - slope * (x - mx)) ** 2 for x, y in enumerate(values)) / total
    return r2 if r2 >= STRAIGHT_R2 else None


def _training_fell_by_half(series: dict[str, list[Point]]) -> bool:
    """The training loss (its epoch means where logged, as the floor below reads it), from its first value to its
    smoothed last value, came SLOW_PROGRESS or more of the way down: the optimiser does its job, whatever
    validation (whose first value is already after an epoch of training) shows."""
    train = [p.value for p in series.get("train_loss_epoch", []) or series.get(TRAIN_LOSS, []) if math.isfinite(p.value)]
    return _came_half_way_down(train)


def _validation_fell_by_half(series: dict[str, list[Point]]) -> bool:
    """The per-epoch validation loss (SLOW_EPOCH_MIN_POINTS+ points), from its first value to its smoothed last
    value, came SLOW_PROGRESS or more of the way down: the model improves on held-out data at a good pace, so a
    training loss that creeps (augmentation, dropout, a regulariser in it) is no slow run. The mirror of
    _training_fell_by_half (DOMAIN: slow is BOTH falling slowly)."""
    val = [p for p in series.get(VAL_LOSS, []) if math.isfinite(p.value)]
    return cadence_of(val) == "epoch" and _came_half_way_down([p.value for p in val])


def _came_half_way_down(values: list[float]) -> bool:
    """SLOW_EPOCH_MIN_POINTS+ values, a positive first one, and SLOW_PROGRESS or more of the way down from it to the
    smoothed last value (where slow_pace reads "now": the centred moving average's last value)."""
    if len(values) < SLOW_EPOCH_MIN_POINTS or values[0] <= 0:
        return False
    now = _smoothed(values[-2:])[-1]
    return (values[0] - now) / values[0] >= SLOW_PROGRESS


def detect_slow_epochs(series: dict[str, list[Point]], ctx) -> list[Finding]:
    """Slow convergence on a per-epoch curve (see the module's rule)."""
    accuracy = _last_accuracy(series)
    if accuracy is not None and accuracy >= GOOD_ACCURACY:
        return []
    for name, points in _per_epoch(series):
        if points[0].epoch is not None and points[0].epoch > 1:
            return []  # an excerpt from mid-run: its first value is not where the model started
        floor = 0.0
        if name == VAL_LOSS and _training_fell_by_half(series):
            continue  # DOMAIN: slow is BOTH falling slowly; validation lagging a training loss that fell is no pace
        if name != VAL_LOSS and _validation_fell_by_half(series):
            continue  # ... and a training loss lagging a validation loss that fell by half is no pace either
        if name == VAL_LOSS:  # validation cannot be expected below what training has reached
            train = [p.value for p in series.get("train_loss_epoch", []) or series.get(TRAIN_LOSS, [])
                     if math.isfinite(p.value)]
            floor = median(train[-3:]) if train else 0.0
            if (len(train) >= SLOW_FEW_EPOCHS and train[0] > 0
                    and (train[0] - floor) / train[0] < TRAIN_FLOOR_FALL):
                floor = 0.0  # training itself barely moved in 10+ epochs: no floor for validation, both creep
        pace = slow_pace([p.value for p in points], floor)
        if pace is not None and len(points) < SLOW_FEW_EPOCHS and (
                pace["projected_epochs_to_target"] <= SLOW_FAR * len(points)):
            # A few epochs (quarters of one or two points, a second half of three or four differences) and a target
            # within reach of a run a few times as long: the start of a run still improving, too early to say slow.
            continue
        if pace is not None:
            return [_slow_finding(name, points, pace, ctx)]
    return []


def _slow_finding(name: str, points: list[Point], pace: dict, ctx) -> Finding:
    where = {"line": points[0].line}
    if points[0].epoch is not None:
        where["epoch"] = points[0].epoch
    evidence = {"series": name, **pace, "from": where}
    what = "validation" if name == VAL_LOSS else "training"
    lr = f" (now {ctx.lr:g})" if getattr(ctx, "lr", None) else ""
    confidence = "medium" if len(points) >= 8 and pace["projected_epochs_to_target"] > SLOW_FAR * len(points) else "low"
    # slow_pace's target: half the start, or (validation) the level the training loss has reached when higher.
    target = ("half its start" if math.isclose(pace["target"], pace["start"] / 2, rel_tol=1e-4)
              else "the training loss's level")
    straight = (f"; and it falls along a straight line (R^2 {pace['straight_line_r2']:.2f}), as fast at the end as "
                "at the start, with no sign of levelling off" if "straight_line_r2" in pace else "")
    return Finding(
        "slow-convergence", "warning",
        f"The {what} loss has come {pace['progress']:.0%} of the way down from its start ({pace['start']:.4g} -> "
        f"{pace['now_smoothed']:.4g}) in {len(points)} epochs and improves {pace['rate_per_epoch']:.1%} an epoch: "
        f"at that pace it needs ~{pace['projected_epochs_to_target']:.0f} more epochs to reach {target} "
        f"({pace['target']:.4g}){straight}. It converges slowly.",
        evidence,
        [f"Run a short trial with the LR 3-10x higher{lr}, or with Adam instead of plain SGD, and compare the first "
         "epochs.",
         "Check the inputs are normalised (features and, for regression, the target): unscaled data makes every "
         "optimizer crawl.",
         "A smaller batch gives more updates per epoch."],
        confidence=confidence)


__all__ = ["detect_slow_epochs", "quarter_paces", "slow_pace", "steady", "straight_fall"]
