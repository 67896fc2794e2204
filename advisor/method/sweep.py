"""Step 4, the comparison sweep: one rule, in three sentences (the README and docs/method.md say the same).

1. Every candidate trains on the same number of samples with the same k seeds (so runs are paired), and each
   run scores the mean of its last two validation checkpoints.
2. The candidate with the best mean score leads; another is its equal only when their mean paired gap is under a
   practical margin. A gap over the margin whose 95% paired t-interval (k - 1 degrees of freedom) still holds 0 is
   inconclusive: those two run more paired seeds, up to a stated budget (6 in all), and then the better-scoring
   one stands; a candidate worse by the margin or more is never picked, whatever its speed. The extra seeds run
   only where they could change the pick: an inconclusive candidate is first timed side by side with the equals,
   and when the walk (sentence 3) would make the same pick with it as an equal, it runs none. A candidate that ran
   out of memory, was unstable in any seed, never learned, or whose (global batch, LR) another run of the plan saw
   fail (the trial's: advisor.method.validated) cannot lead or tie.
3. Among the equals, speed is read only from timing rounds run side by side (short runs, interleaved, the order
   reversed every other round), and the burden of proof is on the bigger batch: the pick walks up from the
   smallest while the rounds show the next bigger one more than 10% faster. Your own setting (the base batch, at
   the base LR), when it is an equal, is where the walk starts, and from it the walk steps down to the next smaller
   equal unless the rounds show yours more than 10% faster (a bigger batch needs at least as many samples to any
   score, so it must pay in speed), else up as above. Shown means a sign test on the paired rounds: 6 of 6 over the
   bar, 8 of 9 or 10 of 12 (at most 1 in 40 by chance at a ratio at the bar); rounds are added three at a time, up
   to 12, while the bigger could still be shown, and the smaller stands otherwise. For a model with BatchNorm the
   walk starts no lower than the largest equal under the small-micro-batch threshold, and never steps down under it. The range (half / chosen / double, double at most the cap; never 1 per
   device with BatchNorm) grows once past the winner's end (a side with no swept batch within a factor 2 of it)
   when the sweep points there: the winner leads with a worse or failed candidate behind it, or it is the largest
   and won on speed.

Why each part of the rule, with the measurements behind it: docs/method.md, step 4.

Every threshold lives in ``SweepPolicy``; ``decide_sweep`` returns the numbers it used (``SweepVerdict``), and
the reason text is rendered from them (``SweepVerdict.reason``), so the recipe, the summary and the app read
one decision."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from .health import FLAT, UNSTABLE, judge, rerun_verdict
from .speed import (FASTER_BY, MAX_WALK_ROUNDS, SHOWN_FASTER_LEVEL, cannot_be_shown_faster, rounds_over_bar,
                    shown_faster, shown_faster_counts)
from ..ledger import TrialRecord

# Two-sided 95% Student t quantiles by degrees of freedom; above 30, the normal's 1.96 plus its first
# Cornish-Fisher correction (within 0.2% there).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
        29: 2.045, 30: 2.042}


def seeds_words(k) -> str:
    """How many seeds a comparison rests on: one seed is one run each, nothing paired (a script plan's case)."""
    return "1 seed" if k == 1 else f"{k} paired seed(s)"


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
    max_seeds: int = 6  # an inconclusive pair runs more paired seeds, up to this many in all
    accuracy_margin: float = 0.01  # a gap under this (absolute) ties, for a metric on 0..1 (accuracy, F1)
    loss_margin: float = 0.02  # a gap under this share of the leader's score ties, for a loss or other metric
    throughput_margin: float = FASTER_BY  # a bigger tied batch must be more than this share faster (speed.py)
    chance_factor: float = 1.5  # accuracy under this multiple of 1/classes: the candidate did not learn
    # How many times the range may grow past an end that wins. Twice: the range spans 4x around the start value, so a
    # start 4x off the best (adam-edge: an Adam model near its LR edge, advised 256 with 128, its grid's best, left
    # unexplored after one step) still gets the best compared; each step runs only while the scores point past the end.
    extensions: int = 2


DEFAULT_POLICY = SweepPolicy()

# BatchNorm as a constraint (DOMAIN 2, 3): its statistics come from each micro-batch, so under this many samples per
# device a model with it trains worse (the plan's batchnorm-small-micro-batch warning reads the same number), and a
# micro-batch of 1 is an error in training mode.
SMALL_MICRO_BATCH = 16
MIN_BATCHNORM_BATCH = 2


def smallest_sweepable(batchnorm: bool) -> int:
    """The smallest per-device batch the sweep may train: 2 for a model with BatchNorm, else 1."""
    return MIN_BATCHNORM_BATCH if batchnorm else 1

# The verdict's rule codes (the recipe's [method.sweep] rule): what the rule decided, one code per outcome.
BEST_BY_MARGIN = "best-by-margin"  # the leader; every other candidate's mean gap is over the margin (no equal)
# Among the equals, the walk's start stood (no bigger equal was faster at every measurement), by why it started there:
EQUALS_SMALLEST = "equals-smallest"  # the smallest of the equals
EQUALS_YOURS = "equals-yours"  # your own setting, an equal (a change must pay)
EQUALS_BATCHNORM_FLOOR = "equals-batchnorm-floor"  # the largest equal under SMALL_MICRO_BATCH (BatchNorm)
EQUALS_BIGGER_FASTER = "equals-bigger-faster"  # among the equals, walked up to a bigger one faster at every measurement
# Among the equals, walked down from your setting to a smaller one that yours was not faster than at every measurement.
EQUALS_SMALLER_AS_FAST = "equals-smaller-as-fast"
WALK_START_RULE = {"smallest": EQUALS_SMALLEST, "yours": EQUALS_YOURS, "batchnorm": EQUALS_BATCHNORM_FLOOR}
EQUALS_RULES = frozenset({*WALK_START_RULE.values(), EQUALS_BIGGER_FASTER, EQUALS_SMALLER_AS_FAST})
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
    tied: bool  # an equal of the leader: the mean gap is under the margin (and only then)
    # "margin" (the mean gap is under it: equal) | "inconclusive" (over it, but the interval holds 0) | "apart"
    by: str
    # Inconclusive, and timed side by side with the equals: were it an equal, the walk would make the same pick, so
    # more seeds could not change the advice and none are run (``SweepVerdict.extra_seeds``).
    pick_unchanged: bool = False

    def to_dict(self) -> dict:
        out = {"per_device": self.per_device, "seeds": self.seeds, "mean_gap": round(self.mean_gap, 6),
               "interval": None if self.half_width is None else
               [round(self.mean_gap - self.half_width, 6), round(self.mean_gap + self.half_width, 6)],
               "tied": self.tied, "by": self.by, "pick_unchanged": self.pick_unchanged or None}
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class WalkStep:
    """One step of the tie-break's walk among the equals, by paired speed ratio: up, ``bigger`` against the pick so
    far (taken when it was shown faster); down, the pick so far (``bigger``) against the next ``smaller`` (taken when
    it cannot be shown faster: the burden of proof is the bigger batch's either way)."""

    smaller: int
    bigger: int
    ratios: list[float]  # bigger / smaller samples/s, one per timing round (or per seed, with no timing rounds)
    rounds: bool  # the ratios are timing rounds run side by side (else the sweep runs' own seeds)
    paid: bool  # the rounds show the bigger more than the bar faster (speed.shown_faster)
    down: bool = False  # a step down from the pick so far (your setting) to a smaller equal
    settled: bool = False  # no further rounds could show the bigger faster (speed.cannot_be_shown_faster)
    over: int = 0  # how many of the ratios cleared the bar

    @property
    def taken(self) -> bool:
        return self.settled if self.down else self.paid

    @property
    def undecided(self) -> bool:
        """Not shown, and more rounds could still show it: ``needs_timing`` asks for them."""
        return not self.paid and not self.settled

    @property
    def awaits_rounds(self) -> bool:
        """Undecided on timing rounds still under MAX_WALK_ROUNDS: more rounds can settle it (seeds cannot grow)."""
        return self.undecided and self.rounds and len(self.ratios) < MAX_WALK_ROUNDS

    def mark(self, bar: float) -> str:
        """The ratios against the bar, in words: "6 of 6 over the 1.10x bar: shown more than 10% faster"."""
        return f"{self.over} of {len(self.ratios)} over the {bar:.2f}x bar: {self._verdict(bar)}"

    def _verdict(self, bar: float) -> str:
        margin = f"more than {bar - 1:.0%} faster"
        if self.paid:
            return f"shown {margin}"
        if self.settled:
            return f"not shown {margin}, nor can it be in {max(MAX_WALK_ROUNDS, len(self.ratios))} rounds"
        return f"not shown {margin} yet"

    def outcome(self, bar: float, where: str) -> str:
        """What the rounds showed of this pair, for the summary: "16 was shown more than 10% faster than 8 (6 of 6
        rounds over the bar)", "16 against 8: not shown more than 10% faster, nor can it be in 12 rounds (4 of 12
        rounds over the bar)" (the same words as ``mark``)."""
        return (f"{self.bigger} against {self.smaller}: {self._verdict(bar)} ({self.over} of {len(self.ratios)} "
                f"{where} over the bar)")


@dataclass
class AgainstYours:
    """The advice against the user's own setting (the base batch at the base LR), on the same seeds."""

    yours: int
    chosen: int
    status: str  # how your setting's sweep runs went ("ok" | "oom" | "unstable" | "flat")
    why: str = ""  # when it cannot take part: what its runs did
    by: str = ""  # your setting against the leader: "margin" | "inconclusive" | "apart" | "leader"
    seeds: int = 0
    score_gap: float | None = None  # the advice's paired mean score minus yours, oriented so positive is better
    score_half: float | None = None
    speed_ratio: float | None = None  # the advice's samples/s over yours: the geometric mean of the paired ratios
    speed_low: float | None = None  # its 95% t-interval, taken on the log ratios (a ratio's interval stays above 0)
    speed_high: float | None = None
    speed_pairs: int = 0
    speed_side_by_side: bool = False
    equals: bool = False  # the pick had equals (the tie-break chose among them)
    bar: float = DEFAULT_POLICY.throughput_margin  # the tie-break's speed bar

    def sentence(self, fmt) -> str:
        """How the advice compares with your setting, rendered from the numbers above."""
        own = f"your setting ({self.yours} per device at the base LR)"
        if self.status != "ok":
            return f"Against {own}: it {self.why}, so it is out of the comparison; {self.chosen} per device learned."
        if self.chosen == self.yours:
            why = ("it scored best, by the margin or more" if self.by == "leader" and not self.equals else
                   f"no equal of it was shown more than {self.bar:.0%} faster in paired measurements")
            return f"Against {own}: no better than yours: keep it ({why})."
        gap = "" if self.score_gap is None else f"score gap {fmt(self.score_gap, signed=True)}" + (
            f" ±{fmt(self.score_half)}" if self.score_half is not None else "") + f" over {seeds_words(self.seeds)}"
        speed = self.speed_words()
        if self.by in ("apart", "inconclusive"):  # the leader outscored yours by the margin or more
            return f"Against {own}: better than yours ({gap}), {speed}."
        smaller = (f"; smaller, and the paired measurements could not show yours more than {self.bar:.0%} faster, "
                   "so it needs no more samples to any score") if self.chosen < self.yours else ""
        return f"Against {own}: as good as yours ({gap}), {speed}{smaller}."

    def speed_words(self) -> str:
        if self.speed_ratio is None:
            return "no paired samples/s to compare"
        where = (f"{self.speed_pairs} timing round(s) side by side" if self.speed_side_by_side
                 else f"{self.speed_pairs} seed(s)")
        interval = (f", 95% interval {self.speed_low:.2f}-{self.speed_high:.2f}x"
                    if self.speed_low is not None and self.speed_high is not None else "")
        return f"{self.speed_ratio:.2f}x the samples/s of yours ({where}{interval})"

    def to_dict(self, fmt) -> dict:
        out = {"per_device": self.yours, "status": self.status, "by": self.by or None, "seeds": self.seeds or None,
               "score_gap": None if self.score_gap is None else round(self.score_gap, 6),
               "score_interval": None if self.score_half is None or self.score_gap is None else
               [round(self.score_gap - self.score_half, 6), round(self.score_gap + self.score_half, 6)],
               "samples_per_s_ratio": None if self.speed_ratio is None else round(self.speed_ratio, 4),
               "samples_per_s_ratio_interval": None if self.speed_low is None or self.speed_high is None else
               [round(self.speed_low, 4), round(self.speed_high, 4)],
               "side_by_side": self.speed_side_by_side if self.speed_ratio is not None else None,
               "sentence": self.sentence(fmt)}
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
    # (PAST_CAP: over the cap; WALK_SPENT: the range grew --sweep-extensions times already).
    unexplored: int | None = None
    end: str = ""
    cap: int | None = None
    policy: SweepPolicy = DEFAULT_POLICY
    batchnorm: bool = False  # the model has BatchNorm: ties never go to a smaller micro-batch under the threshold
    yours: int | None = None  # the user's own setting per device, when it was swept
    walk_from: int | None = None  # where the walk up the equals started
    walk_start_why: str = ""  # "smallest" | "yours" | "batchnorm"
    walk: list[WalkStep] = field(default_factory=list)
    against_yours: AgainstYours | None = None
    # How many validation checkpoints the scored runs' scores averaged (run_score: 2, or 1 where a run validated
    # once, as a script's runs do); empty when no run validated (the metric names the training tail). Reason text only.
    checkpoints: list[int] = field(default_factory=lambda: [2])

    @property
    def tied(self) -> list[int]:
        """The leader and every candidate equal to it (a mean gap under the margin)."""
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
    def out_of_memory_only(self) -> bool:
        """No candidate learned because every one ran out of memory: memory is to blame, not the LR."""
        return bool(self.candidates) and all(c.status == "oom" for c in self.candidates)

    def candidate(self, per_device: int | None) -> CandidateScores | None:
        return next((c for c in self.candidates if c.per_device == per_device), None)

    def unresolved(self) -> list[Comparison]:
        """The inconclusive comparisons whose pair is still under the policy's seed budget."""
        leader = self.candidate(self.leader)
        out = []
        for c in self.comparisons:
            other = self.candidate(c.per_device)
            if c.by != "inconclusive" or leader is None or other is None:
                continue
            shared = set(leader.scores) & set(other.scores)
            if shared and len(shared) < self.policy.max_seeds:
                out.append(c)
        return out

    @property
    def extra_seeds(self) -> list[tuple[int, int]]:
        """(per device, seed) runs the rule asks for before it decides: each inconclusive candidate and the leader
        at the next paired seed, while their shared seeds are under the policy's budget, unless the candidate, as an
        equal, would leave the pick unchanged (``Comparison.pick_unchanged``: more seeds could not change it)."""
        leader = self.candidate(self.leader)
        wanted: set[tuple[int, int]] = set()
        for c in self.unresolved():
            if c.pick_unchanged:
                continue
            other = self.candidate(c.per_device)
            seed = max(set(leader.scores) & set(other.scores)) + 1
            wanted |= {(b.per_device, seed) for b in (leader, other) if seed not in b.scores}
        return sorted(wanted, key=lambda pair: (pair[1], pair[0]))

    @property
    def headline(self) -> str:
        if self.rule in EQUALS_RULES:
            return "an equal of the best; " + self.walk_summary
        return {BEST_BY_MARGIN: "best, by the margin or more",
                NO_RUNS: "no sweep run could be made",
                NONE_LEARNED: "no candidate learned"}[self.rule]

    @property
    def walk_summary(self) -> str:
        """Why the pick among the equals, in a few words, from the walk's own numbers."""
        bar = f"more than {self.policy.throughput_margin:.0%} faster"
        where = "rounds" if any(step.rounds for step in self.walk) else "seeds"
        start = {"yours": "your own setting", "batchnorm": f"the largest under {SMALL_MICRO_BATCH} (BatchNorm)"
                 }.get(self.walk_start_why, "the smallest")
        down = [step for step in self.walk if step.down]
        up = [step for step in self.walk if not step.down]
        ratio_bar = 1 + self.policy.throughput_margin
        if self.chosen < self.walk_from:
            stopped = "" if down[-1].taken else f"; {down[-1].outcome(ratio_bar, where)}"
            return (f"walked down from {self.walk_from} ({start} of the equals): the {where} could not show the "
                    f"bigger of each step {bar}{stopped}")
        if self.chosen > self.walk_from:
            stopped = "" if up[-1].taken else f"; {up[-1].outcome(ratio_bar, where)}"
            return (f"walked up from {self.walk_from} ({start} of the equals), the {where} showing each step {bar}"
                    f"{stopped}")
        kept = ""
        if down:  # the step down refused: the rounds showed yours faster than the smaller, or could not tell yet
            counts = f"{down[0].over} of {len(down[0].ratios)} {where} over the bar"
            kept = (f", shown {bar} than {down[0].smaller} ({counts})" if down[0].paid
                    else f", not settled against {down[0].smaller} ({counts})")
        if not up:
            return f"{start} of the equals{kept}, and none is bigger"
        return f"{start} of the equals{kept}; no bigger one was shown {bar}"

    def fmt(self, value: float, signed: bool = False) -> str:
        sign = "+" if signed else ""
        return f"{value:{sign}.4f}" if "loss" in self.metric else f"{value:{sign}.3f}"

    @property
    def reason(self) -> str:
        """The decision in words, rendered from the numbers above."""
        left = "; ".join(f"{c.per_device} per device {c.why}" for c in self.left_out)
        left = f" Out of the comparison: {left}." if left else ""
        if self.rule == NO_RUNS:
            return "No sweep run could be made (no candidate batch fits)."
        if self.rule == NONE_LEARNED and self.out_of_memory_only:
            return (f"Every sweep candidate ran out of memory in its sweep run, so the comparison cannot pick a "
                    f"batch.{left} The ceiling's probes are a few steps; a long run held more than they did. Plan "
                    "again with more --headroom, or for a device with more --device-memory.")
        if self.rule == NONE_LEARNED:
            return (f"No sweep candidate learned, so the comparison cannot pick a batch.{left} Check that the base LR "
                    "trains at the base batch in a plain run, or run a longer sweep (--sweep-steps).")
        said = self._scores_sentence()
        yours = f" {self.against_yours.sentence(self.fmt)}" if self.against_yours else ""
        if self.rule == BEST_BY_MARGIN:
            return said + f" {self.chosen} per device is best.{left}{self.end_note}{yours}"
        return said + f" {self._walk_sentence()}{left}{self.end_note}{yours}"

    def _scores_sentence(self) -> str:
        seeds = sorted({len(c.scores) for c in self.candidates if c.status == "ok"})
        k = seeds[0] if len(seeds) == 1 else "-".join(map(str, (seeds[0], seeds[-1])))
        scores = ", ".join(f"{c.per_device}: {self.fmt(c.mean)}" for c in self.candidates if c.status == "ok")
        said = (f"By {self.metric}, {self._scored_by()}over {seeds_words(k)} at equal "
                f"training samples ({scores}), {self.leader} per device leads.")
        parts = []
        for c in self.comparisons:
            gap = f"gap {self.fmt(c.mean_gap)}"
            if c.half_width is not None:
                gap += f", 95% t-interval ±{self.fmt(c.half_width)} ({c.seeds - 1} d.f.)"
            if c.by == "margin":
                verdict = "equal (the gap is under the margin)"
            elif c.by == "inconclusive":
                verdict = (f"inconclusive (over the margin, the interval holds 0) after {c.seeds} paired seeds: "
                           f"the better-scoring, {self.leader}, stands")
                if c.pick_unchanged:
                    verdict += (f"; no more seeds: as an equal {c.per_device} would not change the pick (timed side "
                                "by side)")
            else:
                verdict = "worse by the margin or more"
            parts.append(f"{c.per_device}: {gap}: {verdict}")
        if parts:
            said += f" Against it (margin {self.fmt(self.margin)}): " + "; ".join(parts) + "."
        return said

    def _scored_by(self) -> str:
        """What each run's score averaged (run_score), said as the runs had it: a script validates once."""
        if not self.checkpoints:
            return ""
        if self.checkpoints == [1]:
            return "each run's one validation checkpoint "
        if self.checkpoints == [2]:
            return "mean of each run's last two checkpoints "
        return "mean of each run's last two checkpoints (the one checkpoint of a run that validated once) "

    def _walk_sentence(self) -> str:
        """The tie-break: where the walk started and why, each step's paired speed ratios against the bar."""
        bar = 1 + self.policy.throughput_margin
        equals = ", ".join(map(str, self.tied))
        start = {"yours": f"{self.walk_from} per device, your own setting",
                 "batchnorm": (f"{self.walk_from} per device, the largest of them under {SMALL_MICRO_BATCH} (the "
                               "model has BatchNorm, which trains worse on a smaller micro-batch)")
                 }.get(self.walk_start_why, f"{self.walk_from} per device, the smallest")
        margin = f"{self.policy.throughput_margin:.0%}"
        faster = f"shown faster by more than {margin}"
        if self.walk_start_why == "yours":
            moves = (f"moves down to a smaller one unless the bigger is {faster} (a bigger batch needs at least as "
                     f"many samples to any score, so it must pay in speed), else up to a bigger one {faster}")
        else:
            moves = f"moves up only to a bigger one {faster}"
        where = "timing rounds run side by side" if self.walk and self.walk[0].rounds else "paired seeds"
        counts = shown_faster_counts(self.policy.seeds)
        needed = (", ".join(counts[:-1]) + " or " + counts[-1]) if len(counts) > 1 else "".join(counts)
        said = (f"Equals: {equals}. The pick starts at {start}, and {moves}. Shown means by a sign test on the "
                f"{where}: {needed} over the {bar:.2f}x bar (at most 1 in {round(1 / SHOWN_FASTER_LEVEL)} by chance "
                f"at a ratio at the bar); rounds are added while it still could be shown, up to {MAX_WALK_ROUNDS}, "
                "and the smaller stands otherwise")
        steps = []
        for step in self.walk:
            ratios = ", ".join(f"{r:.3f}x" for r in step.ratios) or "none measured"
            steps.append(f"{step.bigger} over {step.smaller}: {ratios} ({step.mark(bar)})")
        said += (": " + "; ".join(steps) if steps else "") + f". Pick: {self.chosen} per device, " \
                f"{self.walk_summary}."
        return said

    @property
    def end_note(self) -> str:
        """When the pick is an end of the swept range the rule could not grow past: which batch went unmeasured."""
        if not self.end:
            return ""
        if self.end == PAST_CAP:
            return f" It is the largest swept; {self.unexplored} per device is past the cap of {self.cap} per device."
        below = self.unexplored < self.chosen
        farther = [c.per_device for c in self.candidates if c.per_device != self.chosen
                   and (c.per_device < self.chosen) == below]
        where = (f"It is the {'smallest' if below else 'largest'} swept" if not farther else
                 f"Nothing within a factor 2 {'below' if below else 'above'} it was swept")
        if self.end == NO_TREND:
            why = (f"it ties with {self.leader}, which leads" if self.chosen != self.leader
                   else "no other candidate scored worse or failed")
            return (f" {where}, but nothing points past it ({why}), so {self.unexplored} per device "
                    "was not compared.")
        if self.end == WALK_SPENT:
            return (f" {where} and the range has grown {self.policy.extensions} time(s) "
                    f"(--sweep-extensions {self.policy.extensions}): {self.unexplored} per device was not compared.")
        return ""

    def summary(self) -> dict:
        """What the recipe's [method.sweep] and `plan --json` record of the rule."""
        out = {"rule": self.rule, "verdict": self.headline, "metric": self.metric or None,
               "seeds": self.policy.seeds, "max_seeds": self.policy.max_seeds if self.metric else None,
               "margin": round(self.margin, 6) if self.metric else None,
               "leader": self.leader, "tied": self.tied or None, "batchnorm": self.batchnorm or None,
               "walk_from": self.walk_from if self.rule in EQUALS_RULES else None,
               "not_compared": self.unexplored, "not_compared_because": self.end or None,
               "comparisons": [c.to_dict() for c in self.comparisons] or None,
               "against_yours": self.against_yours.to_dict(self.fmt) if self.against_yours else None,
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


def _checkpoints_scored(rows: list[TrialRecord], by_loss: bool) -> list[int]:
    """The distinct counts of validation checkpoints (at most 2) that run_score averaged over the learned runs; a
    run with only an end value counts 1, one scored by its training tail counts none."""
    key = "val_loss" if by_loss else "val_metric"
    counts = set()
    for r in rows:
        if r.status != "ok":
            continue
        points = sum(1 for p in r.evals if p.get(key) is not None)
        end = r.val_loss if by_loss else r.val_metric
        if points or end is not None:
            counts.add(min(2, points) or 1)
    return sorted(counts)


def score_candidate(batch: int, runs: list[TrialRecord], by_loss: bool, num_classes: int | None,
                    policy: SweepPolicy, rerun: TrialRecord | None = None, seen_failing: str | None = None
                    ) -> CandidateScores:
    """One candidate's status and per-seed scores. Out of the comparison: any seed out of memory or unstable
    (advisor.method.health), every seed flat, or an accuracy that stayed near chance. ``rerun``: an unstable
    candidate's run again at the nearest validated LR, which says whether the LR scale-up or the batch is to
    blame (the candidate stays out either way: the plan would give it the LR that failed). ``seen_failing``: how
    other runs of the plan failed at the candidate's (global batch, LR) (advisor.method.validated.seen_failing):
    out too, however its own seeds went (a recipe never advises a setting its runs saw fail)."""
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
            out.why += f"; rerun at the nearest validated LR {rerun.lr:.3g} it {rerun_verdict(learned)}"
        return out
    if seen_failing:
        return CandidateScores(batch, "unstable", why=f"is a setting the plan's runs saw fail ({seen_failing}): never "
                                                      "picked, whatever its own seeds did")
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
    """``other`` against ``leader`` over their common seeds: the paired differences' mean and 95% t-interval. Equal
    only when the mean gap is under the margin; over it, inconclusive while the interval holds 0, else apart."""
    paired = paired_interval(leader.scores, other.scores, lambda x, y: sign * (x - y))
    if paired is None:  # nothing to pair (a history that holds other seeds): no evidence of a tie
        return Comparison(other.per_device, 0, sign * (leader.mean - other.mean), None, False, "apart")
    count, mean_gap, half = paired
    if mean_gap < margin:
        by = "margin"
    elif half is not None and mean_gap - half <= 0:
        by = "inconclusive"
    else:
        by = "apart"
    return Comparison(other.per_device, count, mean_gap, half, by == "margin", by)


def paired_speeds(big: CandidateScores, small: CandidateScores) -> tuple[dict, dict, bool]:
    """(big's, small's, side by side) samples/s to pair: the timing rounds when either was timed side by side
    (``needs_timing``; a side with none then has no evidence), else the sweep runs' own seeds."""
    if big.timed or small.timed:
        return big.timed, small.timed, True
    return big.speeds, small.speeds, False


def speed_ratios(big: CandidateScores, small: CandidateScores) -> tuple[list[float], bool]:
    """``big``'s samples/s over ``small``'s at each paired round (or seed), and whether they were rounds."""
    big_speeds, small_speeds, rounds = paired_speeds(big, small)
    return [big_speeds[p] / small_speeds[p] for p in sorted(set(big_speeds) & set(small_speeds))
            if small_speeds[p]], rounds


def clearly_faster(big: CandidateScores, small: CandidateScores, margin: float) -> bool:
    """Whether the timing rounds ``big`` and ``small`` ran side by side (``needs_timing``), or, where neither was
    timed, the seeds they share, show ``big`` faster by more than ``margin``: a sign test (``speed.shown_faster``:
    6 of 6 over the bar, 8 of 9, 10 of 12). A round's two runs shared the machine's load, so its ratio cancels it.

    Counts of rounds over the bar, not a t-interval or a median of the ratios. A t-interval of three ratios (t = 4.3) asks a mean
    ratio near 1.6 at a shared CPU's spread: a GRU measured 64 per device 1.84x, 1.28x and 1.29x as fast as 32 at
    its seeds and the interval kept 32. A median moves up on noise where speeds are level, and moving up is not
    free: a bigger batch that ties on the end score can still need more samples on the way (digits-cnn: 32 per
    device measured 1.11x, 1.11x and 0.90x of 8, the median took 32, and 32 took 1.9x 8's time to 0.90). All k
    rounds above the margin happen by chance at most 0.5^k of the time at a true ratio of 1 + margin; the walk asks
    for 1 in 40 (``speed.SHOWN_FASTER_LEVEL``), as the median of 12 rounds and a 1-in-8 test split fresh plans of
    one command between two answers where the ratio sat near the bar."""
    big_speeds, small_speeds, _ = paired_speeds(big, small)  # timing rounds where either was timed, else seeds
    return shown_faster(big_speeds, small_speeds, margin)


def needs_timing(verdict: SweepVerdict) -> list[int]:
    """The candidates to time side by side before the verdict stands: those of every pair the rule reads a speed
    ratio of that no timing round has measured together yet. The pairs: neighbours among the equals (the walk), the
    same with each inconclusive candidate still under the seed budget taken in (``Comparison.pick_unchanged``), and
    your own setting with the pick (the advice says its samples/s against yours). A set that grew (the range, or
    the equals) is timed only where it grew: the new candidate with its neighbours (and your setting, in every set),
    in new rounds; a pair's ratio reads only rounds the two ran in together. When every pair has its rounds: the
    walk's refused step that more rounds could still show (``WalkStep.undecided``), timed again while it has fewer
    than MAX_WALK_ROUNDS (the sign test's next look: more rounds can decide it, and nothing else is timed again)."""
    pairs = set()
    for batches in _walk_sets(verdict):
        pairs |= set(zip(batches, batches[1:]))
    yours = verdict.candidate(verdict.yours)
    if yours is not None and yours.status == "ok" and verdict.chosen not in (None, verdict.yours):
        pairs.add(tuple(sorted((verdict.yours, verdict.chosen))))
    missing = [pair for pair in pairs if not _timed_together(verdict.candidate(pair[0]), verdict.candidate(pair[1]))]
    batches = {batch for pair in missing for batch in pair}
    if batches and yours is not None and yours.status == "ok":
        batches.add(verdict.yours)  # in every set: whatever the pick becomes, its ratio to yours is then side by side
    if not batches:
        batches = {batch for step in _unsettled_steps(verdict) for batch in (step.smaller, step.bigger)}
    return sorted(batches)


def _unsettled_steps(verdict: SweepVerdict, tied: list[CandidateScores] | None = None) -> list[WalkStep]:
    """The steps more timing rounds could still decide: of the walk among the equals, and of the walk each
    inconclusive candidate under the seed budget would make as an equal (``Comparison.pick_unchanged`` waits for
    them: a pick that more rounds could still change is not yet a reason to skip seeds)."""
    tied = tied if tied is not None else [verdict.candidate(b) for b in sorted(verdict.tied)]
    steps = list(verdict.walk)
    for comparison in verdict.unresolved():
        together = sorted(tied + [verdict.candidate(comparison.per_device)], key=lambda c: c.per_device)
        steps += walk_equals(together, verdict.yours, verdict.batchnorm, verdict.policy.throughput_margin)[3]
    return [step for step in steps if step.awaits_rounds]


def _walk_sets(verdict: SweepVerdict) -> list[list[int]]:
    """The sets of candidates a walk is (or, for ``pick_unchanged``, would be) taken over: the equals, and the
    equals with each inconclusive candidate still under the seed budget."""
    sets = [sorted(verdict.tied)] if len(verdict.tied) >= 2 else []
    return sets + [sorted(set(verdict.tied) | {c.per_device}) for c in verdict.unresolved()]


def _timed_together(a: CandidateScores | None, b: CandidateScores | None) -> bool:
    """Whether two candidates share a timing round, or were both timed and one of them has no timing to give (its
    runs failed: the pair then has no paired speed, and timing it again would fail again)."""
    if a is None or b is None:
        return True
    if (a.timing_failed and (b.timed or b.timing_failed)) or (b.timing_failed and a.timed):
        return True
    return bool(set(a.timed) & set(b.timed))


def practical_margin(name: str, by_loss: bool, leader_mean: float, policy: SweepPolicy) -> float:
    """The gap under which two candidates are the same for the user's purpose."""
    if not by_loss and 0.0 <= leader_mean <= 1.0:
        return policy.accuracy_margin
    return policy.loss_margin * abs(leader_mean)


def decide_sweep(rows: list[TrialRecord], num_classes: int | None = None, cap: int | None = None,
                 extensions_left: int = 0, policy: SweepPolicy = DEFAULT_POLICY,
                 reruns: dict[int, TrialRecord] | None = None,
                 timing: dict[int, dict[int, float]] | None = None, batchnorm: bool = False,
                 yours: int | None = None, seen_failing: dict[int, str] | None = None) -> SweepVerdict:
    """Step 4's pick from the sweep's runs (every candidate's seeds), by the rule in this module's docstring.
    ``cap``: the largest per-device batch the range may grow to; ``extensions_left``: how many more times it may
    grow (the verdict's ``extend_to`` names the batch to sweep next, or None; ``unexplored`` the one it could not
    reach). ``reruns``: per batch, an unstable candidate's rerun at the nearest validated LR (score_candidate).
    ``timing``: per batch, samples/s by round of the side-by-side timing rounds (``needs_timing``). ``batchnorm``:
    the model has BatchNorm; ``yours``: the user's own setting per device, when it was swept; ``seen_failing``: per
    batch, how the plan's other runs failed at its setting (score_candidate). The verdict's
    ``extra_seeds`` and ``needs_timing`` say what to run before it stands."""
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
                                  reruns.get(b), (seen_failing or {}).get(b)) for b in batches]
    for c in candidates:
        c.timed = dict((timing or {}).get(c.per_device, {}))
        c.timing_failed = c.per_device in (timing or {}) and not c.timed
    alive = [c for c in candidates if c.status == "ok"]
    verdict = SweepVerdict(None, NONE_LEARNED, metric, higher, candidates=candidates, cap=cap, policy=policy,
                           batchnorm=batchnorm, yours=yours if yours in batches else None,
                           checkpoints=_checkpoints_scored(rows, by_loss))
    if not alive:
        return verdict
    sign = 1.0 if higher else -1.0
    leader = _leader(alive, sign, policy.seeds)
    verdict.leader = leader.per_device
    verdict.margin = practical_margin(name, by_loss, leader.mean, policy)
    verdict.comparisons = [compare(leader, c, sign, verdict.margin) for c in alive if c is not leader]
    tied = sorted((c for c in alive if c.per_device in verdict.tied), key=lambda c: c.per_device)
    _walk(verdict, tied)
    _mark_pick_unchanged(verdict, tied)
    verdict.rule = _rule_code(verdict, tied)
    verdict.against_yours = _against_yours(verdict, sign)
    _past_the_end(verdict, batches, extensions_left)
    return verdict


