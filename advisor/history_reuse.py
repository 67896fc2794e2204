"""History reuse as a runner: the sweep asks it first for a run an earlier plan measured at exactly the same
settings (advisor.history.Known.measured_run), and it runs the rest on the session's runner."""

from __future__ import annotations

from typing import Callable

from .events import Event, Note, TrialFinished
from .ledger import TrialRecord
from .method.inputs import SessionRunner


class HistoryReuse:
    """``runner`` with ``reused_run`` (method.inputs.ReusingRunner) from ``known`` (history.Known, or None: nothing
    to reuse). A reused run is said (a Note and its TrialFinished) and lands in the runner's ledger."""

    def __init__(self, runner: SessionRunner, known, emit: Callable[[Event], None]):
        self.runner, self.known, self.emit = runner, known, emit

    @property
    def nproc(self) -> int:
        return self.runner.nproc

    def probe(self, *args, **kwargs):
        return self.runner.probe(*args, **kwargs)

    def train(self, *args, **kwargs) -> TrialRecord:
        return self.runner.train(*args, **kwargs)

    def reused_run(self, phase: str, per_device: int, steps: int, precision: str, lr: float, warmup_steps: int,
                   seed: int = 0) -> TrialRecord | None:
        """A run the history measured at exactly these settings: reused, not re-run, and said so in the ledger."""
        if not self.known:
            return None
        from .history import record_from_row

        row = self.known.measured_run(phase, {"per_device": per_device, "world_size": self.runner.nproc,
                                              "accumulation": 1, "steps": steps, "precision": precision, "lr": lr,
                                              "warmup_steps": warmup_steps, "seed": seed})
        if row is None:
            return None
        record = record_from_row(row)
        self.emit(Note(f"{phase} at {per_device} per device: {record.note}."))
        self.runner.ledger.append(record)
        self.emit(TrialFinished(record))
        return record
