"""Exports are checked by the library that reads them: DeepSpeed's config class, Accelerate's config loader,
torchrun's own argument parser. Not by comparing strings."""

import json
import shlex

import pytest

from advisor.cli import main
from advisor.errors import ExportError
from advisor.export import deepspeed_hostfile, export_recipe
from helpers import REPO
from helpers import deepspeed_accepts, export_recipe_data, launch_exported, write_recipe_file


@pytest.mark.parametrize("optimizer, precision, stage", [("adamw", "bf16", 2), ("lamb", "fp16", 0),
                                                         ("sgd", "fp32", 0), ("adam", "fp32", 3)])
def test_deepspeed_config_is_accepted_by_deepspeed_with_the_recipes_world_size(optimizer, precision, stage):
    data = export_recipe_data(optimizer=optimizer, precision=precision, zero_stage=stage)
    text, _ = export_recipe(data, "deepspeed")
    config = json.loads(text)
    parsed = deepspeed_accepts(config, 4)
    assert parsed.train_batch_size == 16 * 4 * 2 and parsed.train_micro_batch_size_per_gpu == 16
    assert parsed.gradient_accumulation_steps == 2 and parsed.zero_optimization_stage == stage
    assert parsed.optimizer_params["lr"] == pytest.approx(0.002)
    assert parsed.bfloat16_config.enabled == (precision == "bf16")
    assert parsed.float16_config.enabled == (precision == "fp16")
    assert parsed.scheduler_name == "WarmupLR" and parsed.scheduler_params["warmup_num_steps"] == 30
    if optimizer == "lamb":
        assert parsed.optimizer_name == "lamb"
        assert {"max_coeff", "min_coeff"} <= set(parsed.optimizer_params)
    # The same config with another world size breaks DeepSpeed's batch identity: the check is real.
    with pytest.raises(AssertionError):
        deepspeed_accepts(config, 3)


