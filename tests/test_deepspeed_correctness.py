"""The DeepSpeed adapter's answers are right, not just accepted: LAMB keeps its per-tensor trust ratio (stage 0,
DeepSpeed's own flattening pinned), the workload's optimizer hyper-parameters reach DeepSpeed's optimizer and
every export, fp16 inputs meet fp16 weights, fused ops are checked before they are built, heartbeats keep a
long build from looking like a hang, ZeRO-3 evaluation does not deadlock, and exported configs go through a
real ``deepspeed.initialize``."""

import json
import os
import subprocess
import sys

import pytest

from advisor.adapters import load_adapter
from advisor.errors import ExportError, SetupError, TrialError
from advisor.export import deepspeed_config, export_recipe
from advisor.launch import CancelToken, run_job
from advisor.method import MethodSettings
from advisor.runner import JobRunner
from helpers import REPO, TEST_WORKLOADS
from helpers import deepspeed_accepts, export_recipe_data

SCRIPTS = REPO / "tests" / "deepspeed_scripts"


def _settings(**kw) -> MethodSettings:
    base = dict(workload="digits-mlp", adapter_name="deepspeed", nproc=2, device="cpu",
                memory_budget_bytes=512 * 2**20, workdir=str(REPO), trial_timeout_s=300, idle_timeout_s=120,
                collective_timeout_s=60)
    return MethodSettings(**{**base, **kw})


def _script_env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_CPP_LOG_LEVEL": "ERROR",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


# -- item 1: LAMB/LARS and the ZeRO stage -----------------------------------------------------------------------

def test_lamb_and_lars_plan_zero_stage_0_and_say_why():
    adapter = load_adapter("deepspeed")
    for optimizer in ("lamb", "lars"):
        for precision in ("fp32", "bf16", "fp16"):
            options = adapter.plan_options({}, optimizer, precision)
            assert options["zero_stage"] == 0 and "trust ratio" in options["zero_stage_reason"]
            assert "trust ratio" in adapter.recipe_extras(options)["zero_stage_reason"]
    assert adapter.plan_options({}, "adamw", "bf16")["zero_stage"] == 2
    assert adapter.plan_options({"zero_stage": 0}, "lamb", "fp32")["zero_stage"] == 0


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_explicit_zero_stage_with_lamb_is_refused_before_any_process(stage):
    from advisor.device import HostDevices
    from advisor.session import validate_setup

    adapter = load_adapter("deepspeed")
    with pytest.raises(SetupError) as err:
        adapter.plan_options({"zero_stage": stage}, "lamb", "fp32")
    assert f"--zero-stage {stage}" in str(err.value) and "per parameter tensor" in str(err.value)
    assert "--zero-stage 0" in str(err.value) and "replicated" in str(err.value)  # the trade-off, named
    settings = _settings(optimizer="lamb", adapter_options={"zero_stage": stage})
    host = HostDevices("cpu", cpu_count=4)
    with pytest.raises(SetupError) as err:
        validate_setup(settings, adapter, host)
    assert "Nothing was run" in str(err.value) and "trust ratio" in str(err.value)


def test_lamb_export_runs_at_stage_0_without_the_untested_optimizer_switch():
    data = export_recipe_data(optimizer="lamb", precision="fp16", zero_stage=None)
    del data["adapter"]["zero_stage"]
    text, notes = export_recipe(data, "deepspeed")
    config = json.loads(text)
    assert config["zero_optimization"]["stage"] == 0 and "zero_allow_untested_optimizer" not in config
    assert any("trust ratio" in note for note in notes)
    with pytest.raises(ExportError, match="per parameter tensor"):
        export_recipe(export_recipe_data(optimizer="lamb", zero_stage=2), "deepspeed")
    with pytest.raises(ExportError, match="per parameter tensor"):
        deepspeed_config(8, 1, 2, "lamb", 0.01, 0, "fp32", 1, "cpu", client_optimizer=True)


# -- item 10: the optimizer's hyper-parameters -------------------------------------------------------------------

