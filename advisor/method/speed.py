"""When a bigger batch is worth it on speed: the one bar the trial (step 3) and the sweep's tie-break (step 4) share.

A bigger batch must be more than ``FASTER_BY`` (10%) faster, in samples/s, than the smaller one, read from paired
measurements (the trial's paired runs; the sweep's timing rounds run side by side): a step of more samples that takes
proportionally longer buys nothing (the device, or the loader, is saturated), and moving up is not free (a larger LR
scale-up, fewer updates per sample). Counts of pairs over the bar, not a mean: runs made at the same time share the
machine's load, so their ratio cancels it, while a mean over rounds can be carried by one burst of load on one side.
The trial asks every pair (``faster_at_every_pair``: all k above the bar happen by chance at most 0.5^k of the time
at a true ratio of 1 + FASTER_BY); the sweep's walk among equals asks the bigger batch for proof, a sign test at 1 in
40 (``shown_faster`` / ``cannot_be_shown_faster``, below).
"""

from __future__ import annotations

import math

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


# The sweep's walk among equals puts the burden of proof on the bigger batch: it is taken over a smaller equal only
# when the side-by-side rounds show it more than the bar faster by a sign test at SHOWN_FASTER_LEVEL (6 of 6 rounds
# over the bar, 8 of 9, 10 of 12: a true ratio AT the bar gives as many at most 1 in 40 of the time); otherwise the
# smaller stands, since it needs no more samples to any score. Rounds come three at a time, up to MAX_WALK_ROUNDS,
# while the bigger can still be shown; the pair is settled for the smaller as soon as it cannot (3 rounds under the
# bar in 12). Why (docs/method.md, step 4): where a pair's true ratio sits near the bar, a test that decides either
# way at 1 in 8 (3 of 3), or by the median of 12 rounds, split fresh plans of one command on one host between two
# answers (digits-cnn: 16 over 8 per device, medians 1.065x and 1.127x in two quiet plans, picks 8 and 16); replayed
# on the rounds of ten recorded plans, this rule gives 8 in every one it decides. What it costs: on a noisy host a
# bigger batch truly up to ~1.2x faster may stay unshown (a quiet GPU's rounds spread by a few per cent, so there a
# bigger batch 1.15x faster clears 6 of 6).
SHOWN_FASTER_LEVEL = 1 / 40
MAX_WALK_ROUNDS = 12
# Timing rounds added at a time, whatever --sweep-seeds is: a round is a short timed run, it needs no seed (a script
# plan runs one seed, and its speed against your setting once rested on one round: 1.34x claimed where its own sweep
# runs measured 0.36x).
ROUNDS_AT_A_TIME = 3


def _at_most_by_chance(count: int, total: int) -> float:
    """P(X <= count) for X ~ Binomial(total, 1/2): how often a ratio exactly at the bar gives this few rounds (or
    fewer) on one side."""
    return sum(math.comb(total, k) for k in range(count + 1)) / 2 ** total


def rounds_needed(total: int, level: float = SHOWN_FASTER_LEVEL) -> int | None:
    """The fewest of ``total`` rounds over the bar that show a bigger batch faster at ``level``; None where even all
    of them would not (a ratio at the bar puts all of 3 rounds over it 1 in 8 of the time)."""
    return next((k for k in range(total + 1) if _at_most_by_chance(total - k, total) <= level), None)


def rounds_over_bar(big: dict, small: dict, bar: float = FASTER_BY) -> tuple[int, int]:
    """(paired measurements where ``big`` cleared the bar against ``small``, paired measurements in all)."""
    pairs = sorted(set(big) & set(small))
    return sum(clears_bar(big[p], small[p], bar) for p in pairs), len(pairs)


def shown_faster(big: dict, small: dict, bar: float = FASTER_BY, level: float = SHOWN_FASTER_LEVEL) -> bool:
    """Whether the paired measurements show ``big`` more than ``bar`` faster than ``small``: so many over the bar
    that a true ratio at the bar gives as many at most ``level`` of the time (False with none paired)."""
    over, total = rounds_over_bar(big, small, bar)
    needed = rounds_needed(total, level)
    return total > 0 and needed is not None and over >= needed


def cannot_be_shown_faster(big: dict, small: dict, bar: float = FASTER_BY, level: float = SHOWN_FASTER_LEVEL,
                           max_rounds: int = MAX_WALK_ROUNDS) -> bool:
    """Whether the pair is settled for the smaller: ``big`` is not shown faster (``shown_faster``), and no number of
    further rounds up to ``max_rounds``, all of them over the bar, would show it (with rounds still to come, and at
    least one paired measurement; at ``max_rounds`` or past it, not shown is settled)."""
    over, total = rounds_over_bar(big, small, bar)
    needed = rounds_needed(total, level)
    if total == 0 or (needed is not None and over >= needed):  # none paired, or shown faster (``shown_faster``)
        return False
    return not any(over + (more - total) >= (rounds_needed(more, level) or more + 1)
                   for more in range(total + 1, max_rounds + 1))


def shown_faster_counts(rounds_per_look: int = 3, level: float = SHOWN_FASTER_LEVEL) -> list[str]:
    """The fewest rounds over the bar that show a bigger batch faster, at each look that can: ["6 of 6", "8 of 9",
    "10 of 12"] (derived from ``level`` and MAX_WALK_ROUNDS, so the explanation cannot drift from the test)."""
    step = max(rounds_per_look, 1)
    counts = []
    for total in range(step, max(MAX_WALK_ROUNDS, step) + 1, step):  # the first look happens even past the cap
        needed = rounds_needed(total, level)
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
