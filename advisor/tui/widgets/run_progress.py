"""The step screens' progress bar over one training run."""

from __future__ import annotations

from textual.widgets import ProgressBar


class RunProgress(ProgressBar):
    """A run's steps done. Hidden while no run has started: with no total, Textual's bar animates as if work were
    under way, and a screen waiting for r (or one an earlier step's redo emptied) looked busy. Hidden, not removed,
    so the screen does not shift by a line when a run starts."""

    def __init__(self, **kwargs):
        super().__init__(show_eta=False, **kwargs)
        self.visible = False

    def idle(self) -> None:
        """No run yet (or the shown ones were cleared)."""
        self.update(total=None, progress=0)
        self.visible = False

    def start(self, steps: int) -> None:
        """A run of ``steps`` steps has started."""
        self.update(total=steps, progress=0)
        self.visible = True
