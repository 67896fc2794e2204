"""`advisor plan` end to end: real probes, real 2-process trials and sweep, a recipe on disk."""

import json
import subprocess
import sys

import pytest

from advisor import load_recipe
from conftest import REPO

pytestmark = [pytest.mark.distributed, pytest.mark.usefixtures("no_leftover_processes")]


def plan(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "advisor.cli", "plan", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=900)


def test_plan_with_a_global_target_that_needs_accumulation(tmp_path):
    out = tmp_path / "cnn.toml"
    run = plan("--workload", "digits-cnn", "--nproc", "2", "--device-memory", "48MiB", "--global-batch", "256",
               "--trial-steps", "8", "--sweep-steps", "12", "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    recipe = load_recipe(out)
    ceiling = summary["ceiling"]
    assert ceiling["trials"] >= 4 and ceiling["smallest_oom"] > ceiling["largest_ok"] >= ceiling["per_device_max"]
    # The global target does not fit in 2 devices: the plan accumulates, keeping per-device at the ceiling.
    assert summary["per_device_batch"] == ceiling["per_device_max"] == recipe.batch.per_device
    assert summary["accumulation_steps"] == recipe.batch.accumulation_steps > 1
    assert summary["global_batch"] == recipe.batch.global_ >= 256
    assert summary["world_size"] == 2 and summary["recipe"] == str(out)
    # LR: SGD scaled linearly from the workload's base (0.02 at 64).
    assert recipe.lr.rule == "linear" and recipe.lr.value == pytest.approx(0.02 * recipe.batch.global_ / 64)
    assert recipe.warmup.steps >= 1 and summary["warmup_steps"] == recipe.warmup.steps
    phases = {row["phase"] for row in recipe.data["ledger"]}
    assert phases == {"ceiling", "trial", "sweep"}
    assert any(row["status"] == "oom" for row in recipe.data["ledger"])
    sweep = [row for row in recipe.data["ledger"] if row["phase"] == "sweep" and row["status"] == "ok"]
    assert sweep and all("val_metric" in row and "throughput" in row and row["loss_curve"] for row in sweep)
    assert {"accumulation-high", "amp-before-shrinking"} & {w["code"] for w in recipe.data["warnings"]}
    assert "Traceback" not in run.stderr and "== 1. memory ceiling" in run.stderr

    # A second run never overwrites the recipe without --force; the check happens before any work.
    again = plan("--workload", "digits-cnn", "--device-memory", "48MiB", "--out", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr and "Nothing was run" in again.stderr
    assert load_recipe(out).batch.per_device == recipe.batch.per_device

    import shlex

    launch = shlex.split(recipe.data["launch"]["example"])  # generated commands are shell-quoted
    assert launch[0] == "torchrun" and f"--batch-size={recipe.batch.per_device}" in launch
    assert shlex.split(recipe.data["provenance"]["command"])[:2] == ["advisor", "plan"]

    check = subprocess.run([sys.executable, "-m", "advisor.cli", "check", str(out)], capture_output=True, text=True)
    assert check.returncode == 0 and "OK" in check.stdout


def test_plan_on_the_default_workload_writes_a_human_summary(tmp_path):
    out = tmp_path / "mlp.toml"
    run = plan("--workload", "digits-mlp", "--nproc", "2", "--device-memory", "64MiB", "--trial-steps", "8",
               "--sweep-steps", "40", "--out", str(out))
    assert run.returncode == 0, run.stderr
    for text in ("per-device batch", "global batch", "learning rate", "1. Ceiling", "4. Sweep", "Recipe written"):
        assert text in run.stdout
    recipe = load_recipe(out)
    assert recipe.batch.accumulation_steps == 1  # no global target: the sweep's winner fits, no accumulation
    assert recipe.lr.rule in ("sqrt", "unchanged")  # Adam: square-root scaling
    assert recipe.data["provenance"]["torch_version"] and recipe.data["ceiling"]["trials"] >= 4
