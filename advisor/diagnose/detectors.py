"""Detectors: from series and events to findings with evidence and actions (DOMAIN section 5).

Each detector is conservative: ordinary mini-batch noise around a falling trend
is not oscillation, a plateau followed by a drop is not slow convergence, and a
crash that is not an out-of-memory error is not reported as one.
"""

from __future__ import annotations

import heapq
import math
import operator
import re
import struct
from collections import Counter
from decimal import Decimal

from ..units import format_bytes
from .records import TRAIN_LOSS, VAL_LOSS, Finding, LogEvent, Point, dataclass
from .advice import NOT_LEARNING_ACTIONS, PERIODIC_ACTIONS, jitter_actions, overfitting_actions
from .shortlog import (ACC_GAP, CONVERGED_LEVEL, _as_fraction, VAL_JITTER_SCORE, _theil_sen, adjacent, detect_short_jitter,
                       detect_short_periodic, detect_short_validation, median)
from .curves import cadence_of, epoch_loss_curve
from .slow import detect_slow_epochs, quarter_paces, steady

MIN_POINTS = 20
JITTER_SCORE = 0.15  # step-to-step noise / starting loss: above it, jitter is a problem even if the loss falls
JITTER_SCORE_STALLED = 0.08  # ... and above this when the loss has stopped falling
STALLED_NOISE_TO_LEVEL = 0.6
PERIODIC_ACF = 0.35
PERIODIC_AMPLITUDE = 0.15
SWING_TO_NOISE = 2.0  # slow swings this many times the step-to-step noise: a pattern in the data order
SWING_TO_LEVEL = 0.03  # ... and at least this share of the loss level
SWING_AMPLITUDE = 0.10  # ... and swinging (5th-95th percentile half-range) by this share of the level: large swings
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
STUCK_MIN_LEVEL = 1e-3  # ... nor one stuck for the second half of the run above this level (a rounded 0.0001 is converged)
STUCK_FEW_POINTS = 4  # an epoch log stuck for this many points (and most of the run) has not learned
STUCK_MAX_STEP = 0.01  # a loss stuck away from its start tells only when printed finer than 1% of its level
PRINT_PRECISION = 1e-4  # relative: values this close differ only in the printed digits (2.3026 vs 2.3029)
LN_K_TOLERANCE = 0.02  # a loss within 2% of ln(K) sits where an untrained K-way classifier starts
LN_K_COMMON_TOLERANCE = 0.015  # ... tighter when K is guessed from the common class counts below
LN_K_COMMON_MIN_POINTS = 8  # ... and only with enough points to see that it is flat
# Class counts (and vocabularies) common enough to recognise ln(K) without being told K.
COMMON_CLASS_COUNTS = (2, 3, 4, 5, 10, 100, 1000, 30522, 32000, 50257, 50304, 128256)
FEW_RISING = 3  # validation points rising after its best, with training falling: overfitting, even in short logs
FEW_TRAIN_FALL = 0.05  # ... and the training loss fell at least this share meanwhile
FEW_TURN_POINTS = 3  # validation points, at least, for one large rise with the accuracy falling to count (below 4)
FEW_TURN_TRAIN_FALL = 0.3  # ... or for two large rises in a row with the training loss falling this share
JUMP_TO_SPREAD = 5.0  # a jump this many times the spread before it, that stays: a blow-up in a short log
JUMP_TO_LEVEL = 1.0  # ... and at least this share of the level before it (1.7 -> 11.5, not 1.7 -> 1.9)
# With only one or two points before the jump there is no spread to measure it against: the new level must be this
# many times every value before it and hold for JUMP_FEW_AFTER points, steady (its own spread 1/JUMP_TO_SPREAD of the
# jump or less). 1.7 -> 11.5 and stays is a blow-up; a second epoch 2x the first (a partial first average) is not.
JUMP_FEW_FACTOR = 3.0
JUMP_FEW_AFTER = 4
EXPLOSION_FACTOR = 100.0  # a loss this many times above every earlier value has blown up, even as the last point
EXPLOSION_STAYS = 10.0  # ... unless it comes back under this factor of the earlier maximum
SCALE_FALL = 2.0 ** 10  # an fp16 loss scale this many times below its start: gradients overflow step after step
# Initial dynamic loss scales by framework, for a log that shows one scale only (apex, DeepSpeed and torch
# GradScaler start at 2**16; fairseq's --fp16-init-scale defaults to 2**7).
INITIAL_LOSS_SCALE = {None: 2.0 ** 16, "apex": 2.0 ** 16, "deepspeed": 2.0 ** 16, "fairseq": 2.0 ** 7}
# fp16 loss-scale floors (the scale a framework stops lowering at): DeepSpeed min_loss_scale=1,
# Megatron min_loss_scale=1.0, fairseq --min-loss-scale 1e-4; apex and torch GradScaler have none.
LOSS_SCALE_FLOORS = {"deepspeed": 1.0, "megatron": 1.0, "fairseq": 1e-4}
OVERFLOW_GAP_LINES = 5  # overflows this close (each rank's copy, a timer line) are "in a row"


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
    classes: int | None = None  # K of a K-way classification (--classes), for the ln(K) "not learning" rule
    framework: str | None = None  # what wrote the log, when it says so: picks loss-scale floors and OOM advice
    elisions: list | None = None  # lines that are only "..." (epochs cut out of a paste): gaps in the curves

    @classmethod
    def from_recipe(cls, recipe) -> "Context":
        """The recipe's plan (a checked recipe: its TOML document, or typed)."""
        from ..recipe import RecipeDocument

        doc = RecipeDocument.of(recipe)
        batch, lr = doc.batch, doc.lr
        return cls(batch.per_device, batch.world_size, batch.accumulation_steps, batch.global_, lr.value, lr.rule,
                   doc.precision.mode, doc.normalization.has_batchnorm, "recipe")

    def merge_log(self, found: dict) -> None:
        for key in ("per_device", "accumulation", "global_batch", "classes", "framework"):
            if getattr(self, key) is None and key in found:
                setattr(self, key, found[key])


# ------------------------------------------------------------------ helpers

def _values(points: list[Point]) -> list[float]:
    return [p.value for p in points]


def _percent_scale(values: list[float]) -> float:
    """100 for accuracies (mAP, scores) printed in per cent (any value above 1), else 1: their scale."""
    return 100.0 if max(values) > 1.0 else 1.0


def _stays_near_first(values: list[float], share: float) -> bool:
    """Every value within ``share`` of the first (a positive one): the curve never left where it began."""
    return values[0] > 0 and max(abs(v - values[0]) for v in values) <= share * values[0]


_median = median


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

def detect_oom(events: list[LogEvent], counts: dict, ctx: Context,
               series: dict[str, list[Point]] | None = None) -> list[Finding]:
    """An out-of-memory error: an error when it ended the run, a warning when the run recovered (HF
    auto_find_batch_size, Accelerate's find_executable_batch_size, fairseq skipping the batch) and trained on.
    A worker killed by SIGKILL is not assumed to be an OOM: detect_crash names it."""
    ooms = [e for e in events if e.kind == "oom"]
    retries = [e for e in events if e.kind == "oom-retry"]
    if not ooms and retries and _oom_recovery(retries[-1], events, series or {}) is None:
        ooms = retries  # the allocator's refusals are the last thing the run did: they ended it
    if not ooms:
        return []  # (allocator retries the run trained past are no failure of the run: a note, survived_oom_note)
    first, last = ooms[0], ooms[-1]
    d = dict(first.details)
    for later in ooms[1:]:  # a device named on any OOM line of the run
        for key in ("gpu", "device", "framework"):
            if key not in d and key in later.details:
                d[key] = later.details[key]
        if d.get("device") == "xla" and later.details.get("device") == "tpu":
            d["device"] = "tpu"  # a later line names the XLA device
    evidence = {"line": first.line, "quote": first.text, "occurrences": counts.get("oom", len(ooms)),
                "device": d.get("device")}
    for key in ("tried_bytes", "total_bytes", "free_bytes", "allocated_bytes", "reserved_bytes", "in_use_bytes",
                "reserved_unallocated_bytes", "framework"):
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
            sizes += f" on a {format_bytes(d['total_bytes'])} device with {format_bytes(d.get('free_bytes'))} free"
    where = _oom_device(d)
    if "rank" in d:
        where += f" (rank {d['rank']})"
    fragmented = ("reserved_unallocated_bytes" in d and d.get("tried_bytes")
                  and d["reserved_unallocated_bytes"] > d["tried_bytes"])
    recovery = _oom_recovery(last, events, series or {})
    actions = _oom_actions(ctx, fragmented, d)
    if recovery is None:
        return [Finding("oom", "error", f"Out of memory on {where}{sizes} (line {first.line}).", evidence, actions)]
    evidence.update(recovery)
    lowered = (f"; the batch was lowered to {recovery['batch_lowered_to']}" if "batch_lowered_to" in recovery
               else "")
    skipped = recovery.get("batches_skipped")
    skipped_text = f"; {skipped} batch(es) were skipped" if skipped else ""
    return [Finding("oom", "warning",
                    f"Out of memory on {where}{sizes} (line {first.line}), but the run recovered{skipped_text}"
                    f"{lowered} and trained on ({recovery['points_after']} logged point(s) after the last OOM).",
                    evidence, ["The run survived, but each OOM costs a batch (or a restart at a smaller batch): "
                               "plan the batch below the ceiling so it stops happening."] + actions)]


def survived_oom_note(events: list[LogEvent], findings: list[Finding]) -> str | None:
    """A note for allocator out-of-memory retries (TensorFlow's `failed to allocate ... CUDA_ERROR_OUT_OF_MEMORY`)
    that the run trained past: worth knowing (memory is tight), not the run's failure."""
    retries = [e for e in events if e.kind == "oom-retry"]
    if not retries or any(f.kind == "oom" for f in findings):
        return None
    return (f"{len(retries)} allocator out-of-memory retr{'y' if len(retries) == 1 else 'ies'} (line "
            f"{retries[0].line}: the allocator was refused a chunk and retried smaller); the run trained on past "
            "them: memory is tight, not a failure")


def _oom_device(d: dict) -> str:
    device = d.get("device")
    if device == "cpu":
        return "CPU"
    if device == "mps":
        return "Apple MPS"
    if device == "tpu":
        return "the TPU"
    if device == "xla":
        return "the XLA device"
    name = "GPU"
    return f"{name} {d['gpu']}" if "gpu" in d else ("the GPU" if device in ("cuda", "gpu") else "the device")


_SKIPS_BATCH = "skipping batch"


def _oom_recovery(last: LogEvent, events: list[LogEvent], series: dict[str, list[Point]]) -> dict | None:
    """How the run went on after its last OOM, or None when the OOM ended it (a crash or nothing logged after)."""
    if any(e.kind in ("crash", "signal", "killed") and e.line > last.line for e in events):
        return None
    losses = [p for name in (TRAIN_LOSS, VAL_LOSS, "train_loss_epoch") for p in series.get(name, [])
              if math.isfinite(p.value)]
    after = [p for p in losses if p.line > last.line]
    skips = [e for e in events if e.kind == "oom-skip" or (e.kind == "oom" and _SKIPS_BATCH in e.text.lower())]
    # A framework that says it skips the batch (fairseq) carries on: when training progress follows any of those
    # lines, the run is recovering, even if the log ends on one more skipped batch.
    progressed = any(p.line > skips[0].line for p in losses) if skips else False
    if not after and not (progressed and last.line <= skips[-1].line + 1):
        return None
    recovery: dict = {"recovered": True, "points_after": len(after)}
    skipped = len({e.line for e in skips if e.kind == "oom-skip"} | {e.line + 1 for e in skips if e.kind == "oom"})
    if skipped:
        recovery["batches_skipped"] = skipped
    lowered = [e.details["batch"] for e in events if e.kind == "batch-lowered"]
    if lowered:
        recovery["batch_lowered_to"] = lowered[-1]
    return recovery


