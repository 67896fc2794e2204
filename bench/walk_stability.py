"""How often the walk among equals gives one answer, when its timing rounds are drawn from what a real host measured.

The timing ratios below are side-by-side rounds of fresh plans of `make run`'s command (digits-cnn, ddp, 2 processes,
1 GiB; 2026-12-07 on a 2-core host; `bench/same_answer.py`): 32 over 16 per device and 16 over 8. Two readings:

- resampled: each draw replays the walk from your setting (32) down, with rounds drawn from one host's pools, under
  each rule; prints the share of each answer and the mean rounds timed. Resampling one host's rounds treats them as
  independent, which overstates how often plans agree where rounds inside a plan move together;
- replayed: each recorded plan's own rounds, in the order they ran, under each rule: what that plan would have
  picked ("?" where the rule needs more rounds than the plan timed).

The rules: the oldest (down only when no round was over the bar, six rounds of 32/16 and three of 16/8 as the plans
ran them), a sign test both ways at 1 in 8 whose undecided pairs stay, the same with the median of 12 rounds
deciding (the product's rule until the evening of 2026-12-07), and the burden of proof on the bigger batch
(`advisor.method.speed.shown_faster` / `cannot_be_shown_faster`: 6 of 6, 8 of 9, 10 of 12 at 1 in 40; the smaller
stands once the bigger cannot be shown). A benchmark of the rule's stability on one host's noise, not a test.

    python bench/walk_stability.py [--draws 20000] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisor.method.speed import MAX_WALK_ROUNDS, cannot_be_shown_faster, shown_faster  # noqa: E402

RATIOS_32_OVER_16 = [0.774, 1.002, 1.041, 1.019, 1.024, 1.031, 0.989, 1.008, 1.035, 1.217, 1.157, 1.052, 1.145, 1.044,
                     1.072, 1.011, 1.031, 1.027, 1.069, 1.016, 1.059, 1.027, 1.015, 1.033, 1.097, 1.021, 1.043]
RATIOS_16_OVER_8 = [1.117, 1.065, 1.077, 1.127, 1.106, 1.089, 1.003, 1.110, 1.137]
# The same command's five plans on a quieter host (2026-12-07 11:13-11:38, load 0.6 -> 2.6, the plans' own two
# processes and two helpers reading; bench/same_answer.py --plans 5: 32, 16, 16, 8, 8 per device under the sign test
# whose undecided pairs moved nothing). Every round of every plan, the stalls (0.5x, 2x) included.
QUIET_32_OVER_16 = [1.144, 2.048, 1.757, 1.049, 1.047, 1.024, 0.549, 1.038, 1.001, 1.104, 1.017, 1.064, 1.041, 1.055,
                    1.051, 0.992, 1.051, 1.120, 1.049, 1.025, 1.040, 1.032, 1.066, 1.083, 1.060, 1.026, 1.028, 1.038,
                    1.022, 1.062]
QUIET_16_OVER_8 = [1.030, 1.101, 1.124, 0.937, 0.524, 1.070, 1.973, 1.261, 2.155, 1.061, 1.090, 1.097, 1.139, 1.090,
                   1.041, 1.076, 1.267, 1.134, 1.085, 1.103, 1.073, 1.060, 1.077, 1.067, 1.084, 1.063, 1.058, 1.098,
                   1.105, 1.077, 1.074, 1.088, 1.076]
HOSTS = {"loaded": (RATIOS_32_OVER_16, RATIOS_16_OVER_8), "quiet": (QUIET_32_OVER_16, QUIET_16_OVER_8)}
BAR = 0.10


def as_pair(ratios: list[float]) -> tuple[dict, dict]:
    return dict(enumerate(ratios)), {i: 1.0 for i in range(len(ratios))}


def old_rule(pools, rng: random.Random) -> tuple[int, int]:
    """Down from 32 while no round was over the bar (six rounds of 32/16, then three of 16/8, as the plans ran)."""
    upper = [rng.choice(pools[0]) for _ in range(6)]
    if any(r > 1 + BAR for r in upper):
        return 32, 6
    lower = [rng.choice(pools[1]) for _ in range(3)]
    return (16 if any(r > 1 + BAR for r in lower) else 8), 9


def _at_most(count: int, total: int) -> float:
    return sum(math.comb(total, k) for k in range(count + 1)) / 2 ** total


def both_ways(ratios: list[float], median_decides: bool) -> bool | None:
    """The sign test both ways at 1 in 8 (replaced): True down (not faster), False not down, None undecided."""
    over = sum(r > 1 + BAR for r in ratios)
    if _at_most(over, len(ratios)) <= 0.125:
        return True
    if _at_most(len(ratios) - over, len(ratios)) <= 0.125:
        return False
    if len(ratios) >= MAX_WALK_ROUNDS:
        return statistics.median(ratios) <= 1 + BAR if median_decides else False
    return None


def burden(ratios: list[float]) -> bool | None:
    """The product's rule: True down (cannot be shown faster), False shown faster, None not settled yet."""
    big, small = as_pair(ratios)
    if shown_faster(big, small, BAR):
        return False
    return True if cannot_be_shown_faster(big, small, BAR) else None