def _leader(alive: list[CandidateScores], sign: float, base_seeds: int) -> CandidateScores:
    """The best mean score over the seeds every candidate ran (the first ``base_seeds``); then, where a pair ran
    extra seeds, the better-scoring of that pair over all their shared seeds stands (a loop over candidates that
    beat the leader on their shared seeds, each taken once)."""
    def base_mean(c: CandidateScores) -> float:
        return statistics.fmean([v for s, v in c.scores.items() if s < base_seeds] or list(c.scores.values()))

    leader = max(alive, key=lambda c: (sign * base_mean(c), -c.per_device))
    seen = {leader.per_device}
    while True:
        beating = []
        for c in alive:
            paired = paired_interval(leader.scores, c.scores, lambda x, y: sign * (x - y))
            if c.per_device not in seen and paired is not None and paired[1] < 0:
                beating.append((paired[1], c.per_device, c))
        if not beating:
            return leader
        leader = min(beating, key=lambda entry: entry[:2])[2]
        seen.add(leader.per_device)


def _walk(verdict: SweepVerdict, tied: list[CandidateScores]) -> None:
    """The tie-break (``walk_equals``), its numbers set on the verdict."""
    verdict.chosen, verdict.walk_from, verdict.walk_start_why, verdict.walk = walk_equals(
        tied, verdict.yours, verdict.batchnorm, verdict.policy.throughput_margin)


