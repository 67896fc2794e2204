"""Time to a target validation metric: the advised batch against the largest that fits and a grid oracle.

    python bench/time_to_accuracy.py [--workload NAME ...] [--all] [--quick] [--seeds 3] [--epochs 12] [--recipe PATH]

Workloads (--workload, repeatable; default digits): digits (digits-cnn, accuracy 0.90), mlp (digits-mlp, Adam,
accuracy 0.90), gru (a GRU on
sequences, bench/heldout_workloads.py, accuracy 0.80), tagger (a Transformer on ragged tokens,
tests/workloads/tokens.py, token accuracy 0.95), tiny (142 samples, tests/workloads/small_data.py, accuracy
0.85), tabular (a BatchNorm MLP on tabular data with 10% label noise, bench/heldout_workloads.py, accuracy
0.70). The rules were tuned on digits; gru, tagger and tiny were held out until session 13 looked at them to
change step 4, and tabular was added after that change, to check it. bn-small (a BatchNorm CNN under a budget
that leaves a few samples per device, accuracy 0.72), adam-edge (a deep MLP, Adam a quarter of its edge LR,
accuracy 0.80) and slow-loader (an MLP whose samples cost 1 ms each in the loader, accuracy 0.80), all in
bench/heldout_workloads.py, are issue 36's check, written after method v3 and tuned on by no rule. `--all` runs
them all.

1. `advisor plan` (2 gloo processes, with its own default trial and sweep lengths: the plan a user runs;
   --quick shortens them, which changes the advice) advises a per-device batch; its recipe also gives the
   largest per-device batch that fits (the ceiling, with the data cap) and the LR rules (base LR and batch,
   optimizer, base warmup).
2. Every per-device batch of an exhaustive grid (powers of two from 4, or 2 under a ceiling below 16, up to the
   largest that fits, plus the largest and the advised ones) trains for the same number of epochs, several seeds
   each, in a plain torch DDP loop on 2 gloo processes (bench/plain_ddp.py: no advisor code on the training path;
   --loop worker: through the product's own 2-process worker instead, as before session m-v3), with the LR and
   warmup the plan's rules give its global batch, and
   validates at evenly spaced checkpoints. A run's time to target is the step where validation crosses
   --target (interpolated between checkpoints) times the run's median step time (validation excluded; a load
   burst on a shared machine is not the batch); a run that never gets there counts as inf.
3. Per batch the median over seeds; the oracle is the grid's best within the steps-per-epoch cap (DOMAIN 8.5:
   the plan never advises past it; the grid's best past it is printed too). Runs are interleaved (seed by seed over
   the grid) so that load on a shared machine falls on every batch alike.
4. How much of the ratio is the bench's own noise: the advised/oracle time ratio paired by seed with its 95%
   t-interval, and a leave-one-seed-out oracle (chosen on the other seeds, timed on the held-out one): the
   minimum of a grid of noisy medians is biased low, so the plain ratio overstates the miss.

Goal (issue 16): the advised batch within 1.1x of the oracle's time, and faster than the largest that fits. The
goal is judged against the paired interval (bench/paired_rerun.goal_verdict): met when its top is at most 1.1x,
missed when its bottom is over 1.1x, undecided when it holds 1.1x (then bench/paired_rerun.py runs more seeds of
the two).
Ends with: RESULT time_to_accuracy vs_oracle=<advised / oracle> vs_largest=<advised / largest> goal=<met|missed|undecided>
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NPROC = 2
BN_TARGET, BN_BUDGET = 0.72, "8MiB"
# name: (workload spec, target of its ranked metric, device budget)
PRESETS = {"digits": ("digits-cnn", 0.90, "64MiB"),
           # Added in session 15 to check a noise-scale charge on the walk (tried, measured here, not adopted) on an
           # Adam workload; the target was set to digits-cnn's before any run.
           "mlp": ("digits-mlp", 0.90, "256MiB"),
           "gru": (f"{REPO / 'bench' / 'heldout_workloads.py'}:gru_sequences", 0.80, "64MiB"),
           "tagger": (f"{REPO / 'tests' / 'workloads' / 'tokens.py'}:tagger", 0.95, "64MiB"),
           "tiny": (f"{REPO / 'tests' / 'workloads' / 'small_data.py'}:tiny_142", 0.85, "64MiB"),
           # 0.80, set from the label noise before any run, was reached by no batch (the MLP peaks near 0.72-0.75
           # and then overfits the noisy labels); 0.70 is reached from 16 per device up. The first run (5 seeds)
           # found the advised batch the oracle at every target from 0.60 to 0.72.
           "tabular": (f"{REPO / 'bench' / 'heldout_workloads.py'}:tabular_mlp", 0.70, "64MiB"),
           # Issue 36's done-when check, written after method v3's rules landed and before their first plan; targets
           # set from a single-process loop at the base batch before any plan (readme of session m-v3). bn-small's
           # budget makes its memory ceiling a few samples per device.
           "bn-small": (f"{REPO / 'bench' / 'heldout_workloads.py'}:bn_small_ceiling", BN_TARGET, BN_BUDGET),
           "adam-edge": (f"{REPO / 'bench' / 'heldout_workloads.py'}:adam_edge_mlp", 0.80, "64MiB"),
           "slow-loader": (f"{REPO / 'bench' / 'heldout_workloads.py'}:slow_loader_mlp", 0.80, "64MiB")}
WORKLOAD = PRESETS["digits"][0]


def advise(device_memory: str, trial_steps: int | None, sweep_steps: int | None, out: Path) -> tuple[dict, float]:
    """Run `advisor plan` as a user would (its own defaults unless --trial-steps/--sweep-steps say otherwise); the
    recipe it wrote, and its wall time."""
    started = time.monotonic()
    lengths = [arg for flag, value in (("--trial-steps", trial_steps), ("--sweep-steps", sweep_steps))
               if value is not None for arg in (flag, str(value))]
    run = subprocess.run([sys.executable, "-m", "advisor.cli", "plan", "--workload", WORKLOAD, "--nproc", str(NPROC),
                          "--device-memory", device_memory, *lengths, "--out", str(out), "--force", "--json", "--fresh"],
                         capture_output=True, text=True, cwd=REPO, timeout=3600)
    if run.returncode not in (0, 3):  # 3: no candidate learned, the recipe holds the base setting
        sys.exit(f"advisor plan failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
    from advisor.recipe import read_recipe_data

    data, _ = read_recipe_data(out)
    return data, time.monotonic() - started


def grid_for(largest: int, advised: int) -> list[int]:
    """Powers of two up to the largest that fits, plus it and the advised one; from 4, or from 2 under a ceiling
    below 16 (a small-memory model still gets a grid to compare; 1 per device is never a candidate: BatchNorm)."""
    batches, b = set(), 4 if largest >= 16 else 2
    while b <= largest:
        batches.add(b)
        b *= 2
    return sorted(batches | {largest, advised})


class Trainer:
    """Training runs with the plan's LR rules: through a plain torch DDP loop (bench/plain_ddp.py, 2 gloo processes,
    no advisor code on the training path; ``loop="plain"``) or the product's runner (real torchrun, 2 gloo
    processes, the DDP adapter; ``loop="worker"``)."""

    def __init__(self, device_memory_bytes: int, recipe: dict, train_size: int, loop: str = "plain"):
        lr = recipe["lr"]
        self.base_lr, self.base_batch, self.optimizer = lr["base"], lr["base_global_batch"], lr["optimizer"]
        self.base_warmup_epochs = recipe["warmup"]["base_epochs"]
        self.train_size = train_size
        self.runner = None
        if loop == "plain":
            from plain_ddp import PlainTrainer

            self.plain = PlainTrainer(WORKLOAD, NPROC, self.schedule)
            return
        from advisor.adapters import load_adapter
        from advisor.launch import CancelToken
        from advisor.method import MethodSettings
        from advisor.runner import JobRunner

        settings = MethodSettings(workload=WORKLOAD, adapter_name="ddp", nproc=NPROC, device="cpu",
                                  memory_budget_bytes=device_memory_bytes, workdir=str(REPO),
                                  trial_timeout_s=1800)
        self.runner = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken())

    def schedule(self, global_batch: int) -> tuple[float, int]:
        """The plan's rules for this global batch: scaled LR and the planned warmup (steps)."""
        from advisor.method.lr import plan_warmup, scale_lr

        lr = scale_lr(self.base_lr, self.base_batch, global_batch, self.optimizer)
        warmup = plan_warmup(lr.scale, self.train_size, global_batch, self.base_warmup_epochs)
        return lr.value, warmup.steps

    def run(self, per_device: int, epochs: float, seed: int, eval_points: int):
        global_batch = per_device * NPROC
        steps = max(4, math.ceil(epochs * self.train_size / global_batch))
        if self.runner is None:
            return self.plain.run(per_device, steps, seed, eval_points)
        lr, warmup = self.schedule(global_batch)
        return self.runner.train("sweep", per_device, steps, lr, warmup, evaluate=True,
                                 eval_points=min(eval_points, steps), seed=seed)

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()  # the warm fork server of this workload's runs


