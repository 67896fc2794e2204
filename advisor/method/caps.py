"""Which per-device cap binds, and why: the one owner steps 2, 3 and 4 (and the app's Start screen) read.

Three limits bound every batch the start, the trial and the sweep run: the memory ceiling (step 1), one device's
share of the training set, and the steps a planned run needs (``MIN_STEPS_PER_RUN``). The smallest binds; its
words say which.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ledger import TrialRecord
from .plan import MIN_STEPS_PER_RUN, largest_learnable_global
from .start import data_cap
from .trial import trained_cap

MEMORY_WORDS = "the memory ceiling"


@dataclass(frozen=True)
class Cap:
    """The largest per-device batch a step may use; ``by`` names the limit that binds ("memory", "data" or
    "steps"), ``why`` says it in words."""

    value: int
    by: str
    why: str

    @property
    def below_memory(self) -> str:
        """Why the cap is below the memory ceiling ("" when the ceiling itself binds)."""
        return "" if self.by == "memory" else self.why

    @property
    def by_steps(self) -> str:
        """Why the steps a planned run needs bind ("" when memory or the data share does)."""
        return self.why if self.by == "steps" else ""


def data_share_words(train_size: int, world_size: int) -> str:
    return f"the training set's share per device: {train_size} samples / {world_size} process(es)"


def memory_or_data_cap(ceiling_max: int, train_size: int, world_size: int) -> Cap:
    """The memory ceiling or the data share, whichever is smaller (the ceiling on a tie)."""
    share = data_cap(train_size, world_size)
    if share < ceiling_max:
        return Cap(share, "data", data_share_words(train_size, world_size))
    return Cap(ceiling_max, "memory", MEMORY_WORDS)


def learnable_cap(ceiling_max: int, train_size: int, world_size: int, nproc: int, epochs: float | None,
                  run_source: str) -> Cap:
    """Within memory and data, and leaving at least MIN_STEPS_PER_RUN optimizer steps in the planned run at the
    global batch the start, the trial and the sweep validate (per-device x this host's ``nproc`` processes; the
    plan keeps that global batch on any target cluster)."""
    cap = memory_or_data_cap(ceiling_max, train_size, world_size)
    by_run = max(1, largest_learnable_global(train_size, epochs) // nproc)
    if by_run < cap.value:
        run = f"the {epochs:g}-epoch run ({run_source})" if epochs else "a 1-epoch run (no --epochs)"
        return Cap(by_run, "steps", f"{train_size} training samples leave at least {MIN_STEPS_PER_RUN} optimizer "
                                    f"steps in {run} on {nproc} process(es) only up to {by_run} per device")
    return cap


def lowered_by_training_runs(cap: int, rows: list[TrialRecord], precision: str) -> tuple[int, str]:
    """The plan's ``cap`` lowered to what its own training runs held in ``precision`` (trial.trained_cap), and why
    ("" when they did not lower it): a recipe never advises a batch its own runs saw run out of memory."""
    ran_cap, why = trained_cap(rows, precision)
    if ran_cap is not None and ran_cap < cap:
        return max(1, ran_cap), why
    return cap, ""
