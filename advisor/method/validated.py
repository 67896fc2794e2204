"""What "validated" means, in one place (DOMAIN 2: "The LR is validated only where a run trained healthily at it (a
rerun at a lower LR validates that LR for its batch, not the rule's) ... A recipe never advises a setting whose own
runs failed").

A (global batch, LR) pair is validated when one of the plan's runs learned at it and none of its runs at that global
batch was unstable at that LR or a lower one: the short trial, its second seed, the sweep's seeds, their extra seeds
and the blame reruns all count alike (a higher LR than one that failed is not trusted either). A rerun at a lower LR
validates that lower LR only. Every rule that needs the word reads it here:

- the sweep: a candidate whose (global batch, LR) another run of the plan saw fail cannot lead, tie or be picked
  (``seen_failing``, read by ``sweep.decide_sweep``);
- the LR bound past the largest global batch validated at the LR the rules give it (``largest_validated_global``);
- the LR a blame rerun runs at (``nearest_validated_lr``);
- the advised LR at the planned global batch, in `advisor plan` (``--global-batch`` included), `advisor replan` and
  `advisor check` (``lr_at_global``): the highest LR validated there when the rules' one is not, or a refusal when
  runs there failed and none learned below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import AdvisorError
from ..ledger import TrialRecord
from .health import UNSTABLE, judge
from .inputs import WorkloadInfo, lr_for
from .lr import LRDecision

COUNTED_PHASES = ("trial", "noise", "sweep")  # "timing" runs measure speed only; probes do not train
LR_TOLERANCE = 1e-6  # LRs are floats written to TOML and read back: equal within this relative tolerance


def same_lr(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=LR_TOLERANCE)


def trained_runs(rows: list[TrialRecord]) -> list[TrialRecord]:
    """The runs that say how a (global batch, LR) trains: finished trial, noise and sweep runs with a known LR."""
    return [r for r in rows if r.phase in COUNTED_PHASES and r.status == "ok" and r.lr is not None]


def failed_runs(rows: list[TrialRecord], global_batch: int, lr: float) -> list[TrialRecord]:
    """The runs at ``global_batch`` judged unstable at ``lr`` or a lower LR."""
    return [r for r in trained_runs(rows) if r.global_batch == global_batch and r.lr <= lr * (1 + LR_TOLERANCE)
            and judge(r).verdict == UNSTABLE]


def learned_runs(rows: list[TrialRecord], global_batch: int, lr: float) -> list[TrialRecord]:
    return [r for r in trained_runs(rows) if r.global_batch == global_batch and same_lr(r.lr, lr)
            and judge(r).learned]


def is_validated(rows: list[TrialRecord], global_batch: int, lr: float) -> bool:
    """Whether (``global_batch``, ``lr``) is validated: a run learned there and none at that batch failed at or
    below that LR."""
    return bool(learned_runs(rows, global_batch, lr)) and not failed_runs(rows, global_batch, lr)


def validated_lrs(rows: list[TrialRecord], global_batch: int) -> list[float]:
    """Every LR validated at ``global_batch``, lowest first."""
    lrs: list[float] = []
    for r in sorted(trained_runs(rows), key=lambda r: r.lr):
        if r.global_batch == global_batch and not any(same_lr(r.lr, x) for x in lrs) \
                and is_validated(rows, global_batch, r.lr):
            lrs.append(r.lr)
    return lrs


def largest_validated_global(info: WorkloadInfo, rows: list[TrialRecord]) -> int | None:
    """The largest global batch validated at the LR the scaling rules give it (past it the LR is bounded:
    ``lr.bound_past_validated``); None when none is."""
    batches = {r.global_batch for r in trained_runs(rows)}
    return max((g for g in batches if is_validated(rows, g, lr_for(info, g).value)), default=None)


def nearest_validated_lr(info: WorkloadInfo, global_batch: int, rows: list[TrialRecord]) -> tuple[float, str]:
    """(LR, whose) to rerun an unstable run at ``global_batch`` with: the highest LR validated at the largest global
    batch under it (without accumulation) that has one; else the base LR (the one the user validated, at the base
    global batch). DOMAIN 2: blame the LR before the batch."""
    below = sorted({r.global_batch for r in trained_runs(rows) if r.accumulation == 1 and r.global_batch < global_batch},
                   reverse=True)
    for g in below:
        lrs = validated_lrs(rows, g)
        if lrs:
            by = learned_runs(rows, g, lrs[-1])[0]
            return lrs[-1], f"{by.per_device} per device's"
    return info.base_lr, "the base"


def runs_words(runs: list[TrialRecord]) -> str:
    """'the trial's 2 runs at 64 per device x 2 (seeds 0, 1) at LR 0.04', one clause per phase and LR."""
    groups: dict[tuple, list[TrialRecord]] = {}
    for r in runs:
        groups.setdefault((r.phase, r.per_device, r.world_size, r.accumulation, r.lr), []).append(r)
    clauses = []
    for (phase, per_device, world, accumulation, lr), group in groups.items():
        seeds = ", ".join(str(r.seed or 0) for r in group)
        what = f"{len(group)} runs" if len(group) > 1 else "run"
        accumulated = f" x {accumulation} accumulation steps" if accumulation > 1 else ""
        clauses.append(f"the {phase}'s {what} at {per_device} per device x {world}{accumulated} "
                       f"(seed{'s' if len(group) > 1 else ''} {seeds}) at LR {lr:.4g}")
    return "; ".join(clauses)


