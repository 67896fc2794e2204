"""Learning-rate scaling and warmup when the global batch changes (DOMAIN section 4)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from ..batches import steps_per_epoch as sampler_steps_per_epoch

# Each optimizer's LR scaling rule has one owner, ``scaling_rule`` (DOMAIN 4); the LR, goodput's AdaScale gain and
# the bound past the validated batch all read it.
# Adaptive (Adam-style) optimizers: square-root scaling is the principled rule (Malladi et al. 2022); LAMB, the
# layer-wise Adam, too (You et al. 2019 scale its LR by the square root of the batch).
ADAPTIVE_OPTIMIZERS = {"adam", "adamw", "lamb", "adagrad", "rmsprop"}
# SGD-style: linear scaling (Goyal et al. 2017). LARS is SGD-style ("LARS for SGD-style, LAMB for Adam-style"): its
# layer-wise trust ratio is what keeps linear scaling converging past ~4096 (You et al. 2017), so it stays linear
# at every batch size where plain SGD bends to the square root.
SGD_OPTIMIZERS = {"sgd", "lars"}
KNOWN_OPTIMIZERS = ADAPTIVE_OPTIMIZERS | SGD_OPTIMIZERS
# Layer-wise adaptive optimizers (DOMAIN 4's large-batch answer): never suggested to themselves, and they need whole
# parameter tensors (advisor.optimizers, advisor.export read this set).
LAYERWISE_OPTIMIZERS = frozenset({"lamb", "lars"})


def scaling_rule(optimizer: str) -> str:
    """"sqrt" for an adaptive (Adam-style) optimizer, LAMB included; "linear" for SGD-style ones, LARS included."""
    return "sqrt" if optimizer.lower() in ADAPTIVE_OPTIMIZERS else "linear"

LARGE_BATCH_THRESHOLD = 4096
DEFAULT_MAX_LR_FACTOR = 16.0
DEFAULT_BASE_WARMUP_EPOCHS = 1.0
WARMUP_STRETCH_FACTOR = 3.0
WARMUP_MAX_RUN_SHARE = 0.2  # a warmup never takes more than this share of the run the user states
# A scaled-up LR never starts cold: at least this many steps, or this share of the stated run if that is more
# (then never past WARMUP_MAX_RUN_SHARE of it). Why 50: the optimizer's running statistics (momentum, Adam's
# second moment at beta2 = 0.999 is ~5% settled after 50 steps) and BatchNorm's running means are still moving
# over the first few dozen steps, exactly when a scaled-up LR does its damage; the diverged digits-cnn trial had
# 10 warmup steps at 2x and blew up at step ~14. 5% is Goyal et al.'s 5 warmup epochs of a 90-epoch run.
WARMUP_FLOOR_STEPS = 50
WARMUP_FLOOR_RUN_SHARE = 0.05


@dataclass
class LRDecision:
    value: float
    base: float
    base_global_batch: int
    global_batch: int
    rule: str  # "unchanged" | "linear" | "sqrt" | "linear-sqrt" (linear to the threshold, sqrt past it)
    scale: float
    capped: bool
    cap: float
    reason: str
    warnings: list[str] = field(default_factory=list)
    suggest_layerwise: str | None = None  # "lamb" | "lars" past the large-batch threshold
    # bound_past_validated's inputs (set whenever it was applied, binding or not), so `advisor check` can redo it
    bounded_from: int | None = None  # the largest global batch that trained healthily
    bound_noise_low: float | None = None  # the noise scale's interval low end it used, if any
    # The rules' LR the plan's own runs saw fail at this global batch, when the value was lowered from it
    # (advisor.method.validated.lr_at_global), so `advisor check` can tell the lowering from a hand edit
    seen_failing_at: float | None = None


@dataclass
class WarmupDecision:
    epochs: float
    steps: int
    steps_per_epoch: int
    reason: str
    base_epochs: float = DEFAULT_BASE_WARMUP_EPOCHS  # today's warmup, in epochs (samples / training set)
    base_source: str = "the advisor's default"
    run_epochs: float | None = None  # the run the user stated, which the warmup may fill only partly
    capped: bool = False


def linear_then_sqrt(batch: float, knee: float) -> float:
    """The LR curve of SGD-style scaling, up to a constant: linear to ``knee``, square root past it."""
    return batch if batch <= knee else math.sqrt(knee * batch)


def scale_lr(
    base_lr: float,
    base_global_batch: int,
    global_batch: int,
    optimizer: str,
    max_lr_factor: float = DEFAULT_MAX_LR_FACTOR,
    large_batch_threshold: int = LARGE_BATCH_THRESHOLD,
) -> LRDecision:
    """Scale ``base_lr`` (tuned at ``base_global_batch``) to ``global_batch``."""
    optimizer = optimizer.lower()
    s = global_batch / base_global_batch
    cap = base_lr * max_lr_factor
    warnings: list[str] = []
    layerwise = None
    if global_batch == base_global_batch:
        return LRDecision(base_lr, base_lr, base_global_batch, global_batch, "unchanged", 1.0, False, cap,
                          "The global batch is unchanged, so the learning rate stays as it is.")
    rule = scaling_rule(optimizer)
    if optimizer == "lamb":
        reason = (f"lamb is the layer-wise Adam: square-root scaling (You et al. 2019), "
                  f"lr x sqrt({global_batch}/{base_global_batch}).")
    elif rule == "sqrt":
        reason = (f"{optimizer} is adaptive: square-root scaling (Malladi et al. 2022), "
                  f"lr x sqrt({global_batch}/{base_global_batch}).")
    elif optimizer == "lars":
        reason = (f"lars is SGD-style: linear scaling rule (Goyal et al. 2017), lr x {global_batch}/"
                  f"{base_global_batch}, at every batch size: its layer-wise trust ratio keeps linear scaling "
                  f"converging past ~{large_batch_threshold} (You et al. 2017); it assumes the base LR was not "
                  "already too high.")
    else:
        reason = (f"{optimizer} is SGD-style: linear scaling rule (Goyal et al. 2017), "
                  f"lr x {global_batch}/{base_global_batch}; it assumes the base LR was not already too high.")
    factor = s if rule == "linear" else math.sqrt(s)
    knee = large_batch_threshold
    low, high = sorted((base_global_batch, global_batch))
    if rule == "linear" and high > knee and optimizer not in LAYERWISE_OPTIMIZERS:
        # One curve for every base: the LR follows linear_then_sqrt(B) and the factor is its ratio, so the
        # scaled LR is continuous in the target whichever side of the threshold the base sits on.
        factor = linear_then_sqrt(global_batch, knee) / linear_then_sqrt(base_global_batch, knee)
        if low >= knee:
            rule = "sqrt"
            reason = (f"Both global batches are at or past ~{knee}, where linear scaling breaks (Goyal et al. "
                      f"2017): square root, lr x sqrt({global_batch}/{base_global_batch}) = x{factor:.4g}.")
        else:
            rule = "linear-sqrt"
            reason = (f"Past a global batch of ~{knee} linear scaling breaks (Goyal et al. 2017): linear between "
                      f"{low} and {knee} (x{knee / low:.3g}), square root between {knee} and {high} "
                      f"(x{math.sqrt(high / knee):.3g}); from {base_global_batch} to {global_batch} that is "
                      f"lr x {factor:.4g}. The warmup is planned from the batch scale s = {s:.3g}.")
    if global_batch > large_batch_threshold and optimizer not in LAYERWISE_OPTIMIZERS:
        layerwise = "lars" if optimizer in SGD_OPTIMIZERS else "lamb"
        warnings.append(
            f"Global batch {global_batch} > {large_batch_threshold}: use a layer-wise adaptive optimizer "
            f"({layerwise.upper()}) or a constant LR with a longer warmup; they keep convergence at 4k-64k batches."
        )
    value = base_lr * factor
    capped = value > cap
    if capped:
        warnings.append(f"The scaled LR {value:.4g} was capped at {cap:.4g} ({max_lr_factor:g}x the base LR).")
        value = cap
    return LRDecision(value, base_lr, base_global_batch, global_batch, rule, s, capped, cap, reason, warnings, layerwise)


def statistical_efficiency(global_batch: float, noise_scale: float, base_batch: float) -> float:
    """Progress per sample at ``global_batch`` relative to ``base_batch`` (1 at the base batch)."""
    return (noise_scale + base_batch) / (noise_scale + global_batch)


def lr_gain(global_batch: float, noise_scale: float, base_batch: float, optimizer: str) -> tuple[float, str]:
    """The LR multiplier from the base batch: AdaScale's gain for SGD, its square root for adaptive optimizers."""
    gain = global_batch / base_batch * statistical_efficiency(global_batch, noise_scale, base_batch)
    if scaling_rule(optimizer) == "sqrt":
        return gain ** 0.5, "square root of AdaScale's gain (adaptive optimizer)"
    return gain, "AdaScale gain (Johnson et al. 2020): (phi + M0) / (phi / S + M0), S = M / M0"


