"""Step 2, the starting value: the global batch first, then divided over the devices (DOMAIN 3)."""

from __future__ import annotations

from ..tasks import task_profile


def data_cap(train_size: int, world_size: int) -> int:
    """A per-device batch never exceeds one device's share of the training set."""
    return max(1, train_size // world_size)



def start_value(task: str, cap: int, cap_text: str = "", base_global: int | None = None, nproc: int = 1,
                base_source: str = "") -> tuple[int, str]:
    """Step 2, global batch first (DOMAIN 3): the user's base global batch (where the base LR was validated)
    divided over this host's processes; without one, the task table's per-device value. Capped (by the ceiling
    unless ``cap_text`` says what else)."""
    cap_text = cap_text or f"capped by the ceiling of {cap}."
    if base_global:
        wanted = max(1, base_global // nproc)
        start = min(wanted, cap)
        reason = (f"Global batch first: your base global batch {base_global} ({base_source or 'the base'}; the "
                  f"base LR was validated there) over {nproc} process(es) = {wanted} per device"
                  + (f", {cap_text}" if start < wanted else "."))
        return start, reason
    profile = task_profile(task)
    start = min(profile.start_per_device, cap)
    reason = (f"{profile.label}: start at {profile.start_per_device} per device ({profile.source})"
              + (f", {cap_text}" if start < profile.start_per_device else "."))
    return start, reason
