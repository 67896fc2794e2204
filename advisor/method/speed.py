"""When a bigger batch is worth it on speed: the one bar the trial (step 3) and the sweep's tie-break (step 4) share.

A bigger batch must be more than ``FASTER_BY`` (10%) faster, in samples/s, than the smaller one, read from paired
measurements (the trial's paired runs; the sweep's timing rounds run side by side): a step of more samples that takes
proportionally longer buys nothing (the device, or the loader, is saturated), and moving up is not free (a larger LR
scale-up, fewer updates per sample). Counts of pairs over the bar, not a mean: runs made at the same time share the
machine's load, so their ratio cancels it, while a mean over rounds can be carried by one burst of load on one side.
The trial asks every pair (``faster_at_every_pair``: all k above the bar happen by chance at most 0.5^k of the time
at a true ratio of 1 + FASTER_BY); the sweep's walk asks a sign test at the same 1-in-8 level whatever the number of
rounds, both ways (``shown_faster`` / ``shown_not_faster``, below).
"""

from __future__ import annotations

import math
import statistics

FASTER_BY = 0.10  # the bar: a bigger batch must be more than this share faster (samples/s) to be worth it


def speed_gain(big: float, small: float) -> float:
    """The bigger batch's samples/s over the smaller's (1.0 when the smaller measured none)."""
    return big / small if small else 1.0


def clears_bar(big: float, small: float, bar: float = FASTER_BY) -> bool:
    """Whether one paired measurement shows the bigger batch more than ``bar`` faster."""
    return big > (1 + bar) * small


def faster_at_every_pair(big: dict, small: dict, bar: float = FASTER_BY) -> bool:
    """Whether ``big`` cleared the bar against ``small`` at every key they share (a seed, a timing round); False
    with none shared (no paired evidence)."""
    pairs = sorted(set(big) & set(small))
    return bool(pairs) and all(clears_bar(big[p], small[p], bar) for p in pairs)


# The sweep's walk among equals reads the side-by-side rounds with a sign test, both ways: a step is shown when the
# rounds on its side of the bar are as many as a true ratio AT the bar gives at most SIGN_TEST_LEVEL of the time
# (3 of 3 rounds, 5 of 6, 7 of 9, 9 of 12), and while neither side is shown the pair is timed again, three rounds at
# a time, up to MAX_WALK_ROUNDS. At three rounds this is the unanimity of ``faster_at_every_pair`` (0.5^3 = 1/8);
# unlike unanimity it does not grow harder to meet with more rounds, which made "no round over the bar" a coin toss
# on a pair that is level within a few per cent: one burst of load in six rounds decided it (digits-cnn, five fresh
# plans of one command: 32 over 16 per device at 0.77-1.07x in four rounds of six and 1.15-1.22x in one, and the
# pick was 16 three times, 32 twice).
SIGN_TEST_LEVEL = 0.125
MAX_WALK_ROUNDS = 12


def _at_most_by_chance(count: int, total: int) -> float:
    """P(X <= count) for X ~ Binomial(total, 1/2): how often a ratio exactly at the bar gives this few rounds (or
    fewer) on one side."""
    return sum(math.comb(total, k) for k in range(count + 1)) / 2 ** total


def rounds_over_bar(big: dict, small: dict, bar: float = FASTER_BY) -> tuple[int, int]:
    """(paired measurements where ``big`` cleared the bar against ``small``, paired measurements in all)."""
    pairs = sorted(set(big) & set(small))
    return sum(clears_bar(big[p], small[p], bar) for p in pairs), len(pairs)


def last_look_median(big: dict, small: dict, bar: float = FASTER_BY, level: float = SIGN_TEST_LEVEL) -> float | None:
    """The median paired ratio big / small when it settles the pair: at the last look (MAX_WALK_ROUNDS rounds or
    more) with the sign test showing it neither way; None otherwise. Why: a pair whose true ratio sits within a few
    per cent of the bar is shown neither way, or either way by chance at an early look, so "nothing moves" made the
    pick a coin toss between two answers (digits-cnn, five quiet plans of one command: 16 over 8 per device at 1.08x
    in 12 rounds, 5 over the bar: undecided in one plan, shown level in another). The median of 12 rounds misses the
    true ratio by a per cent or two on a shared CPU, so only a ratio that close to the bar is left to chance; the
    median of 3 was rejected for moving on noise (``clearly_faster``), which 12 rounds do not."""
    over, total = rounds_over_bar(big, small, bar)
    return _median_at_last_look(big, small, over, total, level)


def _median_at_last_look(big: dict, small: dict, over: int, total: int, level: float) -> float | None:
    """``last_look_median`` from the counts the caller already has (``rounds_over_bar``)."""
    if total < MAX_WALK_ROUNDS or min(_at_most_by_chance(total - over, total), _at_most_by_chance(over, total)) <= level:
        return None
    return statistics.median(speed_gain(big[p], small[p]) for p in sorted(set(big) & set(small)))