def _oom_actions(ctx: Context, fragmented: bool, details: dict | None = None) -> list[str]:
    details = details or {}
    framework = details.get("framework") or ctx.framework
    device = details.get("device")
    if framework == "tensorflow":
        return ["TensorFlow ran out of memory: enable mixed precision "
                "(tf.keras.mixed_precision.set_global_policy('mixed_float16')).",
                "Let TensorFlow grow GPU memory instead of reserving it all "
                "(tf.config.experimental.set_memory_growth(gpu, True)), and do not keep several models alive.",
                "Check the input shapes in the message (the tensor it could not allocate): a resize bug or a "
                "padded long sequence is common.",
                "Only then lower the batch size and keep the global batch with gradient accumulation."]
    actions = []
    if device == "mps":
        actions.append("Apple MPS shares unified memory with the system: close other GPU users; "
                       "PYTORCH_MPS_HIGH_WATERMARK_RATIO raises the cap only at the risk of swapping the machine.")
    crowded = _others_on_the_gpu(details)
    if crowded:
        actions.append(crowded)
    precision = ctx.precision or "unknown"
    if precision in ("fp32", "unknown"):
        actions.append(("Then, in the training, enable mixed precision" if crowded else "Enable mixed precision first")
                       + " (torch.autocast with bf16 on Ampere+/Hopper, or fp16 with a GradScaler): it roughly "
                       "halves activation memory.")
    else:
        actions.append(f"Mixed precision ({precision}) is already on; go on with the next checks.")
    empty_cache = "torch.mps.empty_cache()" if device == "mps" else "torch.cuda.empty_cache()"
    alloc_conf = "PYTORCH_HIP_ALLOC_CONF" if framework == "rocm" else "PYTORCH_CUDA_ALLOC_CONF"
    actions += [
        "Look for tensors that keep the autograd graph alive: accumulate `loss.item()` (not `loss`) for logging, "
        "and do not store outputs or intermediates across steps for debugging.",
        f"Free what is no longer needed (`del` large tensors, then `{empty_cache}`)"
        + (": PyTorch holds reserved-but-unallocated memory larger than the request, a sign of fragmentation; "
           f"also try {alloc_conf}=expandable_segments:True." if fragmented else "."),
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


OTHERS_SHARE = 0.25  # other processes holding this share of the card or more: the first thing to free


def _others_on_the_gpu(details: dict) -> str | None:
    """The first action when PyTorch's message shows other processes filling the card: its total, what is free
    and what this process holds ("Including non-PyTorch memory, this process has ...") leave the rest to others."""
    total, free, own = (details.get(key) for key in ("total_bytes", "free_bytes", "in_use_bytes"))
    if not (total and own is not None and free is not None):
        return None
    others = total - free - own
    if others < OTHERS_SHARE * total:
        return None
    return (f"Other processes hold {format_bytes(others)} of this {format_bytes(total)} GPU (this run: "
            f"{format_bytes(own)}): free the GPU (nvidia-smi lists those processes) or move to an idle one before changing the "
            "training; the run may fit as it is.")


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


def _a_validation_pass_that_recovered(name: str, non_finite: dict[str, Point], series: dict[str, list[Point]]) -> bool:
    """A validation loss that was nan/inf at some evaluations and finite again at the later ones (at least one after
    its last non-finite value), while no training loss ever was: those evaluations went wrong (an empty or corrupt
    validation batch, an fp16 overflow in eval), the training they measure did not diverge (a diverged model stays
    non-finite: its validation never comes back)."""
    if name != VAL_LOSS or any(other in non_finite for other in (TRAIN_LOSS, "train_loss_epoch")):
        return False
    points = series.get(name, [])
    last_bad = max((p.line for p in points if not math.isfinite(p.value)), default=non_finite[name].line)
    return any(p.line > last_bad for p in points)


def detect_diverged(series: dict[str, list[Point]], events: list[LogEvent], counts: dict,
                    ctx: Context, non_finite: dict[str, Point] | None = None) -> list[Finding]:
    """Divergence from every signal, strongest first: a non-finite loss (any case: nan, NaN, inf, -Infinity);
    a gradient norm that stays non-finite; fp16 loss scaling collapsing (a run of overflows halving the scale
    to a small value, or overflows at the framework's floor); a loss that climbs far above where it started,
    or jumps several times its recent spread and stays there (judged on short epoch logs too).
    A loss stuck at one value is not divergence: detect_not_learning names it.
    """
    non_finite = non_finite or {}
    norms = series.get("grad_norm", [])
    bad_losses = [non_finite[name] for name in (TRAIN_LOSS, VAL_LOSS, "train_loss_epoch") if name in non_finite
                  and not _a_validation_pass_that_recovered(name, non_finite, series)]
    if bad_losses:
        bad = min(bad_losses, key=lambda p: p.line)
        # A gradient norm that went non-finite first is where it started (and the line to read).
        norm_bad = non_finite.get("grad_norm")
        if norm_bad is not None and norm_bad.line < bad.line:
            bad = norm_bad
        name = bad.name
        before = [p.value for p in series.get(name, []) if p.line < bad.line and math.isfinite(p.value)]
        where = _where([bad], 0)
        evidence = {"series": name, "first_non_finite": where, "value": str(bad.value),
                    "last_finite": before[-1] if before else None,
                    "max_before": max(before) if before else None}
        later = sorted({p.name for p in bad_losses if p.line > bad.line})
        if later:
            evidence["then_non_finite"] = later
        how = (f"became {bad.value} at {_describe(where)}, after {before[-1]:.4g}" if before else
               f"was {bad.value} from its first value, at {_describe(where)}")
        then = f" (then the {', the '.join(_series_words(n) for n in later)})" if later else ""
        return [Finding("diverged", "error", f"The {_series_words(name)} {how}{then}: training diverged.",
                        evidence, _diverged_actions(ctx))]
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
    train = _finite(series.get(TRAIN_LOSS, []) or series.get("train_loss_epoch", []))
    if len(train) >= MIN_POINTS:
        values = _values(train)
        k = max(3, len(values) // 10)
        # The first value counts on its own too: a run that explodes within three points has no calm start median.
        early_min = min(values[0], *(_median(values[i:i + 3]) for i in range(0, k)))
        start_level = min(values[0], _median(values[:3]))
        late = _median(values[-k:])
        # Ended far above where it started, nearly all of its last tenth, not its median only: a heavy-tailed step
        # loss (3.6e-8 to 27, the same median 0.005 in every fifth of the run) starts at a low draw and "ends above"
        # it with a third of its late values under that start.
        under_start = sum(v <= start_level for v in values[-k:]) / k
        if late > 3 * early_min and late > 1.5 * start_level and under_start <= LATE_UNDER_START:
            return [Finding("diverged", "error",
                            f"The training loss started at {start_level:.4g} and ends around {late:.4g} (peak "
                            f"{max(values):.4g}): training diverged.",
                            {"series": TRAIN_LOSS, "start": start_level, "early_min": early_min, "late_median": late,
                             "peak": max(values),
                             **_span(train, 0, len(train) - 1)}, _diverged_actions(ctx))]
        # Below zero as well: a loss that can go negative (a vocoder or flow term, an NLL) has no floor to settle
        # on, and one that ends EXPLOSION_FACTOR times further from zero than anything in its first tenth has run
        # off, not improved (a TTS loss 1.56 -> -1.8e9).
        early_size = max(abs(v) for v in values[:k])
        if late < 0 and abs(late) > EXPLOSION_FACTOR * early_size:
            return [Finding("diverged", "error",
                            f"The training loss started at {values[0]:.4g} and runs off below zero to about "
                            f"{late:.4g} (at most {early_size:.4g} in size over its first tenth): training diverged.",
                            {"series": TRAIN_LOSS, "start": values[0], "early_size": early_size,
                             "late_median": late, "lowest": min(values),
                             **_span(train, 0, len(train) - 1)}, _diverged_actions(ctx))]
    for name in (TRAIN_LOSS, VAL_LOSS):
        points = _finite(series.get(name, []) or (series.get("train_loss_epoch", []) if name == TRAIN_LOSS else []))
        index = _explosion(points)
        if index is not None:
            earlier = max(p.value for p in points[:index])
            return [Finding("diverged", "error",
                            f"The {'training' if name == TRAIN_LOSS else 'validation'} loss exploded from at most "
                            f"{earlier:.4g} to {points[index].value:.4g} at {_describe(_where(points, index))}: "
                            "training blew up.",
                            {"series": name, "max_before": earlier, "value": points[index].value,
                             "points_after": len(points) - index - 1, **_span(points, index, len(points) - 1)},
                            _diverged_actions(ctx), confidence="high" if len(points) - index >= 2 else "medium")]
    epoch_blow_up = _epoch_mean_blew_up(series, ctx) or _epoch_mean_climbed(series, ctx)
    if epoch_blow_up:
        return epoch_blow_up
    for name in (TRAIN_LOSS, VAL_LOSS):
        jump = _lasting_jump(_finite(series.get(name, []) or (series.get("train_loss_epoch", [])
                                                              if name == TRAIN_LOSS else [])))
        if jump:
            index, points, before, after = jump
            stayed = len(points) - index
            return [Finding("diverged", "error",
                            f"The {'training' if name == TRAIN_LOSS else 'validation'} loss jumped from about "
                            f"{before:.4g} to {after:.4g} at {_describe(_where(points, index))} and stayed there for "
                            f"{stayed} point(s): training blew up.",
                            {"series": name, "level_before": round(before, 6), "level_after": round(after, 6),
                             "points_after": stayed, **_span(points, index, len(points) - 1)},
                            _diverged_actions(ctx), confidence="high" if stayed >= 4 else "medium")]
    return []


CHANCE_ACC_SPREAD = 0.3  # accuracies within this share of 1/K of their median (or 0.02) never left chance
DEAD_AT_CHANCE = 0.85  # after a blow-up, a loss at or above this share of ln K is back at chance, not recovered
DEAD_NO_FALL = 0.1  # ... and falls less than this share over the rest of the run
# A loss high from its first logged value (nothing before it to compare with: ln K is the only reference) has
# blown up only if that value is EXPLOSION_FACTOR times where the loss then sits (3e7 -> 19), or the loss then sits
# on ln K's scale, at most this many times ln K (2.6e18 -> 2.76 = 1.2x ln 10). One that falls 82 -> 35 and sits at
# 10x ln K is a loss on another scale (a sum of several tasks' losses) falling from its initialisation.
DEAD_CHANCE_CEILING = 2.0
DEAD_MIN_AFTER = 3  # points after the blow-up, at least, to say where the loss settled
# A loss this many times ln K at any point of a run whose accuracy never left chance has blown up (a model that never
# moved from its initialisation sits at ln K): a logger that records every Nth step can miss the peak (7e8 between
# two logged steps showed as 27.9, 12x ln 10), so the bar is one order of magnitude, not EXPLOSION_FACTOR's two.
CHANCE_EXPLOSION = 10.0
# A training loss this many times ln K for the whole run, the accuracy at chance throughout: blown up before the
# first log. The same order of magnitude: a loss stuck at 3-7x ln K (a language model's token accuracy near 1/2,
# its loss 4.69 = 7x ln 2) has not learned, it has not diverged.
ABOVE_CHANCE = CHANCE_EXPLOSION


def chance_loss(series: dict[str, list[Point]], ctx: Context) -> tuple[float, int, str, list[float]] | None:
    """(ln K, K, where K came from, the accuracies) for a classifier whose accuracy never left chance: K from
    --classes, else 1/accuracy when every validation (or training) accuracy sits within CHANCE_ACC_SPREAD of 1/K of
    their median. None when the log shows no such accuracy: a classifier that learned (a training accuracy off
    chance says the model fits its data, however poor validation is), or no accuracy at all."""
    found = None
    for name in ("val_acc", "train_acc"):
        accs = [p.value for p in series.get(name, []) if math.isfinite(p.value)]
        if len(accs) < STUCK_FEW_POINTS:
            continue
        accs = _as_fraction(accs)
        level = _median(accs)
        if not 0 < level <= 0.5:
            continue
        # 1/accuracy is noisy (0.089 gives 11): a common class count that the accuracy sits at is the likelier K.
        common = [c for c in COMMON_CLASS_COUNTS if abs(level - 1 / c) <= max(0.02, CHANCE_ACC_SPREAD / c)]
        k = ctx.classes if ctx.classes and ctx.classes >= 2 else (
            min(common, key=lambda c: abs(level - 1 / c)) if common else round(1 / level))
        chance = 1 / k
        at_chance = all(abs(a - chance) <= max(0.02, CHANCE_ACC_SPREAD * chance) for a in accs)
        if found is None and at_chance:
            found = math.log(k), k, "stated (--classes)" if ctx.classes else f"{name} {level:.3g} = 1/K", accs
        elif name == "train_acc" and not at_chance:
            return None
    return found


def _spike(values: list[float]) -> int | None:
    """Index of the first value EXPLOSION_FACTOR times above every value before it (orders of magnitude)."""
    earlier = abs(values[0]) if values else 0.0  # a running maximum: one pass over a 4,000-point series
    for index in range(1, len(values)):
        if earlier > 0 and values[index] >= EXPLOSION_FACTOR * earlier:
            return index
        earlier = max(earlier, abs(values[index]))
    return None


def _falls_over_run(values: list[float]) -> bool:
    """The loss falls over the run: its last third's median DEAD_NO_FALL or more of its level below its first
    third's. A model whose weights blew up does not learn; a loss falling steadily far above ln K is a large-vocabulary
    model learning slowly (its "chance" accuracy, the most frequent token, names no class count)."""
    third = max(1, len(values) // 3)
    first, last = _median(values[:third]), _median(values[-third:])
    return first - last > DEAD_NO_FALL * abs(last)


THROWN_MIN_EPOCHS = 8  # per-epoch pairs of training and validation loss needed to judge a run thrown around
THROWN_TRAIN_SWING = 0.05  # the training loss's epoch means moving this share epoch to epoch (median) ...
THROWN_VAL_SWING = 0.2  # ... and the validation loss this share (median), ...
THROWN_NO_PROGRESS = 0.85  # ... while the training loss's last third is at or above this share of its first third


def _relative_swing(values: list[float]) -> float:
    """The median epoch-to-epoch move of a positive curve, as a share of the value it moved from."""
    return _median([abs(b - a) / a for a, b in zip(values, values[1:])])


def _thrown_around(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """Per-epoch losses the optimizer throws around without progress: the training loss's epoch means swing
    (THROWN_TRAIN_SWING) and its last third is no lower than its first (THROWN_NO_PROGRESS), while the validation
    loss jumps between evaluations (THROWN_VAL_SWING). An epoch mean averages a whole epoch's batches: a stable
    model's moves little (a stuck one hardly at all), a learning one falls; one that swings and gets nowhere has an
    LR far too high (or inputs in raw units) -- divergence that never produced a NaN. Per-epoch: a series the log
    counts by epoch, or training and validation logged one to one."""
    name = "train_loss_epoch" if series.get("train_loss_epoch") else TRAIN_LOSS
    train, val = _finite(series.get(name, [])), _finite(series.get(VAL_LOSS, []))
    per_epoch = name == "train_loss_epoch" or all(p.cadence == "epoch" for p in train) or len(train) == len(val)
    if not per_epoch or min(len(train), len(val)) < THROWN_MIN_EPOCHS:
        return []
    t, v = _values(train), _values(val)
    if min(t) <= 0 or min(v) <= 0:
        return []
    third = len(t) // 3
    first, last = _median(t[:third]), _median(t[-third:])
    train_swing, val_swing = _relative_swing(t), _relative_swing(v)
    if train_swing < THROWN_TRAIN_SWING or val_swing < THROWN_VAL_SWING or last < THROWN_NO_PROGRESS * first:
        return []
    evidence = {"series": name, "epochs": len(t), "train_epoch_swing": round(train_swing, 3),
                "val_epoch_swing": round(val_swing, 3), "first_third_median": round(first, 6),
                "last_third_median": round(last, 6), **_span(train, 0, len(train) - 1)}
    return [Finding("diverged", "error",
                    f"The training loss's epoch values swing by {train_swing:.0%} from epoch to epoch (median) and get "
                    f"nowhere over {len(t)} epochs ({first:.4g} in the first third, {last:.4g} in the last), while "
                    f"the validation loss jumps by {val_swing:.0%} between evaluations: the optimizer throws the "
                    "weights around instead of converging -- divergence without a NaN (the learning rate is far too "
                    "high, or the inputs are unscaled).",
                    evidence, _diverged_actions(ctx), confidence="medium")]


def detect_blown_up(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """A run the optimizer destroyed, whatever its loss does afterwards (the newcomer's SGD at LR 5 and LR 50 of
    issue 37): (1) the loss rose by orders of magnitude (EXPLOSION_FACTOR) and then sat at chance: at or above
    DEAD_AT_CHANCE of ln K with the accuracy at 1/K, or, with no accuracy, never back under the level it had before
    the blow-up, and not falling; (2) the loss sat ABOVE_CHANCE times ln K or more, with the accuracy at chance,
    for the whole run, not falling over it (_falls_over_run): worse than guessing, the weights blew up before the
    first logged value."""
    chance = chance_loss(series, ctx)
    for name in (TRAIN_LOSS, "train_loss_epoch", VAL_LOSS):
        points = _finite(series.get(name, []))
        values = _values(points)
        index = _spike(values)
        if index is None or len(values) - index - 1 < DEAD_MIN_AFTER:
            continue
        after = values[index + 1:]
        settled = _median(after[len(after) // 2:])
        third = max(1, len(after) // 3)
        falling = _median(after[:third]) - _median(after[-third:]) > DEAD_NO_FALL * settled
        # Without an accuracy, the spike must also stand orders of magnitude above the run as a whole (its upper
        # quartile): in a jittery excerpt whose first value is ~0, every large batch loss is "100x every value
        # before it", and a third of them are as large.
        at_chance = (settled >= DEAD_AT_CHANCE * chance[0] if chance
                     else settled >= (1 - DEAD_NO_FALL) * min(values[:index])
                     and values[index] >= EXPLOSION_FACTOR * sorted(values)[3 * len(values) // 4])
        if falling or not at_chance:
            continue
        return [_blown_up_finding(name, points, index, settled, chance, ctx)]
    dead = _exploded_past_chance(series, chance)
    if dead:
        name, points, index, settled = dead
        return [_blown_up_finding(name, points, index, settled, chance, ctx)]
    if chance:
        ln_k, k, source, accs = chance
        # The training loss only: a validation loss far above ln K is also what an overconfident overfit model shows.
        for name in (TRAIN_LOSS, "train_loss_epoch"):
            points = _finite(series.get(name, []))
            if (len(points) >= STUCK_FEW_POINTS and _median(_values(points)) >= ABOVE_CHANCE * ln_k
                    and not _falls_over_run(_values(points))):
                level = _median(_values(points))
                evidence = {"series": name, "loss_level": round(level, 5), "ln_classes": round(ln_k, 4),
                            "classes": k, "classes_from": source, "accuracy": round(_median(accs), 4),
                            "accuracy_points": len(accs), **_span(points, 0, len(points) - 1)}
                return [Finding("diverged", "error",
                                f"The {_series_words(name)} sits around {level:.4g}, {level / ln_k:.0f}x the "
                                f"ln({k}) = {ln_k:.3g} a model that guesses would score, with the accuracy at chance "
                                f"({_median(accs):.3g}, about 1/{k}) throughout: the weights blew up and the model never "
                                "learned (the learning rate is far too high).",
                                evidence, _diverged_actions(ctx),
                                confidence="high" if len(accs) >= 5 and len(points) >= 5 else "medium")]
    return []


GIVE_BACK_ALL = 1.0  # the last quarter back at (or above) the loss's start: all of its best decrease given back
GIVE_BACK_MIN_DECREASE = 0.2  # ... after a smoothed best decrease of at least this share of the start: it had learned
GIVE_BACK_MIN_POINTS = 8
GIVE_BACK_TO_NOISE = 4.0  # ... and at least this many times the curve's point-to-point noise (a dip in jitter is none)
COLLAPSE_LEARNED = 0.5  # an accuracy that rose this share of the way from chance to 1 had learned ...
COLLAPSE_TAIL = 3  # ... and then sat at chance for its last this many evaluations (or its last quarter): dead


def _smoothed_best(values: list[float]) -> tuple[int, float]:
    """(index, value) of the lowest point of the curve's running median (width n/20, at least 5; 3 below 20 points,
    where each point is already an epoch's mean but one low point is no level), searched before the last quarter."""
    width = max(5, len(values) // 20) | 1 if len(values) >= MIN_POINTS else 3
    half = width // 2
    head = values[:len(values) - max(1, len(values) // 4)]
    smoothed = [_median(values[max(0, i - half):i + half + 1]) for i in range(len(head))]
    index = min(range(len(smoothed)), key=smoothed.__getitem__)
    return index, smoothed[index]


def _gave_back(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """A training loss that fell (its smoothed best at least GIVE_BACK_MIN_DECREASE below its start) and then gave
    ALL of that decrease back: its last quarter's median at or above the start (DOMAIN "the loss gives back most of
    its best decrease late in the run"; the trials' health verdict calls half unstable, method/health.py; a log
    from the world is noisier and may hold a schedule's restart, so here the bar is the whole decrease, held over
    the last quarter). The start is the higher of the first three points' median and the first tenth's (a per-step
    loss falls fast at first). A loss back where an untrained model starts is a dead model, whatever it did before."""
    for name in (TRAIN_LOSS, "train_loss_epoch"):
        points = _finite(series.get(name, []))
        if len(points) < GIVE_BACK_MIN_POINTS or not _from_run_start(points):
            continue
        values = _values(points)
        start = max(_median(values[:3]), _median(values[:max(1, len(values) // 10)]))
        index, best = _smoothed_best(values)
        last_quarter = values[len(values) - max(2, len(values) // 4):]
        # Under MIN_POINTS (epoch means, a handful): every point of the last quarter back up, not one late spike.
        end = _median(last_quarter) if len(values) >= MIN_POINTS else min(last_quarter)
        decrease = start - best
        if start <= 0 or decrease < max(GIVE_BACK_MIN_DECREASE * start, GIVE_BACK_TO_NOISE * _trend_and_noise(values)[1]):
            continue
        share = (end - best) / decrease
        if share < GIVE_BACK_ALL:
            continue
        evidence = {"series": name, "start": round(start, 6), "best_smoothed": round(best, 6),
                    "best_at": _where(points, index), "end_median": round(end, 6), "gave_back": round(share, 3),
                    **_span(points, index, len(points) - 1)}
        return [Finding("diverged", "error",
                        f"The {_series_words(name)} fell from {start:.4g} to {best:.4g} (smoothed) by "
                        f"{_describe(_where(points, index))}, then gave all of it back: its last quarter sits at "
                        f"{end:.4g}, {share:.0%} of the decrease: training diverged (LR too high) and the model is "
                        "back where an untrained one starts.",
                        evidence, _diverged_actions(ctx), confidence="high" if len(values) >= MIN_POINTS else "medium")]
    return []


# A run that diverged upwards has at most this share of its last tenth back at its start level. Over the 1011 corpus
# and test inputs (2026-12-08), the 13 runs this climb rule called diverged had 0 (12 runs) and 0.05; the heavy-tailed
# step loss it wrongly called so (world batch 18, labelled not-learning) 0.27.
LATE_UNDER_START = 0.1
CLIMB_TO_BEST = 3.0  # a training loss climbing steadily off its smoothed best by this many times that best ...
CLIMB_TO_NOISE = 5.0  # ... the climb (Theil-Sen, over every point after the best) this many times its noise
CLIMB_GIVE_BACK = 0.25  # ... and this share of its decrease from the start given back (a loss at ~0 may creep)


def _climbed_from_best(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """A training loss that climbs steadily from its smoothed best to several times it, giving back a quarter of its
    decrease: over the MIN_POINTS+ points after the best, the Theil-Sen trend rises CLIMB_TO_BEST times the best,
    CLIMB_TO_NOISE times the noise around the trend (a steady climb, not spikes: a jittering loss's end sits as high,
    but its trend is flat against its noise) and CLIMB_GIVE_BACK of the fall from the start (_gave_back's bar, all
    of it, lowered for a steady climb; a loss memorised to 1e-8 creeping to 1e-3 gives back nothing). The model is
    driven away from what it learned, without a nan: a slow divergence. A warning: a schedule that raises the loss on
    purpose (a growing KL weight, an added term) climbs the same way."""
    for name in (TRAIN_LOSS, "train_loss_epoch"):
        points = _finite(series.get(name, []))
        if len(points) < 2 * MIN_POINTS:
            continue
        values = _values(points)
        index, best = _smoothed_best(values)
        after = values[index:]
        if best <= 0 or len(after) < MIN_POINTS:
            continue
        climb = _theil_sen(after) * (len(after) - 1)
        noise = _trend_and_noise(after)[1]
        start = max(_median(values[:3]), _median(values[:max(1, len(values) // 10)]))
        if climb < max(CLIMB_TO_BEST * best, CLIMB_TO_NOISE * noise, CLIMB_GIVE_BACK * (start - best)):
            continue
        evidence = {"series": name, "best_smoothed": round(best, 6), "best_at": _where(points, index),
                    "climb": round(climb, 6), "noise_sigma": round(noise, 6), **_span(points, index, len(points) - 1)}
        return [Finding("diverged", "warning",
                        f"The {_series_words(name)} climbs steadily from its best, {best:.4g} (smoothed) at "
                        f"{_describe(_where(points, index))}, to about {best + climb:.3g} by "
                        f"{_describe(_where(points, len(points) - 1))}, a rise of {climb:.2g} ({climb / best:.1f}x "
                        f"that best, {climb / noise if noise else float('inf'):.0f}x its noise): training is "
                        "diverging slowly.",
                        evidence, _diverged_actions(ctx), confidence="medium")]
    return []


def _collapsed_to_chance(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """An accuracy that learned (rose COLLAPSE_LEARNED of the way from chance to 1) and then fell back to chance,
    1/K, for its last COLLAPSE_TAIL+ evaluations (its last quarter when longer), while a loss rose off its best: the
    model was destroyed (an LR too high after the warmup, typically) and predicts no better than a guess. K is the
    common class count the tail sits at (or --classes)."""
    for name in ("val_acc", "train_acc"):
        points = _finite(series.get(name, []))
        tail_n = max(COLLAPSE_TAIL, len(points) // 4)
        if len(points) < tail_n + 2:
            continue
        accs = _as_fraction(_values(points))
        tail = accs[-tail_n:]
        chance = chance_loss({name: [Point(p.line, name, a) for p, a in zip(points[-tail_n:], tail)]}, ctx) \
            if len(tail) >= STUCK_FEW_POINTS else _tail_chance(tail, ctx)
        if not chance:
            continue
        ln_k, k = chance[0], chance[1]
        best = max(accs[:-tail_n])
        if best < 1 / k + COLLAPSE_LEARNED * (1 - 1 / k) or not _a_loss_rose(series):
            continue
        at = accs.index(best)
        evidence = {"series": name, "best_accuracy": round(best, 4), "best_at": _where(points, at),
                    "tail_accuracy": round(_median(tail), 4), "tail_points": len(tail), "classes": k,
                    "ln_classes": round(ln_k, 4), **_span(points, at, len(points) - 1)}
        return [Finding("diverged", "error",
                        f"The {'validation' if name == 'val_acc' else 'training'} accuracy reached {best:.3g} at "
                        f"{_describe(_where(points, at))}, then fell back to chance ({_median(tail):.3g}, about 1/{k}) "
                        f"for its last {len(tail)} evaluations while the loss rose: training diverged and the model is "
                        "dead.", evidence, _diverged_actions(ctx), confidence="high" if len(tail) >= 4 else "medium")]
    return []


def _tail_chance(tail: list[float], ctx: Context) -> tuple[float, int] | None:
    """(ln K, K) when every accuracy of a short tail sits at 1/K (CHANCE_ACC_SPREAD), K stated or a common count."""
    level = _median(tail)
    if not 0 < level <= 0.5:
        return None
    common = [c for c in COMMON_CLASS_COUNTS if abs(level - 1 / c) <= max(0.02, CHANCE_ACC_SPREAD / c)]
    k = ctx.classes if ctx.classes and ctx.classes >= 2 else (min(common, key=lambda c: abs(level - 1 / c))
                                                              if common else None)
    if not k or not all(abs(a - 1 / k) <= max(0.02, CHANCE_ACC_SPREAD / k) for a in tail):
        return None
    return math.log(k), k


def _a_loss_rose(series: dict[str, list[Point]]) -> bool:
    """A loss curve whose last quarter sits above its best by more than a tenth of that best."""
    for name in (TRAIN_LOSS, "train_loss_epoch", VAL_LOSS):
        values = _values(_finite(series.get(name, [])))
        if len(values) >= 4:
            end = _median(values[len(values) - max(2, len(values) // 4):])
            if end > 1.1 * min(values):
                return True
    return False


def _jumped_then_frozen(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """A per-epoch loss (validation, or training's epoch means: averages, free of batch noise) that jumps
    EXPLOSION_FACTOR times above its recent level (the median of the three points before: orders of magnitude,
    whatever came earlier), after which it never gets back under the level it had before the jump and does not
    fall (DEAD_NO_FALL), while the training loss sits frozen over the second half of the stretch after it
    (_unmoved): the jump destroyed the model, which now outputs a constant. A per-step loss is not read here: batch
    1 jumps 0.001 -> 0.3 from sample to sample."""
    train = _finite(series.get("train_loss_epoch", []) or series.get(TRAIN_LOSS, []))
    for name in (VAL_LOSS, "train_loss_epoch"):
        points = _finite(series.get(name, []))
        if len(points) < 2 * DEAD_MIN_AFTER or cadence_of(points) != "epoch":
            continue
        values = _values(points)
        for index in range(1, len(values) - DEAD_MIN_AFTER):
            recent = _median(values[max(0, index - 3):index])
            if recent <= 0 or values[index] < EXPLOSION_FACTOR * recent:
                continue
            after = values[index + 1:]
            settled, third = _median(after[len(after) // 2:]), max(1, len(after) // 3)
            if (settled < (1 - DEAD_NO_FALL) * min(values[:index])
                    or _median(after[:third]) - _median(after[-third:]) > DEAD_NO_FALL * settled):
                continue
            kind, at = _position(points[index])
            later = [p for p in train if _position(p)[0] == kind and _position(p)[1] > at]
            if len(later) < 2 * DEAD_MIN_AFTER or not _unmoved(later[len(later) // 2:]):
                continue
            evidence = {"series": name, "level_before": round(recent, 6), "value": values[index],
                        "settled_at": round(settled, 6), "best_before": round(min(values[:index]), 6),
                        "points_after": len(after), **_span(points, index, len(points) - 1)}
            return [Finding("diverged", "error",
                            f"The {_series_words(name)} jumped from about {recent:.4g} to {values[index]:.4g} at "
                            f"{_describe(_where(points, index))} ({values[index] / recent:.3g}x), then sat at "
                            f"{settled:.4g}, never better than the {min(values[:index]):.4g} it had before, while the "
                            "training loss stays frozen: training blew up and the model is dead (it outputs a "
                            "constant).", evidence, _diverged_actions(ctx), confidence="medium")]
    return []


def _exploded_past_chance(series: dict[str, list[Point]], chance) -> tuple[str, list[Point], int, float] | None:
    """(series, points, index, settled level) for a classifier at chance whose loss reached CHANCE_EXPLOSION times
    ln K (the loss a guessing model scores: the reference when the blow-up came at the first logged value, with
    nothing before it to compare with) and then sat at chance, not falling (DEAD_AT_CHANCE, DEAD_NO_FALL): the
    same dead model as a spike after a calm start."""
    if not chance:
        return None
    ln_k = chance[0]
    for name in (TRAIN_LOSS, "train_loss_epoch", VAL_LOSS):
        points = _finite(series.get(name, []))
        values = _values(points)
        index = next((i for i, v in enumerate(values) if v >= CHANCE_EXPLOSION * ln_k), None)
        if index is None or len(values) - index - 1 < DEAD_MIN_AFTER:
            continue
        after = values[index + 1:]
        settled = _median(after[len(after) // 2:])
        third = max(1, len(after) // 3)
        if index == 0 and settled > DEAD_CHANCE_CEILING * ln_k and values[0] < EXPLOSION_FACTOR * settled:
            continue
        if settled >= DEAD_AT_CHANCE * ln_k and _median(after[:third]) - _median(after[-third:]) <= DEAD_NO_FALL * settled:
            return name, points, index, settled
    return None


def _fell_or_rose(share: float, fell: str = "fell") -> str:
    """A change given as a share of the start, fall positive (_moved, _relative_drop), in words: a sign left to
    the reader ("+0.1%") reads as a rise."""
    if round(abs(share), 3) == 0:
        return f"moved {abs(share):.1%}"
    return f"{fell} {share:.1%}" if share > 0 else f"rose {-share:.1%}"


def _series_words(name: str) -> str:
    return {TRAIN_LOSS: "training loss", "train_loss_epoch": "per-epoch training loss",
            VAL_LOSS: "validation loss", "grad_norm": "gradient norm"}.get(name, name)


def _blown_up_finding(name: str, points: list[Point], index: int, settled: float, chance, ctx: Context) -> Finding:
    values = _values(points)
    before = max(values[:index]) if index else None
    evidence = {"series": name, "max_before": before, "value": values[index], "settled_at": round(settled, 5),
                "points_after": len(values) - index - 1, **_span(points, index, len(points) - 1)}
    if chance:
        ln_k, k, source, accs = chance
        evidence.update({"ln_classes": round(ln_k, 4), "classes": k, "classes_from": source,
                         "accuracy": round(_median(accs), 4)})
        where = (f"then sat at {settled:.4g}, chance for a {k}-way classifier (ln {k} = {ln_k:.3g}, accuracy "
                 f"{_median(accs):.3g})")
    else:
        where = f"then sat at {settled:.4g}, never back under the {min(values[:index]):.4g} it had before"
    confident = chance is not None and len(values) - index - 1 >= 5
    exploded = (f"exploded from at most {before:.4g} to {values[index]:.4g}" if before is not None else
                f"was {values[index]:.4g}, {values[index] / chance[0]:.3g}x the loss of a guessing model,")
    return Finding("diverged", "error",
                   f"The {_series_words(name)} {exploded} at "
                   f"{_describe(_where(points, index))} and {where}: training diverged and the model is dead, "
                   "whatever the loss does afterwards.",
                   evidence, _diverged_actions(ctx), confidence="high" if confident else "medium")


def _lasting_jump(points: list[Point]) -> tuple[int, list[Point], float, float] | None:
    """(index, points, level before, level after) of a jump far above the spread before it that never comes
    back, with at least two points after it; None otherwise. Works on a handful of epoch points."""
    values = _values(points)
    for index in (1, 2):  # one or two points before the jump: judged against the steady level after it
        before, after = values[:index], values[index:]
        if len(after) < JUMP_FEW_AFTER:
            break
        low_after, high_before = min(after), max(before)
        if (high_before > 0 and low_after >= JUMP_FEW_FACTOR * high_before
                and low_after - high_before > JUMP_TO_SPREAD * (max(after) - low_after)):
            return index, points, _median(before), _median(after)
    # One pass: the running maximum, minimum and median of the values before each index (two heaps) and the
    # minimum of the values from it on (a suffix minimum), instead of slicing and sorting at every index.
    suffix_min = _suffix_minima(values)
    below = _MedianHeaps()
    for value in values[:3]:
        below.push(value)
    high, low = max(values[:3], default=0.0), min(values[:3], default=0.0)
    for index in range(3, len(values) - 1):
        level = below.median()
        spread = max(high - low, 1e-12)
        low_after = suffix_min[index]
        if low_after - high > JUMP_TO_SPREAD * spread and low_after - level > JUMP_TO_LEVEL * abs(level):
            return index, points, level, _median(values[index:])
        below.push(values[index])
        high, low = max(high, values[index]), min(low, values[index])
    return None


def _suffix_minima(values: list[float]) -> list[float]:
    """suffix[i] = min(values[i:]), in one pass from the end."""
    out = [0.0] * len(values)
    running = math.inf
    for index in range(len(values) - 1, -1, -1):
        running = min(running, values[index])
        out[index] = running
    return out


class _MedianHeaps:
    """The median of the values pushed so far, in O(log n) a push: a max-heap of the lower half, a min-heap of the
    upper half."""

    def __init__(self):
        self.lower: list[float] = []  # negated: heapq is a min-heap
        self.upper: list[float] = []

    def push(self, value: float) -> None:
        if self.lower and value > -self.lower[0]:
            heapq.heappush(self.upper, value)
        else:
            heapq.heappush(self.lower, -value)
        if len(self.lower) > len(self.upper) + 1:
            heapq.heappush(self.upper, -heapq.heappop(self.lower))
        elif len(self.upper) > len(self.lower):
            heapq.heappush(self.lower, -heapq.heappop(self.upper))

    def median(self) -> float:
        if len(self.lower) > len(self.upper):
            return -self.lower[0]
        return (-self.lower[0] + self.upper[0]) / 2


def _explosion(points: list[Point]) -> int | None:
    """Index of a point EXPLOSION_FACTOR times above every point before it (orders of magnitude: 0.85 -> 63118,
    0.16 -> 1.6e18), after which the loss never comes back under that factor of its earlier maximum. Judged on
    any number of points, the last included: such a value is a blow-up whatever follows."""
    values = _values(points)
    suffix_min = _suffix_minima(values)  # "never comes back under": the minimum from each index on, one pass
    earlier = abs(values[0]) if values else 0.0
    for index in range(1, len(values)):
        if index > 1:
            earlier = max(earlier, abs(values[index - 1]))  # a running maximum of the values before index
        if earlier <= 0 or values[index] < EXPLOSION_FACTOR * earlier:
            continue
        if suffix_min[index] >= EXPLOSION_STAYS * earlier:
            return index
    return None


EPOCH_BLOW_UP_LASTS = 2  # epochs, at least, at EXPLOSION_STAYS x the earlier maximum or more: not one bad epoch


def _epoch_mean_blew_up(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """The training loss's epoch means (a per-epoch series) jumping EXPLOSION_FACTOR times above every earlier one and
    staying EXPLOSION_STAYS times above it for EPOCH_BLOW_UP_LASTS+ epochs is divergence even when the loss later comes
    back (_explosion asks that it never does): an epoch mean averages the whole epoch's batches, so a 100x epoch is
    the weights thrown orders of magnitude off, not one bad batch, and where they land after is a new start (a
    regression at SGD LR 0.5: 1.7 -> 59,000 -> back to 1.05, the predict-the-mean level)."""
    found = epoch_loss_curve(series, 3)
    if found is None:
        return []
    name, points = found
    values = _values(points)
    for index in range(1, len(values) - EPOCH_BLOW_UP_LASTS + 1):
        earlier = max(abs(v) for v in values[:index])
        if earlier <= 0 or values[index] < EXPLOSION_FACTOR * earlier:
            continue
        lasted = values[index:index + EPOCH_BLOW_UP_LASTS]
        if min(lasted) < EXPLOSION_STAYS * earlier:
            continue
        return [Finding("diverged", "error",
                        f"The training loss's epoch mean jumped from at most {earlier:.4g} to {values[index]:.4g} at "
                        f"{_describe(_where(points, index))} and stayed {EXPLOSION_STAYS:g}x+ above it for "
                        f"{EPOCH_BLOW_UP_LASTS}+ epochs (it ends at {values[-1]:.4g}): training blew up; what it came "
                        "back to is a restart from thrown-off weights, not the run's progress.",
                        {"series": name, "max_before": earlier, "value": values[index], "last": values[-1],
                         "points_after": len(points) - index - 1, **_span(points, index, len(points) - 1)},
                        _diverged_actions(ctx), confidence="medium")]
    return []


EPOCH_CLIMB_FACTOR = 10.0  # epoch means this many times the lowest one before them ...
EPOCH_CLIMB_LASTS = 3  # ... at each of the run's last this many epochs: an order of magnitude off its best, held


def _epoch_mean_climbed(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """The training loss's epoch means (a per-epoch series, EPOCH_CLIMB_LASTS + 3 or more) each EPOCH_CLIMB_FACTOR
    times the lowest epoch mean before them or more over the run's last EPOCH_CLIMB_LASTS epochs: the loss climbed an
    order of magnitude off the best the same model had already reached, and stayed there. An epoch mean averages the
    whole epoch's batches, and fitting the training set harder (overfitting) only lowers it; ten times its best for
    epochs on end is the weights being thrown off, whatever the run's first epoch was (a regressor on unscaled
    targets: 1e13 at its first epoch, 1.6e8 at its fifth, then 1.7e9, 5.4e9, 1.1e10, 1.2e10: diverged, though never
    above its start nor 100x above every earlier epoch, what _gave_back and _epoch_mean_blew_up ask)."""
    found = epoch_loss_curve(series, 3)
    if found is None:
        return []
    name, points = found
    values = _values(points)
    if len(values) < EPOCH_CLIMB_LASTS + 3:
        return []
    head = values[:-EPOCH_CLIMB_LASTS]
    index = min(range(len(head)), key=head.__getitem__)
    lowest = head[index]
    if lowest < CONVERGED_LEVEL or min(values[-EPOCH_CLIMB_LASTS:]) < EPOCH_CLIMB_FACTOR * lowest:
        return []
    return [Finding("diverged", "error",
                    f"The training loss's epoch mean fell to {lowest:.4g} at {_describe(_where(points, index))}, then "
                    f"climbed to {values[-1]:.4g}: each of its last {EPOCH_CLIMB_LASTS} epochs is "
                    f"{EPOCH_CLIMB_FACTOR:g}x+ above that best (the lowest {min(values[-EPOCH_CLIMB_LASTS:]):.4g}): "
                    "training diverged.",
                    {"series": name, "lowest": lowest, "lowest_at": _where(points, index), "last": values[-1],
                     "lowest_of_last": min(values[-EPOCH_CLIMB_LASTS:]), **_span(points, index, len(points) - 1)},
                    _diverged_actions(ctx), confidence="medium")]


WORSE_ON_BOTH = 1.2  # every later loss this many times its curve's first value, training and validation alike
WORSE_MIN_POINTS = 4


def _worse_than_start_on_both(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """The training loss (epoch means where logged) and the validation loss, 4+ points each, every value after the
    first at least WORSE_ON_BOTH times that first value: the run is worse on its training data and on held-out data
    than when it started, and never came back near it. Overfitting lowers the training loss, a model that does not
    learn stays level; both curves thrown above their start is the optimizer throwing the weights off (an LR warmed
    up far too high): diverged, though nothing reached nan or jumped 100x."""
    train = _finite(series.get("train_loss_epoch", []) or series.get(TRAIN_LOSS, []))
    val = _finite(series.get(VAL_LOSS, []))
    if len(train) < WORSE_MIN_POINTS or len(val) < WORSE_MIN_POINTS:
        return []
    t, v = _values(train), _values(val)
    if t[0] <= 0 or v[0] <= 0 or min(t[1:]) < WORSE_ON_BOTH * t[0] or min(v[1:]) < WORSE_ON_BOTH * v[0]:
        return []
    evidence = {"train_first": round(t[0], 6), "train_lowest_after": round(min(t[1:]), 6),
                "val_first": round(v[0], 6), "val_lowest_after": round(min(v[1:]), 6),
                "train_points": len(t), "val_points": len(v), **_span(train, 0, len(train) - 1)}
    return [Finding("diverged", "error",
                    f"Both losses only got worse: training from {t[0]:.4g} to {min(t[1:]):.4g}-{max(t[1:]):.4g}, "
                    f"validation from {v[0]:.4g} to {min(v[1:]):.4g}-{max(v[1:]):.4g}, never back within "
                    f"{WORSE_ON_BOTH - 1:.0%} of where they started: the weights were thrown off (training diverged).",
                    evidence, _diverged_actions(ctx), confidence="medium")]


def _framework_floor(ctx: Context, events: list[LogEvent]) -> tuple[str | None, float | None]:
    framework = ctx.framework or next((e.details.get("framework") for e in events
                                       if e.kind == "overflow" and e.details.get("framework")), None)
    return framework, LOSS_SCALE_FLOORS.get(framework or "")


def _loss_scale_collapse(scales: list[Point], events: list[LogEvent], counts: dict, ctx: Context
                         ) -> Finding | None:
    overflows = [e for e in events if e.kind == "overflow"]
    at_floor = counts.get("loss-scale-floor", 0) > 0
    framework, floor_value = _framework_floor(ctx, events)
    # The scale as logged (Megatron, fairseq, DLLogger columns) or as the overflow messages report it. A logged
    # 0 is a small scale rounded by the printer (fairseq's "loss_scale 0"), not a scale of 0: it is not read.
    logged = [p.value for p in scales if math.isfinite(p.value) and p.value > 0]
    from_events = [e.details["reduced"] for e in overflows if "reduced" in e.details]
    if not from_events:  # "Attempted loss scale: N" alone (DeepSpeed, apex's old FP16_Optimizer)
        from_events = [e.details["attempted"] for e in overflows if "attempted" in e.details]
    elif overflows[0].details.get("attempted"):
        from_events.insert(0, overflows[0].details["attempted"])
    for source, values in (("overflow messages", from_events), ("logged loss scale", logged)):
        run, before, after = _halving_run(values)
        # At the floor only counts while overflows keep coming there: one overflow an epoch at scale 1.0 is a
        # converged fp16 run breathing, not a divergence.
        floor = source == "overflow messages" and _overflows_at_floor(overflows, floor_value)
        small = LOSS_SCALE_SMALL if floor_value is None else max(LOSS_SCALE_SMALL * floor_value, floor_value * 2)
        if floor_value is None and source == "overflow messages" and run >= LOSS_SCALE_RUN:
            small = LOSS_SCALE_SMALL  # no floor (apex, GradScaler): a cascade down to a handful is the collapse
        if (run >= LOSS_SCALE_RUN and after <= small) or floor:
            at_floor = at_floor or floor
            first = next((e for e in overflows), None)
            evidence = {"source": source, "halvings_in_a_row": run, "scale_before": before, "scale_after": after,
                        "last_scale": values[-1], "overflow_events": counts.get("overflow", 0),
                        "loss_scale_at_minimum": at_floor, "framework": framework, "floor": floor_value}
            if first is not None:
                evidence.update({"first_line": first.line, "quote": first.text})
            floor_text = f" (the floor of {framework}: {floor_value:g})" if floor_value is not None else ""
            return Finding("diverged", "error",
                           f"fp16 loss scaling collapsed: {run} reductions in a row took the scale from {before:g} "
                           f"to {after:g}" + (f" and it sits at its floor{floor_text}" if at_floor else "")
                           + ": gradients are non-finite step after step, updates are being skipped.",
                           evidence, ["Switch from fp16 to bf16 if the GPU supports it (no loss scaling needed)."]
                           + _diverged_actions(ctx))
    fall = _scale_fall(from_events, logged, framework)
    if fall is not None:
        start, lowest, source, assumed = fall
        first = next((e for e in overflows), None)
        evidence = {"source": source, "scale_start": start, "scale_lowest": lowest, "fall": start / lowest,
                    "start_assumed": assumed, "overflow_events": counts.get("overflow", 0), "framework": framework}
        if first is not None:
            evidence.update({"first_line": first.line, "quote": first.text})
        began = (f"the {framework or 'default'} initial scale {start:g} (the log shows one scale)" if assumed
                 else f"{start:g}")
        return Finding("diverged", "error",
                       f"fp16 loss scaling fell from {began} to {lowest:g}, {start / lowest:.3g}x (more than 2^10): "
                       "gradients overflow step after step and updates are being skipped.",
                       evidence, ["Switch from fp16 to bf16 if the GPU supports it (no loss scaling needed)."]
                       + _diverged_actions(ctx), confidence="medium" if assumed else "high")
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


def _scale_fall(from_events: list[float], logged: list[float], framework: str | None
                ) -> tuple[float, float, str, bool] | None:
    """(start, lowest, source, start assumed) when the loss scale fell more than SCALE_FALL below its start: the
    first scale the log shows (or the framework's initial scale, if lower: apex calibrates down from 2**32), or
    the framework's initial scale when the log shows a single overflow message."""
    initial = INITIAL_LOSS_SCALE.get(framework, INITIAL_LOSS_SCALE[None])
    for source, values in (("overflow messages", from_events), ("logged loss scale", logged)):
        values = [v for v in values if v > 0]
        if not values or (len(values) == 1 and source != "overflow messages"):
            continue  # one logged scale is a setting, not a fall; one overflow message is a reduction
        assumed = len(values) == 1
        # Calibration from a huge first scale down to the usual start is not a fall: count from the lower one.
        start = initial if assumed else min(values[0], initial)
        lowest = min(values)
        if start / lowest > SCALE_FALL:
            return start, lowest, source, assumed
    return None


def _overflows_at_floor(overflows: list[LogEvent], floor_value: float | None) -> bool:
    """LOSS_SCALE_RUN overflows in a row (a few lines apart, no training between them) at the framework's floor."""
    if floor_value is None:
        return False
    run, previous = 0, None
    for event in overflows:
        scale = event.details.get("reduced", event.details.get("attempted"))
        if scale is None or scale > 2 * floor_value:
            run, previous = 0, None
            continue
        run = run + 1 if previous is not None and event.line - previous <= OVERFLOW_GAP_LINES else 1
        previous = event.line
        if run >= LOSS_SCALE_RUN:
            return True
    return False


# ------------------------------------------------------------------ not learning




def _decimals(value: float) -> int:
    exponent = Decimal(repr(value)).as_tuple().exponent if math.isfinite(value) else 0
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _print_step(values: list[float], stuck: int) -> float:
    """The step the values were printed with: one unit of the decimal place most of the values before the stuck
    stretch show, or the stuck value's own if finer (0.0286, 0.0105, ... then 0.0047: 1e-4; a 0.2500 after 0.2531
    shows its 4 decimals through the values before it). A stray summary line with more digits does not count."""
    before = Counter(_decimals(v) for v in values[:-stuck] if v != 0)
    places = max(_decimals(values[-1]), before.most_common(1)[0][0] if before else 0)
    return 10.0 ** -places


def _class_count(series: dict[str, list[Point]], ctx: Context) -> tuple[int | None, str | None, float | None]:
    """(K, where it came from, the accuracy it came from) for a K-way task: --classes, or chance-level accuracy."""
    if ctx.classes and ctx.classes >= 2:
        return ctx.classes, "stated (--classes)", None
    for name in ("val_acc", "train_acc"):
        accs = [p.value for p in series.get(name, []) if math.isfinite(p.value)]
        if accs:
            acc = _median(accs[-3:])
            acc = acc / 100 if acc > 1 else acc
            if 0 < acc <= 0.5:
                return round(1 / acc), f"accuracy {acc:.3g} = 1/K", acc
    return None, None, None


def detect_not_learning(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """A loss that sits where an untrained model starts: at ln(K) for a K-way classifier (K from --classes, the
    log's chance-level accuracy, or a common class count), or constant to its printed digits for most of the
    run near where it started. Judged on short epoch logs too; the confidence says how much it stands on."""
    train = _finite(series.get(TRAIN_LOSS, []) or series.get("train_loss_epoch", []))
    if len(train) < STUCK_FEW_POINTS:  # no training loss: the validation curves alone may still tell
        return (_predictions_never_changed(series) or _validation_loss_frozen(series)
                or _validation_at_chance(series, ctx) or _validation_loss_at_ln_k(series, ctx))
    values = _values(train)
    last = values[-1]
    tail = values[len(values) // 2:]
    level = _median(tail)
    evidence = {"series": TRAIN_LOSS, "level": round(level, 6), "points": len(values)}
    # Constant to the printed digits for most of the run, near where it started.
    stuck = 1
    tolerance = PRINT_PRECISION * abs(last)
    while stuck < len(values) and abs(values[-stuck - 1] - last) <= tolerance:
        stuck += 1
    start_level = min(values[0], _median(values[:3]))
    needed = max(STUCK_FEW_POINTS, STUCK_SHARE * len(values)) if len(values) >= MIN_POINTS else max(
        STUCK_FEW_POINTS, len(values) // 2 + 1)
    # Near its start for a fifth of the run, or, at any level above STUCK_MIN_LEVEL, for the whole second half of
    # MIN_POINTS+ points: batch after batch giving one loss to the printed digits is a model whose output no longer
    # depends on its input (an LSTM regressor answering 0.5 to every sample: MSE 0.2500 from step 100 of 240).
    # A value printed with fewer than 3 significant digits (0.0047 at 4 decimals: a step of 2%) is the same to the
    # printed digits while a converged loss still creeps below them: away from its start, that is no evidence.
    long_stuck = (len(values) >= MIN_POINTS and stuck > len(values) / 2 and abs(last) > STUCK_MIN_LEVEL
                  and _print_step(values, stuck) <= STUCK_MAX_STEP * abs(last))
    if last != 0 and stuck >= needed and (abs(last) >= STUCK_NEAR_START * abs(start_level) or long_stuck):
        confidence = "high" if stuck >= STUCK_MIN_POINTS else ("medium" if stuck >= 6 else "low")
        evidence.update({"stuck_value": last, "stuck_points": stuck,
                         **_span(train, len(train) - stuck, len(train) - 1)})
        return [Finding("not-learning", "error",
                        f"The training loss is stuck at {last:.6g} (to its printed digits) for the last {stuck} "
                        "points: the model is not learning (no update reaches the weights, or the network is dead).",
                        evidence, list(NOT_LEARNING_ACTIONS), confidence=confidence)]
    # ln(K): where cross-entropy starts for a K-way classifier that predicts every class alike.
    k, k_source, acc = _class_count(series, ctx)
    candidates = [(k, LN_K_TOLERANCE, k_source)] if k else []
    if len(values) >= LN_K_COMMON_MIN_POINTS:
        candidates += [(c, LN_K_COMMON_TOLERANCE, "a common class count") for c in COMMON_CLASS_COUNTS]
    noise = _mad_sigma([b - a for a, b in zip(tail, tail[1:])]) / math.sqrt(2) if len(tail) > 2 else 0.0
    third = max(1, len(tail) // 3)
    tail_fall = _median(tail[:third]) - _median(tail[-third:])
    # Flat over the tail and over the whole run: a slow run (LR too low) also sits near ln(K), but falls.
    tenth = max(1, len(values) // 10)
    run_fall = _median(values[:tenth]) - _median(values[-tenth:])
    run_noise = _mad_sigma([b - a for a, b in zip(values, values[1:])]) / math.sqrt(2) if len(values) > 2 else 0.0
    flat = (tail_fall <= max(2 * noise, 0.002 * abs(level))
            and run_fall <= max(2 * run_noise, 0.005 * abs(level)))
    for count, tolerance, source in candidates:
        ln_k = math.log(count)
        if flat and level > 0 and abs(level - ln_k) <= tolerance * ln_k and min(tail) > ln_k * (1 - 3 * tolerance):
            confidence = "high" if (acc or count == ctx.classes) and len(tail) >= 3 else (
                "medium" if len(values) >= LN_K_COMMON_MIN_POINTS else "low")
            evidence.update({"classes": count, "classes_from": source, "ln_classes": round(ln_k, 4),
                             "tail_fall": round(tail_fall, 6), "noise_sigma": round(noise, 6),
                             **_span(train, len(train) - len(tail), len(train) - 1)})
            if acc is not None:
                evidence["accuracy"] = round(acc, 4)
            return [Finding("not-learning", "error",
                            f"The training loss sits at {level:.4g} = ln({count}) (K={count}, {source}) and does not "
                            "fall: the model predicts every class alike, it is not learning.",
                            evidence, list(NOT_LEARNING_ACTIONS), confidence=confidence)]
    return (_unmoved_at_chance(series, ctx) or _predictions_never_changed(series) or _validation_loss_frozen(series)
            or _validation_at_chance(series, ctx) or _converged_at_start(series) or _both_losses_at_start(series)
            or _accuracy_never_rose(series) or _epoch_means_at_chance(series, ctx) or _repeats_exact_values(series)
            or _validation_loss_at_ln_k(series, ctx))


REPEAT_MIN_POINTS = 20  # training-loss points, at least, to judge its values repeat
REPEAT_SHARE = 0.9  # the three most common values, exactly as written, hold this share of the points after the first tenth
REPEAT_DIGITS = 5  # ... and are written with this many significant digits or more (a float in full, not a rounding)


def _float32_digits(value: float) -> int:
    """Significant digits of the shortest decimal that reads back as the same float32 (3.3917622566223145: 8;
    9.999999747378752e-05, a float32 0.0001: 1): how precisely a logger wrote the value, whatever its float type."""
    single = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 9):
        if struct.unpack("f", struct.pack("f", float(f"{value:.{digits}g}")))[0] == single:
            return digits
    return 9


def _repeats_exact_values(series: dict[str, list[Point]]) -> list[Finding]:
    """A training loss (REPEAT_MIN_POINTS+ points) that, after its first tenth, takes the same few values exactly,
    to all of their REPEAT_DIGITS+ digits, at REPEAT_SHARE of its points: the model's output does not change from
    step to step, so a batch's loss depends only on which labels it holds (3.3918, 3.2668, 3.1418: a step of one
    sample's loss over the batch). A learning model, or one that jitters, never writes the same 8-digit loss twice in
    most steps; a rounded logger does (0.0001), hence the digits."""
    train = _finite(series.get(TRAIN_LOSS, []) or series.get("train_loss_epoch", []))
    if len(train) < REPEAT_MIN_POINTS:
        return []
    tail = _values(train)[len(train) // 10:]
    common = Counter(tail).most_common(3)
    held = sum(count for _, count in common)
    if held < REPEAT_SHARE * len(tail) or _median(tail) <= 0 or _float32_digits(common[0][0]) < REPEAT_DIGITS:
        return []
    evidence = {"series": train[0].name, "values": [round(v, 6) for v, _ in common],
                "share": round(held / len(tail), 3), "points": len(tail),
                **_span(train, len(train) - len(tail), len(train) - 1)}
    return [Finding("not-learning", "error",
                    f"The training loss takes the same {len(common)} value(s) exactly "
                    f"({', '.join(f'{v:.6g}' for v, _ in common)}) at {held} of its last {len(tail)} points: the "
                    "model's output does not change between steps (a batch's loss depends only on its labels), it is "
                    "not learning.",
                    evidence, list(NOT_LEARNING_ACTIONS), confidence="medium")]


EPOCH_MEANS_FLAT = 0.01  # epoch means whose second half spans less than this share of its level: flat
EPOCH_MEANS_NEVER_ABOVE = 0.1  # ... and none after the first (which holds the fall from the initialisation) above the
# level by more than this share: the loss never was far above where it sits


def _epoch_means_at_chance(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """The training loss's epoch means (LN_K_COMMON_MIN_POINTS+ of them) flat over their second half (its range under
    EPOCH_MEANS_FLAT of the level), never (after the first) more than EPOCH_MEANS_NEVER_ABOVE above it, at ln K
    within LN_K_TOLERANCE (K from --classes, a chance-level accuracy, or a common class count): a model at chance.
    An epoch mean averages out what the batches' order does to the step losses (sorted data swinging 0.36-0.91 every
    epoch), so its flatness is the stronger evidence and the level is read with the tolerance a stated K gets."""
    points = _finite(series.get("train_loss_epoch", []))
    if len(points) < LN_K_COMMON_MIN_POINTS:
        return []
    values = _values(points)
    tail = values[len(values) // 2:]
    level = _median(tail)
    if level <= 0 or max(tail) - min(tail) > EPOCH_MEANS_FLAT * level:
        return []
    if max(values[1:]) > (1 + EPOCH_MEANS_NEVER_ABOVE) * level:
        return []  # it came down to this level from well above (a healthy loss converging near ln K by chance)
    k, k_source, acc = _class_count(series, ctx)
    counts = [(k, k_source)] if k else [(c, "a common class count") for c in COMMON_CLASS_COUNTS]
    for count, source in counts:
        ln_k = math.log(count)
        if abs(level - ln_k) <= LN_K_TOLERANCE * ln_k:
            evidence = {"series": "train_loss_epoch", "level": round(level, 6), "classes": count, "classes_from": source,
                        "ln_classes": round(ln_k, 4), "tail_range": round(max(tail) - min(tail), 6),
                        **_span(points, len(points) - len(tail), len(points) - 1)}
            return [Finding("not-learning", "error",
                            f"The training loss's epoch means sit at {level:.4g} = ln({count}) (K={count}, {source}), "
                            f"flat to {(max(tail) - min(tail)) / level:.1%} over the last {len(tail)} epochs: the model "
                            "predicts every class alike, it is not learning.",
                            evidence, list(NOT_LEARNING_ACTIONS), confidence="medium")]
    return []


NO_MOVE = 0.03  # a loss that moved less than this share of its start over the run, not steadily, has not moved
NO_MOVE_AT_ALL = 0.005  # ... and less than this share, steadily or not
CONSTANT_ACC_POINTS = 5  # evaluations with the same accuracy, at least, to say the model predicts the same classes
CONSTANT_ACC_SPREAD = 0.001  # ... the same to this much (0-1 scale): a few samples of a validation set, not a change
RUN_START_SHARE = 0.05  # a curve whose first point lies within this share of its last point's step/epoch: from the start
CONVERGED_PACE = 0.25  # a last quarter falling less than this share of the first quarter's fall: levelled off
SETTLED_FALL_TO_SPREAD = 3.0  # ... after a fall this many times its second half's spread: a clear, settled descent


def _moved(values: list[float]) -> float:
    """How far a curve moved over the run, as a share of its start: first tenth's median to last tenth's."""
    tenth = max(1, len(values) // 10)
    start = _median(values[:tenth])
    return (start - _median(values[-tenth:])) / abs(start) if start else 0.0


def _unmoved(points: list[Point]) -> bool:
    """A loss curve that has not moved: less than NO_MOVE_AT_ALL of its start over the run, or less than NO_MOVE
    and not falling at a steady pace (a steady creep of a few per cent is slow convergence, slow.py)."""
    values = _values(points)
    moved = abs(_moved(values))
    if moved < NO_MOVE_AT_ALL:
        return True
    paces = quarter_paces(values)
    return moved < NO_MOVE and (paces is None or not steady(paces))


PRIOR_LOSS_SHARE = 0.9  # a loss at or above this share of the lowest a constant prediction can reach (_prior_floor)


UNTRAINED_FALL = 2.0  # a curve whose first value is this many times its end holds the fall from an untrained level


def _prior_floor(accuracy: float) -> float:
    """The lowest cross-entropy a model giving every sample the same class can reach when that class is a share
    ``accuracy`` of the set: the labels' entropy, which is at least the larger of the binary entropy of that share
    (the class against the rest) and -ln(share) (the min-entropy). ln K for a balanced K-class set (0.2: ln 5)."""
    if not 0 < accuracy < 1:
        return 0.0
    binary = -(accuracy * math.log(accuracy) + (1 - accuracy) * math.log(1 - accuracy))
    return max(binary, -math.log(accuracy))


TRAIN_LEARNED = 0.5  # a training loss that fell this share of its start over the run has learned its training set
# Round 20, calibrated on the odd batches 1-17: of the 102 runs there with 5+ training-accuracy points, 42 have one
# whose second half's median is within 0.02 of its first half's (converged fine-tunes near 1.0 among them); 13 of
# those stay under FLAT_TRAIN_ACC_CEILING (7 labelled not-learning, 4 diverged, 1 slow, 1 healthy), and one of the 13
# has a validation accuracy identical at every evaluation: a graph network answering one class (not-learning).
TRAIN_ACC_FLAT = 0.02  # a training accuracy (0-1) whose second half's median is within this of its first half's ...
FLAT_TRAIN_ACC_CEILING = 0.7  # ... and never this high (slow.py's GOOD_ACCURACY: a model already doing its job)


def _training_accuracy_flat(series: dict[str, list[Point]]) -> bool:
    """The training accuracy, CONSTANT_ACC_POINTS+ points not known to start mid-run (_mid_run: a CSV without an epoch
    column is read from its first row), never rose and never got good: its second half's median no more than
    TRAIN_ACC_FLAT (0-1 scale) above its first half's, every value under FLAT_TRAIN_ACC_CEILING. Beside a
    validation accuracy identical at every evaluation, a loss that falls below the constant-prediction floor is the
    model matching its probabilities to the class shares, not telling the classes apart: no class decision changed
    on either set. (A fine-tune whose training accuracy sits at 0.99 from the start has nothing left to rise.)"""
    accs = _finite(series.get("train_acc", []))
    if len(accs) < CONSTANT_ACC_POINTS or _mid_run(accs):
        return False
    values = _values(accs)
    scale = _percent_scale(values)
    half = len(values) // 2
    return (max(values) / scale < FLAT_TRAIN_ACC_CEILING
            and (_median(values[half:]) - _median(values[:half])) / scale <= TRAIN_ACC_FLAT)


def _quality_moved(points: list[Point]) -> bool:
    """A validation quality of CONSTANT_ACC_POINTS+ evaluations whose values spread more than CONSTANT_ACC_SPREAD."""
    values = [p.value for p in points if math.isfinite(p.value)]
    return len(values) >= CONSTANT_ACC_POINTS and max(values) - min(values) > CONSTANT_ACC_SPREAD * _percent_scale(
        values)


def _predictions_never_changed(series: dict[str, list[Point]]) -> list[Finding]:
    """The validation quality (accuracy, mAP or score) identical, to CONSTANT_ACC_SPREAD, at every one of
    CONSTANT_ACC_POINTS+ evaluations: the model's predictions on held-out data never changed. Not learning when the
    loss says the outputs did not change either: for an accuracy, the validation loss (the training loss's when no
    validation loss is logged), seen from the run's start (or from UNTRAINED_FALL x its end: a log whose epoch counter
    starts late but whose loss comes down from an untrained level), no longer moves over its second half (_unmoved)
    and ends at or above PRIOR_LOSS_SHARE of _prior_floor (a model telling samples apart goes below the floor while its arg-max stays put: a segmentation
    run whose pixel accuracy sits at the background share as its loss falls 19% under the floor learns), or, below
    the floor, beside a training accuracy that never rose nor got good (_training_accuracy_flat, round 20: no class
    decision changed on either set; a log without epochs or steps is then read from its first row); for an mAP
    or a score, the loss followed from the run's start has not moved (a detector in its first epochs, mAP 0 while
    its loss falls, is learning). One rule for the majority class (a binary set at 0.574), exactly 1/K (0.2000: a
    5-class set) and never one right prediction (mAP 0 for 100 epochs)."""
    train = _finite(series.get("train_loss_epoch", []) or series.get(TRAIN_LOSS, []))
    if len(train) >= STUCK_FEW_POINTS and _moved(_values(train)) >= TRAIN_LEARNED:
        return []
    if any(_quality_moved(series.get(quality, [])) for quality in ("val_acc", "val_map", "val_score")):
        # Another measure of the same held-out predictions changed (a segmentation's pixel accuracy pinned at the
        # background share while its Dice rose 0.64 -> 0.70: world batch 20): the predictions did change.
        return []
    for quality in ("val_acc", "val_map", "val_score"):
        evaluations = [p for p in series.get(quality, []) if math.isfinite(p.value)]
        if len(evaluations) < CONSTANT_ACC_POINTS:
            continue
        values = [p.value for p in evaluations]  # identical to CONSTANT_ACC_SPREAD: none moved (_quality_moved above)
        scale = _percent_scale(values)
        name = next((n for n in (VAL_LOSS, "train_loss_epoch", TRAIN_LOSS)
                     if len(_finite(series.get(n, []))) >= STUCK_FEW_POINTS), None)
        if name is None:
            return []
        loss = _finite(series[name])
        share = values[-1] / scale
        end = _median(_values(loss)[-3:])
        if quality == "val_acc" and 0 < share < 1:
            floor = _prior_floor(share)
            flat_acc = _training_accuracy_flat(series)
            if not (_unmoved(loss[len(loss) // 2:]) and (end >= PRIOR_LOSS_SHARE * floor or flat_acc)
                    and (_from_run_start(loss) or loss[0].value >= UNTRAINED_FALL * end
                         or (flat_acc and not _mid_run(loss)))):
                return []  # (a mid-run excerpt of a converged run holds a constant accuracy as often as not)
            because = (f"the {_series_words(name)} no longer moves and sits at {end:.4g}, at or above {floor:.4g}, "
                       "the lowest a model giving every sample the same class can reach: it gives every sample the "
                       "same class") if end >= PRIOR_LOSS_SHARE * floor else (
                f"the {_series_words(name)} no longer moves ({end:.4g}) and the training accuracy never rose: the "
                "model never told the classes apart better than at its start")
        elif _from_run_start(loss) and _unmoved(loss):
            floor = None
            because = (f"the {_series_words(name)} has not moved since the run's start "
                       f"(it {_fell_or_rose(_moved(_values(loss)))}): its outputs did not change")
        else:
            return []
        what = {"val_acc": "accuracy", "val_map": "mAP", "val_score": "score"}[quality]
        evidence = {"series": name, "quality": quality, "quality_value": values[-1], "quality_points": len(values),
                    "loss_end": round(end, 6), **({"prior_floor": round(floor, 6)} if floor is not None else {}),
                    **_span(loss, 0, len(loss) - 1)}
        return [Finding("not-learning", "error",
                        f"The validation {what} is {values[-1]:.4g} at every one of its {len(values)} evaluations "
                        f"and {because}; it is not learning.",
                        evidence, list(NOT_LEARNING_ACTIONS), confidence="medium")]
    return []


def _validation_loss_frozen(series: dict[str, list[Point]]) -> list[Finding]:
    """The validation loss the same to its printed digits (PRINT_PRECISION of its level) at every one of
    CONSTANT_ACC_POINTS+ evaluations from the run's start: the evaluated model's outputs never changed, whatever the
    training loss's batch-to-batch noise does (an SGD at 1e-4 whose embeddings barely move: 3.20543 at each of 10
    epochs). A loss is continuous: a model that learns anything moves it in the fourth digit."""
    evaluations = _finite(series.get(VAL_LOSS, []))
    if len(evaluations) < CONSTANT_ACC_POINTS or not _from_run_start(evaluations):
        return []
    values = _values(evaluations)
    level = _median(values)
    if level <= STUCK_MIN_LEVEL or max(values) - min(values) > PRINT_PRECISION * level:
        return []
    evidence = {"series": VAL_LOSS, "level": round(level, 6), "spread": round(max(values) - min(values), 8),
                "points": len(values), **_span(evaluations, 0, len(evaluations) - 1)}
    return [Finding("not-learning", "error",
                    f"The validation loss is {level:.6g} at every one of its {len(values)} evaluations, the same to "
                    "its printed digits from the run's start: the model's outputs never changed; it is not learning.",
                    evidence, list(NOT_LEARNING_ACTIONS), confidence="medium")]


def _since(points: list[Point], first: Point) -> list[Point]:
    """The curve from ``first``'s place in the run on (the first evaluation): what the loss did while the
    evaluations watched. A training point at that very place is left out unless it is the evaluation's own series
    (a per-epoch training loss is the mean over the epoch the evaluation ends: the descent from the
    initialisation to the class prior). The whole curve when that leaves fewer than STUCK_FEW_POINTS points or the
    places do not compare."""
    kind, at = _position(first)
    later = [p for p in points if _position(p)[0] == kind and (
        _position(p)[1] > at or (_position(p)[1] == at and p.name == VAL_LOSS))]
    return later if len(later) >= STUCK_FEW_POINTS else points


def _unmoved_at_chance(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """A classifier whose accuracy never left chance (chance_loss) and whose losses moved less than NO_MOVE of
    their start over the run: the model has not learned, whatever level the loss sits at (an initialisation that
    does not start exactly at ln K, an LR far too low to move it)."""
    chance = chance_loss(series, ctx)
    if not chance:
        return []
    curves = [(name, _finite(series.get(name, []))) for name in ("train_loss_epoch", TRAIN_LOSS, VAL_LOSS)]
    curves = [(name, points) for name, points in curves if len(points) >= STUCK_FEW_POINTS]
    # Each curve from the first evaluation on (_since): a first epoch's mean holds the fall from the initialisation
    # to the class prior, which is no learning.
    evaluations = _finite(series.get("val_acc", [])) or _finite(series.get("train_acc", []))
    if not curves or not all(_unmoved(_since(points, evaluations[0]) if evaluations else points)
                             for _, points in curves):
        return []
    ln_k, k, source, accs = chance
    name, points = curves[0]
    moved = {n: round(_moved(_values(p)), 5) for n, p in curves}
    evidence = {"series": name, "moved": moved, "classes": k, "classes_from": source, "ln_classes": round(ln_k, 4),
                "accuracy": round(_median(accs), 4), "accuracy_points": len(accs), **_span(points, 0, len(points) - 1)}
    validation = source.startswith("val_acc") or (not source.startswith("train_acc")
                                                  and len(_finite(series.get("val_acc", []))) >= STUCK_FEW_POINTS)
    which, counted = ("validation", "evaluations") if validation else ("training", "logged points")
    return [Finding("not-learning", "error",
                    f"The {which} accuracy stays at {_median(accs):.3g} (about 1/{k}: chance for a {k}-way "
                    f"classifier) at all {len(accs)} {counted} and the loss has not moved ("
                    + ", ".join(f"{_series_words(n)} {_fell_or_rose(m)}" for n, m in moved.items())
                    + " over the run): the model is not learning.", evidence, list(NOT_LEARNING_ACTIONS),
                    confidence="high" if len(accs) >= 5 and len(points) >= 8 else "medium")]


CHANCE_BAND = 0.02  # a validation accuracy (0-1) never more than this from its first value never left it
CHANCE_NEAR = 0.03  # ... and whose median is this close to 1/K sits at chance


def _validation_at_chance(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """The validation accuracy, CONSTANT_ACC_POINTS+ evaluations from the run's start, at chance (its median within
    CHANCE_NEAR of 1/K, K from --classes or the nearest common class count) and never more than CHANCE_BAND from its
    first value, while the validation loss, followed from the run's start, never moved NO_MOVE off its first value
    and ends at or above PRIOR_LOSS_SHARE of _prior_floor: the held-out predictions never got better than a coin
    flip, whatever a noisy per-step training accuracy or loss does (an up/down stock classifier at 0.51-0.52 for 50
    epochs, its validation loss 0.711 -> 0.693 = ln 2). A slow run's accuracy climbs off chance, however little its
    loss moves; a fine-tune starts far above chance."""
    evaluations = _finite(series.get("val_acc", []))
    loss = _finite(series.get(VAL_LOSS, []))
    if (len(evaluations) < CONSTANT_ACC_POINTS or len(loss) < CONSTANT_ACC_POINTS
            or not _from_run_start(evaluations) or not _from_run_start(loss)):
        return []
    accs = _as_fraction(_values(evaluations))
    level = _median(accs)
    k = ctx.classes if ctx.classes and ctx.classes >= 2 else min(COMMON_CLASS_COUNTS, key=lambda c: abs(level - 1 / c))
    drift = max(abs(a - accs[0]) for a in accs)
    if not 0 < level < 1 or abs(level - 1 / k) > CHANCE_NEAR or drift > CHANCE_BAND:
        return []
    values = _values(loss)
    floor = _prior_floor(level)
    end = _median(values[-3:])
    if not _stays_near_first(values, NO_MOVE) or end < PRIOR_LOSS_SHARE * floor:
        return []
    fell = (values[0] - min(values)) / values[0]
    evidence = {"series": VAL_LOSS, "quality": "val_acc", "accuracy": round(level, 4), "accuracy_points": len(accs),
                "classes": k, "first_accuracy": round(accs[0], 4), "best_accuracy": round(max(accs), 4),
                "loss_start": round(values[0], 6), "loss_best_fall": round(fell, 5), "loss_end": round(end, 6),
                "prior_floor": round(floor, 6), **_span(loss, 0, len(loss) - 1)}
    return [Finding("not-learning", "error",
                    f"The validation accuracy sits at chance ({level:.3g}, about 1/{k}) for all {len(accs)} "
                    f"evaluations, never more than {drift:.3f} from its first value, and the "
                    f"validation loss never fell more than {fell:.1%} below its start ({values[0]:.4g} -> "
                    f"{end:.4g}): the model's held-out predictions never beat chance; it is not learning.",
                    evidence, list(NOT_LEARNING_ACTIONS), confidence="medium")]


VAL_LN_K_BELOW = 0.005  # no evaluation of the validation loss more than this share under ln K: it never beat chance ...
VAL_LN_K_ABOVE = 0.05  # ... none more than this share above it (it was never far above: it did not come down to ln K) ...
VAL_LN_K_LEVEL = LN_K_COMMON_TOLERANCE  # ... and its median within this share of ln K: it sits there ...
VAL_LN_K_TRAIN = 0.9  # ... and the training loss's second half (median) at or above this share of ln K: no fit either


def _validation_loss_at_ln_k(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """The validation loss at ln K at every evaluation (CONSTANT_ACC_POINTS+): none more than VAL_LN_K_BELOW under it
    or VAL_LN_K_ABOVE over it, its median within VAL_LN_K_LEVEL of it (K from --classes, else a chance-level accuracy
    or a common class count), while the training loss, when logged, did not fit either (its second half's median at
    or above VAL_LN_K_TRAIN of ln K): a classifier whose held-out cross-entropy never beat the uniform guess. Whatever
    a noisy per-step training loss does (a binary pose classifier's batches at 0.64-0.76), a model that learns
    anything goes below ln K on new data within an evaluation or two; a loss that came down to ln K from above (a
    healthy curve converging near it by chance) was far above it first. Not said for a curve more than
    VAL_LN_K_BELOW under ln K (a regression flat at 0.991 ln 4 is a coincidence of levels: other rules judge it). With a
    validation accuracy (mAP, score) logged, the rules reading it judge: an accuracy that climbs off chance while the
    loss sits at ln K is a model learning, slowly."""
    val = _finite(series.get(VAL_LOSS, []))
    if len(val) < CONSTANT_ACC_POINTS or validation_quality(series):
        return []
    values = _values(val)
    low, level = min(values), _median(values)
    if ctx.classes and ctx.classes >= 2:
        counts = [(ctx.classes, "stated (--classes)")]
    else:
        k, source, _ = _class_count(series, ctx)
        counts = ([(k, source)] if k else []) + [(c, "a common class count") for c in COMMON_CLASS_COUNTS if c != k]
    train = _finite(series.get("train_loss_epoch", []))
    train = train if len(train) >= STUCK_FEW_POINTS else _finite(series.get(TRAIN_LOSS, []))
    train_level = _median(_values(train)[len(train) // 2:]) if len(train) >= STUCK_FEW_POINTS else None
    for count, source in counts:
        ln_k = math.log(count)
        if (low < (1 - VAL_LN_K_BELOW) * ln_k or max(values) > (1 + VAL_LN_K_ABOVE) * ln_k
                or abs(level - ln_k) > VAL_LN_K_LEVEL * ln_k):
            continue
        if train_level is not None and train_level < VAL_LN_K_TRAIN * ln_k:
            return []  # the training set is being fitted: a gap, judged by the overfitting rules
        evidence = {"series": VAL_LOSS, "classes": count, "classes_from": source, "ln_classes": round(ln_k, 4),
                    "val_lowest": round(low, 6), "val_median": round(level, 6), "val_points": len(values),
                    **_span(val, 0, len(val) - 1)}
        if train_level is not None:
            evidence["train_second_half"] = round(train_level, 6)
        return [Finding("not-learning", "error",
                        f"The validation loss sits at ln({count}) = {ln_k:.4g} (K={count}, {source}) at every one of its "
                        f"{len(values)} evaluations (lowest {low:.4g}, median {level:.4g}), never below it: the model's "
                        "held-out predictions never beat giving every class alike; it is not learning.",
                        evidence, list(NOT_LEARNING_ACTIONS), confidence="medium")]
    return []


def _from_run_start(points: list[Point]) -> bool:
    """The curve's first point is at the run's start: its step (or epoch) within RUN_START_SHARE of the last's, or
    in the run's first epoch (0 or 1: a validation at the end of epoch 0 is at step 340 of 2386, yet at the start)."""
    starts = []
    for attr in ("step", "epoch"):
        first, last = getattr(points[0], attr), getattr(points[-1], attr)
        if first is not None and last:
            starts.append(first <= RUN_START_SHARE * last or (attr == "epoch" and first <= 1))
    return any(starts)


def _mid_run(points: list[Point]) -> bool:
    """The curve says where it lies and its first point is not at the run's start (_from_run_start): an excerpt of
    a later stretch (a log of the last epoch only, a resumed run). A curve without steps or epochs is not known to be."""
    first, last = points[0], points[-1]
    placed = (first.epoch is not None and last.epoch) or (first.step is not None and last.step)
    return bool(placed) and not _from_run_start(points)


def _converged_at_start(series: dict[str, list[Point]]) -> list[Finding]:
    """No accuracy printed: a training loss followed from the run's start that levelled off (its last quarter
    falls less than CONVERGED_PACE of its first quarter's fall, its second half steady) within NO_MOVE of where it
    started: the model
    settled where it began (a regression stuck at the constant prediction's loss). A loss still falling steadily
    from its start is slow convergence instead (slow.py)."""
    if any(series.get(name) for name in ("val_acc", "train_acc", "test_acc", "val_map", "test_map", "val_score",
                                          "test_score")):
        return []
    train = _finite(series.get("train_loss_epoch", []) or series.get(TRAIN_LOSS, []))
    if len(train) < MIN_POINTS or not _from_run_start(train):
        return []
    values = _values(train)
    moved = _moved(values)
    tail = values[len(values) // 2:]
    spread = _mad_sigma(tail)
    quiet = spread <= NO_MOVE * abs(_median(tail))
    # Never moved at all (under NO_MOVE_AT_ALL of its start, quietly): no pace to read, the first quarter need not
    # fall (the first point, an epoch's mean or the first batch, already holds the run's start).
    never_moved = abs(moved) < NO_MOVE_AT_ALL and quiet
    paces = None if never_moved else quarter_paces(values)
    if not never_moved:
        if paces is None:
            return []
        if not 0 < moved < NO_MOVE or paces[0] <= 0 or paces[1] >= CONVERGED_PACE * paces[0]:
            return []
        # Settled: the small fall it made stands well above its second half's spread; or, over SLOW_MIN_POINTS+
        # logs, it never fell at all and its batch-to-batch spread is itself under NO_MOVE of its level (a language
        # model sitting at its unigram loss). A loss swinging with the data order, or jumping from batch to batch,
        # around its start is judged by the oscillation rules instead.
        settled = _median(values[:max(1, len(values) // 10)]) - _median(tail) > SETTLED_FALL_TO_SPREAD * spread
        if not settled and not (len(values) >= SLOW_MIN_POINTS and quiet):
            return []
    evidence = {"series": train[0].name, "moved": round(moved, 5), "start": round(values[0], 6),
                "level": round(_median(values[-max(1, len(values) // 10):]), 6),
                "pace_last_to_first_quarter": round(paces[1] / paces[0], 3) if paces and paces[0] > 0 else None,
                "points": len(values), **_span(train, 0, len(train) - 1)}
    # A warning, not an error: no accuracy says the level is a failure (a fine-tune that starts near its floor also
    # moves little); the numbers say only that the model settled where it began.
    return [Finding("not-learning", "warning",
                    f"The training loss started at {values[0]:.6g} and levelled off at {evidence['level']:.6g}, "
                    f"{abs(moved):.1%} from its start, over {len(values)} points from the run's start: the model settled "
                    "where it began and is not learning (for a regression: the loss of predicting a constant).",
                    evidence, list(NOT_LEARNING_ACTIONS), confidence="medium")]


FLAT_PAIR_MIN_POINTS = 8  # training and validation losses, each this many points or more, to judge both never moved


def _both_losses_at_start(series: dict[str, list[Point]]) -> list[Finding]:
    """No accuracy printed: a training loss (its epoch means when logged) and a validation loss, FLAT_PAIR_MIN_POINTS+
    points each from the run's start, every point of both within NO_MOVE of its curve's first value and neither
    falling at a steady pace (_unmoved; a wine MLP at SGD 0.003 creeping 1.4% epoch after epoch is slow): the model neither
    fits its training data nor does better on new data than where it began (an LSTM on daily BTC prices, 0.1026 ->
    0.1015 and 0.1012 -> 0.0998 over 10 epochs; an N-BEATS forecaster, 1.3475 -> 1.3427 and 1.3755 -> 1.3741). A slow
    run leaves its band on one curve at least; a loss that fell first and then sat does not start in it. A warning
    like _converged_at_start: without an accuracy the level is not known to be a failure."""
    if any(series.get(name) for name in ("val_acc", "train_acc", "test_acc", "val_map", "test_map", "val_score",
                                          "test_score")):
        return []
    epoch_means = _finite(series.get("train_loss_epoch", []))
    train = epoch_means if len(epoch_means) >= FLAT_PAIR_MIN_POINTS else _finite(series.get(TRAIN_LOSS, []))
    val = _finite(series.get(VAL_LOSS, []))
    moves = {}
    for points in (train, val):
        if len(points) < FLAT_PAIR_MIN_POINTS or not _from_run_start(points):
            return []
        values = _values(points)
        if not _stays_near_first(values, NO_MOVE) or not _unmoved(points):
            return []  # (_unmoved: a steady creep, however small, is a slow run: slow.py)
        moves[points[0].name] = round((values[-1] - values[0]) / values[0], 5)
    evidence = {"series": train[0].name, "moved": moves, "band": NO_MOVE,
                "points": {train[0].name: len(train), VAL_LOSS: len(val)}, **_span(train, 0, len(train) - 1)}
    return [Finding("not-learning", "warning",
                    "The training and validation losses stay within "
                    f"{NO_MOVE:.0%} of their first values for the whole run (" + ", ".join(
                        f"{_series_words(n)} {_fell_or_rose(-m)}" for n, m in moves.items()) + "): the model fits its training "
                    "data no better than where it began, nor new data; it is not learning.",
                    evidence, list(NOT_LEARNING_ACTIONS), confidence="medium")]


NEVER_ROSE_MIN_POINTS = 20  # training accuracy and loss points, at least, from the run's start
NEVER_ROSE_LOSS_FALL = 0.1  # the training loss's second half at least this share below its first half: it fell
NEVER_ROSE_MAX_ACC = 0.5  # a first quarter above this accuracy (0-1) is a model already good at its task (a fine-tune)


def _accuracy_never_rose(series: dict[str, list[Point]]) -> list[Finding]:
    """No validation accuracy: a training accuracy, NEVER_ROSE_MIN_POINTS+ points from the run's start, whose last
    quarter's median is no higher than its first quarter's plus its noise band (its point-to-point noise, MAD sigma,
    over the square root of a quarter's points: how far a median of that many noisy batch accuracies moves by
    chance), while the training loss's second half's median is less than NEVER_ROSE_LOSS_FALL below its first
    half's: a noisy per-step log of a
    model that never got better at its task (a probe on frozen embeddings, accuracy 0.0-0.25 and loss 2.3-3.8 with no
    trend over 20 epochs). A learning run's accuracy climbs out of its early band, however noisy its batches; one
    that starts above NEVER_ROSE_MAX_ACC (a fine-tune near its best) has little left to climb and is not judged."""
    if series.get("val_acc"):
        return []
    accs = _finite(series.get("train_acc", []))
    train = _finite(series.get(TRAIN_LOSS, []))
    if (len(accs) < NEVER_ROSE_MIN_POINTS or len(train) < NEVER_ROSE_MIN_POINTS or not _from_run_start(accs)
            or not _from_run_start(train)):
        return []
    a = _as_fraction(_values(accs))
    quarter = len(a) // 4
    first, second = _median(a[:quarter]), _median(a[-quarter:])
    band = _mad_sigma([y - x for x, y in zip(a, a[1:])]) / math.sqrt(2) / math.sqrt(quarter)
    losses = _values(train)
    loss_first, loss_second = _median(losses[:len(losses) // 2]), _median(losses[len(losses) // 2:])
    if (band <= 0 or first > NEVER_ROSE_MAX_ACC or second > first + band
            or loss_first <= 0 or loss_first - loss_second > NEVER_ROSE_LOSS_FALL * loss_first):
        return []
    evidence = {"series": TRAIN_LOSS, "quality": "train_acc", "accuracy_first_quarter": round(first, 4),
                "accuracy_last_quarter": round(second, 4), "band": round(band, 4),
                "loss_first_half": round(loss_first, 6), "loss_second_half": round(loss_second, 6),
                "points": len(a), **_span(train, 0, len(train) - 1)}
    return [Finding("not-learning", "error",
                    f"The training accuracy's last quarter ({second:.3g}) is no better than its first "
                    f"({first:.3g}, within its noise {band:.3g}) and the training loss fell "
                    f"{(loss_first - loss_second) / loss_first:.1%} between the halves: the model never got better "
                    "at its task; it is not learning.", evidence, list(NOT_LEARNING_ACTIONS), confidence="low")]


def _diverged_actions(ctx: Context) -> list[str]:
    from ..method.lr import LARGE_BATCH_THRESHOLD
    from ..recipe import SCALED_LR_RULES

    actions = []
    if ctx.lr_rule in SCALED_LR_RULES:
        actions.append(f"The LR was scaled up for the batch ({ctx.lr_rule} rule, lr {ctx.lr:g}): the base LR may "
                       "already have been too high for scaling; lower it or lengthen the warmup (3+ epochs when "
                       "the batch grew more than 2x).")
    else:
        actions.append("Lower the learning rate (try half) and warm up from a small LR over the first epoch(s).")
    actions += ["Clip gradients (torch.nn.utils.clip_grad_norm_, e.g. max_norm=1.0).",
                "Check the data for corrupt samples or labels (a NaN input poisons every later step)."]
    # Only what the run is known to do (a recipe, a printed batch): a YOLO csv or a batch-1 fine-tune says neither.
    if ctx.precision == "fp16":
        actions.append("It trains in fp16: prefer bf16, or keep a GradScaler (fp16 overflows to inf past 65504).")
    if ctx.global_batch and ctx.global_batch >= LARGE_BATCH_THRESHOLD:
        actions.append(f"At a global batch of {ctx.global_batch} (past ~{LARGE_BATCH_THRESHOLD}) a layer-wise "
                       "optimizer keeps training stable: LAMB (Adam-style) or LARS (SGD-style).")
    return actions


# ------------------------------------------------------------------ oscillation

def _trend_and_noise(values: list[float]) -> tuple[list[float], float]:
    window = max(5, len(values) // 20) | 1
    trend = _moving_average(values, window)
    residual = [v - t for v, t in zip(values, trend)]
    return trend, _mad_sigma(residual)


FROZEN_VAL_POINTS = 5  # validation points over the judged stretch, at least, to say the weights no longer move


def _validation_frozen(series: dict[str, list[Point]], since: Point) -> bool:
    """The validation loss over the stretch judged (from ``since``'s place on) is the same to NO_MOVE_AT_ALL of its
    level at FROZEN_VAL_POINTS+ evaluations: the weights no longer move (an LR decayed to ~0), so the training
    loss's step-to-step spread is the batches' own variety, not an optimiser's jitter (no batch or LR remedy)."""
    kind, at = _position(since)
    values = [p.value for p in _finite(series.get(VAL_LOSS, [])) if _position(p)[0] == kind and _position(p)[1] >= at]
    return len(values) >= FROZEN_VAL_POINTS and max(values) - min(values) <= NO_MOVE_AT_ALL * abs(_median(values))


VAL_IMPROVING_POINTS = 4  # validation points over the judged stretch, at least, to say it still improves


def _validation_improving(series: dict[str, list[Point]], since: Point) -> bool:
    """Over the stretch judged (from ``since``'s place on), the validation's accuracy or mAP (else its loss) still
    improves: its Theil-Sen trend over the stretch moves the right way by more than VAL_JITTER_TREND times its
    point-to-point noise, on VAL_IMPROVING_POINTS+ evaluations. A training loss that "stopped falling" under its
    noise while validation still improves has not stalled: a label-smoothed or augmented loss sits at a floor far
    above zero while the model goes on getting better."""
    kind, at = _position(since)
    for points, sign in ((validation_quality(series), 1.0), (_finite(series.get(VAL_LOSS, [])), -1.0)):
        values = [sign * p.value for p in points if _position(p)[0] == kind and _position(p)[1] >= at]
        if len(values) < VAL_IMPROVING_POINTS:
            continue
        noise = _mad_sigma([b - a for a, b in zip(values, values[1:])]) / math.sqrt(2)
        return _theil_sen(values) * (len(values) - 1) > VAL_JITTER_TREND * noise
    return False


VAL_CALM_POINTS = 8  # validation evaluations, at least, to say the evaluated model is calm
VAL_CALM_NOISE = 0.05  # ... its second half's point-to-point noise under this share of its level
VAL_CALM_AT_BEST = 0.05  # ... and its last two evaluations within this share of its best
VAL_FEW_FALLING = 3  # fewer evaluations (this many, at least) are calm when each is lower than the one before and
# the last move is under VAL_CALM_NOISE


def _validation_calm_at_best(series: dict[str, list[Point]]) -> bool:
    """The validation loss, over VAL_CALM_POINTS+ evaluations, is calm (its second half moves point to point by under
    VAL_CALM_NOISE of its level) and ends at its best (the last two evaluations' median within VAL_CALM_AT_BEST of
    the lowest level it reached: with 20+ evaluations the low of its running median, _smoothed_low, as the
    overfitting rule reads it, so one lucky evaluation 2-3 noise sigmas under a calm level is not the best it must
    end near). A batch too small or an LR too high for it keeps the weights moving, which the evaluated model shows
    (a noisy validation, or one that drifts off its best: the world corpus's jitter runs with 8+ evaluations end
    15% and 42% above their best, moving 9% and 25% point to point); a calm validation at its best says the training loss's
    spread is the batches' own variety (one batch's loss is a sample), which no batch or LR change would remove."""
    values = _values(_finite(series.get(VAL_LOSS, [])))
    if VAL_FEW_FALLING <= len(values) < VAL_CALM_POINTS:
        # Too few evaluations to measure their noise: each one better than the last, the last move under
        # VAL_CALM_NOISE of the level, says the same -- the evaluated model settled at its best, not thrown around.
        # (A validation still falling fast, 0.25 -> 0.13, is a model still learning under its batches' jitter.)
        return (all(b < a for a, b in zip(values, values[1:])) and min(values) > 0
                and values[-2] - values[-1] < VAL_CALM_NOISE * values[-1])
    if len(values) < VAL_CALM_POINTS or min(values) <= 0:
        return False
    tail = values[len(values) // 2:]
    noise = _mad_sigma([b - a for a, b in zip(tail, tail[1:])]) / math.sqrt(2)
    return noise < VAL_CALM_NOISE * _median(tail) and _median(values[-2:]) <= (1 + VAL_CALM_AT_BEST) * _smoothed_low(
        values, noise)


# A step noise at or above the level the loss sits at (steps swinging from ~0 to several times that level: a batch
# of one sample) is jitter however calm validation is: the batch is too small, which a calm validation does not undo.
JITTER_OVER_LEVEL = 1.0
JITTER_MIN_TURNS = 0.25  # share of the judged stretch's steps that reverse the previous one's direction, at least


def _turn_share(values: list[float]) -> float:
    """The share of consecutive moves (flat steps skipped) where the loss turns: up after down or down after up.
    Noise around any trend turns at about two steps in three; a smooth curve, however steep, almost never does."""
    moves = [b - a for a, b in zip(values, values[1:]) if b != a]
    if len(moves) < 2:
        return 0.0
    return sum((a > 0) != (b > 0) for a, b in zip(moves, moves[1:])) / (len(moves) - 1)


def detect_jitter(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    train = _finite(series.get(TRAIN_LOSS, []))
    if len(train) < MIN_POINTS:
        return []
    values = _values(train)
    if max(abs(v) for v in values) < CONVERGED_LEVEL:
        return []  # a loss logged below 1e-4 everywhere has converged; its jitter is float and batch noise
    # Noise is judged against the loss the run started from: near convergence a healthy small-batch loss
    # has a large noise-to-level ratio, yet it is tiny against the distance the run has come.
    start_level = max(abs(_median(values[:max(3, len(values) // 20)])), 1e-8)
    half = len(values) // 2
    tail = values[half:]
    trend, noise = _trend_and_noise(tail)
    level = _median(trend)
    # Against the starting loss, heavy tails count: when most steps sit near zero and one in four or five is large
    # (batch 1: the sample it got wrong), the MAD sees only the quiet steps; the mean absolute deviation
    # (x sqrt(pi/2): sigma for Gaussian noise) sees the large ones, which are the jitter. Against the level (the
    # stalled test below) they do not: near zero, every sample a well-fit model gets wrong is such a spike.
    residual = [v - t for v, t in zip(tail, trend)]
    spread = max(noise, math.sqrt(math.pi / 2) * sum(abs(r) for r in residual) / len(residual))
    if spread >= JITTER_SCORE * start_level:
        noise = spread
    score = noise / start_level
    fall = (_median(trend[:max(1, len(trend) // 10)]) - _median(trend[-max(1, len(trend) // 10):]))
    clearly_falling = noise > 0 and fall > noise
    converging = _relative_drop(values) > 0.5
    # Stalled: the trend no longer falls, and the noise either dwarfs the level or the run never converged.
    # A run that never fell is judged against the level it sits at (its start may hold an initial spike).
    stalled_score = score if converging else max(score, noise / max(level, 1e-8))
    stalled_noisy = (stalled_score >= JITTER_SCORE_STALLED and not clearly_falling
                     and (not converging or noise >= STALLED_NOISE_TO_LEVEL * max(level, 1e-8))
                     and not _validation_improving(series, train[half]))
    if (score < JITTER_SCORE and not stalled_noisy) or _validation_frozen(series, train[half]):
        return []
    if not clearly_falling and _validation_improving(series, train[half]):
        return []  # the training trend's stall is its batches' own floor while validation still improves
    if _turn_share(tail) < JITTER_MIN_TURNS:
        return []  # no up-and-down: a fall too steep for the moving-average trend leaves residuals, not jitter
    if _mid_run(train) and noise < STALLED_NOISE_TO_LEVEL * max(level, 1e-8):
        # The log starts mid-run (a later epoch's lines only): its first values are no starting loss, so only noise
        # that dwarfs the level it sits at says jitter.
        return []
    evidence = {"series": TRAIN_LOSS, "noise_sigma": round(noise, 5), "loss_level": round(level, 5),
                "jitter_score": round(score, 3), "starting_loss": round(start_level, 5), "points": len(tail),
                "still_falling": clearly_falling,
                **_span(train, half, len(train) - 1)}
    if ctx.per_device is not None:
        evidence["per_device_batch"] = ctx.per_device
    return [Finding("oscillation-jitter", "warning",
                    f"The training loss jitters step to step by ~{noise:.3g} around a level of {level:.3g} "
                    f"({score:.0%} of the starting loss {start_level:.3g})"
                    + ("." if clearly_falling else " and has stopped falling."),
                    evidence, jitter_actions(ctx))]


GRAD_JITTER_LOG = 1.0  # the gradient norm's median |ln(g_i+1 / g_i)| over the second half: a typical factor of e


def detect_gradient_jitter(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """Gradient noise read off the gradient norm when the loss is logged as a mean over many steps (HF Trainer's
    logging_steps) and hides it: over the second half of 20+ logged norms, the typical log-to-log change (median of
    |ln(g_i+1 / g_i)|) is GRAD_JITTER_LOG or more, a factor of e or more from one log to the next: the per-step
    gradient is dominated by sampling noise, a batch small for its LR (DOMAIN: gradient noise). Healthy runs of the
    world and pasted corpora stay at 0.03-0.75; batch-1 runs at LR 0.15 reach 1.6-2.1 (norms 0.01 <-> 6)."""
    norms = [p for p in series.get("grad_norm", []) if math.isfinite(p.value) and p.value > 0]
    if len(norms) < MIN_POINTS:
        return []
    half = norms[len(norms) // 2:]
    jumps = [abs(math.log(b.value / a.value)) for a, b in zip(half, half[1:])]
    typical = _median(jumps)
    if typical < GRAD_JITTER_LOG:
        return []
    values = _values(half)
    evidence = {"series": "grad_norm", "median_log_change": round(typical, 3), "typical_factor": round(math.exp(typical), 2),
                "norm_min": min(values), "norm_max": max(values), "points": len(half),
                **_span(norms, len(norms) - len(half), len(norms) - 1)}
    if ctx.per_device is not None:
        evidence["per_device_batch"] = ctx.per_device
    return [Finding("oscillation-jitter", "warning",
                    f"The gradient norm jumps from log to log by a typical factor of {math.exp(typical):.1f} "
                    f"({min(values):.3g} to {max(values):.3g} over the second half): the per-step gradient is "
                    "dominated by sampling noise (the logged loss, a mean over many steps, hides it).",
                    evidence, jitter_actions(ctx), confidence="medium")]


VAL_JITTER_MIN_POINTS = 10  # a validation series (one point an epoch, typically) this long, at least
VAL_JITTER_TREND = 2.0  # ... with a trend that falls less than this many times the noise over the stretch judged
VAL_JITTER_OF_START = 0.05  # ... and a noise of at least this share of where the validation loss started


def _accuracy_still_rising(series: dict[str, list[Point]]) -> bool:
    """The validation accuracy (VAL_JITTER_MIN_POINTS+ evaluations; its second half once it has twice that) ends at
    its best of the run and rose over the stretch by more than its point-to-point noise: the model still improves on
    held-out data, and a loss's jumps at a small level are a few samples' (MNIST at 99%: a loss of 0.04 jumping 30%)."""
    accs = _values(_finite(series.get("val_acc", [])))
    if len(accs) < VAL_JITTER_MIN_POINTS or accs[-1] < max(accs):
        return False
    judged = accs[len(accs) // 2:] if len(accs) >= 2 * VAL_JITTER_MIN_POINTS else accs
    diffs = [b - a for a, b in zip(judged, judged[1:])]
    centre = _median(diffs)
    noise = 1.4826 * _median([abs(d - centre) for d in diffs]) / math.sqrt(2)
    return _theil_sen(judged) * (len(judged) - 1) > noise


VAL_ACC_CALM = 0.005  # a validation accuracy (0-1) moving less than this point to point over the judged span is calm


def _validation_accuracy_calm(series: dict[str, list[Point]], skip: int) -> bool:
    """The validation accuracy over the span the loss's jitter is judged on moves less than VAL_ACC_CALM point to
    point (the same robust noise as the loss's): the loss's jumps come from a few confident mistakes, not from
    predictions that swing (a digit classifier at 99.2-99.4% whose validation loss bounced 0.024-0.044)."""
    accs = _values(_finite(series.get("val_acc", [])))[skip:]
    if len(accs) < VAL_JITTER_MIN_POINTS:
        return False
    scale = _percent_scale(accs)
    return _mad_sigma([(b - a) / scale for a, b in zip(accs, accs[1:])]) / math.sqrt(2) < VAL_ACC_CALM


def detect_validation_jitter(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """Validation loss that jumps point to point by VAL_JITTER_SCORE of its level or more, without a trend that
    falls past that noise: judged on a validation series of 10+ points (its second half once it has 20+, where
    the first descent is over), whatever reader produced it (a CSV logger, TensorBoard, text lines). As the training
    loss's jitter is (detect_jitter), the noise is also judged against where the curve started: under
    VAL_JITTER_OF_START of its first evaluations' median it is tiny against the distance the validation has come (a
    loss fallen 30x to 0.04 moving 0.013 point to point is a few samples of a well-fit model, 28% of its level but
    1.3% of its start), and no jitter."""
    val = _finite(series.get(VAL_LOSS, []))
    if len(val) < VAL_JITTER_MIN_POINTS:
        return []
    judged = val[len(val) // 2:] if len(val) >= 2 * VAL_JITTER_MIN_POINTS else val
    values = _values(judged)
    level = _median(values)
    if level <= 0 or max(abs(v) for v in values) < CONVERGED_LEVEL:
        return []
    diffs = [b - a for a, b in zip(values, values[1:])]
    centre = _median(diffs)
    noise = 1.4826 * _median([abs(d - centre) for d in diffs]) / math.sqrt(2)
    fall = -_theil_sen(values) * (len(values) - 1)
    score = noise / level
    start = _median(_values(val[:max(3, len(val) // 20)]))
    if score < VAL_JITTER_SCORE or fall > VAL_JITTER_TREND * noise or _accuracy_still_rising(series):
        return []
    if start > 0 and noise < VAL_JITTER_OF_START * start:
        return []
    if _validation_accuracy_calm(series, len(val) - len(judged)):
        return []
    evidence = {"series": VAL_LOSS, "noise_sigma": round(noise, 6), "loss_level": round(level, 6),
                "relative_noise": round(score, 3), "starting_loss": round(start, 6),
                "trend_fall": round(fall, 6) + 0.0, "points": len(values),
                **_span(val, len(val) - len(judged), len(val) - 1)}
    shown = " -> ".join(f"{v:.3g}" for v in values[:4])
    return [Finding("oscillation-jitter", "warning",
                    f"The validation loss jumps point to point by ~{noise:.3g} around {level:.3g} ({score:.0%} of its "
                    f"level; {shown} ...) over {len(values)} points, and its trend does not fall past that noise.",
                    evidence, ["A small validation set gives a noisy estimate: validate on more samples (or report "
                               "a moving average) before acting on single epochs."] + jitter_actions(ctx),
                    confidence="high" if score >= 2 * VAL_JITTER_SCORE and len(values) >= 12 else "medium")]





def _autocorrelations(values: list[float], lags: range, mean: float, var: float) -> dict[int, float]:
    n = len(values)
    centred = [v - mean for v in values]
    return {lag: sum(map(operator.mul, centred[:n - lag], centred[lag:])) / ((n - lag) * var) for lag in lags}


SWING_RISES = 2  # a swing goes back up: a loss that never climbs its swing's size again has a curved trend, no swings


def _rises(values: list[float], size: float) -> int:
    """How many times the loss climbs ``size`` above its lowest point since the last climb: a swing goes up as well as
    down; a smooth fall, however curved (a moving average leaves its knee as residual blocks), never does."""
    count, low = 0, math.inf
    for v in values:
        low = min(low, v)
        if v - low >= size:
            count, low = count + 1, v
    return count


def detect_periodic(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """Swings of the training loss in the data's order: a regular period, or slow blocks far larger than the step
    noise. Judged on losses logged within epochs only: an epoch's mean averages over every sample once, whatever
    their order, so a per-epoch curve cannot show the data order (a neural ODE's loss falling 1000x over 200 epoch
    means left residuals of its curvature that read as blocks: world corpus batch 19, after its one scoring)."""
    train = _finite(series.get(TRAIN_LOSS, []))
    if len(train) < 3 * MIN_POINTS or cadence_of(train) == "epoch":
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
    ordered = sorted(residual)
    amplitude = (ordered[int(0.95 * (n - 1))] - ordered[int(0.05 * (n - 1))]) / 2
    level = max(_median(trend[start:]), 0.1 * _median(values[:max(3, len(values) // 20)]), 1e-8)
    # Data-order swings: the loss wanders in blocks (sorted or grouped data) far more than it moves step to step.
    step_noise = _mad_sigma([b - a for a, b in zip(values[start:], values[start + 1:])]) / math.sqrt(2)
    swing = _mad_sigma(residual)
    swing_to_noise = swing / step_noise if step_noise > SWING_MIN_NOISE * level else 0.0
    # Large swings only (DOMAIN: periodic LARGE swings): a converged loss that wanders by a few percent of its level,
    # however smoothly, is healthy (two healthy world runs: 7-8%; the labelled periodic runs of both corpora: 14.5%+).
    swings = (swing_to_noise >= SWING_TO_NOISE and swing / level >= SWING_TO_LEVEL
              and amplitude / level >= SWING_AMPLITUDE and _rises(values[start:], amplitude) >= SWING_RISES)
    if not swings:
        # No finding whatever the peaks (and the O(n^2) autocorrelation is not computed): a pattern no larger than
        # the step-to-step noise is batch noise that recurs (a loader that repeats its batches each epoch), not
        # the slow swings of sorted or grouped data (DOMAIN: periodic large swings, not every step).
        return []
    acf = _autocorrelations(residual, range(2, n // 3), mean, var)
    peaks = [lag for lag in acf if 3 <= lag < n // 3 - 1 and acf[lag] > PERIODIC_ACF
             and acf[lag] >= acf[lag - 1] and acf[lag] >= acf[lag + 1]]
    if not peaks and _autocorrelations(residual, range(1, 2), mean, var)[1] < PERIODIC_ACF:
        # Slow blocks move together: neighbouring points of a swing are alike (lag-1 autocorrelation 0.67-0.82 on
        # the corpus's class-sorted runs). Without that, and without a regular period, a residual spread far above
        # the step-to-step MAD is heavy-tailed batch noise (batch 1: most losses ~0, one in four large), not a swing.
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
    what = (f"swings periodically (every ~{evidence.get('period_steps', period_points):g} "
            f"{'steps' if steps_per_point else 'log points'}, ±{amplitude:.3g}, autocorrelation {acf[period]:.2f})"
            if regular else
            f"swings in slow blocks {swing_to_noise:.1f}x larger than its step-to-step noise (±{amplitude:.3g})")
    return [Finding("oscillation-periodic", "warning",
                    f"The training loss {what}: a pattern in the data order, not the batch size.",
                    evidence, list(PERIODIC_ACTIONS))]





RECURRING_ACF = 0.6  # residual autocorrelation at some lag of 8+ points: the loss repeats itself with that period
RECURRING_MIN_LAG = 8


def _recurrence(train: list[Point], threshold: float) -> tuple[int, float, list[float], int, float] | None:
    """(lag in analysed points, autocorrelation, residual, block, level) when the training loss's residual (its
    moving-average trend removed, its first fifth skipped) repeats itself: a local peak of the autocorrelation at a
    lag of RECURRING_MIN_LAG+ points (3+ cycles) reaching ``threshold``; the fundamental, not a multiple. ``level``
    is the trend's median over the residual's stretch (at least a tenth of the start)."""
    values, block = _block_means(_values(train), MAX_ANALYSIS_POINTS)
    trend = _moving_average(values, max(9, len(values) // 6) | 1)
    skip = len(values) // 5
    residual = [v - t for v, t in zip(values, trend)][skip:]
    n = len(residual)
    mean = sum(residual) / n if n else 0.0
    var = sum((r - mean) ** 2 for r in residual) / n if n else 0.0
    if n < 3 * RECURRING_MIN_LAG or var <= 0:
        return None
    acf = _autocorrelations(residual, range(RECURRING_MIN_LAG - 1, n // 3), mean, var)
    peaks = [lag for lag in acf if RECURRING_MIN_LAG <= lag < n // 3 - 1 and acf[lag] >= threshold
             and acf[lag] >= acf[lag - 1] and acf[lag] >= acf[lag + 1]]
    if not peaks:
        return None
    strongest = max(acf[lag] for lag in peaks)
    lag = min(lag for lag in peaks if acf[lag] >= 0.9 * strongest)  # the fundamental, not a multiple
    level = max(_median(trend[skip:]), 0.1 * _median(values[:max(3, len(values) // 20)]), 1e-8)
    return lag, acf[lag], residual, block, level


def _recurring_period(train: list[Point]) -> tuple[int, float] | None:
    """(lag in log points, autocorrelation) when the training loss's residual repeats itself (_recurrence) at
    RECURRING_ACF or more. Shuffled batch noise, however large, stays near 0 at every lag (the world corpus's jitter
    runs: 0.12-0.44); the same batches hard at the same place of every epoch give ~1.0 at the epoch's length."""
    found = _recurrence(train, RECURRING_ACF)
    return (found[0] * found[3], found[1]) if found else None


REPEAT_ACF = 0.9  # the residual this alike one period later: the loss repeats its pattern, not a noise that recurs
REPEAT_SPIKE = 3.0  # a phase of the repeating pattern this many robust sigmas out of the others: a restart a cycle
REPEAT_BLOCKS = 0.3  # ... or neighbouring phases this alike (circular lag-1 autocorrelation): swings in blocks
# Swings this share of the level, at least (half of the slow-block rule's SWING_AMPLITUDE: a pattern REPEAT_ACF alike
# with a shape is no healthy wander; a class-sorted VAE repeats +-6-7% of its level at 0.93).
REPEAT_AMPLITUDE = 0.05


def _pattern_shape(profile: list[float]) -> tuple[float, float]:
    """(spike, blocks) of one period's pattern: how far its most extreme phase stands from the others' median in
    robust sigmas, and the circular lag-1 autocorrelation of its phases."""
    centre = _median(profile)
    sigma = _mad_sigma(profile)
    spike = max(abs(x - centre) for x in profile) / sigma if sigma > 0 else 0.0
    mean = sum(profile) / len(profile)
    var = sum((x - mean) ** 2 for x in profile)
    blocks = sum((profile[i] - mean) * (profile[i - 1] - mean) for i in range(len(profile))) / var if var > 0 else 0.0
    return spike, blocks


def detect_repeating_swings(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """Large swings the training loss repeats, period after period, that neither jitter (too small against its start)
    nor the slow-block test (each swing moves in steps as large as the noise) caught: data in the same order every
    epoch. All must hold: the detrended loss one period (8+ log points, 3+ cycles) later is REPEAT_ACF alike; the
    swings are large (its 5th-95th percentile half-range and the repeating pattern's half-range both REPEAT_AMPLITUDE
    of the level); and the pattern has a shape, not one fixed offset a batch (an unshuffled loader's batch noise, as
    large as the step noise, recurs too): a restart once a period (a phase REPEAT_SPIKE robust sigmas out) or swings
    in blocks (neighbouring phases REPEAT_BLOCKS alike). World corpus: the labelled periodic runs repeat at
    0.86-0.996 (those this rule adds: 0.96 and 0.99), healthy runs at most 0.97 (an unshuffled MNIST loader's batch
    noise: no shape, spike 1.2, blocks -0.05). Losses logged within epochs only, as detect_periodic's."""
    train = _finite(series.get(TRAIN_LOSS, []))
    if len(train) < 3 * MIN_POINTS or cadence_of(train) == "epoch":
        return []
    found = _recurrence(train, REPEAT_ACF)
    if found is None:
        return []
    lag, acf, residual, block, level = found
    profile = [_median(residual[phase::lag]) for phase in range(lag)]
    ordered = sorted(residual)
    amplitude = (ordered[int(0.95 * (len(ordered) - 1))] - ordered[int(0.05 * (len(ordered) - 1))]) / 2
    swing = (max(profile) - min(profile)) / 2
    if min(amplitude, swing) < REPEAT_AMPLITUDE * level:
        return []
    spike, blocks = _pattern_shape(profile)
    if spike < REPEAT_SPIKE and blocks < REPEAT_BLOCKS:
        return []
    evidence = {"series": TRAIN_LOSS, "period_points": lag * block, "autocorrelation": round(acf, 3),
                "amplitude": round(amplitude, 5), "relative_amplitude": round(amplitude / level, 3),
                "pattern_half_range": round(swing, 5), "pattern_spike_sigmas": round(spike, 2),
                "pattern_blocks": round(blocks, 3), **_span(train, len(train) // 5, len(train) - 1)}
    shape = "a restart once a period" if spike >= REPEAT_SPIKE else "swings in blocks"
    return [Finding("oscillation-periodic", "warning",
                    f"The training loss repeats the same pattern every ~{lag * block} log points (autocorrelation "
                    f"{acf:.2f} at that lag; {shape}, ±{swing:.3g} around a level of {level:.3g}): the same batches "
                    "come in the same order every epoch, a pattern in the data order, not the batch size.",
                    evidence, list(PERIODIC_ACTIONS))]


def step_oscillation(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """Step-to-step jitter of the training loss (detect_jitter), said as a periodic swing when it recurs with a
    period (recurring_not_jitter), and withdrawn when it does not while the validation loss is calm at its best
    (_validation_calm_at_best: the spread is the batches' own variety)."""
    found = recurring_not_jitter(detect_jitter(series, ctx), series)
    if found and found[0].kind == "oscillation-jitter" and (
            found[0].evidence["noise_sigma"] < JITTER_OVER_LEVEL * found[0].evidence["loss_level"]) and (
            _validation_calm_at_best(series) or (found[0].evidence.get("still_falling") and _validation_improving(
                series, _finite(series[TRAIN_LOSS])[len(_finite(series[TRAIN_LOSS])) // 2]))):
        # A calm validation at its best; or a training loss still falling clearly while the evaluated model keeps
        # improving (a batch-16 spectrogram classifier, steps 0.01-0.5 around 0.24, val_acc 0.78 -> 0.85): the
        # optimiser makes progress under its batches' variety, nothing to fix. Swings that recur are periodic first.
        return []
    return found


def short_step_jitter(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    """Jitter on 10-19 step losses (shortlog.detect_short_jitter), withdrawn, as the long rule's is, when the
    validation loss is calm at its best (_validation_calm_at_best): 3 evaluations each lower than the last, the last
    move under 5% of the level (0.636, 0.622, 0.601), say the evaluated model settled, so the steps' spread is
    their batches' own variety."""
    found = detect_short_jitter(series, ctx, ctx.elisions or [])
    if found and _validation_calm_at_best(series):
        return []
    return found


def recurring_not_jitter(jitter: list[Finding], series: dict[str, list[Point]]) -> list[Finding]:
    """A jitter finding whose step-to-step swings recur with a period (_recurring_period) is the data order, not an
    optimiser's noise: the same batches are hard at the same place of every epoch (data stored by class or topic and
    never shuffled). Said as a periodic finding, with the data-order remedies; a larger batch or a lower LR would
    only average the pattern away."""
    if not jitter:
        return jitter
    train = _finite(series.get(TRAIN_LOSS, []))
    found = _recurring_period(train) if len(train) >= 3 * MIN_POINTS else None
    if found is None:
        return jitter
    period, acf = found
    evidence = {"series": TRAIN_LOSS, "period_points": period, "autocorrelation": round(acf, 3),
                "jitter_score": jitter[0].evidence.get("jitter_score"), **_span(train, len(train) // 5, len(train) - 1)}
    return [Finding("oscillation-periodic", "warning",
                    f"The training loss's step-to-step swings repeat every ~{period} log points (autocorrelation "
                    f"{acf:.2f} at that lag): the same batches are hard at the same place of every epoch, a pattern "
                    "in the data order (stored by class or topic, never shuffled), not the batch size.",
                    evidence, list(PERIODIC_ACTIONS))]


# A sawtooth: the loss restarts high and falls again, over and over, at a regular spacing (per epoch, typically):
# data in the same order every epoch, or something reset every epoch. Judged on the restarts, not on an
# autocorrelation, so two cycles are enough where the autocorrelation rules need three: each restart is tested on its
# own (a one-step rise of 40%+ of the series' range and 6x+ the noise, followed by a gradual fall back), which white
# or heavy-tailed noise and isolated spikes almost never pass, whereas r(P) pools the whole series and has a standard
# error of ~1/sqrt(n). 0 of 3,000 simulated noisy falling runs (9-300 points, Gaussian, t3 or spiky noise) fire, and
# 2 of 3,000 runs of 9-30 points with up to 30% noise. One restart is not a cycle (a resumed run, a one-off jump).
# Minimum: two restarts, each followed by SAWTOOTH_MIN_CYCLE points (the restart and three falling points: fewer is
# step-to-step jitter or a spike) after a first point, so 9 points; and 6+ second differences inside the cycles to
# measure the noise on (a MAD of fewer is no scale), so in practice 11 (two 5-point cycles). Two restarts show one
# spacing; the stretches before the first and after the last may not be longer than it (no restart missing).
SAWTOOTH_MIN_CYCLE = 4
SAWTOOTH_JUMP_SHARE = 0.4  # each restart rises at least this share of the series' range (max - min) in one step ...
SAWTOOTH_JUMP_TO_NOISE = 6.0  # ... and at least this many times the noise (MAD of second differences within cycles)
SAWTOOTH_FALL = 0.5  # each cycle falls back at least this share of its restart's jump ...
SAWTOOTH_HOLD = 0.25  # ... gradually: the point after the restart still this share of the way up (not a spike)
SAWTOOTH_SPACING = 0.2  # restarts this close to their median spacing (and at least one point): regular
SAWTOOTH_MIN_NOISE_POINTS = 6  # second differences inside the cycles, at least, to measure the noise on


def _sawtooth_restarts(values: list[float]) -> list[int] | None:
    """Indices where the loss jumps up by a large share of its range and of its step noise, or None."""
    span = max(values) - min(values)
    diffs = [b - a for a, b in zip(values, values[1:])]
    restarts = [i + 1 for i, d in enumerate(diffs) if d >= SAWTOOTH_JUMP_SHARE * span]
    if len(restarts) < 2 or span <= 0:
        return None
    # The noise from second differences within the stretches between restarts: a steep but smooth fall after each
    # restart is trend, not noise (first differences would count it). White noise of sigma s gives var 6 s^2.
    bounds = [0] + restarts + [len(values)]
    curvature = [values[i + 1] - 2 * values[i] + values[i - 1]
                 for a, b in zip(bounds, bounds[1:]) for i in range(a + 1, b - 1)]
    if len(curvature) < SAWTOOTH_MIN_NOISE_POINTS:
        return None
    noise = _mad_sigma(curvature) / math.sqrt(6)
    if any(diffs[r - 1] < SAWTOOTH_JUMP_TO_NOISE * noise for r in restarts):
        return None
    return restarts


def _sawtooth_regular(restarts: list[int], n: int) -> int | None:
    """The spacing of regular restarts (each cycle SAWTOOTH_MIN_CYCLE+ points, the head and the tail no longer than
    a cycle), or None."""
    gaps = [b - a for a, b in zip(restarts, restarts[1:])]
    period = _median(gaps)
    slack = max(1.0, SAWTOOTH_SPACING * period)
    tail = n - restarts[-1]
    if min(gaps + [tail]) < SAWTOOTH_MIN_CYCLE or any(abs(g - period) > slack for g in gaps):
        return None
    if restarts[0] > period + slack or tail > period + slack:
        return None
    return round(period)


def _sawtooth_falls(values: list[float], restarts: list[int]) -> bool:
    """Each cycle falls again after its restart, gradually: it ends (the median of its last third) at least half the
    jump below the restart, and the point after the restart still holds SAWTOOTH_HOLD of the restart's height above
    that end (a spike is back down at once)."""
    ends = restarts[1:] + [len(values)]
    for start, end in zip(restarts, ends):
        cycle = values[start:end]
        low = _median(cycle[-max(1, len(cycle) // 3):])
        high, jump = values[start], values[start] - values[start - 1]
        if high - low < SAWTOOTH_FALL * jump or cycle[1] - low < SAWTOOTH_HOLD * (high - low):
            return False
    return True


def detect_sawtooth(series: dict[str, list[Point]], ctx: Context, elisions: list[int]) -> list[Finding]:
    """A loss that restarts high and falls again at a regular spacing, from 9 points (two cycles)."""
    train = _finite(series.get(TRAIN_LOSS, []))
    if len(train) < 2 * SAWTOOTH_MIN_CYCLE + 1 or not all(adjacent(train, elisions)):
        return []
    values = _values(train)
    if max(abs(v) for v in values) < CONVERGED_LEVEL:
        return []
    restarts = _sawtooth_restarts(values)
    period = restarts and _sawtooth_regular(restarts, len(values))
    if not period or not _sawtooth_falls(values, restarts):
        return []
    span = max(values) - min(values)
    jumps = [values[r] - values[r - 1] for r in restarts]
    per_epoch = all(train[r].epoch is not None and train[r - 1].epoch is not None
                    and int(train[r].epoch) != int(train[r - 1].epoch) for r in restarts)
    evidence = {"series": TRAIN_LOSS, "period_points": period, "restarts": [_where(train, r) for r in restarts],
                "restart_jumps": [round(j, 6) for j in jumps],
                "jump_share_of_range": round(min(jumps) / span, 3), "points": len(values),
                "cycles": round((len(values) - restarts[0]) / period, 1), "at_epoch_start": per_epoch}
    at = "at each epoch start" if per_epoch else f"every ~{period} log points"
    return [Finding("oscillation-periodic", "warning",
                    f"The training loss restarts high {at} and falls again ({len(restarts)} restarts, "
                    + ", ".join(f"{values[r - 1]:.3g} -> {values[r]:.3g}" for r in restarts)
                    + f"; each jump {min(jumps) / span:.0%}+ of its range): a sawtooth, the same data in the same "
                    "order every epoch or something reset each epoch.",
                    evidence, list(SAWTOOTH_ACTIONS), confidence="medium" if len(restarts) >= 3 else "low")]


SAWTOOTH_ACTIONS = (
    PERIODIC_ACTIONS[0],
    "Check for a per-epoch reset: an optimizer, LR scheduler or model created (or a checkpoint reloaded) inside the "
    "epoch loop restarts the loss at every epoch; create them once, before the loop.",
    PERIODIC_ACTIONS[2])


# ------------------------------------------------------------------ validation

def _drop_from_start(values: list[float]) -> float:
    """How far a per-epoch training loss fell over the run: from its first tenth's median, or from its first three
    points' when higher (a long run whose fast fall came inside its first tenth: 44.6 -> 25 in 40 of 500 epochs did
    not "fall 19%"), to its last tenth's median. slow.py's start is measured the same way."""
    k = max(2, len(values) // 10)
    start = max(_median(values[:k]), _median(values[:3]))
    return (start - _median(values[-k:])) / abs(start) if start else 0.0


def _relative_drop(values: list[float]) -> float:
    k = max(2, len(values) // 10)
    first, last = _median(values[:k]), _median(values[-k:])
    return (first - last) / abs(first) if first else 0.0


VAL_STALE_SHARE = 0.25  # a flat validation's best older than this share of its points (and OVERFIT_SINCE): stalled
QUALITY_RISE_FLOOR = 0.001  # a validation accuracy/mAP rise (0-1 scale) below this is no rise, whatever its noise


def validation_quality(series: dict[str, list[Point]]) -> list[Point]:
    """The validation measure of what the model is for, higher is better: its accuracy, else a detection mAP, else a
    text-quality score (BLEU, ROUGE, F1, exact match: names.py)."""
    for name in ("val_acc", "val_map", "val_score"):
        points = [p for p in series.get(name, []) if math.isfinite(p.value)]
        if points:
            return points
    return []


def _validation_stalled(val: list[Point], best: int, series: dict[str, list[Point]]) -> bool:
    """A flat validation loss says overfitting only once it has stopped improving: its best is OVERFIT_SINCE points
    old or more, and older than the last VAL_STALE_SHARE of its points (a curve that still sets new lows is
    converging, however little it falls), and the validation accuracy (or mAP), when printed, has not gone on
    improving since: the median of its last OVERFIT_SINCE values is not above the median of the OVERFIT_SINCE
    values around the loss's best by more than twice its point-to-point noise (medians: a noisy accuracy's maximum
    is no trend; a smooth mAP creeping to its best at the end is a rise)."""
    since = len(val) - 1 - best
    if since < max(OVERFIT_SINCE, VAL_STALE_SHARE * len(val)):
        return False
    return not _quality_rose_since(val[best], series)


ERROR_CUT = 0.5  # the validation error (1 - accuracy or mAP) cut by this share since the loss's best ...


def _error_halved_since(best_loss: Point, series: dict[str, list[Point]]) -> bool:
    """The validation error (1 - accuracy, mAP or score, on its scale) of the last QUALITY_END_POINTS evaluations'
    median is at most (1 - ERROR_CUT) of the error at the validation loss's best: the model generalises better than
    at that best, whatever the loss does (a few confident mistakes grow the loss)."""
    found = _quality_up_to(series, best_loss, 4)
    if found is None:
        return False
    quality, upto, scale = found
    then, now = scale - upto[-1], scale - _median([p.value for p in quality[-QUALITY_END_POINTS:]])
    return then > 0 and now <= (1 - ERROR_CUT) * then


def _quality_rose_since(best_loss: Point, series: dict[str, list[Point]]) -> bool:
    """The validation accuracy (or mAP, score) went on improving after the validation loss's best: the median of its
    last OVERFIT_SINCE values above the median of the OVERFIT_SINCE values around the loss's best by more than twice
    its point-to-point noise (medians: a noisy accuracy's maximum is no trend; a smooth mAP creeping to its best at
    the end is a rise), with OVERFIT_SINCE+ evaluations since."""
    quality = validation_quality(series)
    at_best = [i for i, p in enumerate(quality) if p.line <= best_loss.line]
    if len(quality) < 2 * OVERFIT_SINCE or not at_best or len(quality) - 1 - at_best[-1] < OVERFIT_SINCE:
        return False
    centre, values = at_best[-1], [p.value for p in quality]
    scale = _percent_scale(values)
    then = _median(values[max(0, centre - OVERFIT_SINCE // 2):centre + OVERFIT_SINCE // 2 + 1])
    now = _median(values[-OVERFIT_SINCE:])
    later = values[centre:]
    noise = _mad_sigma([b - a for a, b in zip(later, later[1:])]) / math.sqrt(2)
    return now - then > max(2 * noise, QUALITY_RISE_FLOOR * scale)


def _position(point: Point) -> tuple[int, float]:
    """Where a point lies in the run, comparable across series: its step, else its epoch, else its line."""
    if point.step is not None:
        return 0, point.step
    if point.epoch is not None:
        return 1, point.epoch
    return 2, point.line


def _train_fall_on_plateau(train: list[Point], val: list[Point], level: float, higher_is_better: bool = False
                           ) -> float:
    """How far training fell while validation sat at its level: from the first validation point within ``level``
    (its best plus its margin) to the end, the relative fall between the medians of the first and last quarter of
    the training points in that span (medians: the end of training's fast phase at the span's start, or a noisy
    epoch, does not count as a fall). 0.0 when the span holds too few training points to say."""
    start = next((i for i, p in enumerate(val) if (p.value >= level if higher_is_better else p.value <= level)), None)
    if start is None:
        return 0.0
    # A validation jumping by VAL_JITTER_SCORE of its level point to point is not flat: it is noisy (the
    # validation-jitter rule), and its margin would take in the whole run.
    plateau = _values(val[start:])
    if len(plateau) < 3 or _mad_sigma([b - a for a, b in zip(plateau, plateau[1:])]) / math.sqrt(2) >= (
            VAL_JITTER_SCORE * abs(_median(plateau))):
        return 0.0
    start = val[start]
    kind, at = _position(start)
    span = [p.value for p in train if _position(p)[0] == kind and _position(p)[1] >= at]
    quarter = len(span) // 4
    if quarter < 2:
        return 0.0
    first, last = _median(span[:quarter]), _median(span[-quarter:])
    return (first - last) / abs(first) if first else 0.0


def _quality_stalled_overfitting(series: dict[str, list[Point]], ctx: Context, val: list[Point] | None = None
                                 ) -> list[Finding]:
    """No validation loss, only a quality (accuracy, mAP, BLEU, F1: higher is better): overfitting when the quality
    stopped improving (its best OVERFIT_SINCE+ evaluations old and older than VAL_STALE_SHARE of them, the last ones
    no better than those around the best: _validation_stalled's rule, mirrored) while the training loss fell
    OVERFIT_PLATEAU_FALL+ over the quality's plateau (from its first evaluation within the best's margin on), and
    the best left room to improve (under QUALITY_ROOM of perfect)."""
    quality = validation_quality(series)
    train = _finite(series.get("train_loss_epoch", []) or series.get(TRAIN_LOSS, []))
    if len(quality) < 2 * OVERFIT_SINCE or len(train) < STUCK_FEW_POINTS:
        return []
    values = _values(quality)
    best = max(range(len(values)), key=values.__getitem__)
    if len(values) - 1 - best < max(OVERFIT_SINCE, VAL_STALE_SHARE * len(values)):
        return []
    scale = _percent_scale(values)
    if values[best] >= QUALITY_ROOM * scale:  # within a tenth of perfect: no room left to show a stall
        return []
    noise = _mad_sigma([b - a for a, b in zip(values, values[1:])]) / math.sqrt(2)
    margin = max(2 * noise, QUALITY_RISE_FLOOR * scale)
    fall = _train_fall_on_plateau(train, quality, values[best] - margin, higher_is_better=True)
    if fall < OVERFIT_PLATEAU_FALL:
        return []
    name = quality[0].name
    evidence = {"series": name, "quality_best": round(values[best], 5), "quality_best_at": _where(quality, best),
                "quality_last": round(values[-1], 5), "evaluations_since_best": len(values) - 1 - best,
                "train_fall_on_plateau": round(fall, 3), "val_points": len(values)}
    what = {"val_acc": "accuracy", "val_map": "mAP", "val_score": "score"}.get(name, name)
    if val:
        loss = _values(val)
        at = min(range(len(loss)), key=loss.__getitem__)
        evidence.update({"val_loss_best": round(loss[at], 6), "val_loss_best_at": _where(val, at)})
        why = (f"; the validation loss has not beaten its best ({loss[at]:.4g} at {_describe(_where(val, at))}) "
               "either: overfitting.")
    else:
        why = ": overfitting (the log prints no validation loss)."
    return [Finding("overfitting", "warning",
                    f"The validation {what} peaked at {values[best]:.4g} at {_describe(_where(quality, best))} and has "
                    f"not improved in the {len(values) - 1 - best} evaluations since (last {values[-1]:.4g}) while the "
                    f"training loss fell {fall:.0%} more" + why,
                    evidence, overfitting_actions(ctx, "val loss" if val else f"the validation {what}"),
                    confidence="medium")]


def _stalled_quality(series: dict[str, list[Point]], val: list[Point], ctx: Context) -> list[Finding]:
    """Overfitting read from the quality (_quality_stalled_overfitting): when the log prints no validation loss, or
    when its validation loss too never beat a best from its first quarter (_loss_never_beat_early_best: both
    validation measures stalled early, the loss's best said beside the quality's)."""
    if len(val) < 4 and not series.get("test_loss"):
        return _quality_stalled_overfitting(series, ctx)
    if _loss_never_beat_early_best(val):
        return _quality_stalled_overfitting(series, ctx, val)
    return []


def _loss_never_beat_early_best(val: list[Point]) -> bool:
    """The validation loss (2 x OVERFIT_SINCE+ evaluations) set its best in its first quarter and never beat it."""
    values = _values(val)
    if len(values) < 2 * OVERFIT_SINCE:
        return False
    best = min(range(len(values)), key=values.__getitem__)
    return len(values) - 1 - best >= max(OVERFIT_SINCE, (1 - VAL_STALE_SHARE) * len(values))


OVERFIT_PLATEAU_FALL = 0.15  # training's fall over validation's plateau that says it still fits the training set
QUALITY_ROOM = 0.9  # a quality (0-1 or 0-100 scale) at or above this share of perfect cannot show overfitting by stalling


def detect_validation(series: dict[str, list[Point]], ctx: Context) -> list[Finding]:
    train = _finite(series.get(TRAIN_LOSS, []) or series.get("train_loss_epoch", []))
    val = _finite(series.get(VAL_LOSS, []))
    quality = _stalled_quality(series, val, ctx)
    if quality:
        return quality
    findings = []
    if len(train) < MIN_POINTS:
        return _few_points_overfitting(train, val, ctx, series)
    # Per-epoch points are epoch means: the first three say where the run started. Per-step points are single
    # batches, too noisy for that (a batch-1 log's first three were 0.99, 0.48, 1.16).
    per_epoch = all(p.cadence == "epoch" for p in train)
    train_drop = ((_drop_from_start if per_epoch else _relative_drop)(_values(train))
                  if len(train) >= MIN_POINTS else None)
    if len(val) >= 4 and train_drop is not None and train_drop <= HEALTHY_TRAIN_DROP:
        # Training fell too little for the rules below to call it healthy (a fine-tune from trained weights falls
        # 20%), but validation rising clearly and for long while it falls at all is overfitting all the same.
        sustained = _sustained_rise(train, val, series, ctx)
        if sustained:
            return sustained
    if len(val) >= 4 and train_drop is not None and train_drop > HEALTHY_TRAIN_DROP:
        values = _values(val)
        best = min(range(len(values)), key=values.__getitem__)
        noise = _mad_sigma([b - a for a, b in zip(values, values[1:])]) / math.sqrt(2)
        margin = max(VAL_RISE * abs(values[best]), 2 * noise)
        after = values[best + 1:]
        rising = len(after) >= 2 and _median(after[-max(2, len(after) // 2):]) > _smoothed_low(values, noise) + margin
        tail = values[len(values) // 2:]
        val_tail_drop = _relative_drop(tail) if len(tail) >= 2 else 0.0
        train_tail = _values(train)[len(train) // 2:]
        # Not improving (flat, or rising less than the rising rule needs) while training still falls: validation
        # has stopped improving, not merely slowed down near its floor (_validation_stalled).
        train_fall = max(_relative_drop(train_tail), _train_fall_on_plateau(train, val, values[best] + margin))
        flat = val_tail_drop < 0.03 and train_fall > OVERFIT_PLATEAU_FALL and _validation_stalled(val, best, series)
        if rising and _quality_rose_since(val[best], series) and (
                _small_rise(values, best) or (_rise(values, best) < OVERFIT_RISE_HIGH and _quality_at_best_end(series))
                or _error_halved_since(val[best], series)):
            # A drift of a few per cent while the model still gets better at what it is for; or of up to 20% while
            # the quality went on rising to its best at the very end (a detector's summed loss creeping up as a
            # few boxes grow overconfident, its mAP still setting new highs).
            rising = False
        if rising or flat:
            gap = _median(values[-2:]) - _median(_values(train)[-max(3, len(train) // 20):])
            evidence = {"val_best": round(values[best], 5), "val_best_at": _where(val, best),
                        "val_last": round(values[-1], 5), "val_last_at": _where(val, len(val) - 1),
                        "train_drop": round(train_drop, 3), "train_val_gap": round(gap, 5),
                        "val_points": len(val)}
            summary = (f"Validation loss bottomed at {values[best]:.4g} at {_describe(_where(val, best))} and rose to "
                       f"{values[-1]:.4g} while the training loss kept falling: overfitting."
                       if rising else
                       "Validation loss has stopped improving: over its second half it "
                       + _fell_or_rose(val_tail_drop, fell="fell only") + f", its best is still {values[best]:.4g} at {_describe(_where(val, best))}, and the "
                       "training loss still falls: overfitting.")
            confidence, note = overfitting_confidence(values, best, series)
            evidence.update(note)
            if note.get("val_acc_at_best"):
                summary += (" Validation accuracy is still at its best, so this is an early sign at most."
                            if confidence == "low" else
                            " Validation accuracy is still at its best: so far only the loss shows it.")
            findings.append(Finding("overfitting", "warning", summary, evidence, overfitting_actions(ctx),
                                    confidence=confidence))
            return findings
    # Slow convergence: both curves fall slowly (or do not fall).
    if train_drop is not None and len(train) >= SLOW_MIN_POINTS:
        values = _values(train)
        val_drop = _relative_drop(_values(val)) if len(val) >= 4 else None
        val_slow = val_drop is None or val_drop < SLOW_DROP
        # A plateau followed by a drop is fine: the overall drop would be large.
        # Judged on the shape of the curve: a decay that has flattened against its own noise has converged
        # (a resumed or fine-tuning run near its floor falls little, and is fine); slow is still falling steadily.
        late = values[len(values) // 2:]
        late_trend, late_noise = _trend_and_noise(late)
        tenth = max(1, len(late_trend) // 10)
        late_fall = _median(late_trend[:tenth]) - _median(late_trend[-tenth:])
        still_falling = late_fall > late_noise  # the smoothed trend still drops more than its noise
        # ... and as fast as at the start (slow.steady): a loss slowing down as it goes converges to its floor
        # (a fine-tune's flattening, a detection loss's floor far above zero), however little it fell.
        paces = quarter_paces(values)
        # From where the run started: its first tenth's median, or its first three points' when higher (a per-step
        # loss that fell 7.6 -> 4.6 within its first tenth, the first epoch, did not "fall only 20%").
        start = max(_median(values[:max(2, len(values) // 10)]), _median(values[:3]))
        fell = (start - _median(values[-max(2, len(values) // 10):])) / abs(start) if start else 0.0
        if max(train_drop, fell) < SLOW_DROP and val_slow and still_falling and paces is not None and steady(paces):
            train_drop = max(train_drop, fell)
            last_quarter = values[3 * len(values) // 4:]
            still = _relative_drop(last_quarter) if len(last_quarter) >= 4 else 0.0
            evidence = {"train_start": round(start, 5), "train_end": round(_median(values[-max(2, len(values) // 10):]), 5),
                        "train_drop": round(train_drop, 3), "still_falling_last_quarter": round(still, 3),
                        "second_half_fall": round(late_fall, 6), "second_half_noise": round(late_noise, 6),
                        "pace_last_to_first_quarter": round(paces[1] / paces[0], 3), "points": len(values), **_span(train, 0, len(train) - 1)}
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


VAL_SMOOTH_POINTS = 20  # validation evaluations, at least, to read its low on running medians ...
VAL_SMOOTH_WINDOW = 5  # ... of this many evaluations (centred; fewer at the ends) ...
VAL_DIP_NOISE = 3.0  # ... when the lowest evaluation lies no more than this many noise sigmas under that low


def _smoothed_low(values: list[float], noise: float) -> float:
    """The lowest the validation loss's level went: with VAL_SMOOTH_POINTS+ evaluations, the minimum of its centred
    running medians of VAL_SMOOTH_WINDOW (shorter at the ends), when its lowest evaluation lies within VAL_DIP_NOISE
    times the point-to-point ``noise`` under it: a lone low evaluation of a noisy curve is not where it turned (a
    spectrogram classifier's 0.414 between 0.498 and 0.435, its level ~0.47, 1.6 sigmas under); else its lowest
    value (a smooth curve's first evaluation at 1.185, the rest at 1.27-1.29 moving 0.002 a point: 37 sigmas under,
    a real best). A curve that turned and rose keeps its low: a median moves a bottom only by what its neighbours
    allow."""
    low = min(values)
    if len(values) < VAL_SMOOTH_POINTS:
        return low
    half = VAL_SMOOTH_WINDOW // 2
    level = min(_median(values[max(0, i - half):i + half + 1]) for i in range(len(values)))
    return level if level - low <= VAL_DIP_NOISE * noise else low


def _rise(values: list[float], best: int) -> float:
    """How far the validation loss's last two points' median sits above its best, as a share of the best."""
    return (_median(values[-2:]) - values[best]) / abs(values[best]) if values[best] else 0.0


QUALITY_END_POINTS = 3  # the quality's last this many evaluations (median) ...


def _quality_at_best_end(series: dict[str, list[Point]]) -> bool:
    """The validation accuracy (or mAP, score) ends at its best: the median of its last QUALITY_END_POINTS values
    within ACC_AT_BEST of the highest it ever reached (4+ evaluations)."""
    quality = [p.value for p in validation_quality(series)]
    if len(quality) < 4:
        return False
    scale = _percent_scale(quality)
    return _median(quality[-QUALITY_END_POINTS:]) >= max(quality) - ACC_AT_BEST * scale


def _sustained_rise(train: list[Point], val: list[Point], series: dict[str, list[Point]], ctx: Context
                    ) -> list[Finding]:
    """Overfitting on a log whose training loss fell too little for the long-log rules (HEALTHY_TRAIN_DROP): the
    validation loss's best is OVERFIT_SINCE+ evaluations old (and older than VAL_STALE_SHARE of them), it ends
    OVERFIT_RISE_MEDIUM+ above that best, every evaluation of the second half since the best sits above the best by
    the rising rule's margin (VAL_RISE of the best, or twice the point-to-point noise: a lone low evaluation in a
    jumping curve is no turning point), the training loss fell FEW_TRAIN_FALL+ meanwhile (the short-log rule's bar),
    and the quality did not go on improving to its best at the end."""
    values = _values(val)
    best = min(range(len(values)), key=values.__getitem__)
    since = len(values) - 1 - best
    if since < max(OVERFIT_SINCE, VAL_STALE_SHARE * len(values)) or _rise(values, best) < OVERFIT_RISE_MEDIUM:
        return []
    after = values[best + 1:]
    noise = _mad_sigma([b - a for a, b in zip(values, values[1:])]) / math.sqrt(2)
    if min(after[len(after) // 2:]) <= values[best] + max(VAL_RISE * abs(values[best]), 2 * noise):
        return []
    if _quality_rose_since(val[best], series) and _quality_at_best_end(series):
        return []
    kind, at = _position(val[best])
    span = [p.value for p in train if _position(p)[0] == kind and _position(p)[1] >= at]
    if len(span) < STUCK_FEW_POINTS:
        return []
    quarter = max(1, len(span) // 4)
    first = _median(span[:quarter])
    fall = (first - _median(span[-quarter:])) / abs(first) if first else 0.0
    if fall < FEW_TRAIN_FALL:
        return []
    rise = _rise(values, best)
    confidence, note = overfitting_confidence(values, best, series)
    evidence = {"val_best": round(values[best], 5), "val_best_at": _where(val, best),
                "val_last": round(values[-1], 5), "val_last_at": _where(val, len(val) - 1),
                "train_fall_since_best": round(fall, 3), "val_points": len(val), **note}
    return [Finding("overfitting", "warning",
                    f"Validation loss bottomed at {values[best]:.4g} at {_describe(_where(val, best))} and has stayed "
                    f"above it since, ending {rise:.0%} higher, while the training loss fell {fall:.0%} more: "
                    "overfitting.", evidence, overfitting_actions(ctx), confidence=confidence)]


def _small_rise(values: list[float], best: int) -> bool:
    """The validation loss's last two points' median rose less than OVERFIT_RISE_MEDIUM above its best."""
    return bool(values[best]) and (_median(values[-2:]) - values[best]) / abs(values[best]) < OVERFIT_RISE_MEDIUM


OVERFIT_RISE_HIGH = 0.20  # validation this far above its best, 5+ points after it: high confidence
OVERFIT_RISE_MEDIUM = 0.10  # ... this far (or 5% with 5+ points after it): medium; less is low
OVERFIT_SINCE = 5
ACC_AT_BEST = 0.005  # a last validation accuracy within this (0-1 scale) of its best is still at its best


def overfitting_confidence(values: list[float], best: int, series: dict[str, list[Point]]) -> tuple[str, dict]:
    """How strongly a validation curve says overfitting: by how far it rose above its best (the last two points'
    median), for how many points, and whether validation accuracy, when printed, has stopped improving. A few per
    cent of drift with the accuracy still at its best is a low-confidence note, not a verdict."""
    rise = (_median(values[-2:]) - values[best]) / abs(values[best]) if values[best] else 0.0
    since = len(values) - 1 - best
    if rise >= OVERFIT_RISE_HIGH and since >= OVERFIT_SINCE:
        confidence = "high"
    elif rise >= OVERFIT_RISE_MEDIUM or (rise >= VAL_RISE and since >= OVERFIT_SINCE):
        confidence = "medium"
    else:
        confidence = "low"
    note: dict = {"val_rise": round(rise, 4), "points_since_best": since}
    accs = [p.value for p in validation_quality(series)]
    if len(accs) >= 4:
        scale = _percent_scale(accs)
        at_best = accs[-1] >= max(accs) - ACC_AT_BEST * scale
        note["val_acc_at_best"] = at_best
        if at_best and rise < OVERFIT_RISE_MEDIUM:
            confidence = "low"
    return confidence, note


def _quality_fell_off_best(series: dict[str, list[Point]], best_loss: Point) -> bool:
    """The validation accuracy (or mAP, score) ends more than ACC_AT_BEST below the best it had up to the validation
    loss's best."""
    found = _quality_up_to(series, best_loss, 2)
    if found is None:
        return False
    quality, upto, scale = found
    return quality[-1].line > best_loss.line and quality[-1].value < max(upto) - ACC_AT_BEST * scale


def _quality_up_to(series: dict[str, list[Point]], best_loss: Point,
                   min_points: int) -> tuple[list[Point], list[float], float] | None:
    """The validation quality (accuracy, mAP or score), its values up to the validation loss's best, and its scale
    (100 when printed in per cent, else 1); None with fewer than ``min_points`` evaluations or none by that best."""
    quality = validation_quality(series)
    upto = [p.value for p in quality if p.line <= best_loss.line]
    if len(quality) < min_points or not upto:
        return None
    return quality, upto, _percent_scale([p.value for p in quality])


def _quality_new_best_at_end(series: dict[str, list[Point]], best_loss: Point) -> bool:
    """The validation accuracy (or mAP, score) sets its best at its last evaluation, more than ACC_AT_BEST above
    where it was at the validation loss's best: the model still generalises better, whatever the loss does."""
    found = _quality_up_to(series, best_loss, 2)
    if found is None or found[0][-1].line <= best_loss.line:
        return False
    quality, upto, scale = found
    last = quality[-1].value
    return last >= max(p.value for p in quality) and last > upto[-1] + ACC_AT_BEST * scale


def _few_points_overfitting(train: list[Point], val: list[Point], ctx: Context,
                            series: dict[str, list[Point]] | None = None) -> list[Finding]:
    """Short (epoch-level) logs: validation rising FEW_RISING+ points in a row after its best while training
    falls is overfitting, said with the confidence so few points allow."""
    if len(val) < FEW_TURN_POINTS or len(train) < 2:
        return []
    values = _values(val)
    best = min(range(len(values)), key=values.__getitem__)
    after = values[best:]
    # Rises in a row between neighbouring epochs; a pair across elided epochs ("...") is a gap, not a step.
    links = adjacent(val[best:], ctx.elisions or [])
    steps = [(a, b) for (a, b), ok in zip(zip(after, after[1:]), links) if ok]
    rising = sum(1 for a, b in steps if b > a)
    train_values = _values(train)
    # Training over the same stretch (by line: the epochs after validation's best).
    since = [p.value for p in train if p.line >= val[best].line] or train_values[-2:]
    train_fall = (train_values[0] - train_values[-1]) / abs(train_values[0]) if train_values[0] else 0.0
    falling_since = len(since) < 2 or since[-1] < since[0]
    rise = (values[-1] - values[best]) / abs(values[best]) if values[best] else 0.0
    # A log too short for FEW_RISING rises in a row (3 evaluations: a 3-epoch fine-tune): one large rise
    # (OVERFIT_RISE_HIGH+) counts when the validation accuracy fell off its best with it (two signals of the same
    # turn). Longer logs are judged by the rises; one late rise there is a noisy evaluation as often as not.
    # Or, with no accuracy falling (a 3-epoch fine-tune whose accuracy holds within 0.5%): both steps after the best
    # rising, with the training loss falling FEW_TURN_TRAIN_FALL+ (the training set being learnt by heart).
    turned = (len(val) < FEW_RISING + 1 and rising >= 1 and rise >= OVERFIT_RISE_HIGH
              and (_quality_fell_off_best(series or {}, val[best])
                   or (rising >= FEW_RISING - 1 and train_fall >= FEW_TURN_TRAIN_FALL
                       and not _quality_new_best_at_end(series or {}, val[best]))))
    if rise < VAL_RISE:  # within what the long-log rule calls a flat validation: a converged run's wobble
        return []
    if (rising < FEW_RISING and not turned) or len(steps) != rising or train_fall < FEW_TRAIN_FALL or not falling_since:
        return []
    confidence = ("high" if rising >= 5 and rise > 0.2 else ("medium" if rising >= 4 or (rise > 0.2 and rising >= FEW_RISING)
                                                             else "low"))
    evidence = {"val_best": round(values[best], 5), "val_best_at": _where(val, best),
                "val_last": round(values[-1], 5), "val_last_at": _where(val, len(val) - 1),
                "rising_points": rising, "val_rise": round(rise, 3), "train_drop": round(train_fall, 3),
                "val_points": len(val), "train_points": len(train)}
    return [Finding("overfitting", "warning",
                    f"Validation loss bottomed at {values[best]:.4g} at {_describe(_where(val, best))} and rose "
                    f"{rising} time(s) in a row to {values[-1]:.4g} while the training loss fell {train_fall:.0%}: "
                    "overfitting.", evidence, overfitting_actions(ctx), confidence=confidence)]


# ------------------------------------------------------------------ crashes that are not OOM

CRASH_LABELS = {
    "collective-timeout": "a collective operation timed out (NCCL/gloo watchdog)",
    "illegal-memory-access": "an illegal memory access on the GPU",
    "shape-mismatch": "a tensor shape mismatch",
    "signal": "a worker died from a signal",
    "killed": "a worker was killed (SIGKILL): by the kernel OOM killer or by the scheduler",
    "exception": "an exception",
    "native-crash": "a native crash (a signal from C/C++/CUDA code, not a Python exception)",
    "exit-status": "the process exited with a non-zero status",
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
    "native-crash": [
        "A segmentation fault, abort or bus error comes from native code: a C++/CUDA extension, a library built "
        "for another CUDA/driver/compiler, a corrupt input file read by a native decoder, or a DataLoader worker.",
        "Run it again under `gdb -ex run --args python train.py ...` (or with PYTHONFAULTHANDLER=1, "
        "faulthandler.enable()) to see the native stack; with num_workers=0 to rule out DataLoader workers.",
        "Check the libraries match (torch and its CUDA build, custom ops rebuilt after an upgrade); the batch size is "
        "not the cause unless the stack shows an allocation."],
    "exit-status": [
        "The process ended with a non-zero status: read the lines just before it for the error it printed.",
        "A status above 128 is a signal (128 + N: 137 SIGKILL, 139 SIGSEGV, 134 SIGABRT)."],
    "killed": [
        "Check `dmesg | grep -i 'killed process'` on the node: an entry names the kernel OOM killer (host RAM ran "
        "out, not GPU memory); none points at the scheduler.",
        "Check the job's memory limit and its accounting (e.g. `sacct -j JOB --format=MaxRSS,ReqMem`, "
        "`kubectl describe pod` for OOMKilled) and whether the job hit its time limit or was preempted.",
        "If host memory ran out: fewer DataLoader workers or a smaller prefetch_factor, memory-map the dataset "
        "instead of loading it into every rank, load checkpoints with mmap=True / on one rank."],
    "exception": [
        "Read the traceback around the quoted line: the run stopped on a Python exception that is not a memory or "
        "distributed failure.",
        "Fix it and resume from the last checkpoint; the batch size is not the cause."],
    # An exception whose message names the library that failed (EXCEPTION_FROM): advice for that library.
    "exception-nccl": [
        "The exception comes from NCCL, the library the GPUs communicate through: a distributed failure, not a bug "
        "in the training code. Re-run with NCCL_DEBUG=INFO to see which rank and which transport failed.",
        "The usual causes are the machine's: too little shared memory (/dev/shm; a container's --shm-size or "
        "--ipc=host), the wrong network interface (NCCL_SOCKET_IFNAME), or peer-to-peer transfers between the GPUs "
        "(re-running with NCCL_P2P_DISABLE=1 tells whether it is that).",
        "Fix it and resume from the last checkpoint; the batch size is not the cause."],
    "exception-cuda-library": [
        "cuDNN/cuBLAS failed inside the library: CUDNN_STATUS_INTERNAL_ERROR, CUBLAS_STATUS_ALLOC_FAILED and "
        "CUBLAS_STATUS_EXECUTION_FAILED are often a GPU out of memory in disguise: watch the memory (nvidia-smi) "
        "and re-run once with half the batch to tell.",
        "Re-run with CUDA_LAUNCH_BLOCKING=1: CUDA reports errors asynchronously, so the stack shown may not be the "
        "failing operation.",
        "Check that torch, its CUDA build and the driver match; torch.backends.cudnn.benchmark = False rules out "
        "one cuDNN algorithm choice."],
}
# (name, what the quote names, how the summary says it): an exception's library, read from its message
EXCEPTION_FROM = (
    ("exception-nccl", re.compile(r"\bNCCL\b|\bnccl\w*Error\b"),
     " from NCCL, the GPUs' communication library. This is not an out-of-memory error."),
    ("exception-cuda-library", re.compile(r"CUDNN_STATUS_|CUBLAS_STATUS_|cuDNN error", re.I),
     " inside cuDNN/cuBLAS; no out-of-memory message was printed, but these errors often hide one."),
)


def detect_crash(events: list[LogEvent], counts: dict) -> list[Finding]:
    """A crash that is not an out-of-memory error, named by class (the earliest named failure in the log)."""
    if any(e.kind == "oom" for e in events):
        return []  # the OOM is the crash; exit codes and tracebacks after it are its consequences
    killed = [e for e in events if e.kind == "killed"]
    if killed:
        first = killed[0]
        evidence = {"class": "killed", "line": first.line, "quote": first.text, "signal": "SIGKILL",
                    "occurrences": counts.get("killed", len(killed))}
        for key in ("rank", "local_rank", "exitcode", "pid"):
            if key in first.details:
                evidence[key] = first.details[key]
        rank = first.details.get("rank", first.details.get("local_rank"))
        where = f"line {first.line}" + (f", rank {rank}" if rank is not None else "")
        return [Finding("crash", "error",
                        f"killed: a worker got SIGKILL ({where}), from the kernel OOM killer or the scheduler; check "
                        "dmesg / the job's memory limit. It is not a GPU out-of-memory error.",
                        evidence, list(CRASH_ACTIONS["killed"]))]
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
    elif cls in ("native-crash", "exit-status") and (first.details.get("signal") or first.details.get("exitcode")):
        label = f"{label}: " + ", ".join(f"{k} {first.details[k]}" for k in ("signal", "exitcode")
                                        if first.details.get(k))
    evidence = {"class": cls, "line": first.line, "quote": first.text,
                "occurrences": counts.get("crash", 0) + counts.get("signal", 0)}
    for key in ("rank", "exception", "signal", "exitcode"):
        if key in first.details:
            evidence[key] = first.details[key]
    where = f"line {first.line}" + (f", rank {first.details['rank']}" if "rank" in first.details else "")
    actions, tail = cls, ". This is not an out-of-memory error."
    if cls == "exception":
        actions, tail = next(((name, said) for name, named, said in EXCEPTION_FROM if named.search(first.text)),
                             (actions, tail))
    return [Finding("crash", "error", f"The run crashed: {label} ({where}){tail}", evidence,
                    list(CRASH_ACTIONS[actions]))]


# ------------------------------------------------------------------ co-findings

# When one cause explains the curve, a weaker finding is dropped or kept as secondary:
# (explaining kind, explained kinds, what happens to them, why)
COFINDING_RULES = (
    ("diverged", ("oscillation-jitter", "oscillation-periodic", "slow-convergence", "overfitting"), "drop",
     "a diverging run also jitters, stalls and leaves validation behind: the divergence is the cause"),
    ("not-learning", ("oscillation-jitter", "slow-convergence", "overfitting"), "drop",
     "a loss that does not move off its starting level also looks flat, slow and noisy: not learning is the cause"),
    # Not a periodic swing: a swing that repeats with the data order (sorted, never shuffled: each block learned,
    # then undone by the next) is a cause of its own beside a model left at chance, and its remedy (shuffle) differs.
    ("oscillation-periodic", ("slow-convergence", "oscillation-jitter"), "drop",
     "a loss that swings with the data order also looks noisy and falls slowly: the swing is the cause"),
    ("oscillation-jitter", ("slow-convergence",), "drop",
     "an oscillating loss falls slowly: the oscillation is the cause"),
    ("overfitting", ("slow-convergence",), "drop",
     "validation that stopped improving while training falls is overfitting; its slow creep is not a second cause"),
    # Not a periodic swing (round 16): a swing that repeats with the data order is a cause of its own whose remedy
    # (shuffle, rebalance) neither contradicts nor waits for the overfitting one, as beside not learning above.
    # Jitter stays secondary: its remedy (a larger batch or a lower LR) pulls against overfitting's (a smaller
    # batch), and overfitting is what to fix first.
    ("overfitting", ("oscillation-jitter",), "secondary",
     "overfitting is what to fix first, and jitter's remedy (a larger batch) pulls "
     "against overfitting's (a smaller one)"),
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


FROZEN_REPEAT = 1e-3  # each step loss one cycle later the same to this share of the swing (median): the weights froze


def _same_batches_same_losses(series: dict[str, list[Point]], oscillation: list[Finding]) -> bool:
    """The training loss's second half repeats itself point for point one cycle later (the median change under
    FROZEN_REPEAT of its 5th-95th percentile half-range), the cycle being a finding's period or the log's points per
    epoch: the same batches, in the same order, give the same losses epoch after epoch, so the weights do not move
    and the swing is only how the fixed batches differ. Said with a not-learning finding, a periodic or jittery
    swing is no second cause and the data-order remedy would change nothing (an EEG-to-fMRI decoder: 4 batches an
    epoch at 2.89e8, 2.88e8, 2.55e8, 2.11e8, the same to 5 digits for 68 epochs). A model that learns, even one left
    at chance by class-sorted data, changes each batch's loss from one epoch to the next (the world corpus's
    periodic runs: 1% to 25% of the swing)."""
    train = _finite(series.get(TRAIN_LOSS, []))
    half = _values(train)[len(train) // 2:]
    if not oscillation or len(half) < 2 * STUCK_FEW_POINTS:
        return False
    periods = {f.evidence.get("period_points") for f in oscillation}
    per_epoch = Counter(p.epoch for p in train if p.epoch is not None)
    if per_epoch:
        periods.add(Counter(per_epoch.values()).most_common(1)[0][0])
    ordered = sorted(half)
    swing = (ordered[int(0.95 * (len(half) - 1))] - ordered[int(0.05 * (len(half) - 1))]) / 2
    if swing <= 0:
        return False
    for period in periods:
        if isinstance(period, int) and 1 <= period <= len(half) // 2:
            change = _median([abs(b - a) for a, b in zip(half, half[period:])])
            if change <= FROZEN_REPEAT * swing:
                return True
    return False


def run_detectors(series: dict[str, list[Point]], events: list[LogEvent], counts: dict, ctx: Context,
                  non_finite: dict[str, Point] | None = None) -> list[Finding]:
    findings = detect_oom(events, counts, ctx, series) + detect_crash(events, counts)
    diverged = (detect_diverged(series, events, counts, ctx, non_finite) or detect_blown_up(series, ctx)
                or _gave_back(series, ctx) or _climbed_from_best(series, ctx) or _collapsed_to_chance(series, ctx) or _jumped_then_frozen(series, ctx)
                or _thrown_around(series, ctx) or _worse_than_start_on_both(series, ctx))
    findings += diverged or detect_not_learning(series, ctx)
    oscillation = (detect_periodic(series, ctx) or detect_sawtooth(series, ctx, ctx.elisions or [])
                   or step_oscillation(series, ctx)
                   or detect_repeating_swings(series, ctx)
                   or detect_gradient_jitter(series, ctx)
                   or detect_short_periodic(series, ctx, ctx.elisions or [])
                   or short_step_jitter(series, ctx)
                   or detect_validation_jitter(series, ctx))
    if any(f.kind == "not-learning" for f in findings) and _same_batches_same_losses(series, oscillation):
        oscillation = []
    findings += oscillation
    kinds = {f.kind for f in findings}
    findings += detect_validation(series, ctx) or [f for f in detect_short_validation(series, ctx)
                                                    if f.kind not in kinds]
    if not any(f.kind == "slow-convergence" for f in findings):
        settled = any(f.kind in ("diverged", "not-learning") for f in findings)  # the loss already explained
        findings += [f if settled else _gain_not_kept(f, series) for f in detect_slow_epochs(series, ctx)]
    return apply_cofinding_rules(findings)


KEPT_MIN_POINTS = 5  # validation evaluations, at least, to say whether the quality kept what it gained
KEPT_SHARE = 0.5  # ... its last three's median keeping less than this share of its best gain over its first value


def _gain_not_kept(slow: Finding, series: dict[str, list[Point]]) -> Finding:
    """A loss creeping down (slow by slow.py's pace) is learning only if the held-out quality keeps what it gains:
    when the validation accuracy (mAP, score) ends, as the median of its last three evaluations, nearer its first
    value than its best (less than KEPT_SHARE of its best gain kept), the creep is not learning anything that carries
    to held-out data (a 9-class run at 0.13 -> 0.19 -> 0.11 while its loss creeps 4% near ln 9): not-learning, not
    slow. Slow runs' accuracies end at or near their best. Not when the training accuracy ends ACC_GAP or more above
    the validation one: that model learns its training set, and the gap is overfitting's reading."""
    quality = [p for p in series.get("val_acc", []) if math.isfinite(p.value)]
    if slow.kind != "slow-convergence" or len(quality) < KEPT_MIN_POINTS:
        return slow
    values = _values(quality)
    first, best, end = values[0], max(values), _median(values[-3:])
    if best <= first or end - first >= KEPT_SHARE * (best - first):
        return slow
    if _mad_sigma([b - a for a, b in zip(values, values[1:])]) / math.sqrt(2) >= best - first:
        return slow  # the quality swings by its whole gain from one evaluation to the next: first, best, end are draws
    train = _values(_finite(series.get("train_acc", [])))
    if len(train) >= 3 and _median(_as_fraction(train)[-3:]) - _median(_as_fraction(values)[-3:]) >= ACC_GAP:
        return slow  # the training accuracy climbed clear of it: the model learns its training set (a gap)
    evidence = {**slow.evidence, "quality": quality[0].name, "quality_first": first, "quality_best": best,
                "quality_end": round(end, 6)}
    return Finding("not-learning", "warning",  # it stands on three points of a held-out curve: never an error
                   f"The loss creeps down ({slow.evidence.get('progress', 0):.0%} of the way in "
                   f"{slow.evidence.get('epochs_run', '?')} epochs) but the validation {quality[0].name} ends at "
                   f"{end:.4g}, nearer its first value {first:.4g} than its best {best:.4g}: the model keeps nothing "
                   "it learns on held-out data; it is not learning.",
                   evidence, list(NOT_LEARNING_ACTIONS), confidence="low")

