"""The three built-in adapters, each with 2 real CPU processes: ceiling probe, trial, sweep; the same job's
loss curve through each (accumulation cadence and loss scaling agree); and `advisor plan` through DeepSpeed
with LAMB whose exported config DeepSpeed accepts."""

import json
import subprocess
import sys

import pytest

from advisor.adapters import load_adapter
from advisor.launch import CancelToken
from advisor.method import MethodSettings
from advisor.runner import JobRunner
from helpers import REPO

pytestmark = [pytest.mark.distributed, pytest.mark.usefixtures("no_leftover_processes")]
ADAPTERS = ("ddp", "accelerate", "deepspeed")


def runner_for(adapter: str, **kw) -> JobRunner:
    settings = MethodSettings(workload="digits-mlp", adapter_name=adapter, nproc=2, device="cpu",
                              memory_budget_bytes=512 * 2**20, workdir=str(REPO), trial_timeout_s=300,
                              idle_timeout_s=120, collective_timeout_s=60, **kw)
    return JobRunner(load_adapter(adapter), settings, lambda event: None, CancelToken())


@pytest.fixture(scope="module")
def same_trial():
    """One trial (SGD, 2 x 16 per device x 2 accumulation, 6 steps) through each adapter."""
    records = {}
    for adapter in ADAPTERS:
        with runner_for(adapter, optimizer="sgd") as runner:  # closed: its warm workers end with the trial
            records[adapter] = (runner, runner.train("trial", 16, 6, lr=0.05, accumulation=2))
    return records


@pytest.mark.slow
def test_each_adapter_trains_the_same_job_to_the_same_losses(same_trial):
    # SGD is scale-sensitive: a loss divided twice by the accumulation count would halve the step.
    curves = {name: record.losses for name, (_, record) in same_trial.items()}
    for name, (runner, record) in same_trial.items():
        assert record.status == "ok" and record.world_size == 2 and record.global_batch == 64, name
        assert record.peak_bytes > 0 and record.step_seconds > 0, name
        assert runner.optimizer_info["implementation"].startswith("torch.optim"), name
    for name in ("accelerate", "deepspeed"):
        assert curves[name] == pytest.approx(curves["ddp"], rel=1e-4), name
    # The closing note's comparison: same workload, batch and run.
    print("\nadapter     step ms   peak bytes   samples/s")
    for name, (_, record) in same_trial.items():
        print(f"{name:<11} {record.step_seconds * 1000:7.1f}   {record.peak_bytes:10d}   {record.throughput:9.0f}")


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_ceiling_probe_runs_through_each_adapter(adapter):
    with runner_for(adapter, adapter_options={"zero_stage": 2} if adapter == "deepspeed" else {}) as runner:
        trial = runner.probe(64, "test")
    assert trial.status == "ok" and trial.peak_bytes > 0 and trial.breakdown
    # ZeRO 2 shards state over the processes and Accelerate wraps DDP only with more than one process (on
    # CUDA): their probes run with the plan's 2; DDP's wraps (and measures its buckets) with one.
    assert runner.ledger[-1].world_size == (1 if adapter == "ddp" else 2)


@pytest.mark.slow
@pytest.mark.parametrize("adapter, optimizer", [("ddp", "lars"), ("accelerate", "lamb"), ("deepspeed", "lamb")])
def test_sweep_run_with_layerwise_optimizer_and_bf16(adapter, optimizer):
    with runner_for(adapter, optimizer=optimizer) as runner:
        record = runner.train("sweep", 32, 6, lr=0.01, evaluate=True, eval_points=2, precision="bf16")
    assert record.status == "ok" and 0 <= record.val_metric <= 1 and len(record.evals) == 2
    implementation = runner.optimizer_info["implementation"]
    assert implementation.startswith("pytorch_optimizer.LARS" if optimizer == "lars" else "advisor.optimizers.Lamb")


@pytest.mark.slow
def test_plan_through_deepspeed_with_lamb_exports_a_config_deepspeed_accepts(tmp_path):
    from helpers import deepspeed_accepts

    out = tmp_path / "recipe.toml"
    advisor = [sys.executable, "-m", "advisor.cli"]
    plan = subprocess.run([*advisor, "plan", "--workload", "digits-mlp", "--adapter", "deepspeed", "--optimizer",
                           "lamb", "--nproc", "2", "--device-memory", "1GiB", "--trial-steps", "4", "--sweep-steps",
                           "24", "--sweep-seeds", "1", "--sweep-extensions", "0", "--base-lr", "0.02", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    # LAMB from the workload's 1e-3 stays at chance in 24 steps (no candidate learned: exit 3); from 0.02 it learns.
    assert plan.returncode == 0, plan.stderr[-2000:]
    from advisor.recipe import check_recipe

    data = check_recipe(out)
    assert data["adapter"]["name"] == "deepspeed" and data["adapter"]["zero_stage"] == 0  # LAMB: whole tensors
    assert "trust ratio" in data["adapter"]["zero_stage_reason"]
    assert data["lr"]["optimizer"] == "lamb" and data["lr"]["rule"] in ("sqrt", "unchanged")
    assert data["lr"]["optimizer_implementation"].startswith("advisor.optimizers.Lamb")
    exported = subprocess.run([*advisor, "export", str(out), "--to", "deepspeed"], capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    config = json.loads(exported.stdout)
    parsed = deepspeed_accepts(config, data["batch"]["world_size"])
    assert parsed.train_batch_size == data["batch"]["global"] and parsed.optimizer_name == "lamb"
    assert parsed.optimizer_params["lr"] == pytest.approx(data["lr"]["value"])
