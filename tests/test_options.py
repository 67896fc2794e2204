"""Every `advisor plan` option is declared once (advisor/options.py) and every part reads that declaration: the CLI's
parser, MethodSettings through settings_from_options, the command a recipe records, the set-up checks' option names
and the app's pre-fill. A part that names an option the table lacks, or misses one the table has, fails here. (The
app's Setup form is checked against the table in tests/test_tui_settings.py, which mounts it.)"""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from advisor.cli import build_parser, plan_options_from_args
from advisor.device import HostDevices
from advisor.method import MethodSettings, WorkloadInfo
from advisor.options import PLAN_OPTION, PLAN_OPTION_TABLE, plan_option, recipe_inputs
from advisor.settings import plan_command, settings_from_options

# `advisor plan` flags that are not plan options: how the command runs, where it writes, the cluster it measures on.
COMMAND_FLAGS = {"-h", "--help", "--nnodes", "--node-rank", "--rdzv-endpoint", "--rdzv-id", "--rdzv-timeout", "--out",
                 "--force", "--json", "--explain", "--history", "--fresh", "--no-history"}
# MethodSettings fields no option fills as it is: settings_from_options derives them from several options or the host.
DERIVED_SETTINGS = {"nproc", "device", "memory_budget_bytes", "device_memories", "workdir", "base_warmup",
                    "adapter_options", "nodes", "target_world_size", "allow_few_steps", "cluster_nodes",
                    "collective_timeout_s", "max_batch"}
# The options a recipe's [inputs] does not record, and where the recipe says them instead.
NOT_IN_INPUTS = {"workload": "[workload] spec", "subset_sweep": "[method.sweep]'s candidates",
                 "start": "[method] start_value and start_reason", "gpus_per_node": "[inputs] world_size",
                 "trial_timeout": "[provenance] command", "idle_timeout": "[provenance] command"}
# A value other than the default for each option, as typed on the command line.
GIVEN = {"workload": "digits-mlp", "adapter": "accelerate", "nproc": "3", "device": "cpu", "device_memory": "2GiB",
         "headroom": "0.2", "trial_steps": "9", "sweep_steps": "50", "subset_sweep": None, "sweep_extensions": "2",
         "sweep_seeds": "2", "start": "8", "global_batch": "256", "base_lr": "0.1", "base_batch": "128",
         "base_warmup": "2epochs", "epochs": "3", "precision": "bf16", "task": "image-classification",
         "optimizer": "adam", "nodes": "2", "gpus_per_node": "3", "world_size": None, "trial_timeout": "30",
         "idle_timeout": "5.5"}


def plan_parser():
    parser = build_parser()
    return next(action for action in parser._subparsers._group_actions if action.choices).choices["plan"]


def test_the_parser_has_a_flag_for_every_declared_option_and_no_other_option():
    flags = {flag for action in plan_parser()._actions for flag in action.option_strings}
    declared = {option.flag for option in PLAN_OPTION_TABLE}
    assert declared <= flags
    declared |= {old for option in PLAN_OPTION_TABLE for old in option.deprecated_flags}
    assert flags - declared == COMMAND_FLAGS, "a plan option added to the parser by hand, not to advisor/options.py"


def test_every_setting_is_filled_by_one_declared_option_or_derived():
    named = [option.setting for option in PLAN_OPTION_TABLE if option.setting]
    assert len(named) == len(set(named))
    assert set(named) | DERIVED_SETTINGS == {f.name for f in fields(MethodSettings)}, \
        "a MethodSettings field no option declares (or a declared setting MethodSettings lacks)"


def given_options() -> dict:
    """The named options of an `advisor plan` line that gives every option its GIVEN value."""
    argv = []
    for name, text in GIVEN.items():
        if name != "world_size":  # the same target as --gpus-per-node, which it contradicts
            argv += [plan_option(name).flag] + ([text] if text is not None else [])
    return plan_options_from_args(plan_parser().parse_args(argv))


def given_settings(options: dict) -> MethodSettings:
    return settings_from_options(options, HostDevices("cpu", [], [], cpu_count=2, physical_memory=8 << 30), workdir="/w")


def test_each_option_given_reaches_the_settings_and_the_recorded_command_parses_back():
    assert set(GIVEN) == set(PLAN_OPTION), "every declared option has a test value here"
    options = given_options()
    settings = given_settings(options)
    for option in PLAN_OPTION_TABLE:
        if option.setting:
            given = True if option.type is bool else option.type(GIVEN[option.name])
            assert getattr(settings, option.setting) == given, option.name
    recorded = plan_command(options)
    assert plan_options_from_args(plan_parser().parse_args(recorded[2:])) == options  # nothing lost on the way


