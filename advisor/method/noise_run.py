"""Step 3's one-device noise run: one device has no replicas to compare, so a short run with accumulation 2 gives
the two gradients the noise scale compares instead (the first micro-batch's and the accumulated one)."""

from __future__ import annotations

from typing import Callable

from ..errors import CancelledError, TrialError
from ..ledger import TrialRecord
from .inputs import Decide, Runner, WorkloadInfo, lr_and_warmup
from .trial import TrialOutcome

NOISE_ACCUMULATION = 2  # the noise run's micro-batches per step (first micro-batch vs accumulated)


def noise_run(runner: Runner, info: WorkloadInfo, trial: TrialOutcome, steps: int, decide: Decide,
              note: Callable[[str], None]) -> TrialRecord | None:
    """The run at half the trial's choice per micro-batch x NOISE_ACCUMULATION, so its global batch, and so its LR,
    are the trial's own, which the trial just showed to train (at twice the global batch the scaled LR can blow the
    run up, and a run whose loss rose says nothing about sampling noise). None when it failed: the plan stands
    without it, and the noise scale then says why it is unknown."""
    batch = max(1, trial.chosen // NOISE_ACCUMULATION)
    lr, warmup = lr_and_warmup(info, batch * NOISE_ACCUMULATION, steps)
    decide(f"One device: a short run of {batch} per device x {NOISE_ACCUMULATION} accumulation measures the noise "
           "scale (micro-batch vs accumulated gradient).")
    try:
        return runner.train("noise", batch, steps, lr, warmup, accumulation=NOISE_ACCUMULATION,
                            precision=trial.precision)
    except CancelledError:
        raise
    except TrialError as exc:
        note(f"The noise-scale run (accumulation {NOISE_ACCUMULATION} at {batch} per device) failed, so the noise "
             f"scale stays unknown: {exc}")
        return None
