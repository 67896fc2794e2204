"""Which runs count: the runner's ledger keeps every run, and a redo of a step supersedes the runs of that step and
of every later one, so the recipe's ledger and the noise-scale median count only the walk that produced the plan."""

from __future__ import annotations

from typing import Callable

from .ledger import TrialRecord


class Walk:
    """Which step ran each row of ``rows()`` (the runner's ledger, appended to as runs land), and which rows a redo
    superseded."""

    def __init__(self, rows: Callable[[], list[TrialRecord]]):
        self.rows = rows
        self.running_step = 1
        self._row_steps: list[int] = []  # parallel to rows()
        self._superseded: set[int] = set()  # id() of superseded rows

    def attribute(self, step: int) -> None:
        """The rows added since the last call were run by ``step``."""
        added = len(self.rows()) - len(self._row_steps)
        self._row_steps += [step] * max(0, added)

    def begin(self, step: int, keep: Callable[[TrialRecord], bool] = lambda row: False) -> None:
        """A (re)run of ``step``: the rows of its earlier runs and of every later step no longer count, except those
        ``keep`` keeps."""
        self.attribute(self.running_step)
        for row, ran_in in zip(self.rows(), self._row_steps):
            if ran_in >= step and not keep(row):
                self._superseded.add(id(row))
        self.running_step = step

    def current(self) -> list[TrialRecord]:
        """The runs of the current walk: every row except those a redo superseded."""
        return [row for row in self.rows() if id(row) not in self._superseded]