def test_every_export_carries_the_optimizers_hyperparameters():
    from torch.distributed.run import get_args_parser

    data = export_recipe_data(optimizer="sgd", precision="fp32", zero_stage=1)
    data["optimizer"] = {"name": "sgd", "momentum": 0.8, "weight_decay": 0.05}
    config = json.loads(export_recipe(data, "deepspeed")[0])
    parsed = deepspeed_accepts(config, 4)
    assert parsed.optimizer_params["momentum"] == 0.8 and parsed.optimizer_params["weight_decay"] == 0.05
    accelerate, _ = export_recipe(data, "accelerate")
    assert "momentum 0.8, weight_decay 0.05" in accelerate
    line, _ = export_recipe(data, "torchrun")
    args = get_args_parser().parse_args(line.split()[2:] if line.startswith("env") else line.split()[1:])
    assert "--momentum=0.8" in args.training_script_args and "--weight-decay=0.05" in args.training_script_args
    adam = export_recipe_data(optimizer="adamw")
    adam["optimizer"] = {"name": "adamw", "betas": [0.85, 0.98], "eps": 1e-6, "weight_decay": 0.1}
    params = deepspeed_accepts(json.loads(export_recipe(adam, "deepspeed")[0]), 4).optimizer_params
    assert params["betas"] == [0.85, 0.98] and params["eps"] == 1e-6 and params["weight_decay"] == 0.1
    old = export_recipe_data(optimizer="sgd")  # a recipe from before [optimizer]: defaults, and a note that says so
    del old["optimizer"]
    assert any("records no optimizer hyper-parameters" in n for n in export_recipe(old, "deepspeed")[1])


def test_workload_hyperparameters_reach_the_optimizer_it_builds():
    import torch

    from advisor.workload import resolve_workload

    workload = resolve_workload(f"{TEST_WORKLOADS / 'odd_val.py'}:odd_val")
    assert workload.optimizer_hyperparameters() == {"momentum": 0.8, "weight_decay": 0.05}
    workload.optimizer, workload.betas, workload.eps = "adamw", (0.8, 0.9), 1e-5
    group = workload.make_optimizer([torch.zeros(2, requires_grad=True)], 0.01).param_groups[0]
    assert group["betas"] == (0.8, 0.9) and group["eps"] == 1e-5 and group["weight_decay"] == 0.05


# -- item 4: fp16 inputs -----------------------------------------------------------------------------------------

def test_fp16_inputs_are_cast_and_the_config_auto_casts():
    import torch

    from advisor_adapters.deepspeed_worker import DeepSpeedStrategy

    config = deepspeed_config(8, 1, 4, "adamw", 0.01, 0, "fp16", 2, "cuda")
    parsed = deepspeed_accepts(config, 4)
    assert parsed.float16_config.enabled and parsed.float16_config.auto_cast  # DeepSpeed casts forward inputs
    exported = deepspeed_accepts(json.loads(export_recipe(export_recipe_data(precision="fp16"), "deepspeed")[0]), 4)
    assert exported.float16_config.auto_cast
    strategy = DeepSpeedStrategy()
    strategy.low_precision = {"bf16": torch.bfloat16, "fp16": torch.float16}["fp16"]
    inputs, targets = strategy.cast_inputs((torch.randn(4, 8), torch.tensor([0, 1, 0, 1])))
    assert inputs.dtype == torch.float16 and targets.dtype == torch.int64  # labels stay integers
    layer = torch.nn.Linear(8, 2).half()  # what DeepSpeed does to the weights under fp16
    assert layer(inputs).dtype == torch.float16
    with pytest.raises(RuntimeError):  # the crash an uncast batch met
        layer(torch.randn(4, 8))


# -- item 14: fused ops and heartbeats ---------------------------------------------------------------------------

