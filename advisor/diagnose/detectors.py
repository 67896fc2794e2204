"""Detectors: from series and events to findings with evidence and actions (DOMAIN section 5).

Each detector is conservative: ordinary mini-batch noise around a falling trend
is not oscillation, a plateau followed by a drop is not slow convergence, and a
crash that is not an out-of-memory error is not reported as one.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ..units import format_bytes
from .records import TRAIN_LOSS, VAL_LOSS, Finding, LogEvent, Point

MIN_POINTS = 20
JITTER_SCORE = 0.15  # step-to-step noise / starting loss: above it, jitter is a problem even if the loss falls
JITTER_SCORE_STALLED = 0.08  # ... and above this when the loss has stopped falling
STALLED_NOISE_TO_LEVEL = 0.6
PERIODIC_ACF = 0.35
PERIODIC_AMPLITUDE = 0.15
SLOW_DROP = 0.25  # a run whose loss fell less than this share of its start is slow
HEALTHY_TRAIN_DROP = 0.30
VAL_RISE = 0.05
MAX_ANALYSIS_POINTS = 2000
SLOW_MIN_POINTS = 50  # fewer points than this is the start of a run, too early to call it slow


@dataclass
class Context:
    """What the log may not say: from --recipe, or from lines the log printed."""

    per_device: int | None = None
    world_size: int | None = None
    accumulation: int | None = None
    global_batch: int | None = None
    lr: float | None = None
    lr_rule: str | None = None
    precision: str | None = None
    has_batchnorm: bool | None = None
    source: str = "log"

    @classmethod
    def from_recipe(cls, data: dict) -> "Context":
        batch, lr = data.get("batch", {}), data.get("lr", {})
        return cls(batch.get("per_device"), batch.get("world_size"), batch.get("accumulation_steps"),
                   batch.get("global"), lr.get("value"), lr.get("rule"), data.get("precision", {}).get("mode"),
                   data.get("normalization", {}).get("has_batchnorm"), "recipe")

    def merge_log(self, found: dict) -> None:
        for key in ("per_device", "accumulation", "global_batch"):
            if getattr(self, key) is None and key in found:
                setattr(self, key, found[key])


# ------------------------------------------------------------------ helpers

def _values(points: list[Point]) -> list[float]:
    return [p.value for p in points]


def _median(values) -> float:
    return statistics.median(values) if values else float("nan")


def _moving_average(values: list[float], window: int) -> list[float]:
    half = window // 2
    prefix = [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
    out = []
    n = len(values)
    for i in range(n):
        lo, hi = max(0, i - half), min(n, i + half + 1)
        out.append((prefix[hi] - prefix[lo]) / (hi - lo))
    return out


def _mad_sigma(values: list[float]) -> float:
    med = _median(values)
    return 1.4826 * _median([abs(v - med) for v in values])


def _block_means(values: list[float], limit: int) -> tuple[list[float], int]:
    if len(values) <= limit:
        return values, 1
    size = math.ceil(len(values) / limit)
    return [sum(values[i:i + size]) / len(values[i:i + size]) for i in range(0, len(values), size)], size


def _where(points: list[Point], index: int) -> dict:
    p = points[index]
    out = {"line": p.line}
    if p.step is not None:
        out["step"] = p.step
    if p.epoch is not None:
        out["epoch"] = round(p.epoch, 3)
    return out


def _describe(where: dict) -> str:
    if "step" in where:
        return f"step {where['step']:g} (line {where['line']})"
    if "epoch" in where:
        return f"epoch {where['epoch']:g} (line {where['line']})"
    return f"line {where['line']}"


def _span(points: list[Point], start: int, end: int) -> dict:
    a, b = _where(points, start), _where(points, end)
    return {"from": a, "to": b}


def _finite(points: list[Point]) -> list[Point]:
    return [p for p in points if math.isfinite(p.value)]


# ------------------------------------------------------------------ OOM

def detect_oom(events: list[LogEvent], counts: dict, ctx: Context) -> list[Finding]:
    ooms = [e for e in events if e.kind == "oom"]
    killed = [e for e in events if e.kind == "killed"]
    findings = []
    if ooms:
        first = ooms[0]
        d = first.details
        evidence = {"line": first.line, "quote": first.text, "occurrences": counts.get("oom", len(ooms)),
                    "device": d.get("device")}
        for key in ("tried_bytes", "total_bytes", "free_bytes", "allocated_bytes", "reserved_bytes", "in_use_bytes",
                    "reserved_unallocated_bytes"):
            if key in d:
                evidence[key] = d[key]
        if "gpu" in d:
            evidence["gpu"] = int(d["gpu"])
        if "rank" in d:
            evidence["rank"] = d["rank"]
        sizes = ""
        if "tried_bytes" in d:
            sizes = f" while allocating {format_bytes(d['tried_bytes'])}"
            if "total_bytes" in d:
                sizes += f" on a {format_bytes(d['total_bytes'])} GPU with {format_bytes(d.get('free_bytes'))} free"
        where = "CPU" if d.get("device") == "cpu" else f"GPU {d.get('gpu', '?')}"
        if "rank" in d:
            where += f" (rank {d['rank']})"
        fragmented = ("reserved_unallocated_bytes" in d and d.get("tried_bytes")
                      and d["reserved_unallocated_bytes"] > d["tried_bytes"])
        findings.append(Finding("oom", "error", f"Out of memory on {where}{sizes} (line {first.line}).", evidence,
                                _oom_actions(ctx, fragmented)))
    if killed and not ooms:
        first = killed[0]
        findings.append(Finding(
            "oom", "error",
            f"A process was killed by SIGKILL (line {first.line}): the signature of the kernel's OOM killer, "
            "i.e. host RAM ran out (not GPU memory).",
            {"line": first.line, "quote": first.text, "occurrences": counts.get("killed", len(killed)),
             "signal": "SIGKILL", "host_memory": True},
            ["Confirm with `dmesg | grep -i 'killed process'` (or the job scheduler's memory report).",
             "Host memory per process: fewer DataLoader workers or a smaller prefetch_factor; avoid loading the "
             "whole dataset into every rank (memory-map it or load lazily); pin_memory only where it helps.",
             "Request more host memory, or fewer processes per node."]))
    return findings


def _oom_actions(ctx: Context, fragmented: bool) -> list[str]:
    precision = ctx.precision or "unknown"
    actions = []
    if precision in ("fp32", "unknown"):
        actions.append("Enable mixed precision first (torch.autocast with bf16 on Ampere+/Hopper, or fp16 with a "
                       "GradScaler): it roughly halves activation memory.")
    else:
        actions.append(f"Mixed precision ({precision}) is already on; go on with the next checks.")
    actions += [
        "Look for tensors that keep the autograd graph alive: accumulate `loss.item()` (not `loss`) for logging, "
        "and do not store outputs or intermediates across steps for debugging.",
        "Free what is no longer needed (`del` large tensors, then `torch.cuda.empty_cache()`)"
        + (": PyTorch holds reserved-but-unallocated memory larger than the request, a sign of fragmentation; "
           "also try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True." if fragmented else "."),
        "Check the input sizes: a resize bug that doubles the resolution or an unpadded long sequence quadruples "
        "activation memory.",
    ]
    if ctx.per_device and ctx.per_device > 1:
        half = ctx.per_device // 2
        acc = (ctx.accumulation or 1) * 2
        keep = f" (global batch {ctx.global_batch} stays)" if ctx.global_batch else ""
        actions.append(f"Only then reduce the per-device batch from {ctx.per_device} to {half} and double gradient "
                       f"accumulation to {acc}{keep}, so the LR need not change. `advisor plan` finds the real "
                       "ceiling.")
    else:
        actions.append("Only then reduce the per-device batch and restore the global batch with gradient "
                       "accumulation (the LR stays unchanged). `advisor plan` finds the real ceiling.")
    return actions


# ------------------------------------------------------------------ divergence

def detect_diverged(series: dict[str, list[Point]], events: list[LogEvent], counts: dict,
                    ctx: Context, non_finite: dict[str, Point] | None = None) -> list[Finding]:
    for name in (TRAIN_LOSS, VAL_LOSS, "train_loss_epoch"):
        bad = (non_finite or {}).get(name)
        if bad is not None:
            before = [p.value for p in series.get(name, []) if p.line < bad.line and math.isfinite(p.value)]
            where = _where([bad], 0)
            evidence = {"series": name, "first_non_finite": where, "value": str(bad.value),
                        "last_finite": before[-1] if before else None,
                        "max_before": max(before) if before else None}
            return [Finding("diverged", "error",
                            f"{name} became {bad.value} at {_describe(where)}: training diverged.",
                            evidence, _diverged_actions(ctx))]
    train = _finite(series.get(TRAIN_LOSS, []))
    if len(train) >= MIN_POINTS:
        values = _values(train)
        k = max(3, len(values) // 10)
        early_min = min(_median(values[i:i + 3]) for i in range(0, k))
        start = _median(values[:3])
        late = _median(values[-k:])
        if late > 3 * early_min and late > 1.5 * start:  # ended far above where it started
            return [Finding("diverged", "error",
                            f"The training loss started at {start:.4g} and ends around {late:.4g} (peak "
                            f"{max(values):.4g}): training diverged.",
                            {"series": TRAIN_LOSS, "start": start, "early_min": early_min, "late_median": late,
                             "peak": max(values),
                             **_span(train, 0, len(train) - 1)}, _diverged_actions(ctx))]
    overflows = counts.get("overflow", 0)
    at_min = counts.get("loss-scale-floor", 0) > 0
    if at_min or overflows >= 20:
        first = next(e for e in events if e.kind in ("overflow", "loss-scale-floor"))
        return [Finding("diverged", "error",
                        f"fp16 loss scaling overflowed {overflows} times" + (" and hit its minimum" if at_min else "")
                        + ": gradients are non-finite, steps are being skipped.",
                        {"overflow_events": overflows, "first_line": first.line, "quote": first.text,
                         "loss_scale_at_minimum": at_min},
                        ["Switch from fp16 to bf16 if the GPU supports it (no loss scaling needed)."]
                        + _diverged_actions(ctx))]
    return []


def _diverged_actions(ctx: Context) -> list[str]:
    actions = []
    if ctx.lr_rule in ("linear", "sqrt"):
        actions.append(f"The LR was scaled up for the batch ({ctx.lr_rule} rule, lr {ctx.lr:g}): the base LR may "
                       "already have been too high for scaling; lower it or lengthen the warmup (3+ epochs when "
                       "the batch grew more than 2x).")
    else:
        actions.append("Lower the learning rate (try half) and warm up from a small LR over the first epoch(s).")
    actions += ["Clip gradients (torch.nn.utils.clip_grad_norm_, e.g. max_norm=1.0).",
                "Check the data for corrupt samples or labels (a NaN input poisons every later step).",
                "Under fp16, prefer bf16 or keep a GradScaler; past a global batch of ~4096 use LAMB/LARS."]
    return actions


# ------------------------------------------------------------------ oscillation

def _trend_and_noise(values: list[float]) -> tuple[list[float], float]:
    window = max(5, len(values) // 20) | 1
    trend = _moving_average(values, window)
    residual = [v - t for v, t in zip(values, trend)]
    return trend, _mad_sigma(residual)


def detect_jitter(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    train = _finite(series.get(TRAIN_LOSS, []))
    if len(train) < MIN_POINTS:
        return []
    values = _values(train)
    # Noise is judged against the loss the run started from: near convergence a healthy small-batch loss
    # has a large noise-to-level ratio, yet it is tiny against the distance the run has come.
    start_level = max(abs(_median(values[:max(3, len(values) // 20)])), 1e-8)
    half = len(values) // 2
    tail = values[half:]
    trend, noise = _trend_and_noise(tail)
    level = _median(trend)
    score = noise / start_level
    fall = (_median(trend[:max(1, len(trend) // 10)]) - _median(trend[-max(1, len(trend) // 10):]))
    clearly_falling = noise > 0 and fall > noise
    converging = _relative_drop(values) > 0.5
    # Stalled: the trend no longer falls, and the noise either dwarfs the level or the run never converged.
    stalled_noisy = (score >= JITTER_SCORE_STALLED and not clearly_falling
                     and (not converging or noise >= STALLED_NOISE_TO_LEVEL * max(level, 1e-8)))
    if score < JITTER_SCORE and not stalled_noisy:
        return []
    evidence = {"series": TRAIN_LOSS, "noise_sigma": round(noise, 5), "loss_level": round(level, 5),
                "jitter_score": round(score, 3), "starting_loss": round(start_level, 5), "points": len(tail),
                **_span(train, half, len(train) - 1)}
    if ctx.per_device is not None:
        evidence["per_device_batch"] = ctx.per_device
    if ctx.per_device is not None and ctx.per_device < 16:
        actions = [f"The per-device batch is {ctx.per_device} (< 16): raise it (or accumulate gradients) so "
                   "each step's gradient is less noisy.",
                   "If the model uses BatchNorm, switch to GroupNorm/LayerNorm (or SyncBatchNorm across GPUs): "
                   "BN statistics over so few samples jitter.",
                   "If that is not possible, lower the LR in proportion to the batch (linear rule for SGD, "
                   "square root for Adam)."]
    elif ctx.per_device is not None:
        actions = [f"The per-device batch is already {ctx.per_device}: the LR is the likely cause; lower it "
                   "(try half) or lengthen the warmup.",
                   "Clip gradients to tame occasional large steps."]
    else:
        actions = ["If the per-device batch is below 16: raise it (or accumulate), and prefer GroupNorm over "
                   "BatchNorm at such sizes.",
                   "If the batch is already large: the LR is too high for it; lower it (try half) or warm up "
                   "longer.",
                   "Pass --recipe RECIPE so the advisor can tell which case applies."]
    return [Finding("oscillation-jitter", "warning",
                    f"The training loss jitters step to step by ~{noise:.3g} around a level of {level:.3g} "
                    f"({score:.0%} of the starting loss {start_level:.3g})"
                    + ("." if clearly_falling else " and has stopped falling."),
                    evidence, actions)]


def _autocorrelation(values: list[float], lag: int, mean: float, var: float) -> float:
    n = len(values)
    return sum((values[i] - mean) * (values[i + lag] - mean) for i in range(n - lag)) / ((n - lag) * var)


def detect_periodic(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    train = _finite(series.get(TRAIN_LOSS, []))
    if len(train) < 3 * MIN_POINTS:
        return []
    raw = _values(train)
    values, block = _block_means(raw, MAX_ANALYSIS_POINTS)
    trend = _moving_average(values, max(9, len(values) // 6) | 1)
    residual = [v - t for v, t in zip(values, trend)]
    start = len(residual) // 5  # skip the initial descent
    residual = residual[start:]
    n = len(residual)
    mean = sum(residual) / n
    var = sum((r - mean) ** 2 for r in residual) / n
    if var <= 0:
        return []
    acf = {lag: _autocorrelation(residual, lag, mean, var) for lag in range(2, n // 3)}
    peaks = [lag for lag in acf if 3 <= lag < n // 3 - 1 and acf[lag] > PERIODIC_ACF
             and acf[lag] >= acf[lag - 1] and acf[lag] >= acf[lag + 1]]
    if not peaks:
        return []
    strongest = max(acf[lag] for lag in peaks)
    period = min(lag for lag in peaks if acf[lag] >= 0.9 * strongest)  # the fundamental, not a multiple
    ordered = sorted(residual)
    amplitude = (ordered[int(0.95 * (n - 1))] - ordered[int(0.05 * (n - 1))]) / 2
    level = max(_median(trend[start:]), 0.1 * _median(values[:max(3, len(values) // 20)]), 1e-8)
    if amplitude / level < PERIODIC_AMPLITUDE:
        return []
    period_points = period * block
    first = train[0]
    steps_per_point = None
    if first.step is not None and train[-1].step is not None and len(train) > 1:
        steps_per_point = (train[-1].step - first.step) / (len(train) - 1)
    evidence = {"series": TRAIN_LOSS, "period_points": period_points, "autocorrelation": round(acf[period], 3),
                "amplitude": round(amplitude, 5), "relative_amplitude": round(amplitude / level, 3),
                **_span(train, start * block, len(train) - 1)}
    if steps_per_point:
        evidence["period_steps"] = round(period_points * steps_per_point, 1)
    return [Finding("oscillation-periodic", "warning",
                    f"The training loss swings periodically (every ~{evidence.get('period_steps', period_points)} "
                    f"{'steps' if steps_per_point else 'log points'}, ±{amplitude:.3g}, autocorrelation "
                    f"{acf[period]:.2f}): a pattern in the data order, not the batch size.",
                    evidence,
                    ["Check the data order: shuffle every epoch (DataLoader(shuffle=True) / "
                     "DistributedSampler.set_epoch(epoch)); sorted or grouped data (by class, source or length) "
                     "makes the loss swing with the same period.",
                     "Check class balance and noisy samples: a block of hard or mislabelled examples recurring "
                     "each epoch produces these swings; clean or rebalance (weighted sampler).",
                     "Changing the batch size will not fix this."])]


# ------------------------------------------------------------------ validation

def _relative_drop(values: list[float]) -> float:
    k = max(2, len(values) // 10)
    first, last = _median(values[:k]), _median(values[-k:])
    return (first - last) / abs(first) if first else 0.0


def detect_validation(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    train = _finite(series.get(TRAIN_LOSS, []) or series.get("train_loss_epoch", []))
    val = _finite(series.get(VAL_LOSS, []))
    findings = []
    train_drop = _relative_drop(_values(train)) if len(train) >= MIN_POINTS else None
    if len(val) >= 4 and train_drop is not None and train_drop > HEALTHY_TRAIN_DROP:
        values = _values(val)
        best = min(range(len(values)), key=values.__getitem__)
        noise = _mad_sigma([b - a for a, b in zip(values, values[1:])]) / math.sqrt(2)
        margin = max(VAL_RISE * abs(values[best]), 2 * noise)
        after = values[best + 1:]
        rising = len(after) >= 2 and _median(after[-max(2, len(after) // 2):]) > values[best] + margin
        tail = values[len(values) // 2:]
        val_tail_drop = _relative_drop(tail) if len(tail) >= 2 else 0.0
        train_tail = _values(train)[len(train) // 2:]
        flat = (abs(val_tail_drop) < 0.03 and _relative_drop(train_tail) > 0.15)
        if rising or flat:
            gap = _median(values[-2:]) - _median(_values(train)[-max(3, len(train) // 20):])
            evidence = {"val_best": round(values[best], 5), "val_best_at": _where(val, best),
                        "val_last": round(values[-1], 5), "val_last_at": _where(val, len(val) - 1),
                        "train_drop": round(train_drop, 3), "train_val_gap": round(gap, 5),
                        "val_points": len(val)}
            summary = (f"Validation loss bottomed at {values[best]:.4g} at {_describe(_where(val, best))} and rose to "
                       f"{values[-1]:.4g} while the training loss kept falling: overfitting."
                       if rising else
                       f"Validation loss is flat ({val_tail_drop:+.1%} over the second half) while the training "
                       f"loss still falls: overfitting.")
            actions = []
            if ctx.per_device and ctx.global_batch and ctx.global_batch >= 128:
                actions.append(f"Try a smaller global batch than {ctx.global_batch} (half, LR scaled down with "
                               "it): smaller batches regularise; large ones converge to sharper minima.")
            else:
                actions.append("Try a smaller batch (LR scaled down with it): smaller batches regularise.")
            actions += ["Add augmentation, dropout or weight decay.",
                        "Stop early at the best validation step (checkpoint on val loss)."]
            findings.append(Finding("overfitting", "warning", summary, evidence, actions))
            return findings
    # Slow convergence: both curves fall slowly (or do not fall).
    if train_drop is not None and len(train) >= SLOW_MIN_POINTS:
        values = _values(train)
        val_drop = _relative_drop(_values(val)) if len(val) >= 4 else None
        val_slow = val_drop is None or val_drop < SLOW_DROP
        # A plateau followed by a drop is fine: the overall drop would be large.
        if train_drop < SLOW_DROP and val_slow:
            start = _median(values[:max(2, len(values) // 10)])
            last_quarter = values[3 * len(values) // 4:]
            still = _relative_drop(last_quarter) if len(last_quarter) >= 4 else 0.0
            evidence = {"train_start": round(start, 5), "train_end": round(_median(values[-max(2, len(values) // 10):]), 5),
                        "train_drop": round(train_drop, 3), "still_falling_last_quarter": round(still, 3),
                        "points": len(values), **_span(train, 0, len(train) - 1)}
            if val_drop is not None:
                evidence["val_drop"] = round(val_drop, 3)
            lr = f" (now {ctx.lr:g})" if ctx.lr else ""
            actions = [f"The optimizer or LR is the problem: run a short trial with the LR doubled{lr}, or with "
                       "Adam instead of SGD, and compare the first few hundred steps.",
                       "A smaller batch gives more updates per epoch and can also help."]
            if ctx.global_batch:
                actions.append(f"The global batch is {ctx.global_batch}: if the LR was not scaled up with it "
                               "(linear for SGD, square root for Adam), it is too low for this batch.")
            findings.append(Finding(
                "slow-convergence", "warning",
                f"The training loss fell only {train_drop:.0%} over {len(values)} points"
                + (f" and validation {val_drop:.0%}" if val_drop is not None else "")
                + ": both fall slowly.", evidence, actions))
    return findings


def run_detectors(series: dict[str, list[Point]], events: list[LogEvent], counts: dict, ctx: Context,
                  non_finite: dict[str, Point] | None = None) -> list[Finding]:
    findings = detect_oom(events, counts, ctx)
    diverged = detect_diverged(series, events, counts, ctx, non_finite)
    findings += diverged
    if not diverged:  # a diverged curve jitters and plateaus too; one finding says it
        oscillation = detect_periodic(series, ctx) or detect_jitter(series, ctx)
        findings += oscillation
        validation = detect_validation(series, ctx)
        # An oscillating loss also falls slowly: the oscillation is the cause, one finding says it.
        findings += [f for f in validation if not (oscillation and f.kind == "slow-convergence")]
    return findings
