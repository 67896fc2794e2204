"""Share of a headless `advisor plan`'s wall time spent outside training steps (launches, imports, builds).

    python bench/overhead.py [--workload digits-cnn] [--nproc 2] [--device-memory 48MiB] [--runs 1] [--no-baseline]

Each run plans twice, alternating: with warm workers (every job forked from the fork server, the default) and
as the baseline with ADVISOR_WARM_WORKERS=0 (every job a fresh torchrun launch), so both meet the same load;
the RESULT line gives both and their ratios. Goal (issue 23): share <= 0.10 on digits-cnn; digits-mlp (fast
steps, as on a GPU) is reported too.

Runs the plan in a fresh subprocess and reads its recipe's ledger. Time inside training steps is what the
workers measured: each trial and sweep run's ``train_seconds`` (its steps and the loader's waits, evaluation
excluded) and each ceiling probe's measured step (``step_seconds``, two cycles a probe). Everything else of
the plan's wall time (process start-up, torchrun, `import torch`, model builds, rendezvous, evaluation, the
engine's own work) is overhead. The machine is shared: numbers are noisy.
The steps default to the product's own (--trial-steps 40, --sweep-steps 200): a plan as users run it.
Ends with: RESULT overhead share=<median> wall_s=<median> baseline_share=<median> baseline_wall_s=<median>
wall_ratio=<warm / baseline> probes=<ceiling probes of the last run>
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from advisor.settings import PLAN_DEFAULTS  # noqa: E402

PROBE_CYCLES = 2  # run_probe runs max(2, steps) cycles with steps=2; the ledger keeps the measured one's time


def run_plan(args, warm: bool = True) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        out = Path(tmp) / "recipe.toml"
        argv = [sys.executable, "-m", "advisor.cli", "plan", "--workload", args.workload, "--adapter", "ddp",
                "--nproc", str(args.nproc), "--device-memory", args.device_memory, "--trial-steps",
                str(args.trial_steps), "--sweep-steps", str(args.sweep_steps), "--out", str(out), "--json"]
        started = time.monotonic()
        env = {**os.environ, "ADVISOR_WARM_WORKERS": "1" if warm else "0"}
        run = subprocess.run(argv, capture_output=True, text=True, env=env)
        wall = time.monotonic() - started
        if run.returncode != 0:
            sys.exit(f"the plan failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
        from advisor.recipe import read_recipe_data

        ledger = read_recipe_data(out)[0]["ledger"]  # the recipe's sibling measurements file, merged
    probes = [r for r in ledger if r["phase"] == "ceiling"]
    runs = [r for r in ledger if r["phase"] != "ceiling"]
    probe_steps = sum(PROBE_CYCLES * r.get("step_seconds", 0.0) for r in probes)
    run_steps = sum(r.get("train_seconds", 0.0) for r in runs)
    launched = sum(r["seconds"] for r in ledger)
    return {"wall": wall, "steps": probe_steps + run_steps, "probes": len(probes), "runs": len(runs),
            "probe_seconds": sum(r["seconds"] for r in probes), "launched": launched,
            "share": 1 - (probe_steps + run_steps) / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="digits-cnn")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--device-memory", default="48MiB")
    # The plan as users run it: the product's own step counts (a 8/12-step plan is all start-up by design).
    parser.add_argument("--trial-steps", type=int, default=PLAN_DEFAULTS["trial_steps"])
    parser.add_argument("--sweep-steps", type=int, default=PLAN_DEFAULTS["sweep_steps"])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="skip the fresh-launch baseline plans (ADVISOR_WARM_WORKERS=0)")
    args = parser.parse_args()
    rows, baseline = [], []
    for _ in range(args.runs):
        rows.append(run_plan(args))
        if args.baseline:
            baseline.append(run_plan(args, warm=False))
    print(f"{'run':>3} {'workers':>8} {'wall s':>8} {'in steps s':>10} {'probes':>6} {'probe s':>8} {'runs':>4} "
          f"{'share':>6}")
    for i, r in enumerate(rows):
        for kind, row in (("warm", r), ("fresh", baseline[i] if baseline else None)):
            if row:
                print(f"{i:>3} {kind:>8} {row['wall']:>8.1f} {row['steps']:>10.2f} {row['probes']:>6} "
                      f"{row['probe_seconds']:>8.1f} {row['runs']:>4} {row['share']:>6.1%}")
    print(f"(trial steps {args.trial_steps}, sweep steps {args.sweep_steps}, {args.workload} on {args.nproc} "
          f"process(es) under {args.device_memory})")
    share = statistics.median(r["share"] for r in rows)
    wall = statistics.median(r["wall"] for r in rows)
    line = f"RESULT overhead share={share:.3f} wall_s={wall:.1f}"
    if baseline:
        base_share = statistics.median(r["share"] for r in baseline)
        base_wall = statistics.median(r["wall"] for r in baseline)
        line += (f" baseline_share={base_share:.3f} baseline_wall_s={base_wall:.1f} "
                 f"wall_ratio={wall / base_wall:.3f}")
    print(f"{line} probes={rows[-1]['probes']}")

if __name__ == "__main__":
    main()
