"""`advisor plan` end to end with 2 gloo processes on a streaming workload (each rank reads its own share; the
epoch is the stated train_size) and on the Lightning example (its steps, logged metric and optimizer)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from advisor import load_recipe
from helpers import REPO, TEST_WORKLOADS

pytestmark = [pytest.mark.distributed, pytest.mark.slow, pytest.mark.usefixtures("no_leftover_processes")]


def plan(spec: str, out: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    # The subject is what the plan probed and ranked by, not the sweep's rule (tests/test_sweep_rule.py): one seed,
    # no growth past an end, and sweep runs long enough to learn (at 8 steps every candidate sat at chance, and a
    # sweep where nothing learned exits 3).
    return subprocess.run([sys.executable, "-m", "advisor.cli", "plan", "--workload", spec, "--nproc", "2",
                           "--device-memory", "64MiB", "--trial-steps", "6", "--sweep-steps", "24", "--sweep-seeds",
                           "1", "--sweep-extensions", "0", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=900, env={**os.environ, **(env or {})})


def test_plan_on_a_stream_gives_each_rank_its_own_samples_and_counts_epochs_by_train_size(tmp_path):
    seen = tmp_path / "seen"
    seen.mkdir()
    out = tmp_path / "stream.toml"
    run = plan(f"{TEST_WORKLOADS / 'stream.py'}:numbered_stream", out, {"ADVISOR_TEST_SEEN_DIR": str(seen)})
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    # Every 2-process job: rank 0 read the even sample numbers, rank 1 the odd ones (the advisor's split).
    jobs = {}
    for path in seen.glob("*.txt"):
        launcher, rank = path.stem.split("-")
        jobs.setdefault(launcher, {})[int(rank)] = {int(i) for i in path.read_text().split()}
    two_rank = [ranks for ranks in jobs.values() if len(ranks) == 2]
    assert two_rank, "no 2-process training job recorded what it read"
    for ranks in two_rank:
        assert all(i % 2 == 0 for i in ranks[0]) and all(i % 2 == 1 for i in ranks[1])
    recipe = load_recipe(out)
    assert recipe.data["workload"]["train_size"] == 960
    # The data caps count the stated 960 samples: 960 / 2 per device, and 10+ steps per epoch at 2 x 48.
    assert "960 samples / 2 process(es)" in recipe.data["ceiling"]["reason"]
    assert recipe.batch.per_device * 2 * 10 <= 960  # the steps-per-epoch cap held (its note shows only when it binds)
    assert recipe.data["workload"]["probed"]["samples"].startswith("batches as the stream yields them")
    assert "stream-probed-as-it-came" in {w["code"] for w in recipe.data["warnings"]}


def test_plan_on_the_lightning_example_ranks_by_what_validation_step_logs(tmp_path):
    out = tmp_path / "lightning.toml"
    run = plan(f"{REPO / 'examples' / 'lightning_module.py'}:workload", out)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "val val_acc" in run.stderr
    recipe = load_recipe(out)
    workload = recipe.data["workload"]
    assert (workload["name"], workload["metric"], workload["higher_is_better"]) == ("digits-lightning", "val_acc", True)
    assert "optimizer_factory" in recipe.data["optimizer"]["implementation"]  # configure_optimizers' AdamW ran
    assert recipe.data["optimizer"]["weight_decay"] == 0.01  # its first param group
    sweep = [r for r in recipe.data["ledger"] if r["phase"] == "sweep" and r["status"] == "ok"]
    assert sweep and all(r["val_metric_name"] == "val_acc" and {"val_acc", "val_loss"} <= set(r["val_metrics"])
                         for r in sweep)
