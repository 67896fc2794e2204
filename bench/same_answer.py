"""The same host, the same answer: N fresh plans of one command, and whether they agree.

Runs ``advisor plan ... --fresh --no-history --json`` N times, one after another (the default is `make run`'s
command: digits-cnn, ddp, 2 processes, 1 GiB), and prints each plan's per-device batch, LR, the range its sweep
compared, its trial's pick, its wall time and the machine's load average before it ran; then whether every plan
gave the same per-device batch and LR. Each plan's JSON and recipe are kept under --keep (default: a temporary
folder, printed) so a disagreement can be read with `advisor explain`.

A benchmark, not a timed test: one digits-cnn plan takes ~5 minutes on a quiet 2-core machine.

    python bench/same_answer.py --plans 5                 # the issue's goal: five quiet plans, one answer
    python bench/same_answer.py --plans 2 --keep runs/same  # keep the recipes
    python bench/same_answer.py --plans 2 -- --workload digits-mlp --nproc 2   # another command

Exit status: 0 when every plan agreed, 1 when they did not, 2 when a plan failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAKE_RUN_ARGS = ["--workload", "digits-cnn", "--adapter", "ddp", "--nproc", "2", "--device-memory", "1GiB"]


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def advisor_command() -> list[str]:
    """The advisor of this checkout (its folder first on the path), run by this Python."""
    return [sys.executable, "-c", "import sys; from advisor.cli import main; sys.exit(main())"]


def one_plan(index: int, plan_args: list[str], keep: Path, timeout: float) -> dict:
    out = keep / f"plan{index}.toml"
    command = advisor_command() + ["plan", *plan_args, "--fresh", "--no-history", "--json", "--out", str(out),
                                   "--force"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    load = load_average()
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    seconds = time.monotonic() - began
    (keep / f"plan{index}.stdout.json").write_text(done.stdout)
    (keep / f"plan{index}.stderr.txt").write_text(done.stderr)
    row = {"plan": index, "seconds": round(seconds), "load_before": load, "load_after": load_average(),
           "rc": done.returncode}
    if done.returncode != 0:
        row["error"] = (done.stderr.strip().splitlines() or ["(no message)"])[-1][:200]
        return row
    row.update(answer_of(out))
    return row


def answer_of(recipe: Path) -> dict:
    """What the plan advised and what it compared to get there, from the recipe it wrote."""
    import tomllib

    data = tomllib.loads(recipe.read_text())
    method, sweep = data.get("method", {}), data.get("method", {}).get("sweep", {})
    return {"per_device": data["batch"]["per_device"], "global": data["batch"]["global"],
            "lr": data["lr"]["value"], "start": method.get("start_value"), "trial": method.get("trial_choice"),
            "swept": sweep.get("candidates"), "rule": sweep.get("rule"), "tied": sweep.get("tied"),
            "validated": not method.get("headline")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plans", type=int, default=5, help="how many fresh plans (default 5)")
    parser.add_argument("--keep", type=Path, help="folder for the recipes and outputs (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one plan may take (default 1800)")
    parser.add_argument("plan_args", nargs="*", help="after --: the plan's arguments (default: make run's)")
    args = parser.parse_args(argv)
    if args.plans < 1:
        print("--plans must be at least 1.", file=sys.stderr)
        return 2
    keep = args.keep or Path(tempfile.mkdtemp(prefix="same-answer-"))
    keep.mkdir(parents=True, exist_ok=True)
    plan_args = args.plan_args or MAKE_RUN_ARGS
    print(f"{args.plans} fresh plan(s) of: advisor plan {' '.join(plan_args)}  (outputs in {keep}; "
          f"{os.cpu_count()} CPUs)", flush=True)
    rows = []
    for index in range(1, args.plans + 1):
        try:
            row = one_plan(index, plan_args, keep, args.timeout)
        except subprocess.TimeoutExpired:
            row = {"plan": index, "rc": "timeout", "error": f"over {args.timeout:.0f} s"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    failed = [r for r in rows if r.get("rc") != 0]
    answers = {(r["per_device"], r["lr"]) for r in rows if r.get("rc") == 0}
    print()
    print(f"{'plan':>4} {'load before':>16} {'seconds':>7} {'start':>5} {'trial':>5} {'swept':>16} "
          f"{'per-device':>10} {'LR':>8}")
    for r in rows:
        if r.get("rc") != 0:
            print(f"{r['plan']:>4} failed: {r.get('error')}")
            continue
        print(f"{r['plan']:>4} {r['load_before']:>16} {r['seconds']:>7} {r['start']!s:>5} {r['trial']!s:>5} "
              f"{','.join(map(str, r['swept'] or [])):>16} {r['per_device']:>10} {r['lr']:>8.4g}")
    if failed:
        print(f"{len(failed)} plan(s) failed: see {keep}")
        return 2
    if len(answers) == 1:
        per_device, lr = answers.pop()
        print(f"AGREE: all {len(rows)} plans advise {per_device} per device at LR {lr:.4g}.")
        return 0
    print(f"DISAGREE: {len(answers)} different answers: "
          + "; ".join(f"{b} per device at LR {lr:.4g}" for b, lr in sorted(answers)))
    if not args.keep:
        print(f"(recipes kept in {keep}: advisor explain {keep}/plan1.toml)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