def bound_past_validated(lr: LRDecision, validated_global: int | None, optimizer: str,
                         noise_low: float | None = None) -> LRDecision:
    """The LR above the largest global batch that trained healthily (``validated_global``, at the LR the rules
    give it): at most the rules' factor for 2x that batch, or the AdaScale gain from it at the low end of the
    noise scale's interval (``noise_low``), whichever is smaller. Past the validated point the scaled LR is an
    extrapolation; a doubling is the step the sweep itself takes, and a small noise scale means a bigger batch
    buys little progress per step, so a big LR jump is not earned (DOMAIN 2)."""
    if validated_global is None:
        return lr
    lr = replace(lr, bounded_from=validated_global, bound_noise_low=noise_low or None)
    if lr.global_batch <= validated_global:
        return lr
    at_validated = scale_lr(lr.base, lr.base_global_batch, validated_global, optimizer)
    doubled = scale_lr(lr.base, lr.base_global_batch, 2 * validated_global, optimizer)
    limit = doubled.value / at_validated.value
    how = f"the rules' x{limit:.3g} for 2x the validated batch"
    if noise_low:
        gain, _ = lr_gain(lr.global_batch, noise_low, validated_global, optimizer)
        if gain < limit:
            # Named as the interval's low end, not "~N": beside the estimate itself (the plan's other texts),
            # a bare "~14" next to "~26" read as two noise scales.
            limit, how = gain, (f"the AdaScale gain x{gain:.3g} at the low end of the noise scale's interval "
                                f"(its low end, {noise_low:.0f}, not the estimate)")
    bound = at_validated.value * limit
    if lr.value <= bound * (1 + 1e-9):
        return lr
    message = (f"Global batch {lr.global_batch} is past the largest that trained healthily here "
               f"({validated_global}, at LR {at_validated.value:.4g}): the rules' LR {lr.value:.4g} would be an "
               f"extrapolation, so it is bounded at {bound:.4g} ({how}). Sweep it on the target before raising it.")
    return replace(lr, value=bound, capped=True, reason=f"{lr.reason} {message}", warnings=lr.warnings + [message])