def seconds_to(record, target: float) -> float:
    """Training seconds to ``target``: the step where validation crosses it, linearly interpolated between the
    checkpoint below and the first at or above it (a crossing is not a checkpoint's quantum: at 24 checkpoints
    in 12 epochs that is half an epoch, as much as a small batch's whole time to target), times the run's
    median step time with its median data wait (``TrialRecord.samples_per_s``'s, the rules' own measure: a load burst
    on a shared machine is not the batch). A run that never gets there: inf."""
    if record.status != "ok":
        return math.inf
    per_step = (record.step_seconds + (record.data_seconds or 0.0)) if record.step_seconds else None
    previous = None
    for point in record.evals:
        value = point.get("val_metric")
        if value is None:
            continue
        if value >= target:
            step = point["step"]
            if previous is not None and previous[1] < target:
                low_step, low_value = previous
                step = low_step + (step - low_step) * (target - low_value) / (value - low_value)
            return step * per_step if per_step else point["train_seconds"]
        previous = (point["step"], value)
    return math.inf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", action="append", choices=sorted(PRESETS), help="which (repeatable)")
    parser.add_argument("--all", action="store_true", help="every workload in PRESETS")
    parser.add_argument("--quick", action="store_true", help="2 seeds, 8 epochs, a short plan (a few minutes)")
    parser.add_argument("--target", type=float, help="the ranked metric to reach (default: the preset's)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=float, default=12, help="training epochs per run (the same for all)")
    parser.add_argument("--eval-points", type=int, default=24, help="validation checkpoints per run")
    parser.add_argument("--device-memory", help="per-device budget for the plan's ceiling (default: the preset's)")
    parser.add_argument("--sweep-steps", type=int, help="the plan's --sweep-steps (default: the plan's own)")
    parser.add_argument("--trial-steps", type=int, help="the plan's --trial-steps (default: the plan's own)")
    parser.add_argument("--recipe", help="use the advice of this earlier digits-cnn plan instead of running one")
    parser.add_argument("--loop", choices=("plain", "worker"), default="plain",
                        help="train the grid in a plain torch DDP loop (bench/plain_ddp.py, the default: the advice "
                             "judged outside the advisor) or through the product's own worker")
    parser.add_argument("--keep", help="a folder to keep each workload's plan (recipe and measurements) and every "
                                       "grid run's validation curve in (<name>.toml, <name>.measurements.toml, "
                                       "<name>.grid.json), to study a rule offline")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.epochs, args.sweep_steps, args.trial_steps = 2, 8, 40, 8
    names = sorted(PRESETS) if args.all else (args.workload or ["digits"])
    results = {}
    for name in names:
        global WORKLOAD
        WORKLOAD, target, memory = PRESETS[name]
        one = argparse.Namespace(**vars(args))
        one.target = args.target or target
        one.device_memory = args.device_memory or ("48MiB" if args.quick and name == "digits" else memory)
        one.name = name
        print(f"== {name}: {WORKLOAD}, target {one.target}", flush=True)
        results[name] = run_one(one)
    for name, (vs_oracle, vs_largest, goal) in results.items():  # the paired interval and leave-one-out: above
        print(f"RESULT time_to_accuracy workload={name} vs_oracle={vs_oracle:.3f} vs_largest={vs_largest:.3f} "
              f"goal={goal}")


def replay_grid(recipe: dict, args, train_size: int, learnable: int, largest: int, advised: int,
                kept: list[dict]) -> dict:
    """The kept grid in the form bench/step4_replay.py reads (bench/grids/): the plan's sweep and noise scale
    beside every run's validation curve (checkpoints trimmed to what the replay reads)."""
    sweep, noise = recipe["method"].get("sweep", {}), recipe.get("noise", {})
    pooled = re.search(r"pooled value would be ([0-9.e+]+)", noise.get("reason", ""))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    runs = [{**{k: v for k, v in run.items() if k != "evals"},
             "evals": [{k: p.get(k) for k in ("step", "val_metric", "val_loss", "train_seconds")}
                       for p in run["evals"]]} for run in kept]
    return {"workload": recipe["workload"].get("name") or WORKLOAD, "train_size": train_size,
            "num_classes": recipe["workload"].get("num_classes"), "nproc": NPROC,
            "recorded": f"{time.strftime('%Y-%m-%d')} at {commit}, bench/time_to_accuracy.py --keep, {args.seeds} "
                        f"seeds, {args.epochs} epochs, {args.eval_points} checkpoints",
            "plan": {"samples_per_run": sweep.get("samples_per_run"), "candidates": sweep.get("candidates"),
                     "pick": advised,
                     "noise_scale_pooled": noise.get("value") or (float(pooled.group(1)) if pooled else None),
                     "noise_reason": noise.get("reason"),
                     "noise_scale": {k: noise.get(k) for k in ("value", "low", "high")}},
            "target": args.target, "learnable_cap": learnable, "largest": largest, "advised": advised, "runs": runs}


def run_one(args) -> tuple[float, float, str]:

    from advisor.units import parse_size
    from advisor.workload import resolve_workload

    train_size = resolve_workload(WORKLOAD).train_length
    if args.recipe:  # a recipe an earlier `advisor plan` wrote for digits-cnn (its settings are in the recipe)
        from advisor.recipe import read_recipe_data

        recipe, plan_seconds = read_recipe_data(args.recipe)[0], math.nan
        if recipe["workload"]["spec"] != WORKLOAD or recipe["inputs"]["nproc"] != NPROC:
            sys.exit(f"--recipe {args.recipe} is not a {NPROC}-process {WORKLOAD} plan.")
        args.device_memory = str(recipe["inputs"]["device_memory_bytes"])
    elif args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        recipe, plan_seconds = advise(args.device_memory, args.trial_steps, args.sweep_steps,
                                      Path(args.keep) / f"{args.name}.toml")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            recipe, plan_seconds = advise(args.device_memory, args.trial_steps, args.sweep_steps,
                                          Path(tmp) / "r.toml")
    advised = recipe["batch"]["per_device"]
    largest = recipe["ceiling"]["per_device_max"]
    sweep = recipe["method"].get("sweep", {})
    print(f"advisor plan: {plan_seconds:.0f} s; advised {advised} per device (x{NPROC}), largest that fits "
          f"{largest}; sweep verdict: {sweep.get('verdict', '?')}", flush=True)
    print(f"  why: {recipe['method'].get('sweep_reason', '?')}", flush=True)  # what the sweep compared and saw

    trainer = Trainer(parse_size(args.device_memory), recipe, train_size, args.loop)
    from advisor.method.plan import largest_learnable_global

    # per device, DOMAIN 8.5's cap, read as the plan reads it: over the planned run when the recipe knows its length
    # (its warmup table's run_epochs), else one epoch (read per epoch, the adam-edge plan's 256 looked past it)
    learnable = largest_learnable_global(train_size, recipe.get("warmup", {}).get("run_epochs")) // NPROC
    grid = sorted(set(grid_for(largest, advised)) | ({learnable} if learnable <= largest else set()))
    times: dict[int, list[float]] = {b: [] for b in grid}
    finals: dict[int, list[float]] = {b: [] for b in grid}
    kept: list[dict] = []
    started = time.monotonic()
    for seed in range(args.seeds):
        for batch in grid:
            record = trainer.run(batch, args.epochs, seed, args.eval_points)
            times[batch].append(seconds_to(record, args.target))
            finals[batch].append(record.val_metric if record.val_metric is not None else math.nan)
            kept.append({"per_device": batch, "seed": seed, "seconds_to_target": times[batch][-1],
                         "step_seconds": record.step_seconds, "data_seconds": record.data_seconds,
                         "steps": record.steps, "lr": record.lr, "warmup_steps": record.warmup_steps,
                         "status": record.status, "evals": record.evals})
            print(f"  seed {seed} batch {batch}: {times[batch][-1]:.2f} s to {args.target}, final "
                  f"{finals[batch][-1]:.3f}", flush=True)
    trainer.close()
    if args.keep:
        Path(args.keep, f"{args.name}.grid.json").write_text(json.dumps(
            replay_grid(recipe, args, train_size, learnable, largest, advised, kept), default=str, indent=1))
    median = {b: statistics.median(t) for b, t in times.items()}
    advisable = [b for b in grid if b <= learnable] or grid
    oracle = min(advisable, key=lambda b: (median[b], b))
    grid_oracle = min(grid, key=lambda b: (median[b], b))

    print()
    print(f"time to validation {args.target} on {WORKLOAD} ({NPROC} gloo processes, "
          f"{args.epochs:g} epochs a run, {args.seeds} seeds, LR and warmup by the plan's rules; "
          f"grid in {time.monotonic() - started:.0f} s)")
    print(f"{'per-device':>10} {'global':>7} {'lr':>8} {'warmup':>7} {'median s':>9} {'per seed (s)':<28} "
          f"{'final acc':>9}  role")
    for b in grid:
        lr, warmup = trainer.schedule(b * NPROC)
        roles = [name for name, v in (("advised", advised), ("largest", largest), ("oracle", oracle),
                                      ("grid's best, past the cap", grid_oracle if grid_oracle != oracle else 0))
                 if v == b] + (["past the steps-per-epoch cap"] if b > learnable else [])
        per_seed = ", ".join("inf" if math.isinf(t) else f"{t:.2f}" for t in times[b])
        print(f"{b:>10} {b * NPROC:>7} {lr:>8.4f} {warmup:>7} {median[b]:>9.2f} {per_seed:<28} "
              f"{statistics.median(finals[b]):>9.3f}  {'+'.join(roles)}")
    vs_oracle = median[advised] / median[oracle] if math.isfinite(median[oracle]) else math.nan
    vs_largest = median[advised] / median[largest] if math.isfinite(median[largest]) else 0.0
    honest = oracle_noise(times, advised, oracle, advisable)
    if grid_oracle != oracle:
        print(f"Past the steps-per-epoch cap ({learnable} per device: DOMAIN 8.5, which the plan never advises past),"
              f" {grid_oracle} per device reached the target in {median[grid_oracle]:.2f} s: advised / that = "
              f"{median[advised] / median[grid_oracle]:.3f}")
    print(f"advised vs oracle, paired by seed: {honest['paired']}, goal (within 1.1x) {honest['goal']}; "
          "leave-one-seed-out oracle: "
          f"{honest['vs_oracle_loo']:.3f} (each seed's time of the batch the other seeds rank best: the grid's "
          "minimum over noisy medians flatters the oracle)")
    print(json.dumps({"advised": advised, "largest": largest, "oracle": oracle, "grid_oracle": grid_oracle,
                      "learnable_cap": learnable, "median_seconds": median,
                      **honest, "sweep": sweep}, default=str))
    return vs_oracle, vs_largest, honest["goal"]


def oracle_noise(times: dict[int, list[float]], advised: int, oracle: int, advisable: list[int]) -> dict:
    """How much of advised / oracle the bench's own noise explains. ``paired``: the geometric mean of the per-seed
    time ratios advised / oracle with its 95% t-interval (k - 1 d.f.), seeds being paired (run back to back, same
    data order). ``vs_oracle_loo``: per seed, the oracle is chosen on the other seeds' medians and timed on this
    one, so picking the best of a noisy grid does not flatter it; the ratio of medians advised / that."""
    from paired_rerun import goal_verdict, paired_ratio

    seeds = range(len(times[advised]))
    paired = paired_ratio(times[advised], times[oracle])
    goal = "met"  # the same batch
    if advised == oracle:
        text = "the same batch"
    elif paired is None:
        text, goal = "no seed where both reached the target", "undecided"
    else:
        count, ratio, low, high = paired
        goal = goal_verdict(low, high)
        text = (f"{ratio:.3f}" + (f" (95% interval {low:.3f}-{high:.3f}, {count} seeds)" if count > 1 else
                                  " (one seed)"))
    held_out = []
    for s in seeds:
        others = {b: statistics.median([t for i, t in enumerate(ts) if i != s]) for b in advisable
                  if (ts := times[b])}
        held_out.append(times[min(others, key=lambda b: (others[b], b))][s])
    loo = statistics.median(held_out)
    advised_median = statistics.median(times[advised])
    return {"paired": text, "goal": goal,
            "vs_oracle_loo": advised_median / loo if math.isfinite(loo) and loo > 0 else math.nan}


if __name__ == "__main__":
    main()
