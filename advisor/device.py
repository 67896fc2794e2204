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
    """A launched worker's device (``cuda:LOCAL_RANK``, the job's ``cuda:N`` without a launcher, or cpu) and the
    process-group backend for it.

    On CUDA the device is made current, so later bare ``cuda`` calls land on this process's card.
    """
    import torch

    if job_device.startswith("cuda"):
        # Under a launcher, LOCAL_RANK picks the card; a lone process keeps the job's own index (cuda:1).
        named = torch.device(job_device).index
        local_rank = os.environ.get("LOCAL_RANK")
        device = torch.device("cuda", int(local_rank) if local_rank is not None else (named or 0))
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


def memory_outside_allocator(device) -> int:
    """Bytes this process holds on the card outside torch's caching allocator: the CUDA context, NCCL's
    communicator buffers, kernels. Device memory in use (``mem_get_info``) minus what the allocator reserved.

    On a card shared with other processes their memory counts too, which only makes a cap stricter.
    """
    import torch

    dev = normalize(device)
    free, total = torch.cuda.mem_get_info(dev)
    return max(0, int(total) - int(free) - int(torch.cuda.memory_reserved(dev)))


def open_collectives(device) -> None:
    """Run one tiny all-reduce so NCCL creates its communicator (and its buffers) now, not at the first
    training step: a cap set afterwards then sees them. A no-op without a process group or off CUDA."""
    import torch
    import torch.distributed as dist

    dev = normalize(device)
    if dev.type == "cuda" and dist.is_available() and dist.is_initialized():
        dist.all_reduce(torch.zeros(1, device=dev))
        torch.cuda.synchronize(dev)


def cap_memory(device, budget_bytes: int) -> dict:
    """Make CUDA allocations past ``budget_bytes`` raise a real OutOfMemoryError on this device.

    ``set_per_process_memory_fraction`` caps only the caching allocator, while a card of ``budget_bytes``
    also holds the CUDA context and NCCL's buffers: those are measured (call ``open_collectives`` first)
    and taken off the allocator's share, so planning for a smaller card leaves what that card really has.
    """
    import torch

    from .units import format_bytes

    dev = normalize(device)
    total = total_memory(dev)
    outside = memory_outside_allocator(dev)
    allocator_budget = budget_bytes - outside
    if allocator_budget <= 0:
        raise MemoryError(
            f"the CUDA context and NCCL buffers on {dev} already take {format_bytes(outside)}, more than the "
            f"budget of {format_bytes(budget_bytes)}: can't allocate memory. Plan for a larger device "
            "(--device-memory), or free the card of other processes.")
    fraction = min(1.0, allocator_budget / total)
    torch.cuda.set_per_process_memory_fraction(fraction, dev.index)
    return {"enforced": True, "how": "set_per_process_memory_fraction", "fraction": fraction,
            "device_total_bytes": total, "device": str(dev), "outside_allocator_bytes": outside,
            "allocator_budget_bytes": int(min(allocator_budget, total)),
            "outside_allocator_how": "torch.cuda.mem_get_info (device used) - torch.cuda.memory_reserved, after "
                                     "the process group's first collective: CUDA context and NCCL buffers, "
                                     "taken off the budget"}


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


BF16_MIN_CAPABILITY = (8, 0)  # Ampere: bf16 Tensor Cores (and TF32); older cards only emulate bf16, slowly
TF32_ENV = {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}  # torch reads it once: TF32 cuBLAS matmuls without code


def native_bf16(capability: tuple[int, int]) -> bool:
    """Real bf16 support: compute capability 8.0 or newer.

    Not ``torch.cuda.is_bf16_supported()``: by default it counts emulation (it creates a bf16 tensor on the
    card), so it says True on a V100 or T4, and it initialises CUDA with a context on the current device.
    """
    return tuple(capability) >= BF16_MIN_CAPABILITY


def mixed_precision_for(device_type: str, bf16_native: bool) -> str | None:
    """The mixed precision this device runs: bf16 on CPU and on Ampere or newer; fp16 (with a GradScaler)
    on older GPUs."""
    if device_type == "cpu":
        return "bf16"  # CPU autocast runs bf16; fp16 needs CUDA loss scaling
    if device_type.startswith("cuda"):
        return "bf16" if bf16_native else "fp16"
    return None


def enable_tf32(device) -> bool:
    """Let fp32 matmuls and convolutions on a CUDA device use TF32 Tensor Cores, as the user's run will.

    CPU flags stay untouched (``set_float32_matmul_precision`` would also change CPU matmuls). Returns whether
    anything was set.
    """
    import torch

    dev = device if isinstance(device, torch.device) else torch.device(device)
    if dev.type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return True


