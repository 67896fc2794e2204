"""The ceiling search against Lightning's BatchSizeFinder and Accelerate's find_executable_batch_size.

    python bench/ceiling_search.py [--quick] [--runs 3] [--headroom 0.15]

Cells: a BatchNorm CNN (3x64x64) and a 2-layer Transformer encoder (seq 256) (bench/ceiling_workloads.py),
under 512 MiB and 1 GiB real CPU budgets, applied the probes' way: RLIMIT_DATA = the data segment once the
model and optimizer exist + the budget - the model's tensors (advisor/memory.py's rule, tests/plain_loop.py).
Every process runs with the recipe's [launch.env] (the CPU allocator setting), the competitors too, so all
of them face the same limit.

Contenders, each run timed from its own start to its answer:
- advisor: ``search_ceiling`` through a real JobRunner (DDP adapter, 1 process; probes fork from the probe
  server). What it found is the measured edge (the largest batch its probes ran), comparable with what the
  other finders report; what it advises keeps ``--headroom`` below that (default the product's 15%) and is
  the batch checked for 200 steps.
- lightning-power / lightning-binsearch: ``Tuner.scale_batch_size`` (3 steps a trial, from 2), in one fresh
  process per search, as a user runs it.
- accelerate: ``find_executable_batch_size`` from 1024, 3 steps a trial, in one fresh process.
- truth: the largest batch surviving 50 steps of a plain loop (tests/plain_loop.py), each batch in a fresh
  process, found by bisection between a batch that survives and one that does not (one-sample resolution,
  assuming survival falls with batch; near the edge it is a band, see ENVIRONMENT.md). Measured once a cell.

"survived": the advised batch survives 200 steps of the plain loop with only the recipe's [launch.env].
Accuracy is found / truth (for the advisor: its measured edge; advised_min: its advised batch / truth); ratios are advisor / lightning-binsearch (medians over the runs of all cells).
--quick: one model (the CNN) under 512 MiB, one run. The machine is shared: times are noisy.
Ends with: RESULT ceiling accuracy_min= accuracy_max= errors= survived=k/n time_ratio= trials_ratio= advised_min=
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = {"bn-cnn-64": f"{REPO / 'bench' / 'ceiling_workloads.py'}:bn_cnn_64",
             "transformer-256": f"{REPO / 'bench' / 'ceiling_workloads.py'}:transformer_256"}
BUDGETS = {"512MiB": 512 * 2**20, "1GiB": 2**30}
FINDERS = ("lightning-power", "lightning-binsearch", "accelerate")
TRIAL_STEPS = 3
ACCELERATE_START = 1024


def recipe_env() -> dict:
    from advisor.adapters import load_adapter

    env = dict(os.environ)
    env.update(load_adapter("ddp").environment("cpu"))
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def plain_loop_survives(spec: str, batch: int, budget: int, steps: int) -> bool:
    run = subprocess.run([sys.executable, str(REPO / "tests" / "plain_loop.py"), spec, str(batch), str(budget),
                          str(steps)], capture_output=True, text=True, env=recipe_env(), timeout=900)
    if run.returncode not in (0, 75):
        raise RuntimeError(f"plain loop at {batch} failed:\n{run.stderr[-2000:]}")
    return run.returncode == 0


def true_limit(spec: str, budget: int, hint: int) -> tuple[int, int]:
    """(largest batch surviving 50 steps, fresh processes used), by bracketing around ``hint`` then bisecting."""
    runs = 0
    low, high = 0, None
    probe = max(1, hint)
    while high is None:  # bracket: step up from the hint until a batch fails, down until one survives
        runs += 1
        if plain_loop_survives(spec, probe, budget, 50):
            low = probe
            probe = probe * 2
        else:
            high = probe
            if low == 0:
                while probe > 1:
                    probe //= 2
                    runs += 1
                    if plain_loop_survives(spec, probe, budget, 50):
                        low = probe
                        break
                    high = probe
                if low == 0:
                    return 0, runs
    while high - low > 1:
        mid = (low + high) // 2
        runs += 1
        if plain_loop_survives(spec, mid, budget, 50):
            low = mid
        else:
            high = mid
    return low, runs


def run_advisor(spec: str, budget: int, headroom: float) -> dict:
    from advisor.adapters import load_adapter
    from advisor.method.ceiling import search_ceiling
    from advisor.launch import CancelToken
    from advisor.method import MethodSettings
    from advisor.runner import JobRunner

    started = time.monotonic()
    settings = MethodSettings(workload=spec, adapter_name="ddp", nproc=1, device="cpu", memory_budget_bytes=budget,
                              workdir=str(REPO))
    runner = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken())
    try:
        result = search_ceiling(lambda b, p: runner.probe(b, p), budget, headroom=headroom)
    except Exception as exc:  # noqa: BLE001 - an error is a result of the benchmark
        return {"found": None, "trials": None, "seconds": time.monotonic() - started, "error": str(exc)[:200]}
    finally:
        runner.close()
    return {"found": result.largest_ok, "advised": result.per_device_max, "trials": len(result.trials),
            "seconds": time.monotonic() - started, "error": None}


def run_finder(finder: str, spec: str, budget: int) -> dict:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-finder-") as scratch:  # Lightning leaves checkpoints in its cwd
        run = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--finder", finder, spec, str(budget)],
                             capture_output=True, text=True, env=recipe_env(), timeout=1800, cwd=scratch)
    seconds = time.monotonic() - started
    line = next((l for l in reversed(run.stdout.splitlines()) if l.startswith("{")), None)
    if line is None:
        tail = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return {"found": None, "trials": None, "seconds": seconds, "error": f"exit {run.returncode}: {tail[:200]}"}
    return {**json.loads(line), "seconds": seconds}


# ------------------------------------------------------------------- the competitors, inside their own process


def _limit_memory(model, budget: int) -> None:
    import resource

    from advisor.memory import data_segment_bytes

    held = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    limit = data_segment_bytes() + budget - held
    resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.getrlimit(resource.RLIMIT_DATA)[1]))


def finder_main(finder: str, spec: str, budget: int) -> None:
    import torch

    from advisor.workload import resolve_workload

    torch.set_num_threads(1)
    torch.manual_seed(0)
    workload = resolve_workload(spec)
    x_all, y_all = workload.train_data.tensors
    trials = []
    try:
        if finder.startswith("lightning"):
            found = _lightning(finder.split("-", 1)[1], workload, budget, trials)
        else:
            found = _accelerate(workload, budget, trials, x_all, y_all)
        print(json.dumps({"found": found, "trials": len(trials), "error": None}))
    except Exception as exc:  # noqa: BLE001 - e.g. oneDNN's "could not create a primitive" is not seen as OOM
        print(json.dumps({"found": None, "trials": len(trials), "error": f"{type(exc).__name__}: "
                                                                          f"{str(exc).splitlines()[0][:160]}"}))


def _lightning(mode: str, workload, budget: int, trials: list) -> int:
    import lightning.pytorch as pl
    from lightning.pytorch.tuner import Tuner
    from torch.utils.data import DataLoader

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = workload.build_model()
            self.batch_size = 2

        def training_step(self, batch, _):
            return workload.batch_loss(self.model, batch)

        def configure_optimizers(self):
            return workload.make_optimizer(self.model.parameters(), workload.current_lr or 0.01)

        def train_dataloader(self):
            trials.append(self.batch_size)
            return DataLoader(workload.train_data, batch_size=self.batch_size, shuffle=True, drop_last=False)

    module = Module()
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    _limit_memory(module, budget)
    return Tuner(trainer).scale_batch_size(module, mode=mode, steps_per_trial=TRIAL_STEPS, init_val=2,
                                           max_trials=25)


def _accelerate(workload, budget: int, trials: list, x_all, y_all) -> int:
    import torch
    from accelerate.utils import find_executable_batch_size

    model = workload.build_model()
    optimizer = workload.make_optimizer(model.parameters(), workload.current_lr or 0.01)
    _limit_memory(model, budget)

    @find_executable_batch_size(starting_batch_size=ACCELERATE_START)
    def train(batch_size):
        trials.append(batch_size)
        for _ in range(TRIAL_STEPS):
            idx = torch.randint(0, len(x_all), (batch_size,))
            loss = workload.loss_fn(model(x_all[idx]), y_all[idx])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return batch_size

    return train()


# ----------------------------------------------------------------------------------------------------- report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the CNN under 512 MiB, one run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--headroom", type=float, default=0.15)
    parser.add_argument("--finder", nargs=3, metavar=("NAME", "SPEC", "BUDGET"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.finder:
        finder_main(args.finder[0], args.finder[1], int(args.finder[2]))
        return
    sys.path.insert(0, str(REPO))
    cells = [("bn-cnn-64", "512MiB")] if args.quick else [(m, b) for m in WORKLOADS for b in BUDGETS]
    runs = 1 if args.quick else args.runs
    rows, summary = [], {"accuracy": [], "advised": [], "errors": 0, "survived": 0, "checked": 0, "time": [], "trials": []}
    for model, budget_name in cells:
        spec, budget = WORKLOADS[model], BUDGETS[budget_name]
        results = {name: [] for name in ("advisor", *FINDERS)}
        for i in range(runs):
            results["advisor"].append(run_advisor(spec, budget, args.headroom))
            for finder in FINDERS:
                results[finder].append(run_finder(finder, spec, budget))
            for name, outcomes in results.items():  # as they come: a long run still shows what it measured
                r = outcomes[-1]
                print(f"# {model} {budget_name} run {i} {name}: found {r['found']} trials {r['trials']} "
                      f"{r['seconds']:.1f} s {r['error'] or ''}", flush=True)
        hint = next((r["found"] for r in results["advisor"] if r.get("found")), 64)
        truth, truth_runs = true_limit(spec, budget, hint)
        for name, outcomes in results.items():
            for i, r in enumerate(outcomes):
                survived = None
                if name == "advisor" and r.get("advised"):
                    survived = plain_loop_survives(spec, r["advised"], budget, 200)
                    print(f"# {model} {budget_name} run {i} advisor: advised {r['advised']} "
                          f"{'survived' if survived else 'did NOT survive'} 200 steps", flush=True)
                    summary["survived"] += survived
                    summary["checked"] += 1
                accuracy = r["found"] / truth if r["found"] and truth else None
                rows.append((model, budget_name, name, i, r["found"], r.get("advised"), truth, accuracy, r["trials"],
                             r["seconds"], r["error"], survived))
        for i, r in enumerate(results["advisor"]):
            binsearch = results["lightning-binsearch"][i]
            if r["error"]:
                summary["errors"] += 1
                continue
            summary["accuracy"].append(r["found"] / truth)
            summary["advised"].append(r["advised"] / truth)
            summary["time"].append(r["seconds"] / binsearch["seconds"])
            if binsearch["trials"]:
                summary["trials"].append(r["trials"] / binsearch["trials"])
        print(f"# {model} {budget_name}: truth {truth} ({truth_runs} fresh 50-step runs)", flush=True)
    print(f"{'model':<16} {'budget':<7} {'finder':<20} {'run':>3} {'found':>6} {'advised':>7} {'truth':>6} {'acc':>6} "
          f"{'trials':>6} {'seconds':>8} {'200 steps':>9}  error")
    for model, budget_name, name, i, found, advised, truth, acc, trials, seconds, error, survived in rows:
        print(f"{model:<16} {budget_name:<7} {name:<20} {i:>3} {found if found else '-':>6} {advised or '':>7} {truth:>6} "
              f"{f'{acc:.2f}' if acc else '-':>6} {trials if trials is not None else '-':>6} {seconds:>8.1f} "
              f"{'' if survived is None else ('ok' if survived else 'OOM'):>9}  {error or ''}")
    acc = summary["accuracy"]
    print(f"RESULT ceiling accuracy_min={min(acc) if acc else float('nan'):.2f} "
          f"accuracy_max={max(acc) if acc else float('nan'):.2f} errors={summary['errors']} "
          f"survived={summary['survived']}/{summary['checked']} "
          f"time_ratio={statistics.median(summary['time']) if summary['time'] else float('nan'):.2f} "
          f"trials_ratio={statistics.median(summary['trials']) if summary['trials'] else float('nan'):.2f} "
          f"advised_min={min(summary['advised']) if summary['advised'] else float('nan'):.2f}")


if __name__ == "__main__":
    main()