def test_accelerate_config_loads_in_accelerate(tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file

    for adapter, expected in (("accelerate", "MULTI_GPU"), ("deepspeed", "DEEPSPEED")):
        text, _ = export_recipe(export_recipe_data(adapter=adapter, world=16, nodes=2), "accelerate")
        path = tmp_path / f"{adapter}.yaml"
        path.write_text(text)
        config = load_config_from_file(str(path))
        assert config.distributed_type.value == expected
        assert config.num_processes == 16 and config.num_machines == 2 and config.mixed_precision == "bf16"
        if adapter == "deepspeed":
            assert config.deepspeed_config["zero_stage"] == 2
            assert config.deepspeed_config["gradient_accumulation_steps"] == 2


def torchrun_args(line: str):
    from torch.distributed.run import get_args_parser

    # What each node's shell does with the line: fill in its NODE_RANK and MASTER_ADDR.
    argv = shlex.split(line.replace("$NODE_RANK", "1").replace("$MASTER_ADDR", "10.0.0.1"))
    env = {}
    if argv[0] == "env":
        argv.pop(0)
        while "=" in argv[0]:
            key, value = argv.pop(0).split("=", 1)
            env[key] = value
    assert argv.pop(0) == "torchrun"
    return get_args_parser().parse_args(argv), env


def test_torchrun_line_parses_in_torchrun_single_and_multi_node():
    args, env = torchrun_args(export_recipe(export_recipe_data(device="cpu", world=2, adapter="ddp"), "torchrun")[0])
    assert args.standalone and args.nproc_per_node == "2" and args.training_script == "train.py"
    assert "--batch-size=16" in args.training_script_args and env == {"MALLOC_MMAP_THRESHOLD_": "65536"}
    text, notes = export_recipe(export_recipe_data(world=32, nodes=4, adapter="ddp"), "torchrun")
    args, _ = torchrun_args(text)
    assert args.nnodes == "4" and args.nproc_per_node == "8" and args.rdzv_backend == "c10d"
    assert args.node_rank == 1 and args.rdzv_endpoint == "10.0.0.1:29500"
    assert "$NODE_RANK" in text and "'" not in text and any("NODE_RANK" in n for n in notes)


def test_accelerate_on_cpu_adds_its_cpu_switch_to_the_torchrun_line():
    _, env = torchrun_args(export_recipe(export_recipe_data(device="cpu", world=2, adapter="accelerate", precision="fp32"),
                                         "torchrun")[0])
    assert env["ACCELERATE_USE_CPU"] == "1"


def test_a_ddp_recipe_exported_to_accelerate_on_cpu_launches_with_the_cpu_switch():
    """The Accelerate export's Launch line on a multi-process CPU plan is torchrun: without ACCELERATE_USE_CPU=1
    every process is rank 0 of 1, whichever adapter measured the recipe (a newcomer's ddp recipe lacked it)."""
    text, notes = export_recipe(export_recipe_data(device="cpu", world=2, adapter="ddp", precision="fp32"), "accelerate")
    launch = next(line for line in text.splitlines() if line.startswith("# Launch: "))
    assert "ACCELERATE_USE_CPU=1" in launch and "torchrun" in launch
    assert any("Launch line" in n for n in notes)


def test_hostfile_template_has_one_line_per_node():
    assert deepspeed_hostfile(export_recipe_data(world=16, nodes=2)) == "node0 slots=8\nnode1 slots=8\n"


@pytest.mark.parametrize("data, target, expected", [
    (export_recipe_data(optimizer="lars", zero_stage=0), "deepspeed", "DeepSpeed has no LARS"),
    (export_recipe_data(precision="fp16", device="cpu"), "deepspeed", "refuses fp16 on CPU"),
    (export_recipe_data(precision="fp16", device="cpu", adapter="accelerate"), "accelerate", "silently ignores"),
    (dict(export_recipe_data(world=6, nodes=4), inputs={"nodes": 4, "device": "cuda"}), "torchrun", "does not split evenly"),
])
def test_a_recipe_the_target_cannot_express_is_a_clear_message(tmp_path, capsys, data, target, expected):
    with pytest.raises(ExportError, match=expected):
        export_recipe(data, target)
    assert main(["export", str(write_recipe_file(tmp_path, data)), "--to", target]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_export_cli_writes_out_and_keeps_existing_files(tmp_path, capsys):
    path = write_recipe_file(tmp_path, export_recipe_data(world=16, nodes=2))
    out, hosts = tmp_path / "ds.json", tmp_path / "hostfile"
    assert main(["export", str(path), "--to", "deepspeed", "--out", str(out), "--hostfile", str(hosts)]) == 0
    assert json.loads(out.read_text())["train_batch_size"] == 16 * 16 * 2 and hosts.read_text().count("slots=8") == 2
    assert main(["export", str(path), "--to", "deepspeed", "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.toml"), "--to", "torchrun"]) == 2


@pytest.mark.parametrize("case", ["missing-folder", "out-is-dir", "hostfile-is-dir"])
def test_export_checks_every_output_path_before_writing_any(tmp_path, capsys, case):
    """A bad --out or --hostfile exits 2 with the path and the fix, and leaves no file behind: a bad hostfile
    used to fail after the config was already written, and a missing folder was a traceback."""
    path = write_recipe_file(tmp_path, export_recipe_data(world=16, nodes=2))
    (tmp_path / "adir").mkdir()
    out, hosts = {"missing-folder": (tmp_path / "no" / "such" / "ds.json", tmp_path / "hostfile"),
                  "out-is-dir": (tmp_path / "adir", tmp_path / "hostfile"),
                  "hostfile-is-dir": (tmp_path / "ds.json", tmp_path / "adir")}[case]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["export", str(path), "--to", "deepspeed", "--out", str(out), "--hostfile", str(hosts),
                 "--force"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Nothing was written" in err
    assert ("does not exist" if case == "missing-folder" else "is a directory") in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_export_force_replaces_whole_and_keeps_the_old_file(tmp_path):
    path = write_recipe_file(tmp_path, export_recipe_data())
    out = tmp_path / "launch.sh"
    out.write_text("old\n")
    assert main(["export", str(path), "--to", "torchrun", "--out", str(out), "--force"]) == 0
    assert "torchrun" in out.read_text() and (tmp_path / "launch.sh.bak").read_text() == "old\n"


def test_export_imports_neither_torch_nor_the_target_library(tmp_path):
    import subprocess
    import sys

    path = write_recipe_file(tmp_path, export_recipe_data())
    code = ("import sys; from advisor.cli import main\n"
            f"for target in ('deepspeed', 'accelerate', 'torchrun'): main(['export', {str(path)!r}, '--to', target])\n"
            "heavy = [m for m in ('torch', 'deepspeed', 'accelerate') if m in sys.modules]\n"
            "assert not heavy, heavy")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_config_exports_say_how_to_carry_the_launch_env():
    from advisor.export import export_recipe
    from advisor.recipe import check_recipe

    data = check_recipe(REPO / "recipes" / "digits-cnn.toml")
    assert data["launch"]["env"]  # the committed CPU recipe carries the allocator setting
    for target in ("deepspeed", "accelerate"):
        _, notes = export_recipe(data, target)
        assert any("MALLOC_MMAP_THRESHOLD_=65536" in n and "[launch.env]" in n for n in notes), target
    text, _ = export_recipe(data, "torchrun")
    assert text.startswith("env MALLOC_MMAP_THRESHOLD_=65536 torchrun")


# ---------------------------------------------------------------------------------------------------------------
# One renderer for launch lines: the recipe's [launch] line is pasted into a shell on each node.

def shell_words(line: str, **env) -> list[str]:
    """The argv a shell runs for ``line``, with each node's variables (NODE_RANK, MASTER_ADDR) set."""
    import os
    import subprocess

    script = f"set -- {line}\nprintf '%s\\0' \"$@\""
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ["PATH"], **env})
    assert run.returncode == 0, run.stderr
    return run.stdout.split("\0")[:-1]


