"""`advisor adapters`, the example plugin, bad input (one paragraph, exit 2), and planning for a bigger cluster."""

import json
import subprocess
import sys

import pytest

from advisor.adapters import adapter_statuses, load_adapter
from advisor.cli import build_parser, main, settings_from_args
from advisor.device import HostDevices
from advisor.export import export_recipe
from advisor.report import build_recipe
from advisor.session import Session, validate_setup
from helpers import REPO

def test_adapters_json_lists_every_adapter_and_a_broken_plugin_is_one_stderr_line(plugins):
    run = subprocess.run([sys.executable, "-m", "advisor.cli", "adapters", "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rows = {row["name"]: row for row in json.loads(run.stdout)}
    assert {"ddp", "accelerate", "deepspeed", "single", "broken"} <= set(rows)
    assert rows["deepspeed"]["available"] and rows["deepspeed"]["version"]
    assert rows["single"]["available"] and rows["single"]["version"] == "0.1.0"
    assert rows["single"]["capabilities"]["optimizers"] == ["adam", "adamw", "sgd"]
    assert rows["single"]["options"] == [{"name": "threads", "flag": "--threads", "type": "int", "default": 1,
                                          "help": rows["single"]["options"][0]["help"], "choices": [1, 2, 4]}]
    assert [o["flag"] for o in rows["deepspeed"]["options"]] == ["--zero-stage"] and rows["ddp"]["options"] == []
    assert not rows["broken"]["available"] and "failed to import" in rows["broken"]["reason"]
    warnings = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "broken" in warnings[0]
    text = subprocess.run([sys.executable, "-m", "advisor.cli", "adapters"], capture_output=True, text=True)
    assert text.returncode == 0 and "single" in text.stdout and "unavailable" in text.stdout


def test_the_example_plugin_runs_a_real_probe_with_its_option(plugins):
    from advisor.launch import CancelToken
    from advisor.method import MethodSettings
    from advisor.runner import JobRunner

    adapter = load_adapter("single")
    settings = MethodSettings(workload="digits-mlp", adapter_name="single", nproc=1, device="cpu",
                              memory_budget_bytes=256 * 2**20, workdir=str(REPO), adapter_options={"threads": 2})
    runner = JobRunner(adapter, settings, lambda event: None, CancelToken())
    trial = runner.probe(32, "test")
    assert trial.status == "ok" and trial.peak_bytes > 0
    assert runner.optimizer_info["adapter_extras"] == {"threads_ran": 2}  # the worker read the option


def parse_plan(argv):
    """What `advisor plan ARGV` parses, the chosen adapter's own flags included (as cmd_plan does)."""
    from advisor.cli import adapter_options_from_argv

    args, rest = build_parser().parse_known_args(["plan", *argv])
    adapter = load_adapter(args.adapter)
    args.adapter_options = adapter_options_from_argv(adapter, rest)
    return args, adapter


def test_a_plugin_option_is_a_validated_flag_recorded_in_the_recipe(plugins, capsys):
    from helpers import StubRunner

    from advisor.recipe import check_recipe, dumps_recipe

    common = ["--adapter", "single", "--nproc", "1", "--device-memory", "1GiB", "--workload", "digits-mlp"]
    for bad, expected in (("3", "must be one of 1, 2 or 4, not '3'"), ("two", "must be one of 1, 2 or 4")):
        assert main(["plan", *common, "--threads", bad]) == 2
        err = capsys.readouterr().err
        assert "--threads (an option of the adapter 'single')" in err and expected in err
        assert "Traceback" not in err and err.count("\n") == 1
    args, adapter = parse_plan([*common, "--threads=2", "--trial-steps", "4", "--sweep-steps", "4"])
    host = HostDevices("cpu")
    settings = settings_from_args(args, host)
    assert settings.adapter_options == {"threads": 2}
    session = Session(adapter, settings, validate_setup(settings, adapter, host), runner=StubRunner(nproc=1))
    data = build_recipe(session.run_all(), ["advisor", "plan", *common, "--threads", "2"])
    assert data["adapter"]["threads"] == 2
    text = dumps_recipe(data)
    path = REPO / "recipes" / ".test-plugin-option.toml"
    try:
        path.write_text(text)
        assert check_recipe(path)["adapter"]["threads"] == 2
    finally:
        path.unlink(missing_ok=True)
    # Without the flag the recipe records the declared default.
    args, adapter = parse_plan([*common, "--trial-steps", "4", "--sweep-steps", "4"])
    settings = settings_from_args(args, host)
    session = Session(adapter, settings, validate_setup(settings, adapter, host), runner=StubRunner(nproc=1))
    assert build_recipe(session.run_all(), ["advisor", "plan"])["adapter"]["threads"] == 1


def test_a_worker_written_from_the_protocol_doc_runs_real_probes(plugins):
    """examples/protocol-worker speaks the documented job file, event lines and exit codes without worker_main:
    a batch that fits is measured, and one that does not is an out-of-memory answer (exit 75), not a crash."""
    from advisor.launch import CancelToken
    from advisor.method import MethodSettings
    from advisor.runner import JobRunner

    adapter = load_adapter("protocol")
    settings = MethodSettings(workload="digits-mlp", adapter_name="protocol", nproc=1, device="cpu",
                              memory_budget_bytes=64 * 2**20, workdir=str(REPO))
    runner = JobRunner(adapter, settings, lambda event: None, CancelToken())
    fits = runner.probe(32, "test")
    assert fits.status == "ok" and fits.peak_bytes > 0 and fits.measured_by.startswith("MemTracker")
    assert runner.model_info["parameters"] > 0
    too_big = runner.probe(2**14, "test")
    assert too_big.status == "oom" and too_big.peak_bytes is None and too_big.message


def test_missing_package_is_unavailable_and_plan_says_how_to_install(monkeypatch, capsys):
    from advisor_adapters.deepspeed import DeepSpeedAdapter

    monkeypatch.setattr(DeepSpeedAdapter, "version", lambda self: None)
    row = next(r for r in adapter_statuses() if r.name == "deepspeed")
    assert not row.available and "pip install" in row.reason
    assert main(["plan", "--adapter", "deepspeed", "--device-memory", "1GiB", "--workload", "digits-mlp"]) == 2
    err = capsys.readouterr().err
    assert "deepspeed package is not installed" in err and "Traceback" not in err


@pytest.mark.parametrize("args, expected", [
    (["--adapter", "horovod"], "Unknown adapter 'horovod'"),
    (["--adapter", "single", "--nproc", "1", "--optimizer", "lamb"], "cannot run the optimizer 'lamb'"),
    (["--optimizer", "magic"], "--optimizer 'magic' is not one of"),
    (["--zero-stage", "2"], "`advisor plan` has no --zero-stage, and the adapter 'ddp' takes no options"),
    (["--adapter", "single", "--nproc", "1", "--thread", "2"], "has no --thread, and the adapter 'single' takes only "
                                                                 "--threads"),
    (["--adapter", "deepspeed", "--zero-stage", "5"], "--zero-stage (an option of the adapter 'deepspeed') must be "
                                                      "one of 0, 1, 2 or 3, not '5'"),
    (["--adapter", "deepspeed", "--zero-stage", "2", "--optimizer", "lamb"], "--zero-stage 2 with --optimizer lamb"),
    (["--world-size", "12", "--nodes", "2", "--gpus-per-node", "4"], "contradicts"),
    (["--world-size", "9", "--nodes", "2"], "does not split evenly"),
])
def test_bad_plan_input_is_one_paragraph_and_exit_2(plugins, capsys, args, expected):
    assert main(["plan", "--device-memory", "1GiB", "--workload", "digits-mlp", *args]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and err.count("\n") == 1


def test_lars_without_its_package_is_a_setup_error(monkeypatch, capsys):
    import advisor.optimizers

    monkeypatch.setattr(advisor.optimizers, "unavailable_reason",
                        lambda name: "the optimizer 'lars' needs the pytorch-optimizer package" if name == "lars"
                        else None)
    assert main(["plan", "--device-memory", "1GiB", "--workload", "digits-mlp", "--optimizer", "lars"]) == 2
    assert "needs the pytorch-optimizer package" in capsys.readouterr().err


def test_planning_for_a_bigger_cluster_than_the_probe_host():
    """Probes on this host's 2 processes; plan, LR, warmup, launch line and exports for 4 nodes x 8."""
    from helpers import StubRunner

    args, adapter = parse_plan(["--adapter", "deepspeed", "--zero-stage", "3", "--nproc", "2", "--nodes", "4",
                                "--gpus-per-node", "8", "--device-memory", "1GiB", "--workload", "digits-cnn",
                                "--trial-steps", "4", "--sweep-steps", "4"])
    host = HostDevices("cpu")
    settings = settings_from_args(args, host)
    assert settings.world_size == 32 and settings.nproc == 2 and settings.adapter_options == {"zero_stage": 3}
    session = Session(adapter, settings, validate_setup(settings, adapter, host), runner=StubRunner(nproc=2))
    result = session.run_all()
    assert result.plan.world_size == 32
    assert result.plan.global_batch == result.plan.per_device * 32 * result.plan.accumulation_steps
    assert result.lr.global_batch == result.plan.global_batch  # the LR is scaled for the target's global batch
    launch = result.launch_command
    assert "--num_nodes=4" in launch and "--num_gpus=8" in launch and "--hostfile=hostfile" in launch
    data = build_recipe(result, ["advisor", "plan"])
    assert data["inputs"]["nodes"] == 4 and data["inputs"]["world_size"] == 32 and data["adapter"]["zero_stage"] == 3
    accelerate_yaml, _ = export_recipe(data, "accelerate")
    assert "num_machines: 4" in accelerate_yaml and "num_processes: 32" in accelerate_yaml
    torchrun, _ = export_recipe(data, "torchrun")
    assert "--nnodes=4" in torchrun and "--nproc-per-node=8" in torchrun


def test_launch_lines_each_launcher_accepts():
    from advisor.adapters import LaunchSpec

    accelerate, deepspeed = load_adapter("accelerate"), load_adapter("deepspeed")
    cpu_env = accelerate.environment("cpu")
    assert cpu_env["ACCELERATE_USE_CPU"] == "1" and deepspeed.environment("cpu")["OMP_NUM_THREADS"] == "1"
    # On CPU `accelerate launch --cpu` starts one process: the line is torchrun with Accelerate's CPU switch.
    line = accelerate.launch_command(LaunchSpec(2, 1, 32, 1, 0.01, 10, "fp32", cpu_env))
    assert "torchrun" in line and "ACCELERATE_USE_CPU=1" in line
    line = accelerate.launch_command(LaunchSpec(8, 2, 32, 2, 0.01, 10, "bf16", {}))
    assert line[:2] == ["accelerate", "launch"] and "--num_processes=16" in line and "--num_machines=2" in line
    assert "--mixed_precision=bf16" in line
    line = deepspeed.launch_command(LaunchSpec(8, 1, 32, 2, 0.01, 10, "bf16", {}))
    assert line[0] == "deepspeed" and "--num_gpus=8" in line and "--deepspeed_config=ds_config.json" in line
    assert deepspeed.probe_processes(4, {"zero_stage": 0}) == 1 and deepspeed.probe_processes(4, {}) == 4
    with pytest.raises(Exception, match="must be one of 0, 1, 2 or 3"):
        deepspeed.validate_options({"zero_stage": 5})
