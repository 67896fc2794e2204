"""Peak-memory measurement and budget enforcement inside a worker process.

On CUDA: ``torch.cuda.max_memory_allocated`` and
``set_per_process_memory_fraction`` (so a user can plan for a smaller card).
On CPU, torch has no memory stats: ``MemTracker`` counts the tensor bytes of a
training step (parameters, gradients, activations, optimizer state), and
``RLIMIT_DATA`` makes exceeding the budget a real allocator failure.
"""

from __future__ import annotations

import contextlib
import resource


def data_segment_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmData not found in /proc/self/status")


def parameter_count(model) -> int:
    """Parameters of the whole model, also when ZeRO-3 has partitioned them (``ds_numel``: the full size)."""
    return sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())


def meta_parameter_count(workload) -> int | None:
    """The workload's parameter count from a build on the meta device (no memory, the RNG left as it was),
    for settings needed before the real model exists; None where the build cannot run on meta."""
    import torch

    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            return parameter_count(workload.build_model())
    except Exception:  # noqa: BLE001 - a build that touches data (loads weights, calls .item()) cannot count here
        return None


def held_tensor_bytes(model) -> int:
    """Bytes this process holds for the model's parameters and buffers: for a ZeRO-3-partitioned parameter
    its own shard (``ds_tensor``), not the emptied full-size placeholder; for an FSDP2 DTensor its local shard
    (a DTensor's ``numel()`` is the global size)."""
    total = 0
    for p in model.parameters():
        held = getattr(p, "ds_tensor", None)
        held = (p.to_local() if callable(getattr(p, "to_local", None)) else p) if held is None else held
        total += held.numel() * held.element_size()
    return total + sum(b.numel() * b.element_size() for b in model.buffers())


def apply_budget(device, budget_bytes: int | None, held_bytes: int = 0) -> dict:
    """Make allocations past ``budget_bytes`` fail for real; returns what was set.

    On CPU, ``held_bytes`` is tensor memory already allocated that the budget must cover (the model's
    parameters and buffers, DDP's buckets), while the process's own overhead (libraries, thread arenas)
    does not count: a GPU's budget does not hold those either.
    """
    from .device import cap_memory, normalize

    if not budget_bytes:
        return {"enforced": False}
    dev = normalize(device)
    if dev.type == "cuda":
        return cap_memory(dev, budget_bytes)
    if held_bytes >= budget_bytes:
        raise MemoryError(f"the model's {held_bytes} bytes of parameters and buffers exceed the budget of "
                          f"{budget_bytes} bytes: can't allocate memory")
    base = data_segment_bytes()
    limit = base + budget_bytes - held_bytes
    resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    return {"enforced": True, "how": "RLIMIT_DATA", "base_bytes": base, "limit_bytes": limit,
            "held_bytes": held_bytes}


@contextlib.contextmanager
def measure_peak(device, model, optimizer, counted_apart=()):
    """Yield a dict whose ``peak_bytes`` holds the step's peak memory once the block ends.

    ``counted_apart``: tensors (made before the step, alive through it) whose bytes the caller counts itself;
    on CPU the tracker leaves them out of its figures."""
    from .device import normalize, peak_allocated, reset_peak

    out: dict = {"peak_bytes": None, "how": None, "breakdown": {}, "next_call": lambda: None}
    dev = normalize(device)
    if dev.type == "cuda":
        reset_peak(dev)
        yield out
        out.update(peak_bytes=peak_allocated(dev), how="torch.cuda.max_memory_allocated")
        return
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    # Registered up front, an in-place op on them is not new memory; registered tensors land in "Other".
    tracker.track_external(model, optimizer, *counted_apart)
    apart = storage_bytes(counted_apart)
    # Accumulation runs several forwards in one tracked step; MemTracker needs its module stats reset between them.
    out["next_call"] = tracker.reset_mod_stats
    with tracker:
        yield out
    peaks = tracker.get_tracker_snapshot("peak")
    cpu = dict(next(iter(peaks.values()), {}))
    if apart:
        other = next((k for k in cpu if getattr(k, "value", k) == "Other"), None)
        if other is not None:
            cpu[other] = max(0, cpu[other] - apart)
        cpu["Total"] = max(0, cpu.get("Total", 0) - apart)
    out["peak_bytes"] = int(cpu.get("Total", 0))
    out["how"] = "MemTracker (tensor bytes)"
    out["breakdown"] = {getattr(k, "value", str(k)): int(v) for k, v in cpu.items() if k != "Total"}


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views of one flat buffer count once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())
