"""Detectors: from series and events to findings with evidence and actions (DOMAIN section 5).

Each detector is conservative: ordinary mini-batch noise around a falling trend
is not oscillation, a plateau followed by a drop is not slow convergence, and a
crash that is not an out-of-memory error is not reported as one.
"""

from __future__ import annotations

import math
import operator
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
SWING_TO_NOISE = 2.0  # slow swings this many times the step-to-step noise: a pattern in the data order
SWING_TO_LEVEL = 0.03  # ... and at least this share of the loss level
SWING_MIN_NOISE = 0.005  # below this step noise (per-epoch averages) the ratio means nothing
SLOW_DROP = 0.25  # a run whose loss fell less than this share of its start is slow
HEALTHY_TRAIN_DROP = 0.30
VAL_RISE = 0.05
MAX_ANALYSIS_POINTS = 2000
SLOW_MIN_POINTS = 50  # fewer points than this is the start of a run, too early to call it slow
GRAD_NORM_NON_FINITE_RUN = 3  # logged steps in a row: one or two are fp16 loss scaling at work
LOSS_SCALE_RUN = 4  # reductions in a row ...
LOSS_SCALE_SMALL = 8.0  # ... ending at or below this scale (DeepSpeed and GradScaler start at 2**16)
LOSS_SCALE_FLOOR = 1.0  # a scale at or below 1 for two readings in a row: the floor
STUCK_MIN_POINTS = 10  # a loss identical to the last digit for this many points ...
STUCK_SHARE = 0.2  # ... and this share of the run: not learning
STUCK_TOLERANCE = 1e-5  # relative: "the same value" up to float32 noise in the last printed digit
STUCK_NEAR_START = 0.5  # a stuck loss at least half its starting level has not learned


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

def _non_finite_run(points: list[Point]) -> tuple[int, int]:
    """(longest run of consecutive non-finite values, index where it starts)."""
    best, best_start, run = 0, -1, 0
    for index, p in enumerate(points):
        run = run + 1 if not math.isfinite(p.value) else 0
        if run > best:
            best, best_start = run, index - run + 1
    return best, best_start


def _halving_run(scales: list[float]) -> tuple[int, float, float]:
    """Longest run of consecutive reductions of the loss scale: (length, scale before it, scale after it)."""
    best = (0, 0.0, 0.0)
    run, start = 0, 0.0
    for before, after in zip(scales, scales[1:]):
        if after < before:
            if run == 0:
                start = before
            run += 1
            if run > best[0]:
                best = (run, start, after)
        elif after > before:
            run = 0
    return best