def seen_failing(rows: list[TrialRecord], global_batch: int, lr: float) -> str | None:
    """Why (``global_batch``, ``lr``) cannot be picked, when runs of the plan saw it fail: 'the trial's 2 runs at 64
    per device x 2 (seeds 0, 1) at LR 0.04 were unstable'; None when none did."""
    failed = failed_runs(rows, global_batch, lr)
    if not failed:
        return None
    return f"{runs_words(failed)} {'were' if len(failed) > 1 else 'was'} unstable"


LOWERED = "lr-seen-unstable"  # the warning: the rules' LR was seen failing, the highest validated LR stands
REFUSED = "lr-not-validated"  # the error: runs at the global batch failed and none learned at a lower LR


@dataclass(frozen=True)
class LRAtGlobal:
    """The advised LR at a global batch where the plan's runs saw the rules' LR fail (``lr_at_global``)."""

    global_batch: int
    rules_lr: float
    lr: float | None  # the highest LR validated at the global batch; None: none is, the setting is refused
    failed: tuple[TrialRecord, ...]
    validated_by: tuple[TrialRecord, ...]  # the runs that learned at ``lr``
    elsewhere: tuple[tuple[int, float], ...]  # (global batch, LR) validated at the rules' LR, for the refusal

    @property
    def refused(self) -> bool:
        return self.lr is None

    @property
    def code(self) -> str:
        return REFUSED if self.refused else LOWERED

    @property
    def message(self) -> str:
        failed = f"{runs_words(list(self.failed))} {'were' if len(self.failed) > 1 else 'was'} unstable"
        if self.lr is not None:
            learned = list(self.validated_by)
            return (f"The rules' LR {self.rules_lr:.4g} at global batch {self.global_batch} is one this plan's own runs "
                    f"saw fail: {failed}. A recipe never advises a setting its runs saw fail, so the LR is "
                    f"{self.lr:.4g}, the highest LR a run at global batch {self.global_batch} learned at with none "
                    f"failing at or below it ({runs_words(learned)} learned); it is validated at that LR only, not "
                    "at the rules' one.")
        others = ", ".join(f"{g} at LR {lr:.4g}" for g, lr in self.elsewhere) or "none"
        return (f"Global batch {self.global_batch} is not validated at any LR: at the rules' LR "
                f"{self.rules_lr:.4g} {failed}, and no run at that global batch learned at a lower LR. A recipe never "
                "advises a setting its own runs saw fail, so there is no LR to give it. Ask for a global batch that "
                f"was validated at the rules' LR (here: {others}), or plan this one with a smaller base LR (advisor "
                f"plan --global-batch {self.global_batch} --base-lr X).")


def lr_at_global(info: WorkloadInfo, global_batch: int, lr: float, rows: list[TrialRecord]) -> LRAtGlobal | None:
    """None when no run at ``global_batch`` was unstable at ``lr`` or below (validated there, or never run there:
    an extrapolation the bound past the validated batch covers); else the highest LR validated at that global batch
    below ``lr``, or a refusal (``lr`` None) when there is none."""
    failed = failed_runs(rows, global_batch, lr)
    if not failed:
        return None
    below = [x for x in validated_lrs(rows, global_batch) if x < lr * (1 - LR_TOLERANCE)]
    safe = max(below, default=None)
    by = tuple(learned_runs(rows, global_batch, safe)) if safe is not None else ()
    elsewhere = tuple((g, lr_for(info, g).value) for g in sorted({r.global_batch for r in trained_runs(rows)})
                      if is_validated(rows, g, lr_for(info, g).value))
    return LRAtGlobal(global_batch, lr, safe, tuple(failed), by, elsewhere)


def never_a_failed_lr(info: WorkloadInfo, lr: LRDecision, rows: list[TrialRecord]) -> tuple[LRDecision, LRAtGlobal | None]:
    """(the LR to advise, the decision when it was not the rules'): ``lr`` when no run at its global batch failed at
    it or below; else lowered to the highest LR validated there (the decision's message, for the plan's warnings,
    says why, and the LR records the rules' value it was lowered from); raises AdvisorError with the refusal's
    paragraph when none is."""
    decision = lr_at_global(info, lr.global_batch, lr.value, rows)
    if decision is None:
        return lr, None
    if decision.refused:
        raise AdvisorError(decision.message)
    # The warning is the plan's, under its own code (the caller adds it); not repeated among the LR's warnings.
    return replace(lr, value=decision.lr, capped=True, reason=f"{lr.reason} {decision.message}",
                   seen_failing_at=lr.value), decision