def walk_equals(tied: list[CandidateScores], yours: int | None, batchnorm: bool, bar: float
                ) -> tuple[int, int, str, list[WalkStep]]:
    """The tie-break among ``tied`` (smallest first): (pick, where the walk started, why there, its steps). One test
    steps from where the walk starts (``_walk_start``) one neighbour at a time, the burden of proof always on the
    bigger batch of a pair (``speed.shown_faster`` / ``cannot_be_shown_faster``). Down, from your own setting only
    (the smallest has nothing below, BatchNorm's floor is where a tie may go at the lowest, and a model with
    BatchNorm never steps down to a batch under SMALL_MICRO_BATCH): to the next smaller equal once the rounds cannot
    show the pick so far faster than it by more than ``bar``. Else up: to the next bigger equal while the rounds show
    it faster than the pick so far by more than ``bar`` (``clearly_faster``). A pair not settled yet is timed again
    (``needs_timing``) up to MAX_WALK_ROUNDS rounds; the first step refused ends the walk.

    Why down: a bigger batch needs at least as many samples to reach any score (McCandlish et al. 2018: samples to
    a target grow as 1 + B / B_noise), so of two equals at the end of the sweep's budget, level in samples/s, the
    smaller reaches every earlier target no later (digits-cnn in a plain loop, samples/s level: 16 per device to
    0.90 in 3.3 s, 32 in 4.3 s; a tagger: 16 in 0.17 s, 32 in 0.35 s). Why the burden on the bigger either way: the
    same evidence for the same pair whichever way the walk meets it, and a pair near the bar goes to the smaller in
    every plan instead of to whichever side a burst of load favoured (docs/method.md, step 4)."""
    start, why = _walk_start(tied, yours, batchnorm)
    steps: list[WalkStep] = []
    current = start
    if why == "yours":
        for smaller in reversed([c for c in tied if c.per_device < start.per_device]):
            if batchnorm and smaller.per_device < SMALL_MICRO_BATCH:
                break
            step = _walk_step(smaller, current, bar, down=True)
            steps.append(step)
            if not step.taken:
                break
            current = smaller
    if current is start:
        for bigger in (c for c in tied if c.per_device > start.per_device):
            step = _walk_step(current, bigger, bar)
            steps.append(step)
            if not step.taken:
                break
            current = bigger
    return current.per_device, start.per_device, why, steps