def test_fused_ops_are_checked_with_deepspeeds_own_builders_and_fall_back_to_torch():
    from deepspeed.ops.op_builder.fused_adam import FusedAdamBuilder
    from deepspeed.ops.op_builder.fused_lamb import FusedLambBuilder

    from advisor_adapters.deepspeed_worker import fused_op_usable, fused_ops_for

    # DeepSpeed's CUDA builders on a host without a CUDA toolkit: not prebuilt, and nvcc is missing to JIT them.
    for builder in (FusedAdamBuilder(), FusedLambBuilder()):
        usable, why = fused_op_usable(builder, "cuda")
        assert not usable and "cannot be JIT-compiled" in why and builder.NAME in why
    assert fused_ops_for("adamw", "cpu")[0] is False and fused_ops_for("lars", "cuda")[0] is False
    slow = deepspeed_config(8, 1, 2, "adamw", 0.01, 0, "bf16", 2, "cuda", fused_ops=False)
    assert slow["optimizer"]["params"]["torch_adam"] is True
    fast = deepspeed_config(8, 1, 2, "adamw", 0.01, 0, "bf16", 2, "cuda", fused_ops=True)
    assert "torch_adam" not in fast["optimizer"]["params"]
    # The recipe's record of a fallback reaches the export: the user's run does not try to build the op.
    data = export_recipe_data(optimizer="adamw", device="cuda")
    data["adapter"].update(fused_ops=False, fused_ops_reason="fused_adam is not prebuilt and cannot be JIT-compiled")
    text, notes = export_recipe(data, "deepspeed")
    assert json.loads(text)["optimizer"]["params"]["torch_adam"] is True and any("fused_adam" in n for n in notes)


HEARTBEAT_JOB = """
import contextlib
import time
from advisor.worker import emit
from advisor_adapters.deepspeed_worker import heartbeat
emit("started", rank=0)  # after the imports (torch): the idle clock runs from here
with {block}:
    time.sleep(12)
emit("result", rank=0)
"""


@pytest.mark.slow  # two real 12-second waits, by design
def test_heartbeats_keep_a_long_build_from_tripping_the_idle_timeout(tmp_path):
    from advisor.job import TrialJob

    job = TrialJob(kind="probe", workload="x", per_device_batch=1, workdir=str(REPO))

    def run(block):
        script = HEARTBEAT_JOB.format(block=block)
        return run_job(lambda path, n: [sys.executable, "-c", script], job, 1, timeout_s=90, idle_timeout_s=6)

    outcome = run("heartbeat('building', every_s=0.5)")
    assert outcome.first("result") and outcome.all("heartbeat")
    with pytest.raises(TrialError, match="made no progress"):
        run("contextlib.nullcontext()")  # the same wait without heartbeats


# -- real DeepSpeed ----------------------------------------------------------------------------------------------

PIN_FLATTENING = """
import json, os, torch, deepspeed
for k, v in dict(MASTER_ADDR="127.0.0.1", MASTER_PORT="29657", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0").items():
    os.environ.setdefault(k, v)
deepspeed.init_distributed(dist_backend="gloo")
from advisor.optimizers import Lamb
shapes = {}
for stage, precision in [(0, "fp32"), (0, "bf16"), (1, "fp32"), (2, "bf16")]:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    config = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": stage},
              "bf16": {"enabled": precision == "bf16"}, "zero_allow_untested_optimizer": True}
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=Lamb(model.parameters(), lr=1e-3),
                                                  config=config)
    inner = getattr(optimizer, "optimizer", optimizer)
    shapes[f"{stage}-{precision}"] = [type(optimizer).__name__, [list(p.shape) for g in inner.param_groups
                                                                 for p in g["params"]]]
configs = json.loads(os.environ["EXPORTED_CONFIGS"])
ran = []
for config in configs:  # each exported config through a real initialize and one training step
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    dtype = torch.bfloat16 if config["bf16"]["enabled"] else torch.float32
    loss = engine(torch.randn(config["train_micro_batch_size_per_gpu"], 8, dtype=dtype)).float().pow(2).mean()
    engine.backward(loss)
    engine.step()
    ran.append(config["zero_optimization"]["stage"])
print("RESULT " + json.dumps({"shapes": shapes, "ran": ran}), flush=True)
os._exit(0)
"""