def plan_warmup(
    scale: float,
    train_size: int,
    global_batch: int,
    base_warmup_epochs: float = DEFAULT_BASE_WARMUP_EPOCHS,
    base_source: str = "the advisor's default",
    run_epochs: float | None = None,
    run_source: str = "",
) -> WarmupDecision:
    """Warmup length in epochs and steps at ``global_batch``; lengthened x3 when the batch grew 2x or more, at
    least WARMUP_FLOOR_STEPS (or WARMUP_FLOOR_RUN_SHARE of the run) whenever the LR is scaled up, and never more
    than WARMUP_MAX_RUN_SHARE of the run the user states (``run_epochs``).

    The base warmup is counted in epochs, i.e. in samples: converted to the new batch it keeps the same
    samples (base steps x base batch / new batch), as Goyal et al. 2017 count warmup in epochs.
    """
    steps_per_epoch = sampler_steps_per_epoch(train_size, global_batch)
    base = f"{base_warmup_epochs:.3g} epoch(s) ({base_source})"
    if scale >= 2 and base_warmup_epochs > 0:
        epochs = base_warmup_epochs * WARMUP_STRETCH_FACTOR
        reason = (f"The global batch grew {scale:.3g}x (>= 2x): warmup lengthened from {base} to {epochs:.3g} "
                  f"epochs, rising from a small LR to the target.")
    elif scale >= 2:
        epochs = DEFAULT_BASE_WARMUP_EPOCHS
        reason = (f"No warmup today ({base_source}), but the global batch grew {scale:.3g}x (>= 2x): warm up for "
                  f"{epochs:g} epoch from a small LR to the target (a larger batch needs a warmup).")
    else:
        epochs = base_warmup_epochs
        reason = (f"Batch scale {scale:.3g}x (< 2x): the base warmup of {base} is kept, as the same number of "
                  "samples at the new batch.")
    steps = max(1, round(epochs * steps_per_epoch)) if epochs > 0 else 0
    if scale > 1:  # a scaled-up LR never starts cold
        run_steps = run_epochs * steps_per_epoch if run_epochs is not None else None
        floor = max(WARMUP_FLOOR_STEPS, math.ceil(WARMUP_FLOOR_RUN_SHARE * run_steps) if run_steps else 0)
        if run_steps:
            floor = min(floor, math.floor(WARMUP_MAX_RUN_SHARE * run_steps))
        else:  # no stated run: never more than the stretched warmup's own length, 3 epochs
            floor = min(floor, round(WARMUP_STRETCH_FACTOR * steps_per_epoch))
        if steps < floor:
            steps = floor
            epochs = steps / steps_per_epoch
            reason += (f" Raised to the floor for a scaled-up LR: {steps} steps (the larger of "
                       f"{WARMUP_FLOOR_STEPS} steps and {WARMUP_FLOOR_RUN_SHARE:.0%} of the run, within "
                       f"{WARMUP_MAX_RUN_SHARE:.0%} of it, or of 3 epochs when no run length is stated).")
    capped = False
    if run_epochs is not None and epochs > WARMUP_MAX_RUN_SHARE * run_epochs:
        capped = True
        epochs = WARMUP_MAX_RUN_SHARE * run_epochs
        steps = min(steps, math.floor(epochs * steps_per_epoch))
        reason += (f" Capped at {WARMUP_MAX_RUN_SHARE:.0%} of the {run_epochs:g}-epoch run ({run_source}): "
                   f"{epochs:.3g} epochs, {steps} steps; a longer warmup would leave too little of the run at "
                   "the target LR.")
    return WarmupDecision(epochs, steps, steps_per_epoch, reason, base_warmup_epochs, base_source, run_epochs,
                          capped)