def _mark_pick_unchanged(verdict: SweepVerdict, tied: list[CandidateScores]) -> None:
    """Which inconclusive candidates could not change the pick by more seeds: timed side by side with the equals,
    and were it one of them, the walk (``walk_equals``, the same rounds) would pick what it picks now. More seeds
    decide only whether it is an equal (the better-scoring stands otherwise, as at the end of the seed budget), so
    for such a candidate they cannot change the advice. Needs its timing rounds (``needs_timing`` asks for them
    first): on the sweep runs' own speeds, made at different times, the question is not answered."""
    for comparison in verdict.unresolved():
        other = verdict.candidate(comparison.per_device)
        together = sorted(tied + [other], key=lambda c: c.per_device)
        if not all((c.timed or c.timing_failed) and _timed_together(c, d) for c, d in zip(together, together[1:])):
            continue
        pick, _, _, steps = walk_equals(together, verdict.yours, verdict.batchnorm, verdict.policy.throughput_margin)
        if any(step.awaits_rounds for step in steps):
            continue  # more rounds could still change that walk's pick: needs_timing asks for them first
        comparison.pick_unchanged = pick == verdict.chosen


def _walk_step(smaller: CandidateScores, bigger: CandidateScores, bar: float, down: bool = False) -> WalkStep:
    ratios, rounds = speed_ratios(bigger, smaller)
    big_speeds, small_speeds, _ = paired_speeds(bigger, smaller)
    return WalkStep(smaller.per_device, bigger.per_device, ratios, rounds, clearly_faster(bigger, smaller, bar), down,
                    cannot_be_shown_faster(big_speeds, small_speeds, bar), rounds_over_bar(big_speeds, small_speeds, bar)[0])