def test_the_recipes_multi_node_launch_line_expands_each_nodes_variables_and_parses_in_torchrun():
    from torch.distributed.run import get_args_parser

    from advisor.adapters import load_adapter
    from advisor.cli import build_parser, settings_from_args
    from advisor.device import HostDevices
    from advisor.report import build_recipe, human_summary, json_summary
    from advisor.session import Session, validate_setup
    from helpers import StubRunner

    args = build_parser().parse_args(["plan", "--adapter", "ddp", "--nproc", "2", "--nodes", "2",
                                      "--gpus-per-node", "4", "--device-memory", "1GiB", "--workload", "digits-cnn",
                                      "--trial-steps", "4", "--sweep-steps", "4"])
    host = HostDevices("cpu")
    settings = settings_from_args(args, host)
    adapter = load_adapter("ddp")
    session = Session(adapter, settings, validate_setup(settings, adapter, host), runner=StubRunner(nproc=2))
    result = session.run_all()
    data = build_recipe(result, ["advisor", "plan"])
    line = data["launch"]["example"]
    # The same renderer everywhere: the recipe, the JSON and human summaries, and `advisor export --to torchrun`.
    assert json_summary(result, None)["launch"]["command"] == line
    assert f"Launch: {line}\n" in human_summary(result, None) + "\n"
    assert export_recipe(data, "torchrun")[0] == line + "\n"

    argv = shell_words(line, NODE_RANK="1", MASTER_ADDR="10.0.0.7")
    while argv[0] in ("env",) or "=" in argv[0]:
        argv.pop(0)
    assert argv.pop(0) == "torchrun"
    parsed = get_args_parser().parse_args(argv)  # torchrun's own parser: --node-rank must be an int
    assert parsed.node_rank == 1 and parsed.rdzv_endpoint == "10.0.0.7:29500" and parsed.nnodes == "2"
    assert parsed.nproc_per_node == "4" and f"--batch-size={result.plan.per_device}" in parsed.training_script_args


@pytest.mark.parametrize("adapter, needle", [("accelerate", "--machine_rank=1"),
                                             ("deepspeed", "--master_addr=10.0.0.7")])
def test_every_adapters_multi_node_line_leaves_the_node_variables_to_the_shell(adapter, needle):
    from advisor.adapters import LaunchSpec, load_adapter, shell_line

    argv = load_adapter(adapter).launch_command(LaunchSpec(4, 2, 16, 2, 0.01, 10, "bf16", {}))
    words = shell_words(shell_line(argv), NODE_RANK="1", MACHINE_RANK="1", MASTER_ADDR="10.0.0.7")
    assert needle in words and not any("$" in w for w in words)


def test_shell_line_quotes_everything_but_variable_references():
    from advisor.adapters import shell_line

    argv = ["env", "A=x y", "run", "it's", "$(touch pwned)", "`id`", "a;b", "x$", "", "--rank=$NODE_RANK",
            "$MASTER_ADDR:29500", "${MASTER_ADDR}x", "glob*"]
    words = shell_words(shell_line(argv), NODE_RANK="3", MASTER_ADDR="h")
    assert words == ["env", "A=x y", "run", "it's", "$(touch pwned)", "`id`", "a;b", "x$", "", "--rank=3",
                     "h:29500", "hx", "glob*"]


# ---------------------------------------------------------------------------------------------------------------
# Every export launched for real (2 CPU processes where the launcher can start them): the numbers reach the
# processes the launcher starts. tests/launched_train.py stands in for the user's train.py.

