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
    "could not create a primitive",  # oneDNN under a memory limit: an OOM too, but see is_primitive_failure
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


# oneDNN says this both when its scratch allocation fails under a memory limit and when it has no kernel for the
# configuration (bf16 on a CPU without AVX512-BF16, say). Only the batch tells them apart: memory failures go
# away at a smaller batch, an unsupported configuration fails at any batch.
PRIMITIVE_FAILURE = "could not create a primitive"


def is_primitive_failure(text: str) -> bool:
    return PRIMITIVE_FAILURE in (text or "").lower()


def unsupported_configuration_message(precision: str, batches: list[int], message: str) -> str:
    """The one-paragraph error for a oneDNN primitive failure that persists at the smallest batches."""
    tried = " and ".join(str(b) for b in sorted(set(batches)))
    what = (f"{precision} is not supported by this CPU's oneDNN (it needs AVX512-BF16 or AMX for bf16)"
            if precision in ("bf16", "fp16") else
            f"oneDNN has no kernel for this model's configuration in {precision} on this CPU")
    fix = ("use --precision fp32" if precision != "fp32"
           else "check the model's layers and dtypes (a layer or layout oneDNN does not cover), or run on a GPU")
    return (f"{what}: the probes at batch {tried} failed with {message!r}. A smaller batch that still fails is "
            f"not out of memory, so no memory ceiling was derived from it. Fix: {fix}.")