def test_the_set_up_checks_name_only_declared_options():
    source = Path(__file__).parents[1] / "advisor" / "setup_checks.py"
    named, literal = [], []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            first = node.args[0]
            if node.func.id == "option_flag" and isinstance(first, ast.Constant):
                named.append(first.value)
            elif node.func.id == "Flag" and isinstance(first, ast.Constant):
                literal.append(first.value)
    assert named and set(named) <= set(PLAN_OPTION), set(named) - set(PLAN_OPTION)
    assert set(literal) <= {"--force"}, "an option named by hand: use option_flag(name), which reads the table"


def test_an_undeclared_option_is_named_as_such():
    with pytest.raises(KeyError, match="no plan option 'sweep_tries' is declared"):
        plan_option("sweep_tries")


def test_the_apps_prefill_has_a_field_for_each_prefill_flag():
    from advisor.tui.steps import Prefill

    prefilled = [option.name for option in PLAN_OPTION_TABLE if option.prefill]
    assert [f.name for f in fields(Prefill) if f.name != "script"] == prefilled
    args = build_parser().parse_args(["tui", "--trial-steps", "9", "--device-memory", "2GiB"])
    assert Prefill.from_args(args) == Prefill(trial_steps=9, device_memory="2GiB")


def test_the_former_flag_of_an_option_still_reads_with_a_note_and_is_never_written(capsys):
    options = plan_options_from_args(plan_parser().parse_args(["--sweep-walk", "0"]))
    assert options["sweep_extensions"] == 0
    assert "--sweep-walk is now --sweep-extensions" in capsys.readouterr().err
    assert plan_command(options)[-2:] == ["--sweep-extensions", "0"]


def test_a_recipe_written_before_a_rename_still_reads_checks_explains_and_replans(capsys, tmp_path):
    import shutil

    from advisor.cli import main

    committed = Path(__file__).parents[1] / "recipes"
    shutil.copy(committed / "digits-cnn.measurements.toml", tmp_path)
    text = (committed / "digits-cnn.toml").read_text()
    assert "sweep_extensions = 1" in text
    recipe = tmp_path / "digits-cnn.toml"
    recipe.write_text(text.replace("sweep_extensions = 1", "sweep_walk = 1"))  # [inputs] as plans wrote it before
    assert main(["check", str(recipe)]) == 0 and main(["explain", str(recipe)]) == 0
    assert main(["replan", str(recipe), "--gpu", "a100-80gb", "--nproc", "8", "--no-confirm"]) == 0


def test_the_recipes_inputs_record_every_option_as_the_plan_ran_with_it_under_its_declared_key():
    """[inputs] is read from the table: each option is recorded there or named in NOT_IN_INPUTS, in the table's
    order, with the value the plan ran with (the base LR and batch as resolved from the workload)."""
    recorded = [option for option in PLAN_OPTION_TABLE if option.recorded]
    assert {option.name for option in PLAN_OPTION_TABLE} - {option.name for option in recorded} == set(NOT_IN_INPUTS)
    workload = WorkloadInfo("w", "image-classification", 10, "adam", 1000, 100, 5000, False, base_lr=0.3,
                            base_global_batch=96, base_source="the workload's")
    inputs = recipe_inputs(given_settings(given_options()), workload)
    assert list(inputs) == [option.inputs_key for option in recorded]
    assert inputs == {"adapter": "accelerate", "nproc": 3, "device": "cpu", "device_memory_bytes": 2 << 30,
                      "headroom": 0.2, "trial_steps": 9, "sweep_steps": 50, "sweep_extensions": 2, "sweep_seeds": 2,
                      "global_batch": 256, "base_lr": 0.3, "base_batch": 96, "base_warmup": "2 epochs", "epochs": 3.0,
                      "precision": "bf16", "task": "image-classification", "optimizer": "adam", "nodes": 2,
                      "world_size": 6}


def test_what_reads_or_rewrites_inputs_names_only_keys_the_options_record():
    """The typed reader (recipe.InputsTable) and a re-plan's rewrite of [inputs] use the declared keys, so a key
    renamed in the table cannot leave a reader reading a key no new recipe has."""
    from advisor.recipe import InputsTable

    keys = {option.inputs_key for option in PLAN_OPTION_TABLE if option.recorded}
    assert {f.name for f in fields(InputsTable)} <= keys
    source = Path(__file__).parents[1] / "advisor" / "replan.py"
    rewritten = [keyword.arg for node in ast.walk(ast.parse(source.read_text())) if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
                 and isinstance(node.func.value, ast.Name) and node.func.value.id == "inputs"
                 for keyword in node.keywords]
    assert rewritten and set(rewritten) <= keys, set(rewritten) - keys
