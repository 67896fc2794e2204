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

Ends with: RESULT step4_replay <rule>=<worst advised/oracle over the ranges that hold the oracle> ... (a range
without it is for the range growth, which is not replayed, to leave).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from advisor.method.goodput import statistical_efficiency  # noqa: E402
from advisor.method.sweep import DEFAULT_POLICY, CandidateScores, clearly_faster, compare  # noqa: E402

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


def speed_needed(big_global: int, small_global: int, noise_scale: float | None) -> float:
    """The speed-up the step from ``small_global`` to ``big_global`` must show: the throughput margin, or with a noise
    scale the extra samples the noise scale's model says the bigger needs for the same progress, whichever is more."""
    needed = 1 + DEFAULT_POLICY.throughput_margin
    if noise_scale:
        needed = max(needed, 1 / statistical_efficiency(big_global, noise_scale, small_global))
    return needed


def walk(grid, batches, samples, noise_scale: float | None) -> int:
    """advisor.method.sweep's walk up the tied (``noise_scale`` None), or the walk charged for samples."""
    def last_two(run, s):
        values = [read(curve(run, grid["nproc"]), s * (i + 1) / POINTS) for i in range(POINTS)]
        return statistics.fmean(values[-2:])
    tied = tied_of(candidates(grid, batches, samples, last_two))
    winner = tied[0]
    for bigger in tied[1:]:
        needed = speed_needed(bigger.per_device * grid["nproc"], winner.per_device * grid["nproc"], noise_scale)
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


def main(paths: list[str]) -> None:
    worst = {name: 1.0 for name in RULES}
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
        powers = sorted(b for b in medians if b <= cap and b & (b - 1) == 0)
        ranges = [powers[i:i + 3] for i in range(len(powers) - 2)]
        if grid["plan"]["candidates"] not in ranges and all(b in medians for b in grid["plan"]["candidates"]):
            ranges.append(grid["plan"]["candidates"])
        for batches in ranges:
            picks = {name: rule(grid, batches, samples) for name, rule in RULES.items()}
            ratios = {name: medians[p] / medians[oracle] for name, p in picks.items()}
            if oracle in batches:  # a range without the oracle is the range growth's job, not replayed here
                for name, ratio in ratios.items():
                    worst[name] = max(worst[name], ratio)
            print(f"  {str(batches):18} " + "  ".join(f"{name} {picks[name]:>4} x{ratios[name]:.2f}"
                                                      for name in RULES)
                  + ("" if oracle in batches else "   (no oracle in range)"))
    print("RESULT step4_replay " + " ".join(f"{name}={value:.2f}" for name, value in worst.items()))


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(str(p) for p in (REPO / "bench" / "grids").glob("*.grid.json")))
