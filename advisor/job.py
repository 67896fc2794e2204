"""The job a launched worker runs, and the event lines it streams back.

Both sides (engine and worker processes) import this module, so it stays free
of torch: a job is plain data written to a JSON file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

EVENT_PREFIX = "ADVISOR_EVENT "
OOM_EXIT_CODE = 75  # a worker that ran out of memory exits with this after reporting it


@dataclass
class TrialJob:
    kind: str  # "probe": one measured step at a batch, under the budget; "train": a short training run
    workload: str
    per_device_batch: int
    accumulation_steps: int = 1
    steps: int = 40
    lr: float = 0.01
    warmup_steps: int = 0
    precision: str = "fp32"  # "fp32" | "bf16" | "fp16"
    tf32: bool = False  # on CUDA, fp32 matmuls/convolutions may use TF32 Tensor Cores (as the user's run will)
    device: str = "cpu"  # "cpu" | "cuda" | "cuda:N"; workers normalise it with torch.device
    memory_budget_bytes: int | None = None
    collective_timeout_s: float = 60.0
    seed: int = 0
    evaluate: bool = False
    loss_every: int = 1
    eval_points: int = 1  # validation checkpoints in a training run (the last one at the end)
    workdir: str = "."
    extra: dict = field(default_factory=dict)  # adapter-specific settings, e.g. a DeepSpeed ZeRO stage

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "TrialJob":
        return cls(**json.loads(text))


def encode_event(kind: str, **payload) -> str:
    return EVENT_PREFIX + json.dumps({"event": kind, **payload}, default=float)


def decode_event(line: str) -> dict | None:
    """The event on a worker's output line, or None for ordinary output."""
    start = line.find(EVENT_PREFIX)  # torchrun may prefix lines with "[rankN]:"
    if start < 0:
        return None
    try:
        event = json.loads(line[start + len(EVENT_PREFIX):])
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None
