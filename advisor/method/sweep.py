"""Step 4, the comparison sweep: one rule, in three sentences (the README and docs/method.md say the same).

1. Every candidate trains on the same number of samples with the same k seeds (so runs are paired), and each
   run scores the mean of its last two validation checkpoints.
2. The candidate with the best mean score leads; another ties with it when the 95% paired t-interval of their
   per-seed differences (k - 1 degrees of freedom) contains 0, or when the mean gap is under a practical
   margin; a candidate that ran out of memory, was unstable in any seed, or never learned cannot lead or tie.
3. Among the tied, the pick walks up from the smallest while the next bigger one was more than 10% faster at
   every seed (or every round of timing them again side by side, when they ran at different times); the range
   (half / chosen / double, double at most the cap) grows once past the winner's end when the sweep points
   there: the winner leads with a worse or failed candidate behind it, or it is the largest and won on speed.

Why these choices:
- Pairing: seed s of every candidate starts from the same initial weights and data order, so the difference
  of two candidates at one seed cancels what the seed did to both; the spread of those differences is the
  noise of the comparison. Counting each candidate's noise separately (and the one shared validation set as
  independent noise per candidate) overstates it.
- The t quantile, not z: with k seeds the interval has k - 1 degrees of freedom (2 seeds: t = 12.7, not 1.96).
- The last two checkpoints, not the last one: a run's end value still moves between evaluations; averaging
  two halves that movement without reaching back into the early, still-falling part of the curve.
- The margin: under a point of accuracy (or 2% of the leader's loss) a user would not trade throughput for the
  difference, and short runs cannot resolve less. A single seed (k = 1) has no interval: only the margin ties.
- Speed is paired too: runs go seed by seed across the candidates, so each seed's runs shared the machine's
  load, and the per-seed ratio cancels it. A candidate added when the range grew ran later, in its own block, and
  its speed against the others' would compare two stretches of a shared machine's load (one digits-cnn plan
  measured 8 per device, run last, at 0.83x of 16's samples/s, another at 1.09x; the bench's 5-seed
  interleaved grid put 16 at 0.96-1.15x of 8, 1.04x on average); so when the tied candidates were swept in
  different blocks they are timed again side by side (k rounds of one short run each, at the trial's length,
  the order reversed every other round so that a steady drift does not always fall on the same candidate) and
  the tie-break reads those rounds instead (``needs_timing``; a run reused from the history was measured on
  another day, a stretch of its own). A bigger batch must be faster at every seed, or every round (see
  ``clearly_faster``: a tie on the end score can hide samples a bigger batch spends on the way, so it must pay
  for itself in speed). At equal speed the smaller batch wins: it needs the smaller LR scale-up. The walk stops
  at the first step that does not pay: throughput saturates with the batch, so a batch past one that bought no
  10% is a jump on noise (a digits-cnn plan timed 16 per device at 1.08x, 1.09x and 1.34x of 8 and 32 at 1.17x,
  1.18x and 1.46x; compared with 8 directly, 32 won, a 4x move from one that was not shown to pay at its first
  step).
- The range grows only where the evidence points. A winner that merely tied and was the smallest by default
  says nothing about a yet smaller batch, which would tie again and win again by the same default: on flat
  scores every walk down ended one step smaller (a GRU at 32 per device, half its grid's fastest; a digits-cnn
  plan at 8 after another's 32). Past a winner that leads with a worse or failed candidate behind it, or a
  largest that won on speed, the trend may continue: half / chosen / double brackets the optimum only when the
  middle wins. The step up stops at the cap rather than not being taken (a GRU's sweep won at 128 per device
  with 256 past its cap of 150, and 150 went unmeasured).

Every threshold lives in ``SweepPolicy``; ``decide_sweep`` returns the numbers it used (``SweepVerdict``), and
the reason text is rendered from them (``SweepVerdict.reason``), so the recipe, the summary and the app read
one decision.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from .health import FLAT, UNSTABLE, judge
from .speed import FASTER_BY, faster_at_every_pair
from ..ledger import TrialRecord

# Two-sided 95% Student t quantiles by degrees of freedom; above 30, the normal's 1.96 plus its first
# Cornish-Fisher correction (within 0.2% there).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
        29: 2.045, 30: 2.042}


def t95(degrees_of_freedom: int) -> float:
    """The two-sided 95% Student t quantile."""
    if degrees_of_freedom < 1:
        raise ValueError("a t interval needs at least 1 degree of freedom (2 paired seeds)")
    if degrees_of_freedom in _T95:
        return _T95[degrees_of_freedom]
    z = 1.959964
    return z + (z ** 3 + z) / (4 * degrees_of_freedom)


@dataclass(frozen=True)
class SweepPolicy:
    """Every number step 4's rule uses (injectable: tests and callers pass their own)."""

    seeds: int = 3  # k: every candidate runs seeds 0..k-1
    accuracy_margin: float = 0.01  # a gap under this (absolute) ties, for a metric on 0..1 (accuracy, F1)
    loss_margin: float = 0.02  # a gap under this share of the leader's score ties, for a loss or other metric
    throughput_margin: float = FASTER_BY  # a bigger tied batch must be more than this share faster (speed.py)
    chance_factor: float = 1.5  # accuracy under this multiple of 1/classes: the candidate did not learn
    extensions: int = 1  # how many times the range may grow past an end that wins