DEFAULT_WARMUP_SOURCE = "the advisor's default"  # how a warmup source reads when neither you nor the workload gave one


def base_warmup_epochs(given: tuple[float, str] | None, current_steps: int | None, base_global_batch: int,
                       train_size: int) -> tuple[float, str]:
    """Today's warmup in epochs, and where it came from: --base-warmup, the workload's current_warmup_steps
    (optimizer steps at the base global batch), or the advisor's default."""
    if given is not None:
        (amount, unit), source = given, "--base-warmup"
    elif current_steps is not None:
        amount, unit, source = current_steps, "steps", "the workload's current_warmup_steps"
    else:
        return DEFAULT_BASE_WARMUP_EPOCHS, (f"{DEFAULT_WARMUP_SOURCE}; pass --base-warmup or set the workload's "
                                            "current_warmup_steps to plan from yours")
    if unit == "epochs":
        return amount, f"{source}: {amount:g} epochs"
    return amount * base_global_batch / train_size, (f"{source}: {amount:g} steps x global batch "
                                                     f"{base_global_batch} / {train_size} samples")


def parse_warmup(text: str) -> tuple[float, str]:
    """``--base-warmup``: ``500`` or ``500steps`` (optimizer steps at the base batch), ``2epochs``, ``0.5epoch``.

    Returns (amount, "steps" | "epochs"); raises ValueError with the accepted forms.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(steps?|epochs?|)\s*", text.lower())
    if not match:
        raise ValueError(f"--base-warmup {text!r} is not a warmup length: give optimizer steps at the base batch "
                         "(500 or 500steps) or epochs (2epochs, 0.5epoch)")
    amount, unit = float(match.group(1)), "epochs" if match.group(2).startswith("epoch") else "steps"
    if unit == "steps" and not amount.is_integer():
        raise ValueError(f"--base-warmup {text!r}: steps are whole numbers (or say epochs: {amount:g}epochs)")
    return amount, unit


def check_lr_change(base_lr: float, base_global_batch: int, new_lr: float, new_global_batch: int,
                    accumulation_steps: int) -> str | None:
    """Flag the classic error: accumulation kept the global batch, yet the LR was changed too."""
    if new_global_batch == base_global_batch and not math.isclose(new_lr, base_lr, rel_tol=1e-9):
        how = f" through {accumulation_steps} accumulation steps" if accumulation_steps > 1 else ""
        return (f"The global batch stays at {new_global_batch}{how}, yet the LR was changed from {base_lr:g} "
                f"to {new_lr:g}. Changing both at once is a classic error: keep the LR at {base_lr:g}.")
    return None
