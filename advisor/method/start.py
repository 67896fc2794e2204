"""Step 2, the starting value: the global batch first, then divided over the devices (DOMAIN 3)."""

from __future__ import annotations

import math

from ..tasks import task_profile
from .caps import Cap



def start_value(task: str, cap: int, cap_text: str = "", base_global: int | None = None, nproc: int = 1,
                base_source: str = "", cap_is_memory: bool = True) -> tuple[int, str]:
    """Step 2, global batch first (DOMAIN 3): the user's base global batch (where the base LR was validated)
    divided over this host's processes; without one, the task table's per-device value. Capped (by the ceiling
    unless ``cap_text`` says what else); a capped base global batch says which route the start takes and why
    (``capped_route``) when the cap is memory (past a data or steps cap, accumulation would not help)."""
    cap_text = cap_text or f"capped by the ceiling of {cap}."
    if base_global:
        wanted = max(1, base_global // nproc)
        start = min(wanted, cap)
        reason = (f"Global batch first: your base global batch {base_global} ({base_source or 'the base'}; the "
                  f"base LR was validated there) over {nproc} process(es) = {wanted} per device"
                  + (f", {cap_text}" if start < wanted else "."))
        if start < wanted and cap_is_memory:
            reason += " " + capped_route(base_global, nproc, start)
        return start, reason
    profile = task_profile(task)
    start = min(profile.start_per_device, cap)
    reason = (f"{profile.label}: start at {profile.start_per_device} per device ({profile.source})"
              + (f", {cap_text}" if start < profile.start_per_device else "."))
    return start, reason


def capped_route(base_global: int, nproc: int, start: int) -> str:
    """Which route a base global batch over the cap takes, and why, in words. Two reach it: accumulation keeps the
    base global batch and so its LR (DOMAIN 3: per-device = the cap, accumulation = ceil(target / (per-device x
    world)), rounded to the smallest per-device batch that reaches it); a smaller global batch at a scaled LR
    needs none. The trial and the sweep compare per-device batches without accumulation (accumulation is the
    fallback when memory is short, not the default, and it does not enlarge BatchNorm's micro-batches), so the
    start takes the second, and the user can ask for the first."""
    accumulation = math.ceil(base_global / (start * nproc))
    per_device = math.ceil(base_global / (nproc * accumulation))
    return (f"The start takes the smaller global batch, {start} x {nproc} = {start * nproc}, with the LR scaled to it, "
            f"not accumulation: the trial and sweep compare per-device batches without accumulation (the fallback "
            f"when memory is short, not the default; it does not enlarge BatchNorm's micro-batches). To keep your base "
            f"global batch and its LR instead, plan with --global-batch {base_global}: {per_device} per device x "
            f"{nproc} x {accumulation} accumulation step(s).")


def start_choice(asked: int | None, known: tuple[int, str] | None, cap: Cap, task: str, base_global: int | None,
                 nproc: int, base_source: str) -> tuple[int, str]:
    """Step 2's value and its reason: the user's own (``asked``), else the best start earlier plans of this
    workload found (``known``: the value and why), else ``start_value``'s; within ``cap``, whose reason is said
    when it binds."""
    why = cap.below_memory
    cap_text = f"capped at {cap.value}: {why}." if why else f"capped by the ceiling of {cap.value}."
    if asked is not None:
        chosen = min(asked, cap.value)
        return chosen, f"Your starting value of {asked} per device" + (f", {cap_text}" if chosen < asked else ".")
    if known:
        best, why_best = known
        chosen = min(best, cap.value)
        return chosen, f"Start at {why_best}" + (f", {cap_text}" if chosen < best else ".")
    return start_value(task, cap.value, cap_text, base_global, nproc, base_source, cap_is_memory=cap.by == "memory")