def physical_memory_bytes() -> int | None:
    """This host's physical RAM, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


@dataclass
class HostDevices:
    """What this host offers: the device type, and per GPU its name, memory and compute capability."""

    type: str  # "cpu" | "cuda"
    names: list[str] = field(default_factory=list)
    memories: list[int] = field(default_factory=list)
    cpu_count: int = field(default_factory=lambda: os.cpu_count() or 1)
    bf16: bool = True  # on CUDA: every GPU has real bf16 (compute capability >= 8.0), not emulation
    capabilities: list[tuple[int, int]] = field(default_factory=list)
    physical_memory: int | None = field(default_factory=lambda: physical_memory_bytes())  # RAM, for CPU budgets

    @property
    def count(self) -> int:
        return len(self.names) if self.type == "cuda" else self.cpu_count

    @property
    def tf32(self) -> bool:
        """TF32 Tensor Cores came with bf16 ones (Ampere)."""
        return self.type == "cuda" and self.bf16

    def describe(self) -> str:
        if self.type == "cpu":
            return f"no GPU: {self.cpu_count} CPU core(s); processes run on CPU with a memory budget you give"
        from .units import format_bytes

        kinds = sorted(set(self.names))
        return f"{len(self.names)} x " + ", ".join(kinds) + " (" + ", ".join(format_bytes(m) for m in self.memories) + ")"


def cuda_inventory() -> list[dict]:
    """Every GPU's name, memory and compute capability. Initialises CUDA: run it in a throwaway process."""
    import torch

    inventory = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        inventory.append({"name": props.name, "total_memory": int(props.total_memory),
                          "capability": [int(props.major), int(props.minor)]})
    return inventory


def query_cuda_devices(timeout_s: float = 120.0) -> list[dict]:
    """``cuda_inventory()`` in a short child process, so the orchestrator never initialises CUDA: reading
    device properties in-process creates a context (hundreds of MiB) on GPU 0 that stays for the whole
    plan, and a CUDA-initialised parent cannot fork CUDA workers."""
    import json
    import subprocess
    import sys

    from .errors import SetupError

    code = "import json; from advisor.device import cuda_inventory; print(json.dumps(cuda_inventory()))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise SetupError(f"Reading the GPUs' properties took over {timeout_s:.0f} s (a child process running "
                         "torch.cuda.get_device_properties). Check the driver with nvidia-smi, or use --device cpu."
                         ) from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SetupError(f"Could not read the GPUs' properties (torch.cuda.get_device_properties in a child "
                         f"process failed: {tail}). Check the driver with nvidia-smi, or use --device cpu.")
    return json.loads(lines[-1])


def detect(requested: str | None = None) -> HostDevices:
    """The host's devices; ``requested`` ("cpu"/"cuda"/None) picks the type. Creates no CUDA context here."""
    import torch

    from .errors import SetupError

    has_cuda = torch.cuda.is_available()  # counts devices (cudaGetDeviceCount or NVML); no context
    if requested == "cuda" and not has_cuda:
        raise SetupError("--device cuda was asked for, but torch sees no CUDA GPU here (torch.cuda.is_available() "
                         "is False). Check the driver and that torch is a CUDA build, or use --device cpu.")
    kind = requested or ("cuda" if has_cuda else "cpu")
    if kind == "cpu":
        return HostDevices("cpu")
    gpus = query_cuda_devices()
    if not gpus:
        raise SetupError("torch.cuda.is_available() is True, but a child process saw no GPU (CUDA_VISIBLE_DEVICES "
                         "or the driver?). Check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu.")
    capabilities = [tuple(g["capability"]) for g in gpus]
    return HostDevices("cuda", [g["name"] for g in gpus], [g["total_memory"] for g in gpus],
                       bf16=bool(capabilities) and all(native_bf16(c) for c in capabilities),
                       capabilities=capabilities)


CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo's names for native bf16 arithmetic


def cpu_runs_precision(precision: str) -> tuple[bool | None, str]:
    """Whether this CPU runs ``precision`` (bf16) outside any memory budget, and the evidence: its flags
    (AVX512-BF16, AMX-BF16) and a tiny bf16 matmul under autocast in this process. (True, why) when either says
    so, (False, why) when neither does, (None, "") for a precision this does not judge (fp32 always runs)."""
    if precision != "bf16":
        return None, ""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            line = next((line for line in f if line.startswith("flags")), "")
        flags = set(line.split(":", 1)[-1].split())
    except OSError:
        pass
    native = [name for name in CPU_BF16_FLAGS if name in flags]
    try:
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.nn.functional.linear(torch.ones(8, 16), torch.ones(4, 16)).sum().item()
        ran = True
    except RuntimeError:
        ran = False
    evidence = ", ".join(filter(None, [f"CPU flags {' and '.join(native)}" if native else "no native bf16 CPU flag",
                                       "a bf16 matmul outside the budget ran" if ran else
                                       "a bf16 matmul outside the budget failed"]))
    return bool(native) or ran, evidence