def _rule_code(verdict: SweepVerdict, tied: list[CandidateScores]) -> str:
    """What decided the pick, as the recipe's code: the leader with no equal, a bigger equal that paid in speed, a
    smaller equal yours did not pay against, or the walk's start (smallest, yours, BatchNorm's floor) standing."""
    if len(tied) == 1:
        return BEST_BY_MARGIN
    if verdict.chosen > verdict.walk_from:
        return EQUALS_BIGGER_FASTER
    if verdict.chosen < verdict.walk_from:
        return EQUALS_SMALLER_AS_FAST
    return WALK_START_RULE[verdict.walk_start_why]


def _walk_start(tied: list[CandidateScores], yours: int | None, batchnorm: bool) -> tuple[CandidateScores, str]:
    """Where the walk among the equals starts, and why: the smallest (it needs the smallest LR scale-up); your own
    setting when it is an equal (a move either way must be shown by a sign test on the timing rounds:
    ``walk_equals``); and for a model with BatchNorm, never below the largest equal under SMALL_MICRO_BATCH (a tie
    never moves it to a smaller micro-batch, which trains its statistics on fewer samples)."""
    start, why = tied[0], "smallest"
    if batchnorm:
        under = [c for c in tied if c.per_device <= SMALL_MICRO_BATCH]
        floor = under[-1] if under else tied[0]
        if floor.per_device > start.per_device:
            start, why = floor, "batchnorm"
    own = next((c for c in tied if c.per_device == yours), None)
    if own is not None and own.per_device >= start.per_device:
        start, why = own, "yours"
    return start, why


