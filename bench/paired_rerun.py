"""Is a gap in a kept grid real, or the grid's own noise? Two per-device batches of a kept grid trained again over
more paired seeds in the plain loop, and their time-to-target ratio with its interval.

    python bench/paired_rerun.py NAME ADVISED BEST [--seeds 8] [--epochs 5] [--eval-points-per-epoch 2]

NAME is a preset of bench/time_to_accuracy.py with a kept grid (bench/grids/NAME.grid.json): each batch trains with
the LR and warmup it ran with there (the plan's rules), in bench/plain_ddp.py's loop (2 gloo processes, no advisor
code on the training path), seed by seed with the two batches' order reversed every other seed (load on a shared
machine falls on both alike). The schedule is warmup then constant, so a run cut at --epochs follows the same
curve as the grid's 12-epoch run up to there; checkpoints keep the grid's spacing (2 an epoch) unless told. A run
that does not reach the target within --epochs counts as inf (a seed where either did is left out of the ratio and
said). Time to target: bench/time_to_accuracy.seconds_to (crossing step x the run's median step + loader time).

The ratio: the geometric mean over seeds of ADVISED / BEST time, with a 95% t-interval on the log ratios (k - 1
degrees of freedom, paired by seed). The goal, "within 1.1x of the grid's best", is judged against the interval:
met (the interval's top is at most 1.1), missed (its bottom is over 1.1), or not decided by these seeds (it holds
1.1).

Ends with: RESULT paired_rerun workload=NAME advised=A best=B ratio=R low=L high=H seeds=K goal=met|missed|undecided
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

GOAL = 1.1  # issue 36: within 1.1x of the best time to a target in a small grid


def paired_ratio(advised: list[float], best: list[float]) -> tuple[int, float, float, float] | None:
    """(seeds used, geometric-mean ratio, 95% low, 95% high) over the seeds where both reached the target."""
    from advisor.method.sweep import paired_interval

    pairs = {s: (a, b) for s, (a, b) in enumerate(zip(advised, best)) if math.isfinite(a) and math.isfinite(b)}
    found = paired_interval({s: math.log(a) for s, (a, _) in pairs.items()},
                            {s: math.log(b) for s, (_, b) in pairs.items()})
    if found is None:
        return None
    count, mean, half = found
    half = math.inf if half is None else half
    return count, math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def goal_verdict(low: float, high: float, goal: float = GOAL) -> str:
    if high <= goal:
        return "met"
    if low > goal:
        return "missed"
    return "undecided"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("advised", type=int)
    parser.add_argument("best", type=int)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--epochs", type=float, default=5)
    parser.add_argument("--eval-points-per-epoch", type=float, default=2)
    args = parser.parse_args()
    import time_to_accuracy as tta
    from plain_ddp import PlainTrainer

    spec, target, _ = tta.PRESETS[args.name]
    grid = json.loads((HERE / "grids" / f"{args.name}.grid.json").read_text())
    schedule = {}
    for run in grid["runs"]:
        schedule[run["per_device"]] = (run["lr"], run["warmup_steps"])
    missing = [b for b in (args.advised, args.best) if b not in schedule]
    if missing:
        sys.exit(f"{args.name}'s kept grid has no run at {missing} per device (it has {sorted(schedule)}).")
    trainer = PlainTrainer(spec, tta.NPROC, lambda global_batch: schedule[global_batch // tta.NPROC])
    train_size = grid["train_size"]
    times: dict[int, list[float]] = {args.advised: [], args.best: []}
    samples: dict[int, list[float]] = {args.advised: [], args.best: []}  # to the target: the load-free part
    started = time.monotonic()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        order = (args.advised, args.best) if seed % 2 == 0 else (args.best, args.advised)
        for batch in order:
            steps = max(4, math.ceil(args.epochs * train_size / (batch * tta.NPROC)))
            points = max(2, round(args.epochs * args.eval_points_per_epoch))
            record = trainer.run(batch, steps, seed, points)
            times[batch].append(tta.seconds_to(record, target))
            per_step = (record.step_seconds or 0.0) + (record.data_seconds or 0.0)
            samples[batch].append(times[batch][-1] / per_step * batch * tta.NPROC if per_step else math.inf)
            print(f"  seed {seed} batch {batch}: {times[batch][-1]:.3f} s to {target} ({record.status}, "
                  f"{samples[batch][-1]:.0f} samples, step {record.step_seconds or 0:.4f} s + loader "
                  f"{record.data_seconds or 0:.4f} s)", flush=True)
    found = paired_ratio(times[args.advised], times[args.best])
    print(f"{args.name}: {args.advised} vs {args.best} per device, {args.seeds} paired seeds, {args.epochs:g} epochs "
          f"a run, {time.monotonic() - started:.0f} s")
    if found is None:
        print(f"RESULT paired_rerun workload={args.name} advised={args.advised} best={args.best} ratio=nan seeds=0 "
              "goal=undecided")
        return
    count, ratio, low, high = found
    print(f"advised / best, paired by seed: {ratio:.3f} (95% t-interval {low:.3f}-{high:.3f}, {count} seeds "
          f"where both reached {target})")
    by_samples = paired_ratio(samples[args.advised], samples[args.best])
    if by_samples is not None:  # the samples each needed, apart from the machine's speed at the time
        print(f"samples to {target}, advised / best: {by_samples[1]:.3f} (95% t-interval {by_samples[2]:.3f}-"
              f"{by_samples[3]:.3f})")
    print(f"RESULT paired_rerun workload={args.name} advised={args.advised} best={args.best} ratio={ratio:.3f} "
          f"low={low:.3f} high={high:.3f} seeds={count} goal={goal_verdict(low, high)}")


if __name__ == "__main__":
    main()
