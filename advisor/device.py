"""The device boundary: every CUDA call the engine and the workers make goes through here.

Devices are normalised once (``torch.device``), so ``cuda:1`` takes the same
branches as ``cuda``; tests patch the ``torch.cuda`` functions called here, never
the logic around them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def normalize(device) -> "torch.device":  # noqa: F821 - torch is imported lazily
    """``"cuda"`` -> ``cuda:<current>``; ``"cuda:1"``, ``"cpu"``, ``torch.device`` pass through."""
    import torch

    dev = device if isinstance(device, torch.device) else torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def worker_device(job_device: str) -> tuple["torch.device", str]:  # noqa: F821
    """A launched worker's device (``cuda:LOCAL_RANK``, or cpu) and the process-group backend for it.

    On CUDA the device is made current, so later bare ``cuda`` calls land on this process's card.
    """
    import torch

    if job_device.startswith("cuda"):
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        return device, "nccl"
    return torch.device("cpu"), "gloo"


def is_cuda(device) -> bool:
    return normalize(device).type == "cuda"


def synchronize(device) -> None:
    """Wait for queued kernels, so a wall-clock step time measures the work and not the launches."""
    dev = normalize(device)
    if dev.type == "cuda":
        import torch

        torch.cuda.synchronize(dev)


def total_memory(device) -> int:
    import torch

    dev = normalize(device)
    return int(torch.cuda.get_device_properties(dev.index).total_memory)


def cap_memory(device, budget_bytes: int) -> dict:
    """Make CUDA allocations past ``budget_bytes`` raise a real OutOfMemoryError on this device."""
    import torch

    dev = normalize(device)
    total = total_memory(dev)
    fraction = min(1.0, budget_bytes / total)
    torch.cuda.set_per_process_memory_fraction(fraction, dev.index)
    return {"enforced": True, "how": "set_per_process_memory_fraction", "fraction": fraction,
            "device_total_bytes": total, "device": str(dev)}


def reset_peak(device) -> None:
    import torch

    dev = normalize(device)
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)


def peak_allocated(device) -> int:
    import torch

    dev = normalize(device)
    torch.cuda.synchronize(dev)
    return int(torch.cuda.max_memory_allocated(dev))


def mixed_precision_for(device) -> str | None:
    """The mixed precision to try before shrinking a batch on this device, or None."""
    dev = normalize(device)
    if dev.type == "cpu":
        return "bf16"  # CPU autocast runs bf16; fp16 needs CUDA loss scaling
    if dev.type == "cuda":
        import torch

        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return None


def physical_memory_bytes() -> int | None:
    """This host's physical RAM, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


@dataclass
class HostDevices:
    """What this host offers: the device type, and per GPU its name and memory."""

    type: str  # "cpu" | "cuda"
    names: list[str] = field(default_factory=list)
    memories: list[int] = field(default_factory=list)
    cpu_count: int = field(default_factory=lambda: os.cpu_count() or 1)
    bf16: bool = True
    physical_memory: int | None = field(default_factory=lambda: physical_memory_bytes())  # RAM, for CPU budgets

    @property
    def count(self) -> int:
        return len(self.names) if self.type == "cuda" else self.cpu_count

    def describe(self) -> str:
        if self.type == "cpu":
            return f"no GPU: {self.cpu_count} CPU core(s); processes run on CPU with a memory budget you give"
        from .units import format_bytes

        kinds = sorted(set(self.names))
        return f"{len(self.names)} x " + ", ".join(kinds) + " (" + ", ".join(format_bytes(m) for m in self.memories) + ")"


def detect(requested: str | None = None) -> HostDevices:
    """The host's devices; ``requested`` ("cpu"/"cuda"/None) picks the type."""
    import torch

    from .errors import SetupError

    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        raise SetupError("--device cuda was asked for, but torch sees no CUDA GPU here (torch.cuda.is_available() "
                         "is False). Check the driver and that torch is a CUDA build, or use --device cpu.")
    kind = requested or ("cuda" if has_cuda else "cpu")
    if kind == "cpu":
        return HostDevices("cpu")
    count = torch.cuda.device_count()
    props = [torch.cuda.get_device_properties(i) for i in range(count)]
    return HostDevices("cuda", [p.name for p in props], [int(p.total_memory) for p in props],
                       bf16=bool(torch.cuda.is_bf16_supported()))