def _against_yours(verdict: SweepVerdict, sign: float) -> AgainstYours | None:
    """The advice against your own setting on the same seeds (score) and rounds (speed), when it was swept."""
    own, chosen = verdict.candidate(verdict.yours), verdict.candidate(verdict.chosen)
    if own is None or chosen is None:
        return None
    out = AgainstYours(own.per_device, chosen.per_device, own.status, own.why, equals=len(verdict.tied) > 1,
                       bar=verdict.policy.throughput_margin)
    comparison = next((c for c in verdict.comparisons if c.per_device == own.per_device), None)
    out.by = comparison.by if comparison else "leader"
    if own.status != "ok" or own is chosen:
        return out
    paired = paired_interval(chosen.scores, own.scores, lambda x, y: sign * (x - y))
    if paired:
        out.seeds, out.score_gap, out.score_half = paired
    big, small, rounds = paired_speeds(chosen, own)
    # On the log ratios: a mean of ratios with a symmetric interval printed "95% interval -11.69-31.43x" for a
    # held-out MLP whose rounds read 2.2x-4.4x under load (session m-v3); a ratio's interval is a ratio's.
    speed = paired_interval(big, small, lambda x, y: math.log(x / y) if x > 0 and y > 0 else math.nan)
    if speed and math.isfinite(speed[1]):
        out.speed_pairs, log_mean, log_half = speed
        out.speed_ratio = math.exp(log_mean)
        if log_half is not None and math.isfinite(log_half):
            out.speed_low, out.speed_high = math.exp(log_mean - log_half), math.exp(log_mean + log_half)
        out.speed_side_by_side = rounds
    return out


