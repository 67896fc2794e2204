"""Rules for the short logs people paste (about 4-19 points, often one line an epoch, often with validation).

The long-run detectors need 20+ points for a trend. A pasted excerpt rarely has them, yet a reader can see a
train/validation gap, validation sitting at chance, validation that stopped improving, or a jittering loss in
ten epochs. These rules say so, each with the confidence so few points allow; and `assess` says when a log holds
too little evidence for a "healthy" verdict (three verdicts: findings, healthy, nothing conclusive).
"""

from __future__ import annotations

import math

from .advice import NOT_LEARNING_ACTIONS, PERIODIC_ACTIONS, jitter_actions, overfitting_actions
from .records import TRAIN_LOSS, VAL_LOSS, Finding, Point

SHORT_MAX_POINTS = 20  # below this the long-run trend detectors do not judge the curves (detectors.MIN_POINTS)
VAL_JITTER_SCORE = 0.25  # point-to-point noise / level: tune logs' healthy runs reach 0.14 (a flat TSL run), their
#                          jittery ones 0.6+; the Lightning run (0.61 -> 0.96 -> 0.39 -> 0.92) is ~0.5
VAL_MIN_POINTS = 4  # validation points the generalisation rules need
ACC_GAP = 0.20  # train accuracy this far above validation accuracy (absolute, on a 0-1 scale): overfitting
ACC_GAP_TRAIN_MIN = 0.70  # ... once training accuracy is at least this (a model that fits its training set)
GAP_VAL_AT_BEST = 0.01  # ... unless the validation loss is within this share of its best over its last two points
GAP_VAL_FELL = 0.30  # ... after falling this share of its start: still improving on new data, a gap is no overfitting
LOSS_GAP_RATIO = 2.0  # validation loss above twice the training loss at the end ...
FLAT_VAL_CHANGE = 0.05  # validation changed less than this share over the run ...
FLAT_TRAIN_DROP = 0.30  # ... while training fell at least this share: validation is flat, training is not
FLAT_ROBUST_POINTS = 9  # with this many points each, both ends are read as the median of three (one noisy end)
STALE_SHARE = 0.5  # validation has not beaten its best for at least half its points ...
STALE_TRAIN_FALL = 0.05  # ... while training fell at least this share over the same stretch
STALE_END = 3  # the last this many validation points, on a jittery curve, say where it ended ...
STALE_END_RISE = 1.5  # ... and at this many times its best (and 2x the noise above it) it has turned: overfitting
CHANCE_ACC_TOLERANCE = 0.02  # validation accuracy within this (absolute) of 1/K: chance
CHANCE_LN_TOLERANCE = 0.02  # validation loss within this share of ln(K)
TRAIN_IMPROVES_DROP = 0.10  # training loss fell this share (or its accuracy rose 0.15 above chance): it learns
# Jitter on short logs. 10 points give 9 step-to-step differences, the fewest whose median absolute deviation
# is stable to about +-35% (its relative standard error is ~1.1/sqrt(n)); with 5 or 6 a single outlier moves
# the estimate past the threshold and a clean run would be called noisy.
JITTER_MIN_POINTS = 10
SHORT_JITTER = 0.05  # step-to-step noise / level, on a loss whose trend falls less than twice that noise
CONVERGED_LEVEL = 1e-4  # a loss logged below this everywhere has converged: its jitter is not a problem
# Periodic swings on short logs: the autocorrelation of the (Theil-Sen) detrended curve at a lag P, with the
# half-cycle lag in opposite phase. Chosen over counting sign changes of the first differences: a sign count is
# moved by every noisy point and cannot tell a wobbling trend from cycles, while r(P) compares whole cycles.
# 12 points at least: three cycles of period 4, the shortest period that is not step-to-step jitter (2-3 points);
# with 12-19 points white noise reaches r(P) >= 0.6 together with r(P/2) <= -0.3 rarely (r's standard error is
# ~1/sqrt(n), 0.23-0.29 here; 1.1% of 3,000 simulated noisy falling runs), and the swing must be 5% of the level.
PERIODIC_MIN_POINTS = 12
PERIODIC_MIN_PERIOD = 4
SHORT_PERIODIC_ACF = 0.6
SHORT_PERIODIC_HALF = -0.3
SHORT_PERIODIC_AMPLITUDE = 0.05


