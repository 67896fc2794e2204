"""Replay step 4's tie-break on recorded time-to-accuracy grids: which pick each rule would make, and its time to the
target against the grid's oracle. Seconds, no training: for studying a rule change on workloads it was not tuned on
before paying for real plans.

    python bench/step4_replay.py [GRID.json ...]      (default: bench/grids/*.grid.json)

A grid (`bench/time_to_accuracy.py --keep`, trimmed and annotated in bench/grids/) holds, per per-device batch and
seed, a 12-epoch run's validation curve (24 checkpoints), its median step time and its time to the target. The
replay cuts every run's curve at the sweep's samples per run (or at the grid's end when the plan's sweep ran longer:
said in the output) and reads it at the sweep's 4 checkpoints (linear between the grid's), so each candidate is what
one sweep run would have measured. Runs were interleaved seed by seed, so their speeds pair as the sweep's do.

Rules compared, for each range of three neighbouring candidates (health, the range growing and timing rounds are
not replayed):
- `advisor`: advisor.method.sweep's rule (mean of the last two checkpoints, the paired tie, the walk up the tied
  while the next is more than 10% faster at every seed).
- `known-charge`: the walk also charges a bigger batch for the samples the gradient noise scale's model says it
  needs for the same progress (McCandlish et al. 2018: 1 + B / B_noise, goodput's ``statistical_efficiency``),
  at the high end of the plan's noise scale when the plan called it known; else as `advisor`.
- `pooled-charge`: the same charge at the plan's pooled noise scale even where the plan called it unknown (the
  runs disagreed): what a trusted noise scale would do.
- `time-read`: each run's curve read at quarters of the fastest candidate's run time (an accuracy starts at chance),
  mean of the readings; the smallest of the tied wins.

Then the walk's throughput margin against timing noise: each seed's speed drawn again around the grid's (x
exp(N(0, sigma))), the share of picks past 1.1x the oracle's time at margins of 5-30%, per range whose tied
candidates hold the oracle, and the worst and mean over them.

Then the walk from your own setting (each candidate of each range taken in turn as yours): the pick when the walk
only moves up from it (before session m-v3b) against the product's walk, which also steps down to a smaller equal
that yours was more than 10% faster than at no seed (``advisor.method.sweep.walk_equals``), and the symmetric
variant that steps down whenever yours was not faster at every seed, each as its time to the target over the
oracle's. RESULT step4_from_yours: how many cases each moved to a faster / slower batch than up-only.

Ends with: RESULT step4_replay <rule>=<worst advised/oracle over the ranges that hold the oracle> ... (a range
without it is for the range growth, which is not replayed, to leave), and RESULT step4_margin margin<m>=<mean share
of picks past 1.1x at sigma 0.07> ...
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from advisor.method.goodput import statistical_efficiency  # noqa: E402
from advisor.method.sweep import DEFAULT_POLICY, CandidateScores, clearly_faster, compare, walk_equals  # noqa: E402

POINTS = 4  # advisor.method.inputs.SWEEP_EVAL_POINTS


def curve(run: dict, nproc: int, start: float | None = None) -> list[tuple[float, float]]:
    """(samples seen, validation metric) at each checkpoint, from (0, start) when given."""
    points = [(p["step"] * run["per_device"] * nproc, p["val_metric"]) for p in run["evals"]
              if p.get("val_metric") is not None]
    return ([(0.0, start)] if start is not None else []) + points


def read(points: list[tuple[float, float]], at: float) -> float | None:
    """The curve at ``at`` samples, linear between checkpoints; None past its end or before its first point."""
    for (x0, v0), (x1, v1) in zip(points, points[1:]):
        if x0 <= at <= x1:
            return v0 + (v1 - v0) * (at - x0) / (x1 - x0)
    return points[0][1] if points and abs(points[0][0] - at) < 1e-9 else None


def speed(run: dict, nproc: int) -> float:
    return run["per_device"] * nproc / (run["step_seconds"] + (run["data_seconds"] or 0.0))


def candidates(grid: dict, batches: list[int], samples: float, score) -> list[CandidateScores]:
    out = []
    for b in batches:
        runs = {r["seed"]: r for r in grid["runs"] if r["per_device"] == b}
        speeds = {s: speed(r, grid["nproc"]) for s, r in runs.items()}
        scores = {s: score(r, samples) for s, r in runs.items()}
        out.append(CandidateScores(b, "ok", scores, statistics.fmean(speeds.values()), speeds))
    return out


def tied_of(scored: list[CandidateScores]) -> list[CandidateScores]:
    """The leader and those tied with it, smallest first (advisor.method.sweep's sentence 2)."""
    leader = max(scored, key=lambda c: (c.mean, -c.per_device))
    margin = DEFAULT_POLICY.accuracy_margin
    return sorted((c for c in scored if c is leader or compare(leader, c, 1.0, margin).tied),
                  key=lambda c: c.per_device)


def speed_needed(big_global: int, small_global: int, noise_scale: float | None,
                 margin: float = DEFAULT_POLICY.throughput_margin) -> float:
    """The speed-up the step from ``small_global`` to ``big_global`` must show: the throughput margin, or with a noise
    scale the extra samples the noise scale's model says the bigger needs for the same progress, whichever is more."""
    needed = 1 + margin
    if noise_scale:
        needed = max(needed, 1 / statistical_efficiency(big_global, noise_scale, small_global))
    return needed


def last_two(grid):
    """advisor.method.sweep's run score: the mean of the last two of the sweep's checkpoints."""
    def score(run, s):
        values = [read(curve(run, grid["nproc"]), s * (i + 1) / POINTS) for i in range(POINTS)]
        return statistics.fmean(values[-2:])
    return score


def walk(grid, batches, samples, noise_scale: float | None, margin: float = DEFAULT_POLICY.throughput_margin,
         tied: list[CandidateScores] | None = None) -> int:
    """advisor.method.sweep's walk up the tied (``noise_scale`` None), or the walk charged for samples. ``margin``:
    the walk's throughput margin; ``tied``: the tied candidates, their speeds perturbed (``timing_noise``)."""
    tied = tied or tied_of(candidates(grid, batches, samples, last_two(grid)))
    winner = tied[0]
    for bigger in tied[1:]:
        needed = speed_needed(bigger.per_device * grid["nproc"], winner.per_device * grid["nproc"], noise_scale,
                              margin)
        if not clearly_faster(bigger, winner, needed - 1):
            break
        winner = bigger
    return winner.per_device


def rule_advisor(grid, batches, samples):
    return walk(grid, batches, samples, None)


def rule_known_charge(grid, batches, samples):
    noise = grid["plan"]["noise_scale"]
    return walk(grid, batches, samples, noise["high"] if noise["value"] is not None else None)


def rule_pooled(grid, batches, samples):
    return walk(grid, batches, samples, grid["plan"]["noise_scale_pooled"])


def rule_time_read(grid, batches, samples):
    nproc, chance = grid["nproc"], 1.0 / (grid.get("num_classes") or 10)
    mean_speed = {b: statistics.fmean(speed(r, nproc) for r in grid["runs"] if r["per_device"] == b)
                  for b in batches}
    horizon = samples / max(mean_speed.values())  # seconds: the fastest candidate's run

    def time_read(run, s):
        points = curve(run, nproc, start=chance)
        return statistics.fmean(read(points, horizon * (i + 1) / POINTS * mean_speed[run["per_device"]])
                                for i in range(POINTS))
    return tied_of(candidates(grid, batches, samples, time_read))[0].per_device


RULES = {"advisor": rule_advisor, "known-charge": rule_known_charge, "pooled-charge": rule_pooled,
         "time-read": rule_time_read}


# The walk's throughput margin against timing noise: each seed's speed times exp(N(0, sigma)), on top of the grid's
# own. Sigma: the per-seed spread (sd of the log) of the speed ratio in recorded plans, about 0.03 between timing
# rounds and 0.07 between sweep runs; 0.12 stands for a loaded machine.
MARGINS = (0.05, 0.10, 0.20, 0.30)
SIGMAS = (0.03, 0.07, 0.12)
DRAWS = 400


def timing_noise(studied: list[tuple[dict, list[int], float, dict, int]]) -> None:
    """Prints, per range whose tied candidates hold the oracle (elsewhere the score keeps it out, not the walk's
    margin), the share of draws whose pick takes more than 1.1x the oracle's time at each margin; then per sigma
    the worst over those ranges. ``studied``: (grid, range, samples a run, median seconds by batch, oracle)."""
    import math
    import random

    rng = random.Random(0)
    worst: dict[tuple[float, float], float] = {}
    total: dict[tuple[float, float], float] = {}
    ranges = 0
    print(f"\nThe walk's throughput margin under timing noise ({DRAWS} draws of each seed's speed x exp(N(0, sigma)));"
          " share of picks past 1.1x the oracle's time:")
    print(f"  {'workload':24} {'range':18} sigma  " + "  ".join(f"margin {m:.0%}" for m in MARGINS))
    for grid, batches, samples, medians, oracle in studied:
        tied = tied_of(candidates(grid, batches, samples, last_two(grid)))
        if oracle not in [c.per_device for c in tied]:
            continue
        ranges += 1
        for sigma in SIGMAS:
            shares = []
            for margin in MARGINS:
                misses = 0
                for _ in range(DRAWS):
                    jittered = [CandidateScores(c.per_device, c.status, c.scores, c.throughput,
                                                {s: v * math.exp(rng.gauss(0.0, sigma)) for s, v in c.speeds.items()})
                                for c in tied]
                    misses += medians[walk(grid, batches, samples, None, margin, jittered)] / medians[oracle] > 1.1
                shares.append(misses / DRAWS)
                worst[sigma, margin] = max(worst.get((sigma, margin), 0.0), misses / DRAWS)
                total[sigma, margin] = total.get((sigma, margin), 0.0) + misses / DRAWS
            if sigma == SIGMAS[1]:  # the sweep runs' spread; the worst line below covers the others
                print(f"  {grid['workload'].split(':')[-1]:24} {str(batches):18} {sigma:5.2f}  "
                      + "  ".join(f"{v:>10.0%}" for v in shares))
    if not ranges:
        print("  (no range's tied candidates hold the oracle: nothing for the margin to decide)")
        return
    for label, table, scale in (("worst over the ranges", worst, 1), ("mean over the ranges", total, ranges)):
        for sigma in SIGMAS:
            print(f"  {label:43} {sigma:5.2f}  " + "  ".join(f"{table[sigma, m] / scale:>10.0%}" for m in MARGINS))
    print("RESULT step4_margin " + " ".join(f"margin{m:.2f}={total[SIGMAS[1], m] / ranges:.2f}" for m in MARGINS))


def full_run(grid: dict, cap: int) -> str:
    """DOMAIN's own objective beside the time to a target: the grid's whole run (every batch the same epochs), per
    batch within the cap its final score (mean of the last two checkpoints over the seeds) and its median training
    seconds. A batch that ends level with the best and trains faster wins there even when it reaches the target
    later (digits-cnn: 16 per device ends as 8 does, 9% sooner, and reaches 0.90 1.47x later)."""
    out = []
    for b in sorted({r["per_device"] for r in grid["runs"] if r["per_device"] <= cap}):
        runs = [r for r in grid["runs"] if r["per_device"] == b]
        final = statistics.fmean(statistics.fmean(p["val_metric"] for p in r["evals"][-2:]) for r in runs)
        seconds = statistics.median(r["steps"] * (r["step_seconds"] + (r["data_seconds"] or 0.0)) for r in runs)
        out.append(f"{b}: {final:.3f} in {seconds:.1f} s")
    return "the whole run (final score in training seconds): " + ", ".join(out)


def up_only(tied: list[CandidateScores], yours: int) -> int:
    """The walk as it was before the step down: from your setting (an equal) up while the next bigger paid."""
    current = next(c for c in tied if c.per_device == yours)
    for bigger in (c for c in tied if c.per_device > yours):
        if not clearly_faster(bigger, current, DEFAULT_POLICY.throughput_margin):
            break
        current = bigger
    return current.per_device


def down_unless_paid(tied: list[CandidateScores], yours: int) -> int:
    """The symmetric variant, not taken: down while yours was not faster at every seed, else up as before."""
    current = next(c for c in tied if c.per_device == yours)
    for smaller in reversed([c for c in tied if c.per_device < yours]):
        if clearly_faster(current, smaller, DEFAULT_POLICY.throughput_margin):
            break
        current = smaller
    return current.per_device if current.per_device != yours else up_only(tied, yours)


def from_yours(studied_all: list[tuple[dict, list[int], float, dict, int]]) -> None:
    """Per range and your setting in it (when it is an equal): up-only, the product's walk, the symmetric variant."""
    rules = {"up-only": up_only, "walk": lambda tied, yours: walk_equals(tied, yours, False,
                                                                          DEFAULT_POLICY.throughput_margin)[0],
             "down-unless-paid": down_unless_paid}
    moved = {name: [0, 0] for name in rules if name != "up-only"}
    print("\nThe walk from your setting (yours = each equal of each range; time to the target / the oracle's):")
    for grid, batches, samples, medians, oracle in studied_all:
        tied = tied_of(candidates(grid, batches, samples, last_two(grid)))
        for yours in [c.per_device for c in tied]:
            picks = {name: rule(tied, yours) for name, rule in rules.items()}
            ratio = {name: medians[p] / medians[oracle] for name, p in picks.items()}
            for name in moved:
                if ratio[name] != ratio["up-only"]:
                    moved[name][ratio[name] > ratio["up-only"]] += 1
            if len(set(picks.values())) > 1:
                print(f"  {grid['workload'].split(':')[-1]:24} {str(batches):18} yours {yours:>4}  "
                      + "  ".join(f"{name} {picks[name]:>4} x{ratio[name]:.2f}" for name in rules))
    print("RESULT step4_from_yours " + " ".join(f"{name}_faster={f} {name}_slower={w}"
                                                 for name, (f, w) in moved.items()))


def main(paths: list[str]) -> None:
    worst = {name: 1.0 for name in RULES}
    studied, studied_all = [], []
    for path in paths:
        grid = json.loads(Path(path).read_text())
        medians = {}
        for r in grid["runs"]:
            medians.setdefault(r["per_device"], []).append(r["seconds_to_target"])
        medians = {b: statistics.median(t) for b, t in medians.items()}
        cap = grid["learnable_cap"]
        oracle = min((b for b in medians if b <= cap), key=lambda b: (medians[b], b))
        end = min(p["step"] * r["per_device"] * grid["nproc"] for r in grid["runs"] for p in r["evals"][-1:])
        samples = min(grid["plan"]["samples_per_run"], end)
        print(f"== {grid['workload']}: target {grid['target']}, oracle {oracle} per device "
              f"({medians[oracle]:.2f} s); {samples:.0f} samples a run"
              + (f" (the plan's sweep ran {grid['plan']['samples_per_run']}: cut at the grid's end)"
                 if samples < grid["plan"]["samples_per_run"] else ""))
        print("  " + full_run(grid, cap))
        powers = sorted(b for b in medians if b <= cap and b & (b - 1) == 0)
        ranges = [powers[i:i + 3] for i in range(len(powers) - 2)]
        if grid["plan"]["candidates"] not in ranges and all(b in medians for b in grid["plan"]["candidates"]):
            ranges.append(grid["plan"]["candidates"])
        for batches in ranges:
            studied_all.append((grid, batches, samples, medians, oracle))
            picks = {name: rule(grid, batches, samples) for name, rule in RULES.items()}
            ratios = {name: medians[p] / medians[oracle] for name, p in picks.items()}
            if oracle in batches:  # a range without the oracle is the range growth's job, not replayed here
                studied.append((grid, batches, samples, medians, oracle))
                for name, ratio in ratios.items():
                    worst[name] = max(worst[name], ratio)
            print(f"  {str(batches):18} " + "  ".join(f"{name} {picks[name]:>4} x{ratios[name]:.2f}"
                                                      for name in RULES)
                  + ("" if oracle in batches else "   (no oracle in range)"))
    print("RESULT step4_replay " + " ".join(f"{name}={value:.2f}" for name, value in worst.items()))
    timing_noise(studied)
    from_yours(studied_all)


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(str(p) for p in (REPO / "bench" / "grids").glob("*.grid.json")))