def double_within(batch: int, cap: int | None) -> int:
    """The step up from ``batch``: double, but at most the cap (the batch the plan may still advise is measured,
    not assumed). The sweep's range and its step past a winning end both take it."""
    return batch * 2 if cap is None or batch >= cap else min(batch * 2, cap)


def _past_the_end(verdict: SweepVerdict, batches: list[int], extensions_left: int) -> None:
    """Sentence 3's last clause: a winner at an end of the range gets the batch past it (half, but never under
    ``smallest_sweepable``, or double but at most the cap) swept next when the sweep points there (``_points_past``)
    and the walk allows; else the verdict names that batch unexplored, and why."""
    chosen, cap = verdict.chosen, verdict.cap
    # An end is where no swept batch lies within a factor 2 of the winner on that side: your own setting swept far
    # below or above the half / chosen / double range leaves the gap between it and the winner unexplored.
    low = all(b < chosen // 2 for b in batches if b < chosen)
    high = all(b > double_within(chosen, cap) for b in batches if b > chosen)
    half_ok = chosen // 2 >= smallest_sweepable(verdict.batchnorm)
    beyond = chosen // 2 if low and half_ok else double_within(chosen, cap) if high else 0
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
    won_on_speed = upward and verdict.chosen > verdict.walk_from
    return (verdict.chosen == verdict.leader and worse) or won_on_speed