DEFAULT_POLICY = SweepPolicy()

# The verdict's rule codes (the recipe's [method.sweep] rule): which sentence of the rule decided.
ALONE = "best-outside-interval"  # the leader, with no other candidate tied to it
FASTEST_TIED = "fastest-of-tied"  # among the tied: the smallest, or a bigger one faster at every seed
NO_RUNS = "no-runs"  # nothing could run (no candidate fits)
NONE_LEARNED = "none-learned"  # every candidate ran out of memory, was unstable, or never learned
# Why the batch past a winning end was not compared.
PAST_CAP = "past-cap"
WALK_SPENT = "walk-spent"
NO_TREND = "no-trend"  # the winner only tied, or nothing scored worse: nothing points past it


@dataclass
class CandidateScores:
    """One candidate over its seeds."""

    per_device: int
    status: str  # "ok" | "oom" | "unstable" | "flat" (never learned)
    scores: dict[int, float] = field(default_factory=dict)  # seed -> the run's score (oriented as measured)
    throughput: float | None = None  # samples/s, mean over seeds, at each run's median step time
    speeds: dict[int, float] = field(default_factory=dict)  # seed -> that run's samples/s
    timed: dict[int, float] = field(default_factory=dict)  # round -> samples/s in the side-by-side timing rounds
    timing_failed: bool = False  # due for timing side by side, and no timing run of it gave a speed
    why: str = ""  # for a candidate that cannot take part: what its runs did
    blame: str = ""  # unstable at its scaled LR: "lr" (it learned at the nearest validated LR) or "batch" (not)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores.values()) if self.scores else None

    @property
    def compared_speed(self) -> float | None:
        """The samples/s the tie-break compares: the timing rounds' mean when the tied were timed side by side
        (``needs_timing``; none when its timing runs failed), else its sweep runs'."""
        if self.timed or self.timing_failed:
            return statistics.fmean(self.timed.values()) if self.timed else None
        return self.throughput

    def to_dict(self) -> dict:
        out = {"per_device": self.per_device, "status": self.status,
               "seeds": sorted(self.scores), "scores": [round(self.scores[s], 6) for s in sorted(self.scores)],
               "mean": None if self.mean is None else round(self.mean, 6),
               "samples_per_s": None if self.throughput is None else round(self.throughput, 1),
               "samples_per_s_by_seed": [round(self.speeds[s], 1) for s in sorted(self.speeds)] or None,
               "samples_per_s_by_timing_round": [round(self.timed[r], 1) for r in sorted(self.timed)] or None,
               "why": self.why or None, "blame": self.blame or None}
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class Comparison:
    """A candidate against the leader, paired by seed: gap = leader - candidate, oriented so positive is worse."""

    per_device: int
    seeds: int  # paired seeds
    mean_gap: float
    half_width: float | None  # of the 95% t-interval; None with one seed (no interval)
    tied: bool
    by: str  # "interval" (it contains 0) | "margin" (the mean gap is under it) | "apart"

    def to_dict(self) -> dict:
        out = {"per_device": self.per_device, "seeds": self.seeds, "mean_gap": round(self.mean_gap, 6),
               "interval": None if self.half_width is None else
               [round(self.mean_gap - self.half_width, 6), round(self.mean_gap + self.half_width, 6)],
               "tied": self.tied, "by": self.by}
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class SweepVerdict:
    """decide_sweep's answer and every number it used."""

    chosen: int | None  # None: no candidate learned (rule NONE_LEARNED / NO_RUNS)
    rule: str
    metric: str = ""
    higher_is_better: bool = True
    margin: float = 0.0
    candidates: list[CandidateScores] = field(default_factory=list)
    leader: int | None = None
    comparisons: list[Comparison] = field(default_factory=list)
    extend_to: int | None = None  # the next batch past the winning end, when the rule asks for one
    # The winner is an end of the range and the batch past it was not compared: that batch, and why not
    # (PAST_CAP: over the cap; WALK_SPENT: the range grew --sweep-walk times already).
    unexplored: int | None = None
    end: str = ""
    cap: int | None = None
    policy: SweepPolicy = DEFAULT_POLICY

    @property
    def tied(self) -> list[int]:
        """The leader and every candidate tied with it."""
        if self.leader is None:
            return []
        return sorted([self.leader] + [c.per_device for c in self.comparisons if c.tied])

    @property
    def failed(self) -> bool:
        return self.chosen is None

    @property
    def left_out(self) -> list[CandidateScores]:
        return [c for c in self.candidates if c.status != "ok"]

    @property
    def headline(self) -> str:
        return {ALONE: "best, outside the others' paired intervals",
                FASTEST_TIED: "tied with the best; the fastest of the tied",
                NO_RUNS: "no sweep run could be made",
                NONE_LEARNED: "no candidate learned"}[self.rule]

    def fmt(self, value: float) -> str:
        return f"{value:.4f}" if "loss" in self.metric else f"{value:.3f}"

    @property
    def reason(self) -> str:
        """The decision in words, rendered from the numbers above."""
        left = "; ".join(f"{c.per_device} per device {c.why}" for c in self.left_out)
        left = f" Out of the comparison: {left}." if left else ""
        if self.rule == NO_RUNS:
            return "No sweep run could be made (no candidate batch fits)."
        if self.rule == NONE_LEARNED:
            return (f"No sweep candidate learned, so the comparison cannot pick a batch.{left} Check the base LR "
                    "and the base batch it was validated at, or run a longer sweep (--sweep-steps).")
        k = self.policy.seeds
        scores = ", ".join(f"{c.per_device}: {self.fmt(c.mean)}" for c in self.candidates if c.status == "ok")
        said = (f"By {self.metric}, mean of each run's last two checkpoints over {k} paired seed(s) at equal "
                f"training samples ({scores}), {self.leader} per device leads.")
        parts = []
        for c in self.comparisons:
            gap = f"gap {self.fmt(c.mean_gap)}"
            if c.half_width is not None:
                gap += f", 95% t-interval ±{self.fmt(c.half_width)} ({c.seeds - 1} d.f.)"
            verdict = {"interval": "tied (the interval holds 0)", "margin": "tied (under the margin)",
                       "apart": "worse"}[c.by]
            parts.append(f"{c.per_device}: {gap}: {verdict}")
        margin = f"margin {self.fmt(self.margin)}"
        said += f" Against it ({margin}): " + "; ".join(parts) + "." if parts else ""
        if self.rule == ALONE:
            return said + f" {self.chosen} per device is best.{left}{self.end_note}"
        tied = [c for c in self.candidates if c.per_device in self.tied]
        rounds = max((len(c.timed) for c in tied), default=0)
        speeds = ", ".join(f"{c.per_device}: {c.compared_speed:.0f}" if c.compared_speed is not None
                           else f"{c.per_device}: none" for c in tied)
        where = (f"at every one of {rounds} timing rounds run side by side, as its candidates were measured at "
                 f"different times (samples/s in those rounds {speeds})" if rounds
                 else f"at every seed (samples/s {speeds})")
        return (said + f" Among the tied, the pick walks up from the smallest while the next bigger one is faster by "
                f"more than {self.policy.throughput_margin:.0%} {where}: {self.chosen} per device.{left}"
                f"{self.end_note}")

    @property
    def end_note(self) -> str:
        """When the pick is an end of the swept range the rule could not grow past: which batch went unmeasured."""
        if not self.end:
            return ""
        if self.end == PAST_CAP:
            return f" It is the largest swept; {self.unexplored} is past the cap of {self.cap}."
        side = "smallest" if self.unexplored < self.chosen else "largest"
        if self.end == NO_TREND:
            why = (f"it ties with {self.leader}, which leads" if self.chosen != self.leader
                   else "no other candidate scored worse or failed")
            return (f" It is the {side} swept, but nothing points past it ({why}), so {self.unexplored} per device "
                    "was not compared.")
        if self.end == WALK_SPENT:
            return (f" It is the {side} swept and the range has grown {self.policy.extensions} time(s) "
                    f"(--sweep-walk {self.policy.extensions}): {self.unexplored} per device was not compared.")
        return ""

    def summary(self) -> dict:
        """What the recipe's [method.sweep] and `plan --json` record of the rule."""
        out = {"rule": self.rule, "verdict": self.headline, "metric": self.metric or None,
               "seeds": self.policy.seeds, "margin": round(self.margin, 6) if self.metric else None,
               "leader": self.leader, "tied": self.tied or None,
               "not_compared": self.unexplored, "not_compared_because": self.end or None,
               "comparisons": [c.to_dict() for c in self.comparisons] or None,
               "candidates_scored": [c.to_dict() for c in self.candidates] or None}
        return {k: v for k, v in out.items() if v is not None}


