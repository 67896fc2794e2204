"""How often the walk among equals gives one answer, when its timing rounds are drawn from what a real host measured.

The timing ratios below are every side-by-side round of five fresh plans of `make run`'s command (digits-cnn, ddp,
2 processes, 1 GiB; 2026-12-07, load ~2.3 on 2 cores; `bench/same_answer.py --plans 5`): 32 over 16 per device
(27 rounds) and 16 over 8 (9 rounds). Each draw replays the walk from your setting (32) down, with rounds resampled
from those pools, under two rules: the old one (down only when no round was over the bar, rounds as the plans ran
them: six of 32/16, three of 16/8) and the sign test of `advisor.method.speed` (3 of 3, 5 of 6, 7 of 9, 9 of 12;
three more rounds while neither way is shown, up to MAX_WALK_ROUNDS). Prints the share of each answer and the mean
rounds timed. A benchmark of the rule's stability on one host's noise, not a test.

    python bench/walk_stability.py [--draws 20000] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisor.method.speed import MAX_WALK_ROUNDS, last_look_median, shown_faster, shown_not_faster  # noqa: E402

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


def sequential(pool: list[float], rng: random.Random, median_decides: bool) -> tuple[bool, int]:
    """(shown not faster, rounds timed): three rounds, then three more while neither way is shown. At the last
    look the product's rule lets the median decide (speed.last_look_median); the rule before it moved nothing."""
    ratios = [rng.choice(pool) for _ in range(3)]
    while True:
        big, small = as_pair(ratios)
        if not median_decides and last_look_median(big, small, BAR) is not None:
            return False, len(ratios)
        if shown_not_faster(big, small, BAR):
            return True, len(ratios)
        if shown_faster(big, small, BAR) or len(ratios) >= MAX_WALK_ROUNDS:
            return False, len(ratios)
        ratios += [rng.choice(pool) for _ in range(3)]


def walk(pools, rng: random.Random, median_decides: bool) -> tuple[int, int]:
    down, timed = sequential(pools[0], rng, median_decides)
    if not down:
        return 32, timed
    down, more = sequential(pools[1], rng, median_decides)
    return (8 if down else 16), timed + more


RULES = (("no round over the bar (old)", old_rule),
         ("sign test, undecided stays", lambda pools, rng: walk(pools, rng, False)),
         ("sign test, then the median", lambda pools, rng: walk(pools, rng, True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for host, pools in HOSTS.items():
        for name, rule in RULES:
            rng = random.Random(args.seed)
            results = [rule(pools, rng) for _ in range(args.draws)]
            answers = Counter(pick for pick, _ in results)
            shares = ", ".join(f"{pick} per device {count / args.draws:.0%}" for pick, count in sorted(answers.items()))
            rounds = sum(timed for _, timed in results) / args.draws
            top = max(answers.values()) / args.draws
            print(f"{host:6s} {name:28s} {shares}; one answer {top:.0%}; five plans alike {top ** 5:.0%}; "
                  f"rounds timed {rounds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