def assert_reports(reports, data, launcher, world):
    b = data["batch"]
    assert [r["rank"] for r in reports] == list(range(world)), reports
    for r in reports:
        assert r["launcher"] == launcher and r["world"] == world == b["world_size"]
        assert r["per_device"] == b["per_device"] and r["accumulation"] == b["accumulation_steps"]
        assert r["global"] == b["global"] and r["lr"] == pytest.approx(data["lr"]["value"])
        assert r["precision"] == data["precision"]["mode"]
        from advisor.optimizers import HYPERPARAMETERS

        optimizer = data["lr"]["optimizer"]
        expected = {key: data["optimizer"][key] for key in HYPERPARAMETERS[optimizer]}
        ran = {key: value for key, value in r["optimizer"].items() if key in expected}
        assert r["optimizer"]["name"].lower() == optimizer and ran == pytest.approx(expected), r["optimizer"]


@pytest.mark.distributed
@pytest.mark.parametrize("adapter, precision, launcher", [("ddp", "fp32", "torch.distributed"),
                                                          ("accelerate", "bf16", "accelerate")])
def test_the_torchrun_export_launches_two_processes_with_the_plan(tmp_path, adapter, precision, launcher):
    data = export_recipe_data(per_device=8, world=2, accumulation=3, optimizer="sgd", precision=precision, device="cpu",
                  adapter=adapter)
    line, _ = export_recipe(data, "torchrun")
    assert_reports(launch_exported(line, tmp_path), data, launcher, 2)


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_accelerate_export_launches_with_accelerate_launch(tmp_path, precision):
    """A CPU config: `accelerate launch --config_file` starts one process whatever num_processes says
    (ENVIRONMENT.md), so this plan has one; the precision comes from the config, the batch from the line."""
    from advisor.export import ACCELERATE_CONFIG_NAME, accelerate_launch_line
    from advisor.adapters import shell_line

    data = export_recipe_data(per_device=8, world=1, accumulation=4, optimizer="adamw", precision=precision, device="cpu",
                  adapter="accelerate")
    text, _ = export_recipe(data, "accelerate")
    (tmp_path / ACCELERATE_CONFIG_NAME).write_text(text)
    line = shell_line(accelerate_launch_line(data))
    assert f"# Launch: {line}\n" in text  # the config says how it is launched
    assert_reports(launch_exported(line, tmp_path), data, "accelerate", 1)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_gpu_accelerate_export_resolves_to_the_plans_world_size_in_accelerate(tmp_path, precision):
    """No GPU here: Accelerate's own launch-argument resolution decides what `accelerate launch` would start."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    from advisor.export import accelerate_launch_line

    data = export_recipe_data(world=4, precision=precision, adapter="accelerate")
    text, _ = export_recipe(data, "accelerate")
    config = tmp_path / "accelerate.yaml"
    config.write_text(text)
    argv = accelerate_launch_line(data, config_path=str(config))
    assert argv[:2] == ["accelerate", "launch"]
    args = launch_command_parser().parse_args(argv[2:])
    args, defaults, mp_from_config = _validate_launch_command(args)
    assert args.num_processes == 4 and args.multi_gpu and not args.cpu
    assert args.mixed_precision == {"fp32": "no"}.get(precision, precision)
    assert "--batch-size=16" in args.training_script_args and "--accumulation-steps=2" in args.training_script_args


@pytest.mark.slow
@pytest.mark.distributed
def test_the_deepspeed_export_launches_two_processes_with_the_deepspeed_launcher(tmp_path):
    """The recipe's deepspeed line with the exported ds_config.json; DeepSpeed's config class reads it in
    each process against the real world size."""
    from advisor.adapters import load_adapter, shell_line
    from advisor.export import recipe_launch_spec

    data = export_recipe_data(per_device=4, world=2, accumulation=2, optimizer="adamw", precision="bf16", device="cpu",
                  adapter="deepspeed", zero_stage=1)
    text, _ = export_recipe(data, "deepspeed")
    (tmp_path / "ds_config.json").write_text(text)
    line = shell_line(load_adapter("deepspeed").launch_command(recipe_launch_spec(data)))
    assert "--num_gpus=2" in line and "--deepspeed_config=ds_config.json" in line
    assert_reports(launch_exported(line, tmp_path, timeout=480), data, "deepspeed", 2)  # a first build can take minutes
