"""Share of a headless `advisor plan`'s wall time spent outside training steps (launches, imports, builds).

    python bench/overhead.py [--workload digits-cnn] [--nproc 2] [--device-memory 48MiB] [--runs 1]

Runs the plan in a fresh subprocess and reads its recipe's ledger. Time inside training steps is what the
workers measured: each trial and sweep run's ``train_seconds`` (its steps and the loader's waits, evaluation
excluded) and each ceiling probe's measured step (``step_seconds``, two cycles a probe). Everything else of
the plan's wall time (process start-up, torchrun, `import torch`, model builds, rendezvous, evaluation, the
engine's own work) is overhead. Goal (issue 16): <= 25%. The machine is shared: numbers are noisy.
The steps default to the product's own (--trial-steps 40, --sweep-steps 200): a plan as users run it.
Ends with: RESULT overhead share=<median share> wall_s=<median wall> probes=<ceiling probes of the last run>
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from advisor.settings import PLAN_DEFAULTS  # noqa: E402

PROBE_CYCLES = 2  # run_probe runs max(2, steps) cycles with steps=2; the ledger keeps the measured one's time


def run_plan(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        out = Path(tmp) / "recipe.toml"
        argv = [sys.executable, "-m", "advisor.cli", "plan", "--workload", args.workload, "--adapter", "ddp",
                "--nproc", str(args.nproc), "--device-memory", args.device_memory, "--trial-steps",
                str(args.trial_steps), "--sweep-steps", str(args.sweep_steps), "--out", str(out), "--json"]
        started = time.monotonic()
        run = subprocess.run(argv, capture_output=True, text=True)
        wall = time.monotonic() - started
        if run.returncode != 0:
            sys.exit(f"the plan failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
        ledger = tomllib.loads(out.read_text())["ledger"]
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
    args = parser.parse_args()
    rows = [run_plan(args) for _ in range(args.runs)]
    print(f"{'run':>3} {'wall s':>8} {'in steps s':>10} {'probes':>6} {'probe s':>8} {'runs':>4} {'share':>6}")
    for i, r in enumerate(rows):
        print(f"{i:>3} {r['wall']:>8.1f} {r['steps']:>10.2f} {r['probes']:>6} {r['probe_seconds']:>8.1f} "
              f"{r['runs']:>4} {r['share']:>6.1%}")
    print(f"(trial steps {args.trial_steps}, sweep steps {args.sweep_steps}, {args.workload} on {args.nproc} "
          f"process(es) under {args.device_memory})")
    share = statistics.median(r["share"] for r in rows)
    wall = statistics.median(r["wall"] for r in rows)
    print(f"RESULT overhead share={share:.3f} wall_s={wall:.1f} probes={rows[-1]['probes']}")


if __name__ == "__main__":
    main()
