"""The one out-of-memory classifier, shared by the probes (exceptions) and `advisor diagnose` (log lines).

Torch-free at import time: `advisor diagnose` must start fast and run where torch is not installed.
"""

from __future__ import annotations

import re

# Lower-case substrings that mean "an allocation failed", whichever allocator or generation wrote them.
OOM_MARKERS = (
    "out of memory",  # CUDA/HIP/XPU/MPS "... out of memory. Tried to allocate", "CUDA error: out of memory"
    "outofmemoryerror",  # torch.OutOfMemoryError / torch.cuda.OutOfMemoryError in a traceback
    "can't allocate memory",  # DefaultCPUAllocator
    "not enough memory",  # DefaultCPUAllocator on Windows builds
    "could not create a primitive",  # oneDNN under a memory limit: an OOM too (Lightning's finder misses it)
    "cublas_status_alloc_failed",
    "enforce fail at alloc_cpu.cpp",
)

OOM_PATTERN = re.compile("|".join(re.escape(m) for m in OOM_MARKERS), re.IGNORECASE)


def is_oom_message(text: str) -> bool:
    """True when ``text`` (an exception message or a log line) reports a failed allocation."""
    return OOM_PATTERN.search(text) is not None


def is_oom_exception(exc: BaseException) -> bool:
    """True for torch's OutOfMemoryError, MemoryError, and RuntimeErrors whose message is an OOM."""
    if isinstance(exc, MemoryError):
        return True
    import torch

    if isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    return isinstance(exc, RuntimeError) and is_oom_message(str(exc))