def shown_faster(big: dict, small: dict, bar: float = FASTER_BY, level: float = SIGN_TEST_LEVEL) -> bool:
    """Whether the paired measurements show ``big`` more than ``bar`` faster than ``small``: so many over the bar
    that a true ratio at the bar gives as many at most ``level`` of the time (False with none paired); at the last
    look (``last_look_median``), a median ratio over the bar."""
    over, total = rounds_over_bar(big, small, bar)
    if (median := _median_at_last_look(big, small, over, total, level)) is not None:
        return median > 1 + bar
    return total > 0 and _at_most_by_chance(total - over, total) <= level


def shown_not_faster(big: dict, small: dict, bar: float = FASTER_BY, level: float = SIGN_TEST_LEVEL) -> bool:
    """Whether the paired measurements show ``big`` NOT more than ``bar`` faster than ``small`` (the mirror of
    ``shown_faster``: so few over the bar that a true ratio at the bar gives as few at most ``level`` of the time;
    at the last look, a median ratio at the bar or under it)."""
    over, total = rounds_over_bar(big, small, bar)
    if (median := _median_at_last_look(big, small, over, total, level)) is not None:
        return median <= 1 + bar
    return total > 0 and _at_most_by_chance(over, total) <= level


def sign_test_counts(rounds_per_look: int = 3, level: float = SIGN_TEST_LEVEL) -> list[str]:
    """The fewest rounds on one side of the bar that show a step, at each look: ["3 of 3", "5 of 6", "7 of 9",
    "9 of 12"] (derived from ``level`` and MAX_WALK_ROUNDS, so the explanation cannot drift from the test)."""
    counts = []
    step = max(rounds_per_look, 1)
    for total in range(step, max(MAX_WALK_ROUNDS, step) + 1, step):  # the first look happens even past the cap
        # With one or two rounds even a clean sweep happens by chance more often than ``level`` (1/2, 1/4 > 1/8):
        # such a look cannot decide, so it is not named (a one-seed plan's first deciding look is "3 of 3").
        needed = next((k for k in range(total + 1) if _at_most_by_chance(total - k, total) <= level), None)
        if needed is not None:
            counts.append(f"{needed} of {total}")
    return counts


def gain_words(gain: float, bar: float = FASTER_BY) -> str:
    """A ratio against the bar, printed so that a miss reads as one: 1.099 is "1.099x (under the 1.10x bar)"."""
    verdict = "over" if gain > 1 + bar else "under"
    return f"{gain:.3f}x ({verdict} the {1 + bar:.2f}x bar)"


def pairs_text(big: dict, small: dict, bar: float = FASTER_BY) -> str:
    """Every paired ratio and the verdict against the bar: "1.370x, 1.412x, 1.351x (each over the 1.10x bar)" or
    "1.370x, 1.099x (under the 1.10x bar in round 2)"."""
    pairs = sorted(set(big) & set(small))
    if not pairs:
        return "no paired measurement"
    gains = [speed_gain(big[p], small[p]) for p in pairs]
    ratios = ", ".join(f"{g:.3f}x" for g in gains)
    missed = [i + 1 for i, p in enumerate(pairs) if not clears_bar(big[p], small[p], bar)]
    if not missed:
        return f"{ratios} (each over the {1 + bar:.2f}x bar)"
    where = ", ".join(map(str, missed))
    return f"{ratios} (under the {1 + bar:.2f}x bar in round{'s' if len(missed) > 1 else ''} {where})"


# A timing run lasts at least this long (wall clock, at the speed the batch measured before), at most this many times
# the trial's steps. On a 2-core machine shared by ~8 busy processes one run can be descheduled for a few hundred
# milliseconds: a 40-step run of a model that steps in 1-4 ms (0.04-0.16 s) is then decided by the scheduler, not the
# batch. A held-out MLP (bench/heldout_workloads.py adam_edge_mlp, load ~16) timed 32 per device against 16 at
# 1.966x, 0.408x and 4.292x in three 40-step rounds where the bench's interleaved 12-epoch runs measured 2.3x, and the
# walk stayed at 16 (session m-v3). Models whose 40 steps already take that long time exactly as before.
# Its length is set by that duration, not by the trial's step count: the samples/s read is the median step's, which
# ten steps already give, and a 40-step floor made a big batch's timing run last 4-8 s on digits-cnn (40 steps of 128
# samples) where 2 s was the aim: side-by-side timing of 16 / 32 / 64 per device cost 23,000 samples a plan, more
# than a sweep run (12,800). At most this many times the trial's steps.
MIN_TIMING_SECONDS = 2.0
MIN_TIMING_STEPS = 10
MAX_TIMING_STRETCH = 20


def timing_steps(steps: int, samples_per_s: float | None, global_batch: int) -> int:
    """Steps of one side-by-side timing run: enough that at ``samples_per_s`` (the batch's speed measured before) it
    lasts ``MIN_TIMING_SECONDS``, and at least ``MIN_TIMING_STEPS`` (``steps``, the trial's length, when that is
    shorter; unknown speed: ``steps`` as they are)."""
    if not samples_per_s or samples_per_s <= 0 or global_batch <= 0:
        return steps
    wanted = -(-MIN_TIMING_SECONDS * samples_per_s // global_batch)  # ceil
    return int(min(max(min(steps, MIN_TIMING_STEPS), wanted), MAX_TIMING_STRETCH * steps))