def _values(points: list[Point]) -> list[float]:
    return [p.value for p in points]


def _finite(points: list[Point]) -> list[Point]:
    return [p for p in points if math.isfinite(p.value)]


def median(values) -> float:
    """statistics.median (the same arithmetic), nan for no values: importing statistics costs diagnose's start-up
    a few ms (fractions, decimal, random)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


_median = median


def _as_fraction(values: list[float]) -> list[float]:
    """Accuracies as printed (0-1 or percent) on a 0-1 scale."""
    return [v / 100 if max(values) > 1.0 else v for v in values]


def _where(p: Point) -> str:
    if p.epoch is not None:
        return f"epoch {p.epoch:g} (line {p.line})"
    if p.step is not None:
        return f"step {p.step:g} (line {p.line})"
    return f"line {p.line}"


def adjacent(points: list[Point], elisions: list[int]) -> list[bool]:
    """For each pair of neighbours, False when an elided stretch ("...") lies between them: a gap, not a step."""
    out = []
    for a, b in zip(points, points[1:]):
        out.append(not any(a.line < e < b.line for e in elisions))
    return out





def detect_short_validation(series: dict[str, list[Point]], ctx) -> list[Finding]:
    """Generalisation rules for short logs, strongest first: validation at chance (with training at chance too:
    not learning); a train/validation accuracy gap; a loss gap larger than the distance training has come;
    validation flat while training falls; validation that has not beaten its best for most of the run."""
    train = _finite(series.get(TRAIN_LOSS, []) or series.get("train_loss_epoch", []))
    if len(train) >= SHORT_MAX_POINTS:
        return []
    val = _finite(series.get(VAL_LOSS, []))
    for rule in (_at_chance, _accuracy_gap, _loss_gap, _flat_validation, _stale_validation):
        found = rule(train, val, series, ctx)
        if found:
            return [found]
    return []


def _train_drop(train: list[Point]) -> float | None:
    if len(train) < 2:
        return None
    values = _values(train)
    first = max(values[:2]) if len(values) > 3 else values[0]
    return (first - values[-1]) / abs(first) if first else None


def _at_chance(train, val, series, ctx) -> Finding | None:
    """Validation accuracy at 1/K (or validation loss at ln K) for most of the run."""
    accs = [p.value for p in series.get("val_acc", []) if math.isfinite(p.value)]
    if len(accs) < VAL_MIN_POINTS:
        return None
    accs = _as_fraction(accs)
    level = _median(accs)
    k = ctx.classes if ctx.classes and ctx.classes >= 2 else (round(1 / level) if 0 < level <= 0.5 else None)
    if not k:
        return None
    chance = 1 / k
    near = sum(abs(a - chance) <= max(CHANCE_ACC_TOLERANCE, 0.1 * chance) for a in accs)
    if near < max(VAL_MIN_POINTS, 0.7 * len(accs)):
        return None
    val_values = _values(val)
    if len(val_values) >= VAL_MIN_POINTS and val_values[0] > 0 and (
            val_values[0] - _median(val_values[-2:])) / val_values[0] >= TRAIN_IMPROVES_DROP:
        # The validation loss keeps coming down from its start: the model learns, however low its accuracy (4% of
        # 500 classes is 20x chance; 1/accuracy is no class count). Slow convergence judges such a curve.
        return None
    ln_k = math.log(k)
    if val_values and abs(_median(val_values) - ln_k) > max(CHANCE_LN_TOLERANCE * ln_k, 0.15 * ln_k):
        # A validation loss far from ln K with accuracy at 1/K: an imbalanced or odd metric; say nothing.
        if _median(val_values) > 2 * ln_k or _median(val_values) < 0.5 * ln_k:
            return None
    train_accs = _as_fraction([p.value for p in series.get("train_acc", []) if math.isfinite(p.value)] or [0.0])
    drop = _train_drop(train)
    learns = (drop is not None and drop >= TRAIN_IMPROVES_DROP) or (
        len(train_accs) >= 2 and _median(train_accs[-3:]) >= chance + 0.15)
    if learns and len(val_values) >= VAL_MIN_POINTS and all(
            abs(v - ln_k) <= CHANCE_LN_TOLERANCE * ln_k for v in val_values) and (drop or 0.0) < FLAT_TRAIN_DROP:
        # A model that learns its training set only grows confident on it, and its validation loss rises above
        # ln K; one at ln K at every evaluation gives held-out samples every class alike, and a training loss that
        # fell less than FLAT_TRAIN_DROP (a noisy batch accuracy above chance) is no memorising: not learning.
        learns = False
        evidence_extra = {"val_loss_at_ln_k_throughout": True}
    else:
        evidence_extra = {}
    evidence = {"classes": k, "classes_from": "stated (--classes)" if ctx.classes else f"accuracy {level:.3g} = 1/K",
                "val_accuracy": round(level, 4), "val_points_at_chance": near, "val_points": len(accs),
                "train_drop": None if drop is None else round(drop, 3)}
    if val_values:
        evidence["val_loss"] = round(_median(val_values), 5)
        evidence["ln_classes"] = round(ln_k, 4)
    evidence.update(evidence_extra)
    if learns:
        return Finding("overfitting", "warning",
                       f"Validation accuracy sits at chance ({level:.3g} = 1/{k}) for {near} of {len(accs)} "
                       "points while training improves: the model learns the training set only.",
                       evidence, overfitting_actions(ctx), confidence="medium" if near >= 6 else "low")
    return Finding("not-learning", "error",
                   f"Validation accuracy sits at chance ({level:.3g} = 1/{k}) for {near} of {len(accs)} points and "
                   + ("the validation loss at ln K at every evaluation: the model gives every class alike, it is not "
                      "learning." if evidence_extra else "training does not improve either: the model is not learning."),
                   evidence, list(NOT_LEARNING_ACTIONS), confidence="medium" if near >= 6 else "low")


def _accuracy_gap(train, val, series, ctx) -> Finding | None:
    tr = [p.value for p in series.get("train_acc", []) if math.isfinite(p.value)]
    va = [p.value for p in series.get("val_acc", []) if math.isfinite(p.value)]
    if len(tr) < 3 or len(va) < 3:
        return None
    tr, va = _as_fraction(tr), _as_fraction(va)
    train_level, val_level = _median(tr[-3:]), _median(va[-3:])
    gap = train_level - val_level
    if gap < ACC_GAP or train_level < ACC_GAP_TRAIN_MIN:
        return None
    val_values = _values(val)
    if len(val_values) >= VAL_MIN_POINTS and min(val_values[-2:]) <= (1 + GAP_VAL_AT_BEST) * min(val_values) and (
            val_values[0] - min(val_values)) >= GAP_VAL_FELL * abs(val_values[0]):
        # A validation loss that came down and is at its best at the end still gains on new data: the gap is how
        # far the model fits its training set better, not a model getting worse where it counts.
        return None
    evidence = {"train_accuracy": round(train_level, 4), "val_accuracy": round(val_level, 4), "gap": round(gap, 4),
                "val_points": len(va)}
    return Finding("overfitting", "warning",
                   f"Training accuracy is {train_level:.3g} but validation accuracy {val_level:.3g} over the last "
                   f"points (a gap of {gap:.2f}): the model fits the training set far better than new data.",
                   evidence, overfitting_actions(ctx), confidence="high" if gap >= 0.3 else "medium")


def _loss_gap(train, val, series, ctx) -> Finding | None:
    """Validation loss more than twice the training loss at the end, and the gap wider than the whole distance
    the training loss has come in the log (the run's own scale): training is far ahead of validation."""
    if len(val) < VAL_MIN_POINTS or len(train) < 2:
        return None
    t, v = _values(train), _values(val)
    train_end, val_end = _median(t[-2:]), _median(v[-2:])
    came = max(t[:2]) - train_end
    gap = val_end - train_end
    if train_end <= 0 or val_end < LOSS_GAP_RATIO * train_end or came <= 0 or gap <= came:
        return None
    if _jitters(v):  # the end is one jump of a validation thrown around (0.22, 1.15, 0.32, 2.03): no gap to read
        return None
    evidence = {"train_end": round(train_end, 6), "val_end": round(val_end, 6), "gap": round(gap, 6),
                "train_fell_by": round(came, 6), "val_points": len(v)}
    return Finding("overfitting", "warning",
                   f"The validation loss ends at {val_end:.4g}, {val_end / train_end:.1f}x the training loss "
                   f"({train_end:.4g}); the gap ({gap:.3g}) is wider than all the training loss fell in the log "
                   f"({came:.3g}): overfitting.", evidence, overfitting_actions(ctx),
                   confidence="medium" if val_end >= 5 * train_end else "low")


def _point_noise(v: list[float]) -> float:
    """Point-to-point noise of a curve: the robust spread (MAD) of its neighbour differences / sqrt 2."""
    diffs = [b - a for a, b in zip(v, v[1:])]
    centre = _median(diffs)
    return 1.4826 * _median([abs(d - centre) for d in diffs]) / math.sqrt(2)


def _jitters(v: list[float]) -> bool:
    """The curve jumps point to point by VAL_JITTER_SCORE of its level or more (the validation-jitter rule's own
    measure): its lowest or last point is one jump, not a level."""
    return len(v) >= 3 and _point_noise(v) >= VAL_JITTER_SCORE * abs(_median(v))


def _flat_validation(train, val, series, ctx) -> Finding | None:
    if len(val) < VAL_MIN_POINTS:
        return None
    drop = _train_drop(train)
    v = _values(val)
    change = (v[0] - v[-1]) / abs(v[0]) if v[0] else 0.0
    first, last = v[0], v[-1]
    if len(v) >= FLAT_ROBUST_POINTS and len(train) >= FLAT_ROBUST_POINTS:
        # Enough points to read each end as the median of its three: one noisy evaluation (0.654 after eleven at
        # 0.69-0.75) is no end of a flat curve; training's fall is measured the same way, from its first three.
        first, last = _median(v[:3]), _median(v[-3:])
        change = (first - last) / abs(first) if first else 0.0
        t = _values(train)
        drop = (_median(t[:3]) - _median(t[-3:])) / abs(_median(t[:3])) if _median(t[:3]) else None
    if drop is None or drop < FLAT_TRAIN_DROP or abs(change) >= FLAT_VAL_CHANGE:
        return None
    evidence = {"val_first": round(first, 6), "val_last": round(last, 6), "val_change": round(change, 4),
                "train_drop": round(drop, 3), "val_points": len(v)}
    return Finding("overfitting", "warning",
                   f"The training loss fell {drop:.0%} while validation stayed flat ({first:.4g} -> {last:.4g}, "
                   f"{-change:+.1%}): what training learns does not carry to new data.",
                   evidence, overfitting_actions(ctx), confidence="medium" if len(v) >= 6 else "low")


def _stale_validation(train, val, series, ctx) -> Finding | None:
    """Validation bottomed early and never beat that best again for most of the run, while training fell."""
    if len(val) < VAL_MIN_POINTS + 1:
        return None
    v = _values(val)
    best = min(range(len(v)), key=v.__getitem__)
    after = len(v) - 1 - best
    if after < max(2, math.ceil(STALE_SHARE * len(v))) or v[-1] <= v[best]:
        return None
    # On a validation curve that jitters (by the jitter rule's own measure, detectors.VAL_JITTER_SCORE) the best is
    # one low jump, not a turning point: the points after it must sit above it by more than twice the point-to-point
    # noise (0.61 -> 0.96 -> 0.39 -> 0.92 is jitter). A steady curve's best stands as it is.

    # A jittery curve whose end climbs away from its best (its last STALE_END points' median more than twice the
    # noise above it, as well as STALE_END_RISE times it) has turned, however it bounced on the way.
    noise = _point_noise(v)
    end = _median(v[-STALE_END:])
    turned = end - v[best] > 2 * noise and end >= STALE_END_RISE * v[best] > 0
    if _jitters(v) and _median(v[best + 1:]) - v[best] <= 2 * noise and not turned:
        return None
    since = [p.value for p in train if p.line >= val[best].line]
    if len(since) < 2 or not since[0]:
        return None
    fall = (since[0] - since[-1]) / abs(since[0])
    if fall < STALE_TRAIN_FALL:
        return None
    evidence = {"val_best": round(v[best], 6), "val_best_at": _where(val[best]), "points_since_best": after,
                "val_last": round(v[-1], 6), "train_fall_since_best": round(fall, 3), "val_points": len(v)}
    return Finding("overfitting", "warning",
                   f"Validation loss has not beaten its best ({v[best]:.4g} at {_where(val[best])}) for the last "
                   f"{after} of {len(v)} points while the training loss fell {fall:.0%}: overfitting.",
                   evidence, overfitting_actions(ctx), confidence="medium" if after >= 4 else "low")


THEIL_SEN_EXACT_MAX = 200  # points: above this, the slope is estimated on an evenly spaced subsample of them


def _theil_sen(values: list[float]) -> float:
    """The median of the slopes between every pair of points (Theil-Sen), per point index. All n(n-1)/2 pairs up to
    THEIL_SEN_EXACT_MAX points; above that (a validation series of thousands, in a long log) the same estimator on
    THEIL_SEN_EXACT_MAX evenly spaced points, an estimate of it: the pairs grow as n^2 (1,200 points: 720,000
    slopes, a quarter of a second), the subsample's slope has the same expectation."""
    n = len(values)
    if n > THEIL_SEN_EXACT_MAX:
        indices = [round(k * (n - 1) / (THEIL_SEN_EXACT_MAX - 1)) for k in range(THEIL_SEN_EXACT_MAX)]
    else:
        indices = list(range(n))
    slopes = [(values[j] - values[i]) / (j - i) for a, i in enumerate(indices) for j in indices[a + 1:]]
    return _median(slopes)


EPOCHS_STEADY_FALL = 0.20  # a per-epoch curve falling at every evaluation by this share in all: the run improves


def _epochs_fall_steadily(series: dict[str, list[Point]]) -> bool:
    """The per-epoch curves of the same log (the validation loss and the training loss's epoch means, those it holds
    with 3+ points, one at least) are each lower at every evaluation than at the one before and EPOCHS_STEADY_FALL
    lower in all: the model improves epoch after epoch, so 10-19 noisy step losses whose trend looks flat are batch
    noise around a falling trend they are too few to show."""
    curves = [_values(_finite(series.get(name, []))) for name in (VAL_LOSS, "train_loss_epoch")]
    curves = [values for values in curves if len(values) >= 3]
    return bool(curves) and all(
        values[0] > 0 and all(b < a for a, b in zip(values, values[1:]))
        and (values[0] - values[-1]) / values[0] >= EPOCHS_STEADY_FALL for values in curves)


def detect_short_jitter(series: dict[str, list[Point]], ctx, elisions: list[int]) -> list[Finding]:
    """Step-to-step jitter on 10-19 points: the noise (MAD of neighbouring differences, gaps excluded) is at
    least SHORT_JITTER of the loss level, and the robust (Theil-Sen) trend falls less than twice that noise over the
    whole run, and no per-epoch curve of the log falls steadily (_epochs_fall_steadily)."""
    train = _finite(series.get(TRAIN_LOSS, []))
    if not JITTER_MIN_POINTS <= len(train) < SHORT_MAX_POINTS:
        return []
    values = _values(train)
    level = _median(values)
    if level <= 0 or max(abs(v) for v in values) < CONVERGED_LEVEL:
        return []
    links = adjacent(train, elisions)
    diffs = [b - a for (a, b), ok in zip(zip(values, values[1:]), links) if ok]
    if len(diffs) < JITTER_MIN_POINTS - 1:
        return []
    centre = _median(diffs)
    noise = 1.4826 * _median([abs(d - centre) for d in diffs]) / math.sqrt(2)
    fall = -_theil_sen(values) * (len(values) - 1)
    score = noise / level
    if score < SHORT_JITTER or fall > 2 * noise or _epochs_fall_steadily(series):
        return []
    evidence = {"series": TRAIN_LOSS, "noise_sigma": round(noise, 6), "loss_level": round(level, 6),
                "relative_noise": round(score, 3), "trend_fall": round(fall, 6) + 0.0, "points": len(values)}
    return [Finding("oscillation-jitter", "warning",
                    f"The training loss jitters point to point by ~{noise:.3g} around {level:.3g} ({score:.0%} of "
                    f"its level) over {len(values)} points and its trend does not fall more than that noise.",
                    evidence, jitter_actions(ctx), confidence="medium" if len(values) >= 15 else "low")]


def _autocorrelation(values: list[float], lag: int) -> float:
    """r(lag) of a centred series: the mean lagged product over the variance (each over its own pair count)."""
    n = len(values)
    variance = sum(v * v for v in values) / n
    if variance <= 0 or lag >= n:
        return 0.0
    return sum(values[i] * values[i + lag] for i in range(n - lag)) / (n - lag) / variance


def detect_short_periodic(series: dict[str, list[Point]], ctx, elisions: list[int]) -> list[Finding]:
    """Periodic swings on 12-19 points (three cycles or more), by the autocorrelation of the detrended loss."""
    train = _finite(series.get(TRAIN_LOSS, []))
    if not PERIODIC_MIN_POINTS <= len(train) < SHORT_MAX_POINTS or not all(adjacent(train, elisions)):
        return []
    values = _values(train)
    level = _median(values)
    if level <= 0 or max(abs(v) for v in values) < CONVERGED_LEVEL:
        return []
    slope = _theil_sen(values)
    detrended = [v - slope * i for i, v in enumerate(values)]
    centre = sum(detrended) / len(detrended)
    detrended = [v - centre for v in detrended]
    amplitude = (max(detrended) - min(detrended)) / 2
    if amplitude / level < SHORT_PERIODIC_AMPLITUDE:
        return []
    best = None
    for period in range(PERIODIC_MIN_PERIOD, len(values) // 3 + 1):
        r, half = _autocorrelation(detrended, period), _autocorrelation(detrended, round(period / 2))
        if r >= SHORT_PERIODIC_ACF and half <= SHORT_PERIODIC_HALF and (best is None or r > best[1]):
            best = (period, r, half)
    if best is None:
        return []
    period, r, half = best
    evidence = {"series": TRAIN_LOSS, "period_points": period, "autocorrelation": round(r, 3),
                "half_period_autocorrelation": round(half, 3), "amplitude": round(amplitude, 6),
                "relative_amplitude": round(amplitude / level, 3), "points": len(values),
                "cycles": round(len(values) / period, 1)}
    return [Finding("oscillation-periodic", "warning",
                    f"The training loss swings periodically (every ~{period} log points, ±{amplitude:.3g}, "
                    f"autocorrelation {r:.2f}) over {len(values)} points: a pattern in the data order, not the "
                    "batch size.", evidence, list(PERIODIC_ACTIONS),
                    confidence="medium" if len(values) / period >= 3.5 else "low")]


def assess(series: dict[str, list[Point]], findings: list[Finding]) -> tuple[str | None, list[str], list[str]]:
    """(why nothing conclusive can be said, or None; the checks that ran; what would be needed for the rest).

    "Healthy" needs the trend checks (divergence, not learning, oscillation: 10+ training-loss points) and a
    generalisation check: a validation series of 4+ points, or 20+ training points (a long curve without a
    validation series is judged on training alone, and the report says overfitting was not checked)."""
    train = _finite(series.get(TRAIN_LOSS, []) or series.get("train_loss_epoch", []))
    val = _finite(series.get(VAL_LOSS, []))
    n, nv = len(train), len(val)
    ran = ["failures (out of memory, crashes, non-finite values, fp16 loss scale)"]
    needed = []
    if n >= 4:
        ran.append(f"divergence and not learning ({n} training-loss points)")
    if n >= JITTER_MIN_POINTS:
        ran.append("oscillation" + (" (short-log jitter rule)" if n < SHORT_MAX_POINTS else ""))
    else:
        needed.append(f"{JITTER_MIN_POINTS}+ training-loss points for oscillation (has {n})")
    if nv >= VAL_MIN_POINTS and n >= 2:
        ran.append(f"overfitting ({nv} validation points)")
    else:
        needed.append(f"a validation-loss series of {VAL_MIN_POINTS}+ points for overfitting"
                      + (f" (has {nv})" if nv else " (none was read)"))
    if n >= 50:
        ran.append("slow convergence")
    if not train:
        present = ", ".join(f"{k} {len(v)}" for k, v in series.items()) or "no metric series"
        return f"no training loss was read ({present})", ran, needed
    trend_ok = n >= JITTER_MIN_POINTS
    general_ok = (nv >= VAL_MIN_POINTS) or n >= SHORT_MAX_POINTS
    if trend_ok and general_ok:
        return None, ran, needed
    return (f"nothing conclusive: the training loss has {n} point(s) and validation loss {nv}; needed: "
            + "; ".join(needed)), ran, needed
