"""Step 4's runs: which per-device batches the comparison sweep trains, each run's steps / LR / warmup at
equal samples, and what the sweep hands the plan (``advisor.method.sweep`` holds the rule that picks)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ledger import TrialRecord
from .inputs import MIN_SWEEP_STEPS, WorkloadInfo, lr_for, warmup_for
from .sweep import SweepVerdict, double_within, smallest_sweepable


SUBSET_SWEEP = (8, 16, 32, 64, 128)



@dataclass
class SweepOutcome:
    chosen: int  # the plan's per-device batch; the trial's choice when no candidate learned (verdict.failed)
    reason: str
    rows: list[TrialRecord]
    candidates: list[int]
    verdict: SweepVerdict | None = None
    samples: int | None = None  # training samples every candidate saw (equal samples)
    extended: list[int] = field(default_factory=list)  # candidates added because an end of the range won

    @property
    def failed(self) -> bool:
        """No candidate learned: the sweep validated nothing, and the plan must not repeat its setting."""
        return self.verdict is not None and self.verdict.failed

    def summary(self) -> dict:
        """What the recipe's [method.sweep] and `plan --json` say about the comparison."""
        out = {"samples_per_run": self.samples, "candidates": self.candidates, "extended": self.extended or None}
        if self.verdict:
            out.update(self.verdict.summary())
        return {k: v for k, v in out.items() if v is not None}



def sweep_candidates(chosen: int, cap: int, subset: bool, smallest: int = 1) -> tuple[list[int], str]:
    """The per-device batches step 4 compares, and a note when the asked-for set had to change. ``smallest``: the
    least per-device batch the model can train (``smallest_sweepable``: 2 with BatchNorm)."""
    if subset:
        fitting = [b for b in SUBSET_SWEEP if smallest <= b <= cap]
        if len(fitting) >= 2:
            return fitting, ""
        note = (f"The subset sweep ({', '.join(map(str, SUBSET_SWEEP))}) needs a ceiling of at least 16; it is "
                f"{cap}, so half / chosen / double is compared instead.")
    else:
        note = ""
    candidates = sorted({b for b in (chosen // 2, chosen, double_within(chosen, cap)) if smallest <= b <= cap}
                        or {chosen})
    return candidates, note


def your_setting(base_global: int, nproc: int, cap: int, batchnorm: bool) -> tuple[int | None, str]:
    """(per device, "") of the user's own setting on this host: the base global batch (where the base LR was
    validated) over its processes, so its sweep run trains at the base LR; or (None, why not) when it does not
    split evenly over them or does not fit (the cap, or under what BatchNorm can train)."""
    per_device, rest = divmod(base_global, nproc)
    if rest or per_device < 1:
        return None, (f"your base global batch {base_global} does not split evenly over {nproc} process(es), so "
                      "your own setting cannot be swept as it is")
    if per_device > cap:
        return None, f"your own setting, {per_device} per device, is above the per-device cap of {cap}"
    if per_device < smallest_sweepable(batchnorm):
        return None, f"your own setting, {per_device} per device, is under what BatchNorm can train on"
    return per_device, ""



def sweep_samples(sweep_steps: int, centre: int, nproc: int, train_size: int | None,
                  run_epochs: float | None, run_source: str = "") -> tuple[int, str]:
    """The training samples every sweep candidate sees (equal samples), and a note when the planned run capped them:
    what the centre sees in ``sweep_steps`` steps, but never more than the planned run's own samples (``run_epochs``
    x the training set) when its length is known: a comparison longer than the run judges a training the user
    never runs (a batch that wins late may lose by the run's end)."""
    wanted = sweep_steps * centre * nproc
    if not run_epochs or not train_size:
        return wanted, ""
    run = max(1, int(run_epochs * train_size))
    if wanted <= run:
        return wanted, ""
    source = f" ({run_source})" if run_source else ""
    return run, (f"Each candidate trains on {run} samples, the planned {run_epochs:g}-epoch run{source}, not the "
                 f"{wanted} ({wanted / train_size:.3g} epochs) that --sweep-steps {sweep_steps} at {centre} per "
                 f"device x {nproc} process(es) would give: the comparison is capped by the run it advises for.")


def sweep_run_settings(info: WorkloadInfo, global_batch: int, samples: int) -> tuple[int, float, int]:
    """(steps, LR, warmup steps) of one comparison-sweep run: ``samples`` training samples whatever its batch
    (equal samples, so a bigger batch gets fewer steps, not more data), with the LR and the whole warmup the
    plan would give that global batch."""
    lr = lr_for(info, global_batch)
    steps = max(MIN_SWEEP_STEPS, round(samples / global_batch))
    return steps, lr.value, warmup_for(info, lr).steps
