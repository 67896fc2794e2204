"""Precision: what the probes, the trial and the sweep measure in, and mixed precision before a smaller batch
or accumulation (DOMAIN 3)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


@dataclass
class PrecisionChoice:
    """What the probes, trial and sweep run in, what to try before halving or accumulating, and why."""

    measure: str  # "fp32" | "bf16" | "fp16": the ceiling probes, the trial and the sweep run in it
    mixed: str | None  # tried before halving (trial) and before accumulation (plan); None if fixed or already mixed
    tf32: bool  # fp32 matmuls may use TF32 Tensor Cores (workers and the user's run)
    reason: str



def choose_precision(requested: str, device_type: str, bf16_native: bool, adapter_supports: set[str]
                     ) -> PrecisionChoice:
    """``--precision`` resolved for this device. auto measures in what the user will train in: bf16 autocast
    with TF32 on a GPU with bf16 Tensor Cores; fp32 elsewhere, with mixed precision tried before halving and
    before accumulation (on CPU bf16 is slow without AMX; fp16 on older GPUs needs a GradScaler and can
    overflow, so it is not a silent default)."""
    from ..device import mixed_precision_for

    cuda = device_type.startswith("cuda")
    tf32 = cuda and bf16_native and requested != "fp32"
    if requested != "auto":
        note = ""
        if cuda and bf16_native:
            note = (" TF32 stays off: fp32 was asked for." if requested == "fp32"
                    else " TF32 is allowed for the fp32 matmuls outside autocast.")
        return PrecisionChoice(requested, None, tf32, f"{requested}, as asked (--precision {requested}).{note}")
    mixed = mixed_precision_for(device_type, bf16_native)
    if mixed not in adapter_supports:
        mixed = None
    if cuda and mixed == "bf16":
        return PrecisionChoice("bf16", None, True, (
            "--precision auto on a GPU with bf16 Tensor Cores (compute capability >= 8.0): the ceiling probes, the "
            "trial and the sweep ran in bf16 autocast with TF32 matmuls allowed, as the training will run. Pass "
            "--precision fp32 to measure plain fp32."))
    if cuda:
        reason = ("--precision auto on a GPU without bf16 Tensor Cores (compute capability < 8.0): measured in fp32"
                  + (", with fp16 AMP (and a GradScaler) tried before halving a batch or accumulating; pass "
                     "--precision fp16 to measure in fp16." if mixed else "; the adapter runs no fp16."))
    else:
        reason = ("--precision auto on CPU: measured in fp32 (CPU bf16 is slow without AMX)"
                  + (", with bf16 autocast tried before halving a batch or accumulating." if mixed else "."))
    return PrecisionChoice("fp32", mixed, False, reason)



def accumulation_for(target_global: int, world_size: int, per_device_cap: int) -> int:
    """The accumulation steps a plan needs (plan_data_parallel's rule): 1 when the target fits the cap."""
    return max(1, math.ceil(target_global / (max(1, per_device_cap) * world_size)))



def mixed_before_accumulation(target_global: int, world_size: int, cap: int, precision: PrecisionChoice,
                              mixed_cap: Callable[[str], tuple[int | None, str]]) -> tuple[str, int, str]:
    """DOMAIN 3: when memory is short, mixed precision comes before accumulation. If the plan needs accumulation
    in fp32 and a mixed precision may be tried, ``mixed_cap(mixed)`` measures the per-device cap in it (None
    and why when it cannot run); the plan takes it when it needs fewer accumulation steps.

    Returns (precision, per-device cap, what was decided; "" when nothing was tried)."""
    needed = accumulation_for(target_global, world_size, cap)
    if needed == 1 or precision.measure != "fp32" or not precision.mixed:
        return precision.measure, cap, ""
    mixed = precision.mixed
    other, why = mixed_cap(mixed)
    if other is None:
        return "fp32", cap, (f"fp32 needs {needed} accumulation steps for the global target {target_global}; "
                             f"{mixed} was tried first and cannot run: {why}")
    fewer = accumulation_for(target_global, world_size, other)
    if fewer < needed:
        return mixed, other, (f"fp32 fits {cap} per device and needs {needed} accumulation steps for the global "
                              f"target {target_global}; the ceiling re-probed in {mixed} is {other} per device, "
                              f"which needs {fewer}: the plan uses {mixed} (mixed precision before accumulation).")
    return "fp32", cap, (f"fp32 needs {needed} accumulation steps for the global target {target_global}; in {mixed} "
                         f"the ceiling is {other} per device, which needs as many, so the plan keeps fp32.")



MIXED_PRECISIONS = ("bf16", "fp16")
