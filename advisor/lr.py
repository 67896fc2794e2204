"""Learning-rate scaling and warmup when the global batch changes (DOMAIN section 4)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Adaptive optimizers: square-root scaling is the principled rule (Malladi et al. 2022).
ADAPTIVE_OPTIMIZERS = {"adam", "adamw", "lamb", "adagrad", "rmsprop"}
# SGD-style: linear scaling (Goyal et al. 2017); LARS keeps it working at large batches.
SGD_OPTIMIZERS = {"sgd", "lars"}
KNOWN_OPTIMIZERS = ADAPTIVE_OPTIMIZERS | SGD_OPTIMIZERS
# Layer-wise adaptive optimizers are the large-batch answer (DOMAIN 4): they scale by the rule DOMAIN gives
# beyond ~4096, square root, at every batch size.
LAYERWISE_OPTIMIZERS = {"lamb", "lars"}

LARGE_BATCH_THRESHOLD = 4096
DEFAULT_MAX_LR_FACTOR = 16.0
DEFAULT_BASE_WARMUP_EPOCHS = 1.0
WARMUP_STRETCH_FACTOR = 3.0


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


@dataclass
class WarmupDecision:
    epochs: float
    steps: int
    steps_per_epoch: int
    reason: str


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
    if optimizer in LAYERWISE_OPTIMIZERS:
        rule = "sqrt"
        reason = (f"{optimizer} is a layer-wise adaptive optimizer: square-root scaling, the rule for global batches "
                  f"beyond ~{large_batch_threshold} (You et al. 2019), lr x sqrt({global_batch}/{base_global_batch}).")
    elif optimizer in ADAPTIVE_OPTIMIZERS:
        rule = "sqrt"
        reason = (f"{optimizer} is adaptive: square-root scaling (Malladi et al. 2022), "
                  f"lr x sqrt({global_batch}/{base_global_batch}).")
    else:
        rule = "linear"
        reason = (f"{optimizer} is SGD-style: linear scaling rule (Goyal et al. 2017), "
                  f"lr x {global_batch}/{base_global_batch}; it assumes the base LR was not already too high.")
    factor = s if rule == "linear" else math.sqrt(s)
    if global_batch > large_batch_threshold and optimizer not in LAYERWISE_OPTIMIZERS:
        layerwise = "lars" if optimizer in SGD_OPTIMIZERS else "lamb"
        if rule == "linear":
            # Continuous: linear up to the threshold, square root from there on (no jump at 4096 -> 4104).
            knee = max(large_batch_threshold, base_global_batch)
            factor = (knee / base_global_batch) * math.sqrt(global_batch / knee)
            rule = "linear-sqrt" if knee > base_global_batch else "sqrt"
            reason = (f"Past a global batch of ~{large_batch_threshold} linear scaling breaks (Goyal et al. 2017): "
                      f"linear from {base_global_batch} to {knee} (x{knee / base_global_batch:.3g}), then square "
                      f"root from {knee} to {global_batch} (x{math.sqrt(global_batch / knee):.3g}), "
                      f"lr x {factor:.4g}. The warmup is planned from the batch scale s = {s:.3g}.")
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


def plan_warmup(
    scale: float,
    train_size: int,
    global_batch: int,
    base_warmup_epochs: float = DEFAULT_BASE_WARMUP_EPOCHS,
) -> WarmupDecision:
    """Warmup length in epochs and steps; lengthened when the batch grew more than 2x."""
    steps_per_epoch = max(1, math.ceil(train_size / global_batch))
    if scale > 2:
        epochs = base_warmup_epochs * WARMUP_STRETCH_FACTOR
        reason = (f"The global batch grew {scale:.3g}x (> 2x): warmup lengthened from {base_warmup_epochs:g} "
                  f"to {epochs:g} epochs, rising from a small LR to the target.")
    else:
        epochs = base_warmup_epochs
        reason = f"Batch scale {scale:.3g}x (<= 2x): the base warmup of {base_warmup_epochs:g} epoch(s) is enough."
    return WarmupDecision(epochs, max(1, round(epochs * steps_per_epoch)), steps_per_epoch, reason)


def check_lr_change(base_lr: float, base_global_batch: int, new_lr: float, new_global_batch: int,
                    accumulation_steps: int) -> str | None:
    """Flag the classic error: accumulation kept the global batch, yet the LR was changed too."""
    if new_global_batch == base_global_batch and not math.isclose(new_lr, base_lr, rel_tol=1e-9):
        how = f" through {accumulation_steps} accumulation steps" if accumulation_steps > 1 else ""
        return (f"The global batch stays at {new_global_batch}{how}, yet the LR was changed from {base_lr:g} "
                f"to {new_lr:g}. Changing both at once is a classic error: keep the LR at {base_lr:g}.")
    return None