def ranked_metric(rows: list[TrialRecord]) -> tuple[str, bool]:
    """(name, higher_is_better) the sweep ranks ``rows`` by: the workload's metric when every run computed
    it, else the validation loss (never a metric a run did not compute)."""
    ok = [r for r in rows if r.status == "ok"]
    if ok and all(r.val_metric is not None for r in ok):
        higher = ok[0].higher_is_better
        return ok[0].val_metric_name or "accuracy", True if higher is None else higher
    return "loss", False


def training_tail(record: TrialRecord) -> float | None:
    """The mean of the run's last quarter of training losses: what a run with no validation is scored by (one
    step's loss is one mini-batch's, as noisy as the batch is small; the tail's mean is not)."""
    losses = [v for v in record.losses if v is not None and math.isfinite(v)]
    return statistics.fmean(losses[-max(1, len(losses) // 4):]) if losses else None


def run_score(record: TrialRecord, by_loss: bool) -> float | None:
    """The run's score: the mean of its last two validation checkpoints of the ranked value (the end value when
    it has fewer), or with no validation at all, its training-loss tail."""
    key = "val_loss" if by_loss else "val_metric"
    points = [p[key] for p in record.evals if p.get(key) is not None]
    if points:
        return statistics.fmean(points[-2:])
    end = record.val_loss if by_loss else record.val_metric
    if end is not None:
        return end
    return training_tail(record) if by_loss else None


def score_candidate(batch: int, runs: list[TrialRecord], by_loss: bool, num_classes: int | None,
                    policy: SweepPolicy, rerun: TrialRecord | None = None) -> CandidateScores:
    """One candidate's status and per-seed scores. Out of the comparison: any seed out of memory or unstable
    (advisor.method.health), every seed flat, or an accuracy that stayed near chance. ``rerun``: an unstable
    candidate's run again at the nearest validated LR, which says whether the LR scale-up or the batch is to
    blame (the candidate stays out either way: the plan would give it the LR that failed)."""
    if any(r.status == "oom" for r in runs):
        return CandidateScores(batch, "oom", why="ran out of memory")
    verdicts = [judge(r) for r in runs]
    unstable = [(r, v) for r, v in zip(runs, verdicts) if v.verdict == UNSTABLE]
    if unstable:
        run, verdict = unstable[0]
        out = CandidateScores(batch, "unstable", why=f"was unstable at seed {run.seed or 0} ({verdict.reason})")
        if rerun is not None and rerun.status == "ok":
            learned = judge(rerun).learned
            out.blame = "lr" if learned else "batch"
            out.why += (f"; rerun at the nearest validated LR {rerun.lr:.3g} it "
                        + ("learned: the LR scale-up, not the batch, is to blame" if learned
                           else "was not healthy either: the batch itself is to blame"))
        return out
    scores = {(r.seed or 0): run_score(r, by_loss) for r in runs}
    scores = {s: v for s, v in scores.items() if v is not None}
    speeds = {(r.seed or 0): t for r in runs if (t := r.samples_per_s)}
    out = CandidateScores(batch, "ok", scores, statistics.fmean(speeds.values()) if speeds else None, speeds)
    if not scores:
        out.status, out.why = "flat", "reported no validation or training loss"
    elif all(v.verdict == FLAT for v in verdicts):
        out.status, out.why = "flat", f"never learned ({verdicts[0].reason})"
    elif not by_loss and num_classes and out.mean < policy.chance_factor / num_classes:
        out.status, out.why = "flat", (f"stayed near chance (mean {out.mean:.3f}, under {policy.chance_factor:g} x "
                                       f"1/{num_classes})")
    return out


def paired_interval(a: dict[int, float], b: dict[int, float], difference=lambda x, y: x - y
                    ) -> tuple[int, float, float | None] | None:
    """Over the seeds ``a`` and ``b`` share: (how many, the mean of ``difference(a[s], b[s])``, the half-width of its
    95% t-interval with k - 1 degrees of freedom, None with one seed). None when they share no seed. The one
    paired statistic of the rule: the score gap and the speed ratio both use it."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    values = [difference(a[s], b[s]) for s in seeds]
    half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)) if len(values) >= 2 else None
    return len(values), statistics.fmean(values), half


def compare(leader: CandidateScores, other: CandidateScores, sign: float, margin: float) -> Comparison:
    """``other`` against ``leader`` over their common seeds: the paired differences' mean and 95% t-interval."""
    paired = paired_interval(leader.scores, other.scores, lambda x, y: sign * (x - y))
    if paired is None:  # nothing to pair (a history that holds other seeds): no evidence of a tie
        return Comparison(other.per_device, 0, sign * (leader.mean - other.mean), None, False, "apart")
    count, mean_gap, half = paired
    if half is not None and mean_gap - half <= 0:
        by = "interval"
    elif mean_gap < margin:
        by = "margin"
    else:
        by = "apart"
    return Comparison(other.per_device, count, mean_gap, half, by != "apart", by)


def clearly_faster(big: CandidateScores, small: CandidateScores, margin: float) -> bool:
    """Whether ``big`` was faster than ``small`` by more than ``margin`` at every seed they share, or at every
    timing round when both were timed side by side (``needs_timing``). Runs go seed by seed across candidates, so
    a seed's two runs shared the machine's load and its ratio cancels it; a timing round's two runs did too.

    Every seed, not a t-interval or a median of the ratios. A t-interval of three ratios (t = 4.3) asks a mean
    ratio near 1.6 at a shared CPU's spread: a GRU measured 64 per device 1.84x, 1.28x and 1.29x as fast as 32 at
    its seeds and the interval kept 32. A median moves up on noise where speeds are level, and moving up is not
    free: a bigger batch that ties on the end score can still need more samples on the way (digits-cnn: 32 per
    device measured 1.11x, 1.11x and 0.90x of 8, the median took 32, and 32 took 1.9x 8's time to 0.90). All k
    seeds above the margin happen by chance at most 0.5^k of the time at a true ratio of 1 + margin (1 in 8 at
    k = 3)."""
    if big.timed or small.timed:  # timed side by side: only those rounds pair (a side with none has no evidence)
        big_speeds, small_speeds = big.timed, small.timed
    else:
        big_speeds, small_speeds = big.speeds, small.speeds
    return faster_at_every_pair(big_speeds, small_speeds, margin)


def needs_timing(verdict: SweepVerdict, block: dict[int, object]) -> list[int]:
    """The tied candidates to time again side by side (none when no speed decides, or when they were all swept in
    one block, seed by seed, so their runs already shared the machine's load). ``block``: per batch, which
    stretch of time ran it (0: the first range; n: the n-th time it grew; a run reused from the history: its own)."""
    tied = verdict.tied
    if len(tied) < 2 or len({block.get(b, 0) for b in tied}) < 2:
        return []
    if all(c.timed or c.timing_failed for c in verdict.candidates if c.per_device in tied):
        return []
    return tied


def practical_margin(name: str, by_loss: bool, leader_mean: float, policy: SweepPolicy) -> float:
    """The gap under which two candidates are the same for the user's purpose."""
    if not by_loss and 0.0 <= leader_mean <= 1.0:
        return policy.accuracy_margin
    return policy.loss_margin * abs(leader_mean)


def decide_sweep(rows: list[TrialRecord], num_classes: int | None = None, cap: int | None = None,
                 extensions_left: int = 0, policy: SweepPolicy = DEFAULT_POLICY,
                 reruns: dict[int, TrialRecord] | None = None,
                 timing: dict[int, dict[int, float]] | None = None) -> SweepVerdict:
    """Step 4's pick from the sweep's runs (every candidate's seeds), by the rule in this module's docstring.
    ``cap``: the largest per-device batch the range may grow to; ``extensions_left``: how many more times it may
    grow (the verdict's ``extend_to`` names the batch to sweep next, or None; ``unexplored`` the one it could not
    reach). ``reruns``: per batch, an unstable candidate's rerun at the nearest validated LR (score_candidate).
    ``timing``: per batch, samples/s by round of the side-by-side timing rounds (``needs_timing``); the tie-break
    reads them for every pair timed together."""
    reruns = reruns or {}
    if not rows:
        return SweepVerdict(None, NO_RUNS, policy=policy)
    name, higher = ranked_metric([r for r in rows if judge(r).verdict != UNSTABLE])
    by_loss = name == "loss"
    unvalidated = by_loss and all(r.val_loss is None for r in rows if r.status == "ok")
    metric = ("training loss, mean of each run's last quarter (the runs reported no validation)" if unvalidated
              else f"validation {name}" + ("" if higher or by_loss else " (lower is better)"))
    batches = sorted({r.per_device for r in rows})
    candidates = [score_candidate(b, [r for r in rows if r.per_device == b], by_loss, num_classes, policy,
                                  reruns.get(b)) for b in batches]
    for c in candidates:
        c.timed = dict((timing or {}).get(c.per_device, {}))
        c.timing_failed = c.per_device in (timing or {}) and not c.timed
    alive = [c for c in candidates if c.status == "ok"]
    verdict = SweepVerdict(None, NONE_LEARNED, metric, higher, candidates=candidates, cap=cap, policy=policy)
    if not alive:
        return verdict
    sign = 1.0 if higher else -1.0
    leader = max(alive, key=lambda c: (sign * c.mean, -c.per_device))
    verdict.leader = leader.per_device
    verdict.margin = practical_margin(name, by_loss, leader.mean, policy)
    verdict.comparisons = [compare(leader, c, sign, verdict.margin) for c in alive if c is not leader]
    tied = sorted((c for c in alive if c.per_device in verdict.tied), key=lambda c: c.per_device)
    winner = tied[0]
    for bigger in tied[1:]:  # a bigger batch must earn its larger LR scale-up by being faster, one step at a time
        if not clearly_faster(bigger, winner, policy.throughput_margin):
            break
        winner = bigger
    verdict.chosen, verdict.rule = winner.per_device, ALONE if len(tied) == 1 else FASTEST_TIED
    _past_the_end(verdict, batches, extensions_left)
    return verdict


def double_within(batch: int, cap: int | None) -> int:
    """The step up from ``batch``: double, but at most the cap (the batch the plan may still advise is measured,
    not assumed). The sweep's range and its step past a winning end both take it."""
    return batch * 2 if cap is None or batch >= cap else min(batch * 2, cap)


def _past_the_end(verdict: SweepVerdict, batches: list[int], extensions_left: int) -> None:
    """Sentence 3's last clause: a winner at an end of the range gets the batch past it (half, or double but at
    most the cap) swept next when the sweep points there (``_points_past``) and the walk allows; else the verdict
    names that batch unexplored, and why."""
    chosen, cap = verdict.chosen, verdict.cap
    low, high = chosen == batches[0], chosen == batches[-1]
    beyond = chosen // 2 if low and chosen // 2 >= 1 else double_within(chosen, cap) if high else 0
    if beyond < 1 or len(batches) < 2:  # a lone candidate is no range, and has no trend
        return
    if beyond > chosen and cap is not None and beyond > cap:
        verdict.unexplored, verdict.end = beyond, PAST_CAP
    elif not _points_past(verdict, upward=beyond > chosen):
        verdict.unexplored, verdict.end = beyond, NO_TREND
    elif extensions_left > 0:
        verdict.extend_to = beyond
    else:
        verdict.unexplored, verdict.end = beyond, WALK_SPENT


def _points_past(verdict: SweepVerdict, upward: bool) -> bool:
    """Whether the sweep's evidence points past its winning end: the winner leads the scores and another candidate
    scored worse (outside the tie) or failed to train (unstable, never learned: not out of memory, which says
    nothing of the score); or, at the top, the winner was picked over a smaller tied batch for its speed."""
    worse = any(not c.tied for c in verdict.comparisons) or any(c.status in ("unstable", "flat")
                                                                for c in verdict.candidates)
    won_on_speed = upward and verdict.chosen != verdict.tied[0]
    return (verdict.chosen == verdict.leader and worse) or won_on_speed