def sequential(decide, next_round) -> tuple[bool | None, int]:
    """(down, rounds timed): three rounds, then three more while ``decide`` says None; ``next_round`` returns None
    when a recorded plan has no more rounds (then down is None: the plan did not time enough to tell)."""
    ratios: list[float] = []
    while True:
        for _ in range(3):
            r = next_round()
            if r is None:
                return None, len(ratios)
            ratios.append(r)
        verdict = decide(ratios)
        if verdict is not None:
            return verdict, len(ratios)


def walk(decide, upper, lower) -> tuple[int | None, int]:
    down, timed = sequential(decide, upper)
    if down is None:
        return None, timed
    if not down:
        return 32, timed
    down, more = sequential(decide, lower)
    return (None if down is None else 8 if down else 16), timed + more


RULES = (("sign test, undecided stays", lambda r: both_ways(r, False)),
         ("sign test, then the median", lambda r: both_ways(r, True)),
         ("burden on the bigger (now)", burden))

# Every round of the pairs the walk timed, in order, in plans of `make run`'s command on 2026-12-07 (plans whose walk
# stopped at 32/16 timed no 16/8): the afternoon's five (15:00-15:29, load 2.1-5.4, picks 8 8 8 16 8), three beside
# two busy loops (14:36-15:00, load 5.2-5.5: 8 8 8), and four quiet (17:40-18:05, load ~2, the plans' own processes:
# 8 16 8 32) under the sign test with the median.
PLANS = [
    ([1.047, 1.038, 1.255, 0.894, 1.122, 0.818, 1.707, 0.856, 1.393, 1.033, 1.017, 0.984, 0.597, 0.847, 1.229],
     [1.058, 0.909, 1.031]),
    ([0.988, 1.03, 1.063, 0.899, 0.736, 1.106], [0.98, 1.0, 1.13, 1.0, 0.912, 1.542, 0.74, 0.868, 1.06]),
    ([0.789, 1.035, 1.139, 1.039, 1.1, 1.058, 0.968, 1.066, 1.116], [1.063, 1.125, 1.006, 1.082, 1.083, 1.013]),
    ([1.05, 1.089, 1.055, 1.032, 1.091, 1.1], [1.149, 1.188, 1.195]),
    ([1.015, 1.012, 1.017, 1.057, 1.009, 1.066], [1.089, 0.999, 1.076]),
    ([0.924, 0.986, 0.957, 0.91, 0.97, 1.032], [0.61, 0.658, 0.696]),
    ([0.905, 0.823, 0.838, 0.85, 0.877, 0.858], [0.882, 0.749, 0.708]),
    ([0.993, 0.906, 0.648, 1.391, 0.974, 1.026], [0.903, 0.934, 0.674]),
    ([1.035, 0.989, 1.078, 1.079, 1.016, 1.047],
     [1.046, 1.027, 1.279, 0.946, 1.059, 1.152, 1.263, 1.2, 0.864, 0.978, 1.07, 1.101]),
    ([1.075, 1.148, 0.974, 1.025, 0.975, 1.105, 1.093, 1.218, 1.194, 0.991, 1.136, 1.006, 0.991, 1.027, 1.019],
     [0.99, 1.3, 1.068, 1.024, 1.179, 1.083, 1.255, 0.838, 1.134, 1.236, 1.12, 1.167]),
    ([0.952, 1.073, 0.924, 1.152, 1.051, 1.183, 1.013, 0.837, 0.966],
     [1.028, 1.013, 1.229, 0.992, 1.182, 1.116, 1.13, 0.997, 1.036, 1.099, 1.075, 1.1]),
    ([1.006, 1.051, 1.067, 1.696, 0.996, 1.231, 1.121, 1.105, 1.153, 1.089, 1.243, 1.141], []),
]


def replayed(decide, plan) -> int | None:
    upper, lower = (iter(rounds) for rounds in plan)
    return walk(decide, lambda: next(upper, None), lambda: next(lower, None))[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rules = [("no round over the bar (old)", None)] + list(RULES)
    print("resampled:")
    for host, pools in HOSTS.items():
        for name, decide in rules:
            rng = random.Random(args.seed)
            if decide is None:
                results = [old_rule(pools, rng) for _ in range(args.draws)]
            else:
                results = [walk(decide, lambda: rng.choice(pools[0]), lambda: rng.choice(pools[1]))
                           for _ in range(args.draws)]
            answers = Counter(pick for pick, _ in results)
            shares = ", ".join(f"{pick} per device {count / args.draws:.0%}" for pick, count in sorted(answers.items()))
            rounds = sum(timed for _, timed in results) / args.draws
            top = max(answers.values()) / args.draws
            print(f"  {host:6s} {name:28s} {shares}; one answer {top:.0%}; five plans alike {top ** 5:.0%}; "
                  f"rounds timed {rounds:.1f}")
    print(f"replayed ({len(PLANS)} recorded plans, each plan's rounds in order; ? = needs more rounds than it timed):")
    for name, decide in RULES:
        picks = [replayed(decide, plan) for plan in PLANS]
        said = " ".join("?" if pick is None else str(pick) for pick in picks)
        print(f"  {name:28s} {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
