"""A small table of common GPUs for `advisor replan --gpu NAME`: memory, compute capability, Tensor Cores.

Memory is the nominal size (the card reports a little less; pass --device-memory for the exact figure).
bf16 and TF32 Tensor Cores come with compute capability 8.0 (Ampere), the same rule as ``device.native_bf16``;
Volta and Turing have fp16 Tensor Cores only; Pascal has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import SetupError

GIB = 2**30


@dataclass(frozen=True)
class GpuSpec:
    key: str  # what --gpu accepts, e.g. "a100-80gb"
    name: str  # how people write it
    memory_bytes: int
    capability: tuple[int, int]
    tensor_cores: bool

    @property
    def bf16(self) -> bool:
        from .device import native_bf16

        return native_bf16(self.capability)

    @property
    def mixed_precision(self) -> str | None:
        """What mixed precision uses this card's Tensor Cores: bf16 from Ampere on, fp16 on Volta/Turing."""
        if not self.tensor_cores:
            return None
        from .device import mixed_precision_for

        return mixed_precision_for("cuda", self.bf16)

    def describe(self) -> str:
        from .units import format_bytes

        cores = ("bf16 + TF32 Tensor Cores" if self.bf16 else "fp16 Tensor Cores, no bf16" if self.tensor_cores
                 else "no Tensor Cores")
        return (f"{self.name} ({format_bytes(self.memory_bytes)} nominal, compute capability "
                f"{self.capability[0]}.{self.capability[1]}, {cores})")


def _gpu(key, name, gib, capability, tensor_cores=True) -> GpuSpec:
    return GpuSpec(key, name, int(gib * GIB), capability, tensor_cores)


GPUS: tuple[GpuSpec, ...] = (
    _gpu("p100-16gb", "Tesla P100 16GB", 16, (6, 0), tensor_cores=False),
    _gpu("v100-16gb", "Tesla V100 16GB", 16, (7, 0)),
    _gpu("v100-32gb", "Tesla V100 32GB", 32, (7, 0)),
    _gpu("t4", "Tesla T4", 16, (7, 5)),
    _gpu("rtx-2080-ti", "GeForce RTX 2080 Ti", 11, (7, 5)),
    _gpu("rtx-3080", "GeForce RTX 3080", 10, (8, 6)),
    _gpu("rtx-3090", "GeForce RTX 3090", 24, (8, 6)),
    _gpu("rtx-4090", "GeForce RTX 4090", 24, (8, 9)),
    _gpu("rtx-a6000", "RTX A6000", 48, (8, 6)),
    _gpu("a10", "A10", 24, (8, 6)),
    _gpu("a10g", "A10G", 24, (8, 6)),
    _gpu("a40", "A40", 48, (8, 6)),
    _gpu("l4", "L4", 24, (8, 9)),
    _gpu("l40s", "L40S", 48, (8, 9)),
    _gpu("a100-40gb", "A100 40GB", 40, (8, 0)),
    _gpu("a100-80gb", "A100 80GB", 80, (8, 0)),
    _gpu("h100-80gb", "H100 80GB", 80, (9, 0)),
    _gpu("h200", "H200", 141, (9, 0)),
)

_VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla|quadro)\b")
_MEMORY = re.compile(r"(\d+)\s*g(?:i)?b\b")


def _model(text: str) -> str:
    """The model part of a name, letters and digits only: 'NVIDIA A100-SXM4-80GB' -> 'a100sxm4'."""
    text = _VENDOR_WORDS.sub(" ", text.lower())
    text = _MEMORY.sub(" ", text)
    return re.sub(r"[^a-z0-9]", "", text)


def _base(spec: GpuSpec) -> str:
    return _model(spec.key.replace("-", " ").replace("gb", "GB"))


def lookup_gpu(name: str) -> GpuSpec:
    """The table's entry for ``name`` ('a100-80gb', 'A100 80GB', torch's 'NVIDIA A100-SXM4-80GB', 'v100'), or a
    SetupError that lists the table and says to pass --device-memory for a card it does not know."""
    wanted = name.strip()
    lowered = wanted.lower()
    exact = [g for g in GPUS if lowered in (g.key, g.name.lower())]
    if exact:
        return exact[0]
    model = _model(wanted)
    memory = _MEMORY.search(lowered)
    # The longest model id that the name starts with: 'a100sxm4' is an A100, 'rtx3090ti' is not an RTX 3090.
    candidates = [g for g in GPUS if model and (model == _base(g) or (model.startswith(_base(g))
                                                                     and _form_factor(model[len(_base(g)):])))]
    if memory:
        gib = int(memory.group(1))
        sized = [g for g in candidates if round(g.memory_bytes / GIB) == gib]
        if sized:
            candidates = sized
        elif candidates:
            sizes = ", ".join(f"{g.key} ({round(g.memory_bytes / GIB)} GB)" for g in candidates)
            raise SetupError(f"--gpu {name!r}: the table knows {sizes}, not a {gib} GB one. Pass "
                             f"--device-memory {gib}GiB with the nearest --gpu for its precision, or use "
                             "--device-memory alone.")
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        raise SetupError(f"--gpu {name!r} comes in more than one size: "
                         + ", ".join(f"{g.key} ({round(g.memory_bytes / GIB)} GB)" for g in candidates)
                         + ". Name the size (e.g. --gpu " + candidates[-1].key + ") or pass --device-memory.")
    raise SetupError(f"--gpu {name!r} is not in the advisor's table of GPUs ({', '.join(g.key for g in GPUS)}). "
                     "For another card pass --device-memory SIZE (its memory per device, e.g. 48GiB); add --gpu "
                     "with the closest known card of the same generation for its precision, or leave it out.")


def _form_factor(rest: str) -> bool:
    """What may follow a model id in a full name: board forms (SXM4, PCIe, NVL), not another model ('ti')."""
    return bool(re.fullmatch(r"(sxm\d*|pcie|nvl|hbm\d*e?|)+", rest))
