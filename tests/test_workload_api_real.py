"""The Workload API on real processes: `advisor plan` end to end on a Hugging Face-style dict-batch model with 2
gloo processes, and a ceiling probed on the longest samples that survives a plain loop fed only those."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from advisor import load_recipe
from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.method import MethodSettings
from advisor.session import Session, validate_setup
from helpers import REPO, TEST_WORKLOADS

pytestmark = [pytest.mark.distributed, pytest.mark.slow, pytest.mark.usefixtures("no_leftover_processes")]
MIB = 2**20


def test_plan_on_a_dict_batch_model_ranks_by_its_own_metric_and_records_what_was_probed(tmp_path):
    out = tmp_path / "tagger.toml"
    run = subprocess.run([sys.executable, "-m", "advisor.cli", "plan", "--workload",
                          f"{TEST_WORKLOADS / 'tokens.py'}:tagger", "--nproc", "2", "--device-memory", "64MiB",
                          "--trial-steps", "6", "--sweep-steps", "24", "--sweep-seeds", "1", "--sweep-extensions", "0",
                          "--out", str(out)],  # long enough to learn: a sweep where nothing learned exits 3
                         capture_output=True, text=True, cwd=REPO, timeout=900)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "val token_accuracy" in run.stderr
    recipe = load_recipe(out)
    workload = recipe.data["workload"]
    assert workload["metric"] == "token_accuracy" and workload["higher_is_better"] is True
    assert "validation token_accuracy" in recipe.data["method"]["sweep_reason"]
    probed = workload["probed"]
    assert "longest training samples" in probed["samples"] and "longest 64, median 16" in probed["samples"]
    assert probed["shapes"]["input_ids"] == [probed["batch"], 64]  # padded to the longest sample by the collate
    sweep = [r for r in recipe.data["ledger"] if r["phase"] == "sweep" and r["status"] == "ok"]
    assert sweep and all(r["val_metric_name"] == "token_accuracy" and "token_accuracy" in r["val_metrics"]
                         for r in sweep)


def test_a_ceiling_probed_on_the_longest_samples_survives_fifty_steps_of_only_those(tmp_path):
    # The longest sample is 4x the median and rare (4 of 2000): random probe batches almost never meet it,
    # an epoch always does. Probed on random batches, this ceiling was far above what the longest batch holds.
    ddp = load_adapter("ddp")
    budget = 64 * MIB
    spec = f"{TEST_WORKLOADS / 'tokens.py'}:tagger_for_memory"
    settings = MethodSettings(workload=spec, adapter_name="ddp", nproc=1, device="cpu", memory_budget_bytes=budget,
                              workdir=str(REPO))
    with Session(ddp, settings, validate_setup(settings, ddp, HostDevices("cpu"))) as session:
        ceiling = session.ceiling()
    assert session.runner.probe_selection.kind == "longest"
    assert ceiling.smallest_oom is not None, "the budget should be tight enough to meet a real OOM"
    loop = subprocess.run([sys.executable, str(REPO / "tests" / "plain_loop.py"), spec, str(ceiling.per_device_max),
                           str(budget), "50", "longest"], capture_output=True, text=True,
                          env={**os.environ, **session.runner.env}, cwd=REPO, timeout=300)
    assert loop.returncode == 0, loop.stdout + loop.stderr
