"""Blame the LR before the batch (DOMAIN 2), one rule for the trial (step 3) and the sweep (step 4).

A run that was unstable at an LR scaled up past a validated one runs once more, same batch, at the nearest
validated LR: if it learns there, the LR scale-up is to blame; if not, the batch itself. The batch is never
doubled from nor chosen either way (the plan would give it the scaled LR that failed).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ledger import TrialRecord
from .health import judge, rerun_verdict
from .inputs import Runner, WorkloadInfo
from .validated import nearest_validated_lr


@dataclass(frozen=True)
class Blame:
    """The rerun of ``batch`` at ``validated`` (``whose`` LR), after it was unstable at ``lr``."""

    batch: int
    lr: float
    validated: float
    whose: str
    rerun: TrialRecord
    verdict: str  # the rerun's health verdict
    learned: bool

    @property
    def to_blame(self) -> str:
        """"lr" or "batch"."""
        return "lr" if self.learned else "batch"

    @property
    def sentence(self) -> str:
        """The decision as the sweep says it."""
        return (f"{self.batch} per device was unstable at LR {self.lr:.3g}; at {self.whose} LR {self.validated:.3g} "
                f"it {rerun_verdict(self.learned)}.")


def blame_lr_or_batch(runner: Runner, info: WorkloadInfo, phase: str, batch: int, global_batch: int, steps: int,
                      lr: float | None, warmup: int, earlier: list[TrialRecord], precision: str, **run
                      ) -> Blame | None:
    """The unstable run at ``batch`` per device (``global_batch``, at ``lr``) once more at the nearest validated LR
    among ``earlier`` runs; ``run`` goes to the runner (evaluate, eval_points, seed). None when ``lr`` was not
    scaled up past a validated one (nothing to tell apart)."""
    validated, whose = nearest_validated_lr(info, global_batch, earlier)
    if lr is None or not lr > validated * (1 + 1e-9):
        return None
    record = runner.train(phase, batch, steps, validated, warmup, precision=precision, **run)
    health = judge(record)
    return Blame(batch, lr, validated, whose, record, health.verdict, health.learned)
