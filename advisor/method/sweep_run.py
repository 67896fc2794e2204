"""Step 4's run loop, beside step 3's (``trial.short_trial``): the runs ``sweep.decide_sweep`` judges.

Half / chosen / double (and your own setting) with equal samples and paired seeds; the extra seeds an
inconclusive pair asks for; a range extended past an end that wins; equals timed side by side; an unstable run
at a scaled-up LR rerun at the nearest validated one (``blame``). It drives a ``Runner``; a runner that can hand
back a run the history measured at the same settings (``reused_run``) is asked first.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable

from ..errors import CancelledError, TrialError
from ..ledger import NOT_A_CANDIDATE, TrialRecord
from .blame import blame_lr_or_batch
from .candidates import SweepOutcome, sweep_candidates, sweep_run_settings, sweep_samples, your_setting
from .caps import Cap
from .health import judge, unstable
from .speed import MAX_WALK_ROUNDS, MIN_TIMING_SECONDS, ROUNDS_AT_A_TIME, timing_steps
from .inputs import SWEEP_EVAL_POINTS, Decide, MethodSettings, ReusingRunner, WorkloadInfo
from .validated import seen_failing
from .sweep import DEFAULT_POLICY, SweepPolicy, SweepVerdict, decide_sweep, needs_timing, smallest_sweepable


def _noted(record: TrialRecord, note: str) -> None:
    record.note = (record.note + "; " if record.note else "") + note


def _seed_kw(seed: int) -> dict:
    return {"seed": seed} if seed else {}  # seed 0 is every runner's default


@dataclass
class SweepRun:
    """One sweep's runs so far and what they are judged with."""

    runner: ReusingRunner
    info: WorkloadInfo
    settings: MethodSettings
    precision: str
    cap: Cap
    earlier: Callable[[], list[TrialRecord]]  # the plan's trained runs so far: the validated LRs
    decide: Decide
    note: Callable[[str], None]
    samples: int = 0
    policy: SweepPolicy = DEFAULT_POLICY
    rows: list[TrialRecord] = field(default_factory=list)
    reruns: dict[int, TrialRecord] = field(default_factory=dict)
    extended: list[int] = field(default_factory=list)
    timing: dict[int, dict[int, float]] = field(default_factory=dict)

    # -- the candidates ----------------------------------------------------------------------------------------
    def candidate_range(self, chosen: int) -> tuple[int, list[int], str]:
        """(centre, candidates, note): half / chosen / double (or the subset) within the cap, and what changed."""
        cap, nproc, batchnorm = self.cap.value, self.runner.nproc, self.info.has_batchnorm
        notes = []
        if chosen > cap:  # the cap bounds every sweep point, the centre included
            notes.append(f"{chosen} per device is above the cap of {cap} ({self.cap.why}): sweeping around {cap}.")
            chosen = cap
        candidates, subset_note = sweep_candidates(chosen, cap, self.settings.subset_sweep,
                                                   smallest_sweepable(batchnorm))
        notes += [subset_note] if subset_note else []
        yours, not_yours = your_setting(self.info.base_global_batch, nproc, cap, batchnorm)
        if yours is not None and yours not in candidates:  # the advice is measured against what you run today
            candidates = sorted(candidates + [yours])
            notes.append(f"Sweeping your own setting too ({yours} per device at the base LR), to compare the "
                         "advice with it on the same seeds.")
        elif not_yours:
            notes.append(f"Not compared with your own setting: {not_yours}.")
        if self.cap.by_steps and chosen * 2 > cap:
            notes.append(f"Not sweeping above {cap}: {self.cap.by_steps}.")
        note = " ".join(notes)
        if note:
            self.note(note)
        return chosen, candidates, note

    def run_candidates(self, batches: list[int], seeds: range) -> list[TrialRecord]:
        """Every paired seed at each of ``batches``, seed by seed across them (load on a shared machine then falls
        on every candidate alike, so their samples/s compare); a candidate's later seeds are skipped once one rules
        it out (out of memory or unstable: the rule never lets it lead or tie, whatever the other seeds do). An
        unstable run at a scaled-up LR is rerun once at the nearest validated LR, into ``reruns`` (not a
        candidate's run: it says whether the LR or the batch is to blame)."""
        runs, out = [], set()
        for seed in seeds:
            for batch in batches:
                if batch in out:
                    continue
                record = self.one_run(batch, seed)
                runs.append(record)
                if record.status != "ok" or unstable(record):
                    out.add(batch)
                if record.status == "ok" and unstable(record) and batch not in self.reruns:
                    rerun = self.rerun_at_validated_lr(record)
                    if rerun is not None:
                        self.reruns[batch] = rerun
        return runs

    def one_run(self, batch: int, seed: int) -> TrialRecord:
        """One sweep run (or the history's run at exactly its settings), with the health verdict in its note."""
        run_steps, lr, warmup = sweep_run_settings(self.info, batch * self.runner.nproc, self.samples)
        reused = self.runner.reused_run("sweep", batch, run_steps, self.precision, lr, warmup, seed)
        if reused:
            return reused
        record = self.runner.train("sweep", batch, run_steps, lr, warmup, evaluate=True, precision=self.precision,
                                   eval_points=SWEEP_EVAL_POINTS, **_seed_kw(seed))
        record.seed = seed
        if unstable(record):
            _noted(record, f"unstable: {judge(record).reason}")
        return record

    def rerun_at_validated_lr(self, record: TrialRecord) -> TrialRecord | None:
        """The unstable sweep run again, same seed and steps, at the nearest validated LR (None when its LR was
        not scaled up past one: nothing to tell apart)."""
        blame = blame_lr_or_batch(self.runner, self.info, "sweep", record.per_device, record.global_batch,
                                  record.steps, record.lr, record.warmup_steps or 0, self.earlier(), self.precision,
                                  evaluate=True,
                                  eval_points=SWEEP_EVAL_POINTS, **_seed_kw(record.seed))
        if blame is None:
            return None
        rerun = blame.rerun
        rerun.seed = record.seed
        _noted(rerun, f"{NOT_A_CANDIDATE}: unstable at LR {record.lr:.3g}, rerun at {blame.whose} LR "
                      f"{blame.validated:.3g}: {blame.verdict}")
        self.decide(blame.sentence)
        return rerun

    def extra_seed_runs(self, verdict: SweepVerdict, pairs: list[tuple[int, int]]) -> list[TrialRecord]:
        """The extra paired seeds an inconclusive comparison asks for (``SweepVerdict.extra_seeds``), seed by seed
        across the batches that need each, as the sweep's own runs go."""
        batches = sorted({b for b, _ in pairs})
        seeds = sorted({s for _, s in pairs})
        self.decide(f"{' and '.join(map(str, batches))} per device: the gap is over the margin of "
                    f"{verdict.fmt(verdict.margin)} but its interval holds 0 (inconclusive): running paired seed(s) "
                    f"{', '.join(map(str, seeds))} (at most {verdict.policy.max_seeds} seeds in all).")
        runs: list[TrialRecord] = []
        for seed in seeds:
            runs += self.run_candidates([b for b, s in pairs if s == seed], range(seed, seed + 1))
        return runs

    # -- timing side by side ---------------------------------------------------------------------------------
    def time_side_by_side(self, batches: list[int], rounds: int) -> dict[int, dict[int, float]]:
        """Samples/s of ``batches`` timed again side by side: ``rounds`` rounds of one run each, as long as
        ``timing_steps`` says (2 s at the batch's swept speed; its settings otherwise the candidate's sweep run's), the order reversed every other round, so that
        a machine's load and drift fall on every candidate alike. Per batch, round -> samples/s, the rounds numbered
        after those already run (a pair's ratio reads only rounds both ran in; a run that fails gives none, and the
        tie-break then has no paired speed for it). Phase "timing": never reused from the
        history (a reused timing was not side by side), and never read as a result."""
        lengths = {b: timing_steps(self.settings.trial_steps, self.swept_speed(b), b * self.runner.nproc)
                   for b in batches}
        said = ", ".join(f"{b}: {n}" for b, n in lengths.items())
        self.decide(f"{', '.join(map(str, batches))} per device: timing them side by side ({rounds} round(s), "
                    f"interleaved, each run to last {MIN_TIMING_SECONDS:g} s: steps {said}) before a speed is read "
                    "(the sweep's long runs each met the machine's load at a different time).")
        timed: dict[int, dict[int, float]] = {b: {} for b in batches}
        first = 1 + max((r for speeds in self.timing.values() for r in speeds), default=-1)  # new rounds' numbers
        for round_ in range(rounds):
            for batch in (batches if round_ % 2 == 0 else batches[::-1]):
                _, lr, warmup = sweep_run_settings(self.info, batch * self.runner.nproc, self.samples)
                length = lengths[batch]
                try:
                    record = self.runner.train("timing", batch, length, lr, warmup, precision=self.precision,
                                               **_seed_kw(round_))
                except CancelledError:
                    raise
                except TrialError as exc:  # the sweep's verdict stands; this batch has no paired speed
                    self.note(f"Timing round {round_ + 1} at {batch} per device failed: {exc}")
                    continue
                record.seed = round_
                _noted(record, f"{NOT_A_CANDIDATE}: timing round {round_ + 1} of {rounds}, side by side")
                if record.status == "ok" and (speed := record.samples_per_s):
                    timed[batch][first + round_] = speed
        return timed

    def swept_speed(self, batch: int) -> float | None:
        """The median samples/s of ``batch``'s sweep runs so far (a timing run's length is set from it)."""
        speeds = [r.samples_per_s for r in self.rows if r.phase == "sweep" and r.per_device == batch and r.status == "ok"
                  and r.samples_per_s]
        return statistics.median(speeds) if speeds else None

    # -- the verdict -----------------------------------------------------------------------------------------
    def verdict_now(self, yours: int | None) -> SweepVerdict:
        return decide_sweep(self.rows, self.info.num_classes, self.cap.value,
                            self.policy.extensions - len(self.extended), self.policy, self.reruns, self.timing,
                            batchnorm=self.info.has_batchnorm, yours=yours, seen_failing=self.seen_failing())

    def seen_failing(self) -> dict[int, str]:
        """Per candidate, how the plan's runs outside the sweep (the trial's) failed at its (global batch, LR): such
        a candidate cannot be picked (advisor.method.validated; its own unstable seeds the verdict reads itself)."""
        others = [r for r in self.earlier() if r.phase != "sweep"]
        found = {}
        for batch in sorted({r.per_device for r in self.rows}):
            run = next(r for r in self.rows if r.per_device == batch)
            why = seen_failing(others, run.global_batch, run.lr) if run.lr is not None else None
            if why:
                found[batch] = why
        return found

    def settled_verdict(self, yours: int | None) -> SweepVerdict:
        """The verdict once it stands: the equals, your setting beside the pick and the inconclusive candidates timed
        side by side first (short runs), then extra seeds (each run once) only for an inconclusive pair whose
        answer could change the pick (``Comparison.pick_unchanged``)."""
        asked: dict[tuple[int, ...], int] = {}  # how often each set was timed: a run that keeps failing ends it
        while True:
            verdict = self.verdict_now(yours)
            to_time = tuple(needs_timing(verdict))
            if to_time and asked.get(to_time, 0) * ROUNDS_AT_A_TIME < MAX_WALK_ROUNDS:
                asked[to_time] = asked.get(to_time, 0) + 1
                for batch, speeds in self.time_side_by_side(list(to_time), ROUNDS_AT_A_TIME).items():
                    self.timing.setdefault(batch, {}).update(speeds)
                continue
            ran = {(r.per_device, r.seed or 0) for r in self.rows}
            extra = [pair for pair in verdict.extra_seeds if pair not in ran]
            if not extra:
                return verdict
            self.rows.extend(self.extra_seed_runs(verdict, extra))

    def warmup_note(self, candidates: list[int]) -> str:
        """The candidates whose planned warmup is as long as their sweep run, or longer."""
        in_warmup = [b for b in candidates
                     if (run := sweep_run_settings(self.info, b * self.runner.nproc, self.samples))[2] >= run[0]]
        if not in_warmup:
            return ""
        return (f"At {', '.join(map(str, in_warmup))} per device the planned warmup outlasts the sweep run "
                f"({self.samples} samples each): the comparison covers the start of training only; a longer "
                "--sweep-steps covers more of it.")