def detect_diverged(series: dict[str, list[Point]], events: list[LogEvent], counts: dict,
                    ctx: Context, non_finite: dict[str, Point] | None = None) -> list[Finding]:
    """Divergence from every signal, strongest first: a non-finite loss (any case: nan, NaN, inf, -Infinity);
    a gradient norm that stays non-finite; fp16 loss scaling collapsing (a run of overflows halving the scale
    to a small value, or the scale at its floor); a loss that climbs far above where it started; a loss stuck
    at exactly one value (the run is not learning).
    """
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
    norms = series.get("grad_norm", [])
    run, start = _non_finite_run(norms)
    if norms and (run >= GRAD_NORM_NON_FINITE_RUN or (run and not math.isfinite(norms[-1].value))):
        # An isolated inf/nan gradient norm is fp16 loss scaling skipping one step; a run of them is divergence.
        where = _where(norms, start)
        return [Finding("diverged", "error",
                        f"The gradient norm became {norms[start].value} at {_describe(where)} and stayed non-finite "
                        f"for {run} logged step(s): training diverged (the logged loss may still look finite).",
                        {"series": "grad_norm", "first_non_finite": where, "non_finite_run": run,
                         "value": str(norms[start].value)}, _diverged_actions(ctx))]
    scale_finding = _loss_scale_collapse(series.get("loss_scale", []), events, counts, ctx)
    if scale_finding:
        return [scale_finding]
    train = _finite(series.get(TRAIN_LOSS, []))
    if len(train) >= MIN_POINTS:
        values = _values(train)
        k = max(3, len(values) // 10)
        # The first value counts on its own too: a run that explodes within three points has no calm start median.
        early_min = min(values[0], *(_median(values[i:i + 3]) for i in range(0, k)))
        start_level = min(values[0], _median(values[:3]))
        late = _median(values[-k:])
        if late > 3 * early_min and late > 1.5 * start_level:  # ended far above where it started
            return [Finding("diverged", "error",
                            f"The training loss started at {start_level:.4g} and ends around {late:.4g} (peak "
                            f"{max(values):.4g}): training diverged.",
                            {"series": TRAIN_LOSS, "start": start_level, "early_min": early_min, "late_median": late,
                             "peak": max(values),
                             **_span(train, 0, len(train) - 1)}, _diverged_actions(ctx))]
        stuck = 1
        tolerance = STUCK_TOLERANCE * abs(values[-1])  # float32 noise in the last printed digit
        while stuck < len(values) and abs(values[-stuck - 1] - values[-1]) <= tolerance:
            stuck += 1
        # Stuck near where it started (a converged loss printed to 4 decimals also repeats, far below its start).
        if (values[-1] != 0 and values[-1] >= STUCK_NEAR_START * start_level
                and stuck >= max(STUCK_MIN_POINTS, STUCK_SHARE * len(values))):
            return [Finding("diverged", "error",
                            f"The training loss is stuck at {values[-1]:.6g} (to the last printed digit) for the last {stuck} points: "
                            "the model is not learning (no update reaches the weights, or the network is dead).",
                            {"series": TRAIN_LOSS, "stuck_value": values[-1], "stuck_points": stuck,
                             **_span(train, len(train) - stuck, len(train) - 1)},
                            ["Check that the optimizer steps the model's parameters: optimizer.zero_grad() before "
                             "backward(), not between backward() and step(); the optimizer built over this model's "
                             "parameters; requires_grad not turned off.",
                             "Check the LR schedule is not at 0 (warmup from 0, a scheduler stepped too often).",
                             "If an earlier spike preceded the plateau, the network may be dead (ReLUs or saturated "
                             "activations): lower the LR, clip gradients, restart from a checkpoint before it."])]
    return []


def _loss_scale_collapse(scales: list[Point], events: list[LogEvent], counts: dict, ctx: Context
                         ) -> Finding | None:
    overflows = [e for e in events if e.kind == "overflow"]
    at_floor = counts.get("loss-scale-floor", 0) > 0
    # The scale as logged (Megatron, fairseq, DLLogger columns) or as the overflow messages report it.
    logged = [p.value for p in scales if math.isfinite(p.value)]
    from_events = [e.details["reduced"] for e in overflows if "reduced" in e.details]
    if from_events and overflows[0].details.get("attempted"):
        from_events.insert(0, overflows[0].details["attempted"])
    for source, values in (("overflow messages", from_events), ("logged loss scale", logged)):
        run, before, after = _halving_run(values)
        floor = bool(values) and values[-1] <= LOSS_SCALE_FLOOR and len(values) >= 2 and values[-2] <= LOSS_SCALE_FLOOR
        if (run >= LOSS_SCALE_RUN and after <= LOSS_SCALE_SMALL) or floor:
            at_floor = at_floor or floor
            first = next((e for e in overflows), None)
            evidence = {"source": source, "halvings_in_a_row": run, "scale_before": before, "scale_after": after,
                        "last_scale": values[-1], "overflow_events": counts.get("overflow", 0),
                        "loss_scale_at_minimum": at_floor}
            if first is not None:
                evidence.update({"first_line": first.line, "quote": first.text})
            return Finding("diverged", "error",
                           f"fp16 loss scaling collapsed: {run} reductions in a row took the scale from {before:g} "
                           f"to {after:g}" + (" and it sits at its floor" if at_floor else "")
                           + ": gradients are non-finite step after step, updates are being skipped.",
                           evidence, ["Switch from fp16 to bf16 if the GPU supports it (no loss scaling needed)."]
                           + _diverged_actions(ctx))
    if at_floor:
        first = next(e for e in events if e.kind == "loss-scale-floor")
        return Finding("diverged", "error",
                       f"fp16 loss scaling hit its minimum (line {first.line}) after {counts.get('overflow', 0)} "
                       "overflow(s): gradients are non-finite, steps are being skipped.",
                       {"overflow_events": counts.get("overflow", 0), "first_line": first.line, "quote": first.text,
                        "loss_scale_at_minimum": True},
                       ["Switch from fp16 to bf16 if the GPU supports it (no loss scaling needed)."]
                       + _diverged_actions(ctx))
    return None


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
    # A run that never fell is judged against the level it sits at (its start may hold an initial spike).
    stalled_score = score if converging else max(score, noise / max(level, 1e-8))
    stalled_noisy = (stalled_score >= JITTER_SCORE_STALLED and not clearly_falling
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


def _autocorrelations(values: list[float], lags: range, mean: float, var: float) -> dict[int, float]:
    n = len(values)
    centred = [v - mean for v in values]
    return {lag: sum(map(operator.mul, centred[:n - lag], centred[lag:])) / ((n - lag) * var) for lag in lags}


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
    acf = _autocorrelations(residual, range(2, n // 3), mean, var)
    peaks = [lag for lag in acf if 3 <= lag < n // 3 - 1 and acf[lag] > PERIODIC_ACF
             and acf[lag] >= acf[lag - 1] and acf[lag] >= acf[lag + 1]]
    ordered = sorted(residual)
    amplitude = (ordered[int(0.95 * (n - 1))] - ordered[int(0.05 * (n - 1))]) / 2
    level = max(_median(trend[start:]), 0.1 * _median(values[:max(3, len(values) // 20)]), 1e-8)
    # Data-order swings: the loss wanders in blocks (sorted or grouped data) far more than it moves step to step.
    step_noise = _mad_sigma([b - a for a, b in zip(values[start:], values[start + 1:])]) / math.sqrt(2)
    swing = _mad_sigma(residual)
    swing_to_noise = swing / step_noise if step_noise > SWING_MIN_NOISE * level else 0.0
    swings = swing_to_noise >= SWING_TO_NOISE and swing / level >= SWING_TO_LEVEL
    if not (peaks and amplitude / level >= PERIODIC_AMPLITUDE) and not swings:
        return []
    if peaks:
        strongest = max(acf[lag] for lag in peaks)
        period = min(lag for lag in peaks if acf[lag] >= 0.9 * strongest)  # the fundamental, not a multiple
    else:
        period = max(acf, key=acf.get)
    period_points = period * block
    first = train[0]
    steps_per_point = None
    if first.step is not None and train[-1].step is not None and len(train) > 1:
        steps_per_point = (train[-1].step - first.step) / (len(train) - 1)
    evidence = {"series": TRAIN_LOSS, "period_points": period_points, "autocorrelation": round(acf[period], 3),
                "amplitude": round(amplitude, 5), "relative_amplitude": round(amplitude / level, 3),
                "swing_to_step_noise": round(swing_to_noise, 2),
                **_span(train, start * block, len(train) - 1)}
    if steps_per_point:
        evidence["period_steps"] = round(period_points * steps_per_point, 1)
    regular = bool(peaks) and amplitude / level >= PERIODIC_AMPLITUDE
    what = (f"swings periodically (every ~{evidence.get('period_steps', period_points)} "
            f"{'steps' if steps_per_point else 'log points'}, ±{amplitude:.3g}, autocorrelation {acf[period]:.2f})"
            if regular else
            f"swings in slow blocks {swing_to_noise:.1f}x larger than its step-to-step noise (±{amplitude:.3g})")
    return [Finding("oscillation-periodic", "warning",
                    f"The training loss {what}: a pattern in the data order, not the batch size.",
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
        # Not improving (flat, or rising less than the rising rule needs) while training still falls.
        flat = (val_tail_drop < 0.03 and _relative_drop(train_tail) > 0.15)
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


# ------------------------------------------------------------------ crashes that are not OOM

CRASH_LABELS = {
    "collective-timeout": "a collective operation timed out (NCCL/gloo watchdog)",
    "illegal-memory-access": "an illegal memory access on the GPU",
    "shape-mismatch": "a tensor shape mismatch",
    "signal": "a worker died from a signal",
    "exception": "an exception",
}
CRASH_ACTIONS = {
    "collective-timeout": [
        "One rank stopped joining collectives while the others waited: find it (the rank that did not report "
        "the timeout, or whose log stops first) and read its last lines for a hang or an earlier error.",
        "Common causes: ranks with different numbers of batches (use DistributedSampler with drop_last=True, or "
        "Join), code that only rank 0 runs around a collective (evaluation, checkpointing, logging), a stalled "
        "data loader or filesystem.",
        "Re-run with NCCL_DEBUG=INFO and TORCH_NCCL_ASYNC_ERROR_HANDLING=1; raise init_process_group(timeout=...) "
        "only once the cause is known (a long first step, e.g. compilation)."],
    "illegal-memory-access": [
        "Re-run with CUDA_LAUNCH_BLOCKING=1: CUDA reports errors asynchronously, so the stack shown may not be the "
        "failing operation.",
        "Check index tensors on CPU first: embedding ids >= the vocabulary size, labels >= the number of classes, "
        "negative indices in gather/scatter.",
        "If custom CUDA extensions or mismatched CUDA/driver builds are involved, test without them."],
    "shape-mismatch": [
        "Read the shapes in the message: a tensor does not match what the model expects.",
        "Check the data pipeline (a flattened or extra dimension, the last partial batch, a collate function) and "
        "that a loaded checkpoint matches the model configuration.",
        "This is not a batch-size problem: changing the batch size will not fix it."],
    "signal": [
        "Find which rank died first and from which signal: SIGSEGV/SIGABRT point at a native crash (a CUDA "
        "extension, a DataLoader worker), SIGTERM at the scheduler or launcher stopping the job.",
        "Re-run that configuration with num_workers=0 to see whether a DataLoader worker is the cause."],
    "exception": [
        "Read the traceback around the quoted line: the run stopped on a Python exception that is not a memory or "
        "distributed failure.",
        "Fix it and resume from the last checkpoint; the batch size is not the cause."],
}


def detect_crash(events: list[LogEvent], counts: dict) -> list[Finding]:
    """A crash that is not an out-of-memory error, named by class (the earliest named failure in the log)."""
    if any(e.kind in ("oom", "killed") for e in events):
        return []  # the OOM is the crash; exit codes and tracebacks after it are its consequences
    crashes = [e for e in events if e.kind in ("crash", "signal")]
    if not crashes:
        return []
    # The earliest named failure is the root cause: a peer's "connection closed" or torchrun's exit codes follow it.
    first = next((e for e in crashes if e.details.get("class") not in (None, "exception")
                  or e.details.get("exception")), crashes[0])
    cls = first.details.get("class") or ("signal" if first.kind == "signal" else "exception")
    label = CRASH_LABELS[cls]
    if cls == "exception" and first.details.get("exception"):
        label = f"{label} ({first.details['exception']})"
    evidence = {"class": cls, "line": first.line, "quote": first.text,
                "occurrences": counts.get("crash", 0) + counts.get("signal", 0)}
    for key in ("rank", "exception", "signal", "exitcode"):
        if key in first.details:
            evidence[key] = first.details[key]
    where = f"line {first.line}" + (f", rank {first.details['rank']}" if "rank" in first.details else "")
    return [Finding("crash", "error", f"The run crashed: {label} ({where}). This is not an out-of-memory error.",
                    evidence, list(CRASH_ACTIONS[cls]))]


# ------------------------------------------------------------------ co-findings

# When one cause explains the curve, a weaker finding is dropped or kept as secondary:
# (explaining kind, explained kinds, what happens to them, why)
COFINDING_RULES = (
    ("diverged", ("oscillation-jitter", "oscillation-periodic", "slow-convergence", "overfitting"), "drop",
     "a diverging run also jitters, stalls and leaves validation behind: the divergence is the cause"),
    ("oscillation-periodic", ("slow-convergence", "oscillation-jitter"), "drop",
     "a loss that swings with the data order also looks noisy and falls slowly: the swing is the cause"),
    ("oscillation-jitter", ("slow-convergence",), "drop",
     "an oscillating loss falls slowly: the oscillation is the cause"),
    ("overfitting", ("oscillation-periodic", "oscillation-jitter"), "secondary",
     "with a clear train/validation gap the gap is what to fix first; on small data the training loss also "
     "repeats its pattern every epoch"),
)


def apply_cofinding_rules(findings: list[Finding]) -> list[Finding]:
    """Apply COFINDING_RULES in order; a finding already explained cannot explain others."""
    kept = list(findings)
    for cause, explained, action, why in COFINDING_RULES:
        if not any(f.kind == cause and f.secondary_to is None for f in kept):
            continue
        out = []
        for f in kept:
            if f.kind in explained and f.secondary_to is None:
                if action == "drop":
                    continue
                f.secondary_to = cause
                f.severity = "info"
                f.evidence["secondary_because"] = why
            out.append(f)
        kept = out
    return sorted(kept, key=lambda f: f.secondary_to is not None)


def run_detectors(series: dict[str, list[Point]], events: list[LogEvent], counts: dict, ctx: Context,
                  non_finite: dict[str, Point] | None = None) -> list[Finding]:
    findings = detect_oom(events, counts, ctx) + detect_crash(events, counts)
    findings += detect_diverged(series, events, counts, ctx, non_finite)
    findings += detect_periodic(series, ctx) or detect_jitter(series, ctx)
    findings += detect_validation(series, ctx)
    return apply_cofinding_rules(findings)


def judgeable(series: dict[str, list[Point]]) -> str | None:
    """None when the curves hold enough points to judge a trend, else why not (stated, never 'healthy')."""
    train = _finite(series.get(TRAIN_LOSS, []) or series.get("train_loss_epoch", []))
    if len(train) >= MIN_POINTS:
        return None
    if not train:
        present = ", ".join(f"{k} {len(v)}" for k, v in series.items()) or "no metric series"
        return f"no training loss was read ({present})"
    return f"the training loss has {len(train)} point(s); a trend needs {MIN_POINTS}"
