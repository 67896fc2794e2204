"""The job a launched worker runs, and the event lines it streams back.

Both sides (engine and worker processes) import this module, so it stays free
of torch: a job is plain data written to a JSON file.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import asdict, dataclass, field

EVENT_PREFIX = "ADVISOR_EVENT "
PART_PREFIX = "ADVISOR_EVENT_PART "
# Every rank writes to the one pipe torchrun hands them; a write() to a pipe is atomic only up to PIPE_BUF
# (4096 bytes on Linux), so a longer line from one rank can be cut by another's and both events are lost
# (a 1438-step run's result, with its per-step losses and gradient norms, is ~60 KB). Longer events go out
# as numbered part lines, each short enough to be written whole.
ATOMIC_LINE = 3800
_PART_IDS = itertools.count()
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

    @property
    def adapter_options(self) -> dict:
        """The adapter's options as the plan checked them (the runner puts them in ``extra``), for its workers."""
        return dict(self.extra.get("adapter_options") or {})

    @property
    def script_form(self) -> str | None:
        """How a user's script is run (a script door's ``extra["script"]``), or None for a workload's job."""
        script = self.extra.get("script")
        return script.get("form") if isinstance(script, dict) else None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "TrialJob":
        return cls(**json.loads(text))


def encode_event(kind: str, **payload) -> str:
    return EVENT_PREFIX + json.dumps({"event": kind, **payload}, default=float)


def event_lines(kind: str, **payload) -> list[str]:
    """The lines (without newline) that carry one event: one line, or part lines when it is too long to be
    written to a shared pipe in one piece. Write and flush each line on its own."""
    line = encode_event(kind, **payload)  # json.dumps escapes non-ASCII: characters are bytes
    if len(line) <= ATOMIC_LINE:
        return [line]
    body = line[len(EVENT_PREFIX):]
    ident = f"{os.getpid()}.{next(_PART_IDS)}"
    size = ATOMIC_LINE - len(PART_PREFIX) - 40  # room for "id k n "
    chunks = [body[i:i + size] for i in range(0, len(body), size)]
    return [f"{PART_PREFIX}{ident} {k} {len(chunks)} {chunk}" for k, chunk in enumerate(chunks)]


def write_event(stream, kind: str, **payload) -> None:
    """Write one event to ``stream`` as ``event_lines`` gives it, flushing each line on its own."""
    for line in event_lines(kind, **payload):
        stream.write(line + "\n")
        stream.flush()


class EventReader:
    """Events from worker output lines, whole or in parts (``event_lines``), interleaved in any order
    with other ranks' lines. ``feed`` gives the event a line completes, else None; ``is_output`` tells an
    ordinary output line (kept for error messages) from an event's part."""

    def __init__(self):
        self._parts: dict[str, dict[int, str]] = {}

    @staticmethod
    def is_output(line: str) -> bool:
        return EVENT_PREFIX not in line and PART_PREFIX not in line

    def feed(self, line: str) -> dict | None:
        start = line.find(PART_PREFIX)
        if start < 0:
            return decode_event(line)
        try:
            ident, index, total, chunk = line[start + len(PART_PREFIX):].split(" ", 3)
            index, total = int(index), int(total)
        except ValueError:
            return None
        parts = self._parts.setdefault(ident, {})
        parts[index] = chunk
        if len(parts) < total:
            return None
        del self._parts[ident]
        return decode_event(EVENT_PREFIX + "".join(parts[i] for i in range(total)))


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