@pytest.mark.slow
@pytest.mark.distributed
def test_deepspeeds_own_code_flattens_at_zero_1_2_not_at_0_and_exported_configs_initialize():
    configs = []
    for optimizer, precision, stage in (("sgd", "fp32", 0), ("adamw", "bf16", 2), ("adam", "fp32", 3)):
        data = export_recipe_data(optimizer=optimizer, precision=precision, zero_stage=stage, world=1, device="cpu")
        configs.append(json.loads(export_recipe(data, "deepspeed")[0]))
    done = subprocess.run([sys.executable, "-c", PIN_FLATTENING], capture_output=True, text=True, timeout=600,
                          env={**_script_env(), "EXPORTED_CONFIGS": json.dumps(configs)})
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(line[len("RESULT "):])
    whole = [[16, 8], [16], [4, 16], [4]]
    # Stage 0 keeps one fp32 master per tensor in fp32 and bf16 alike (FP16_UnfusedOptimizer for bf16) ...
    assert result["shapes"]["0-fp32"] == ["Lamb", whole]
    assert result["shapes"]["0-bf16"] == ["FP16_UnfusedOptimizer", whole]
    # ... ZeRO 1/2 hand the optimizer one flat partition: a per-tensor trust ratio would be a per-rank one.
    assert result["shapes"]["1-fp32"] == ["DeepSpeedZeroOptimizer", [[212]]]
    assert result["shapes"]["2-bf16"] == ["DeepSpeedZeroOptimizer", [[212]]]
    assert result["ran"] == [0, 2, 3]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("world", [1, 2])
def test_lamb_trust_ratios_inside_deepspeed_are_the_per_tensor_ones(tmp_path, world):
    runner = JobRunner(load_adapter("deepspeed"), _settings(optimizer="lamb", nproc=world), lambda e: None,
                       CancelToken())
    job = runner._job(kind="train", per_device_batch=8, steps=1, lr=0.01)
    path = tmp_path / "job.json"
    path.write_text(job.to_json())
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                           f"--nproc-per-node={world}", str(SCRIPTS / "lamb_trust_ratios.py"), str(path)],
                          capture_output=True, text=True, timeout=600, env=_script_env(), cwd=tmp_path)
    line = next((l for l in done.stdout.splitlines() if "RESULT " in l), None)
    assert line, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(line[line.index("RESULT ") + len("RESULT "):])
    assert result["world"] == world and result["zero_stage"] == 0
    assert len(result["inside"]) == result["tensors"] == 6
    assert result["inside"] == pytest.approx(result["per_tensor"], rel=1e-4)


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.usefixtures("no_leftover_processes")
def test_zero3_evaluation_with_unequal_shards_does_not_deadlock_and_uses_the_workloads_hyperparameters():
    spec = f"{TEST_WORKLOADS / 'odd_val.py'}:odd_val"  # 33 validation samples: 2 chunks on rank 0, 1 on rank 1
    runner = JobRunner(load_adapter("deepspeed"), _settings(workload=spec, adapter_options={"zero_stage": 3},
                                                            idle_timeout_s=40), lambda e: None, CancelToken())
    record = runner.train("sweep", 16, 4, lr=0.05, evaluate=True)
    assert record.status == "ok" and 0 <= record.val_metric <= 1
    ran = runner.optimizer_info
    assert "ZeRO stage 3" in ran["implementation"]
    assert ran["hyperparameters"]["momentum"] == 0.8 and ran["hyperparameters"]["weight_decay"] == 0.05


def test_every_rank_runs_the_same_number_of_evaluation_forwards():
    """Under ZeRO-3 each forward is a collective: a rank with one chunk fewer would leave the others waiting."""

    from advisor.job import TrialJob
    from advisor.worker import WorkerStrategy, _evaluate
    from advisor.workload import resolve_workload

    workload = resolve_workload(f"{TEST_WORKLOADS / 'odd_val.py'}:odd_val")  # 33 samples: chunks 2 and 1
    job = TrialJob(kind="train", workload="odd-val", per_device_batch=16)
    forwards, counted = {}, {}
    for rank in (0, 1):
        strategy = WorkerStrategy()
        strategy.setup(job)
        strategy.rank, strategy.world_size = rank, 2
        strategy.all_reduce_sum = lambda totals, rank=rank: counted.setdefault(rank, totals)
        model = workload.build_model()
        calls = []
        model.register_forward_hook(lambda module, args, out: calls.append(len(args[0])))
        _evaluate(job, workload, strategy, model)
        forwards[rank] = len(calls)
    assert forwards[0] == forwards[1] == 2
    assert counted[0][1] == 17 and counted[1][1] == 16  # the padding forward is not counted (totals: loss sum, samples, metrics)