def comparison_sweep(runner: ReusingRunner, info: WorkloadInfo, settings: MethodSettings, chosen: int,
                     precision: str, cap: Cap, earlier: Callable[[], list[TrialRecord]], decide: Decide,
                     note: Callable[[str], None]) -> SweepOutcome:
    """Step 4 around ``chosen`` (the trial's pick) within ``cap``: every candidate on the same paired seeds and
    the same samples, then ``decide_sweep``'s verdict, extending the range while an end wins (``sweep_extensions``
    times at most). ``decide`` hears each decision as it is made, ``note`` what changed the range; the closing
    reason is the outcome's."""
    sweep = SweepRun(runner, info, settings, precision, cap, earlier, decide, note,
                     policy=SweepPolicy(seeds=settings.sweep_seeds, extensions=settings.sweep_extensions,
                                        max_seeds=max(settings.sweep_seeds, DEFAULT_POLICY.max_seeds)))
    chosen, candidates, range_note = sweep.candidate_range(chosen)
    yours = your_setting(info.base_global_batch, runner.nproc, cap.value, info.has_batchnorm)[0]
    # Equal samples: every candidate trains on what the centre sees in --sweep-steps steps (at most the planned
    # run), each with the warmup the plan would give its batch, so a bigger batch is not credited with more data.
    sweep.samples, budget_note = sweep_samples(settings.sweep_steps, chosen, runner.nproc, info.train_size,
                                               info.run_epochs, info.run_source)
    if budget_note:
        note(budget_note)
        range_note = " ".join(filter(None, (range_note, budget_note)))
    sweep.rows = sweep.run_candidates(candidates, range(sweep.policy.seeds))
    verdict = sweep.settled_verdict(yours)
    while verdict.extend_to is not None:
        batch = verdict.extend_to
        decide(f"{verdict.chosen} per device won at an end of the range: sweeping {batch} per device too, with the "
               "same seeds.")
        sweep.extended.append(batch)
        candidates = sorted(candidates + [batch])
        sweep.rows += sweep.run_candidates([batch], range(sweep.policy.seeds))
        verdict = sweep.settled_verdict(yours)
    reason = " ".join(filter(None, (range_note, verdict.reason, sweep.warmup_note(candidates))))
    return SweepOutcome(verdict.chosen if not verdict.failed else chosen, reason, sweep.rows, candidates, verdict,
                        sweep.samples, sweep.extended)
