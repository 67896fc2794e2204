"""Does the advice hold outside the tool? `advisor plan` on workloads the rules were not tuned on, then the
advised setting in a plain loop.

    python bench/advice_check.py [--steps 200] [--workload SPEC ...] [--plan-args "..."]

For each workload: `advisor plan --fresh` on 2 gloo processes (the defaults unless --plan-args), then a plain
single-process loop (no advisor code on the training path: the workload's model, data, optimizer and loss) at
the advised global batch (per-device x world x accumulation, one process: the same averaged gradient as DDP
without BatchNorm), the advised LR with a linear warmup over the advised warmup steps, for --steps steps. The
loop's loss curve is judged by the product's health verdict (advisor.method.health: learned / unstable / flat).

Ends with one line per workload and: RESULT advice_check unstable=<n> flat=<n> of=<n>. Exit 1 if any advised
setting was unstable in the plain loop.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

HELDOUT = [f"{REPO / 'bench' / 'heldout_workloads.py'}:gru_sequences",
           f"{REPO / 'tests' / 'workloads' / 'tokens.py'}:tagger",
           f"{REPO / 'tests' / 'workloads' / 'small_data.py'}:tiny_142"]


def plan(spec: str, extra: list[str], out: Path) -> tuple[dict, int, float]:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "advisor.cli", "plan", "--workload", spec, "--nproc", "2",
                          "--out", str(out), "--json", "--fresh", "--no-history", *extra],
                         capture_output=True, text=True, cwd=REPO, timeout=3600)
    if run.returncode not in (0, 3):
        sys.exit(f"advisor plan {spec} failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
    from advisor.recipe import read_recipe_data

    return read_recipe_data(out)[0], run.returncode, time.monotonic() - started


def plain_loop(spec: str, global_batch: int, lr: float, warmup: int, steps: int) -> dict:
    """The advised setting in a plain loop; the loss every steps // 20 steps and the end's validation."""
    import torch
    from torch.utils.data import DataLoader

    from advisor.method.health import judge
    from advisor.ledger import TrialRecord
    from advisor.workload import resolve_workload

    torch.manual_seed(0)
    workload = resolve_workload(spec)
    model = workload.build_model()
    optimizer = workload.make_optimizer(model.parameters(), lr)
    loader = DataLoader(workload.train_data, batch_size=global_batch, shuffle=True, drop_last=True,
                        collate_fn=workload.collate_fn, generator=torch.Generator().manual_seed(0))
    losses, step, every = [], 0, max(1, steps // 20)
    while step < steps:
        for batch in loader:
            for group in optimizer.param_groups:
                group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
            loss = workload.batch_loss(model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % every == 0 or step == steps - 1:
                losses.append(float(loss.detach()))
            step += 1
            if step >= steps:
                break
    model.eval()
    val_loss, metrics = [], []
    with torch.no_grad():
        for batch in DataLoader(workload.val_data, batch_size=256, collate_fn=workload.collate_fn):
            value, metric = workload.eval_batch(model, batch)
            val_loss.append(value)
            metrics.append(metric)
    record = TrialRecord("plain", global_batch, 1, 1, global_batch, "ok", 0.0, losses=losses, final_loss=losses[-1],
                         val_loss=sum(val_loss) / len(val_loss))
    verdict = judge(record)
    names = sorted({k for m in metrics for k in m})
    return {"verdict": verdict.verdict, "why": verdict.reason, "first_loss": losses[0], "last_loss": losses[-1],
            "val_loss": record.val_loss, **{f"val_{n}": sum(m[n] for m in metrics) / len(metrics) for n in names}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--workload", action="append", help="a workload spec (default: the held-out three)")
    parser.add_argument("--plan-args", default="--device-memory 256MiB", help="extra `advisor plan` arguments")
    args = parser.parse_args()
    results = []
    for spec in args.workload or HELDOUT:
        with tempfile.TemporaryDirectory() as tmp:
            recipe, code, seconds = plan(spec, shlex.split(args.plan_args), Path(tmp) / "r.toml")
        batch, lr, warmup = recipe["batch"], recipe["lr"]["value"], recipe["warmup"]["steps"]
        global_batch = batch["global"]
        sweep = recipe["method"].get("sweep", {})
        print(f"{Path(spec).name}: plan {seconds:.0f} s, exit {code}; {batch['per_device']} per device x "
              f"{batch['world_size']} x {batch['accumulation_steps']} = {global_batch}, LR {lr:.4g}, warmup "
              f"{warmup}; sweep {sweep.get('rule')} ({sweep.get('verdict')}), tied {sweep.get('tied')}", flush=True)
        loop = plain_loop(spec, global_batch, lr, warmup, args.steps)
        print(f"   plain loop {args.steps} steps: {loop['verdict']} ({loop['why']}); "
              + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in loop.items()
                            if k not in ("verdict", "why")}), flush=True)
        results.append(loop["verdict"])
    unstable, flat = results.count("unstable"), results.count("flat")
    print(f"RESULT advice_check unstable={unstable} flat={flat} of={len(results)}")
    return 1 if unstable else 0


if __name__ == "__main__":
    sys.exit(main())
