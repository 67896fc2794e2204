"""The first hour (issue 38): a workload file imports like `python file.py`, a typo names what was meant, and every
bad input a newcomer's walk found is one paragraph, exit 2, nothing written. Refusals run `main` in this process
(a subprocess paid ~3-5 s of torch's import each); nothing trains."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from advisor.errors import WorkloadError
from advisor.workload import load_workload_function
from helpers import REPO


def in_process(capsys, *args) -> tuple[int, str]:
    """(exit code, stderr) of `advisor ARGS` run in this process: each subprocess paid ~3-5 s of torch's import
    under load, for a refusal that comes before any run."""
    from advisor.cli import main

    code = main(list(args))
    return code, capsys.readouterr().err


def _project(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "mymodel.py").write_text("def make():\n    return 'built by a sibling module'\n")
    (project / "textcnn.py").write_text(textwrap.dedent("""
        from mymodel import make  # a sibling, as `python textcnn.py` would import it


        def helper():
            return None


        def workload():
            return make()
    """))
    return project


def test_a_workload_file_imports_the_modules_beside_it_from_any_folder(tmp_path):
    """`--workload proj/textcnn.py:workload` failed with 'No module named mymodel' even when run from proj/."""
    project = _project(tmp_path)
    code = ("from advisor.workload import load_workload_function as load; "
            "print(load('proj/textcnn.py:workload')())")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "built by a sibling module" in run.stdout


def test_a_workload_file_without_its_function_names_the_spec_meant(tmp_path):
    project = _project(tmp_path)
    with pytest.raises(WorkloadError) as caught:
        load_workload_function(str(project / "textcnn.py"))
    message = str(caught.value)
    assert f"did you mean '{project / 'textcnn.py'}:workload'" in message and "helper" in message


def test_a_built_in_one_typo_away_is_named():
    with pytest.raises(WorkloadError, match="Did you mean 'digits-cnn'"):
        load_workload_function("digits-cnnn")


@pytest.mark.parametrize("typed, meant", [("plna", "plan"), ("diagnse", "diagnose"), ("exprt", "export")])
def test_a_mistyped_command_names_the_command_meant(capsys, typed, meant):
    code, err = in_process(capsys, typed, "x")
    assert code == 2 and "Traceback" not in err
    assert f"Did you mean `advisor {meant}`?" in err


REPO_RECIPE = REPO / "recipes" / "digits-cnn.toml"


@pytest.mark.parametrize("memory, nproc", [("4TiB", "4"), ("8TB", "2")])
def test_replan_confirmed_on_this_host_makes_plans_host_checks(capsys, memory, nproc):
    """`replan --device-memory 24GiB --nproc 4` 'confirmed' on a 23.6 GiB host, which `plan` refuses (sizes past
    any test host's RAM here)."""
    code, err = in_process(capsys, "replan", str(REPO_RECIPE), "--device-memory", memory, "--nproc", nproc,
                           "--confirm")
    assert code == 2 and "Traceback" not in err, err
    assert "cannot run them" in err and "of RAM" in err and "--no-confirm" in err


@pytest.mark.parametrize("target, got", [(["--device-memory", "1GiB", "--nproc", "0"], "(got 0 and 1)"),
                                         (["--gpu", "a100-80gb", "--nodes", "0"], "(got 2 and 0)")])
def test_replan_reads_a_count_of_0_as_0_not_as_the_default(capsys, target, got):
    """`--nproc 0` re-planned for the recipe's 2 processes, and `--nodes 0` for one node (both exited 0). In
    process: a subprocess costs ~7 s of torch import under load."""
    from advisor.cli import main

    assert main(["replan", str(REPO_RECIPE), *target]) == 2
    err = capsys.readouterr().err
    assert f"--nproc and --nodes must be at least 1 {got}" in err and "Traceback" not in err


@pytest.mark.parametrize("form", [["--device-memory", "-1GiB"], ["--device-memory=-1GiB"]])
def test_a_negative_memory_size_is_named_in_either_form(capsys, form):
    """`--device-memory -1GiB` (space form) gave argparse's 'expected one argument', and the = form 'cannot read
    the memory size': both name the size and say it must be larger than zero."""
    code, err = in_process(capsys, "plan", "--workload", "digits-mlp", *form)
    assert code == 2, err
    assert "'-1GiB' must be larger than zero" in err and "Traceback" not in err


def test_a_negative_number_after_any_flag_is_its_value(capsys):
    """A value that starts with '-' is the flag's value (argparse reads only plain negative numbers so): the
    message is the option's own check, not argparse's 'expected one argument'."""
    code, err = in_process(capsys, "plan", "--workload", "digits-mlp", "--device-memory", "1GiB", "--start", "-3")
    assert code == 2 and "--start must be at least 1 sample per device, not -3" in err, err


@pytest.mark.parametrize("where", ["missing-folder/workload.py", "a-file/workload.py", "a-folder"])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_init_refuses_an_out_path_it_cannot_write_before_writing(tmp_path, capsys, where, force):
    """`advisor init --out` into a missing folder, under a file, or onto a folder (even with --force) was a
    traceback (FileNotFoundError, NotADirectoryError, IsADirectoryError): one paragraph, exit 2, nothing written."""
    from advisor.cli import main

    (tmp_path / "a-file").write_text("kept\n")
    (tmp_path / "a-folder").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["init", "--out", str(tmp_path / where), *force]) == 2
    err = capsys.readouterr().err
    assert err.startswith("advisor: ") and "Nothing was written." in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and (tmp_path / "a-file").read_text() == "kept\n"


def test_init_with_force_replaces_a_file_keeping_a_backup(tmp_path, capsys):
    from advisor.cli import main

    path = tmp_path / "workload.py"
    path.write_text("# my edits\n")
    assert main(["init", "--out", str(path), "--force"]) == 0
    assert "TODO" in path.read_text() and (tmp_path / "workload.py.bak").read_text() == "# my edits\n"


@pytest.mark.parametrize("sibling", ["missing", "a folder", "another file"])
def test_explain_and_check_say_when_the_measurements_beside_the_recipe_are_not_loaded(tmp_path, capsys, sibling):
    """A recipe copied without its NAME.measurements.toml (or with a folder or another file in its place) lost its
    per-run rows and the Time line from `advisor explain` without a word; `check` said OK. Now both say why."""
    import shutil

    from advisor.cli import main

    recipe = tmp_path / "digits-cnn.toml"
    shutil.copy(REPO_RECIPE, recipe)
    measured = tmp_path / "digits-cnn.measurements.toml"
    if sibling == "a folder":
        measured.mkdir()
    elif sibling == "another file":
        measured.write_text("[[ledger]]\nphase = 'trial'\n")
    assert main(["explain", str(recipe)]) == 0 and main(["check", str(recipe)]) == 0
    out, err = capsys.readouterr()
    assert "\nMeasurements: " in out and "per-run rows and step times are not shown" in out and "Time: " not in out
    assert f"{recipe}: note: {measured}" in err and "commit both" in err
    shutil.copy(REPO_RECIPE.with_name("digits-cnn.measurements.toml"), tmp_path / "whole.measurements.toml")
    shutil.copy(REPO_RECIPE, tmp_path / "whole.toml")
    text = (tmp_path / "whole.toml").read_text().replace('"digits-cnn.measurements.toml"', '"whole.measurements.toml"')
    (tmp_path / "whole.toml").write_text(text)
    assert main(["explain", str(tmp_path / "whole.toml")]) == 0 and main(["check", str(tmp_path / "whole.toml")]) == 0
    out, err = capsys.readouterr()
    assert "Measurements:" not in out and "Time: " in out and "note" not in err


@pytest.mark.parametrize("command", [["history"], ["plan", "--workload", "digits-mlp", "--device-memory", "64MiB"]])
@pytest.mark.parametrize("content", [b"step 1 loss 2.3\nstep 2 loss 2.1\n", b"\x89PNG\x00\xff\xfe" * 50], ids=["a-log", "binary"])
def test_a_history_path_that_names_another_file_is_refused_and_left_as_it_was(tmp_path, capsys, command, content):
    """`advisor history --history train.log` (or a binary file) said 'no runs recorded', and `advisor plan
    --history train.log` would have appended its rows to the log."""
    from advisor.cli import main

    other = tmp_path / "train.log"
    other.write_bytes(content)
    assert main([*command, "--history", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"--history names {other}, which is not an advisor history" in err and "Nothing was run." in err
    assert "Traceback" not in err and other.read_bytes() == content


def test_a_history_with_a_torn_last_line_still_reads(tmp_path, capsys):
    from advisor.cli import main

    history = tmp_path / "h.jsonl"
    history.write_text((REPO / "recipes" / ".history.jsonl").read_text().splitlines()[0] + '\n{"kind": "tri')
    assert main(["history", "--history", str(history)]) == 0
    assert "1 torn line(s) left out" in capsys.readouterr().out


def test_a_workload_spec_that_names_a_folder_or_a_non_python_file_says_which_form_works(tmp_path, monkeypatch):
    """`--workload train.log:workload` said "No module named 'train'" and `--workload proj:workload` (a folder)
    "has no function 'workload'. Callables it defines: none"; a package folder, or a module beside a folder of the
    same name, still imports as Python would."""
    project = _project(tmp_path)
    (tmp_path / "train.log").write_text("step 1 loss 2.3\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WorkloadError) as caught:
        load_workload_function("proj:workload")
    assert "names the folder 'proj' (Python files there: mymodel.py, textcnn.py)" in str(caught.value)
    assert "for example 'proj/textcnn.py:workload'" in str(caught.value)  # the file that defines it
    with pytest.raises(WorkloadError, match="'train.log', a file that is not Python source"):
        load_workload_function("train.log:workload")
    (project / "__init__.py").write_text("def workload():\n    return 'the package'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert load_workload_function("proj:workload")() == "the package"
    finally:
        sys.modules.pop("proj", None)


@pytest.mark.parametrize("argv, said", [
    (["workloads", "foo"], "`advisor workloads` does not take 'foo'."),
    (["history", "--jsn"], "`advisor history` does not take '--jsn'. Did you mean --json?"),
    (["export", "R", "--to", "torchrun", "--forse"], "Did you mean --force?"),
])
def test_a_word_the_command_does_not_take_is_named_with_the_command(capsys, argv, said):
    """argparse printed the bare `advisor` usage and 'advisor: error: unrecognized arguments: foo', naming neither
    the command nor what it takes."""
    from advisor.cli import main

    assert main([str(REPO_RECIPE) if word == "R" else word for word in argv]) == 2
    err = capsys.readouterr().err
    assert said in err and f"`advisor {argv[0]} --help` lists what it takes" in err and "usage:" not in err


@pytest.mark.parametrize("script, said", [
    ("runs", "The script 'runs' is a folder (its .py files: train.py)"),
    ("train.sh", "The script 'train.sh' is not Python source (a /bin/bash script)"),
    ("model.bin", "The script 'model.bin' is not Python source (binary)"),
])
def test_a_script_python_cannot_run_is_refused_before_the_first_look(tmp_path, script, said):
    """A shell script or a binary file after `--` failed in the first look's worker (exit 1, Python's SyntaxError
    traceback relayed); a folder was said not to exist. A Python script without .py (a python shebang) still
    runs."""
    from advisor.door import detect_form
    from advisor.errors import SetupError

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "train.py").write_text("")
    (tmp_path / "train.sh").write_text("#!/bin/bash\ntorchrun train.py \"$@\"\n")
    (tmp_path / "model.bin").write_bytes(b"\x80\x04\x95\x00\x00" * 20)
    (tmp_path / "train").write_text("#!/usr/bin/env python3\nimport torch\n")
    with pytest.raises(SetupError) as caught:
        detect_form([script, "--bs", "{per_device}"], workdir=str(tmp_path))
    assert said in str(caught.value) and "Nothing was run." in str(caught.value)
    assert detect_form(["train", "--bs", "{per_device}"], workdir=str(tmp_path)).form == "placeholders"


def test_a_mistyped_placeholder_is_named_with_the_one_meant(tmp_path):
    """`--bs {per_devise}` was read as no placeholder at all ('its arguments hold no placeholder')."""
    from advisor.door import detect_form
    from advisor.errors import SetupError

    (tmp_path / "train.py").write_text("import torch\n")
    with pytest.raises(SetupError, match=r"hold \{per_devise\}, which is no placeholder: did you mean \{per_device\}"):
        detect_form(["train.py", "--bs", "{per_devise}"], workdir=str(tmp_path))
    # The flag's own spelling, hyphenated (a newcomer's `--batch-size {per-device}`): it too read as no placeholder.
    with pytest.raises(SetupError, match=r"hold \{per-device\}, which is no placeholder: did you mean \{per_device\}"):
        detect_form(["train.py", "--batch-size", "{per-device}"], workdir=str(tmp_path))
    spec = detect_form(["train.py", "--bs", "{per_device}", "--cfg", '{"tag": 1}', "--fmt", "{name}", "--x", "{a-b}"],
                       workdir=str(tmp_path))
    assert spec.form == "placeholders"  # braces that are no near miss are the script's own


def test_a_syntax_error_in_a_workload_file_names_the_users_line(tmp_path):
    """It said '(at <frozen importlib._bootstrap>:241)', the last frame of the import, not the file's line."""
    broken = tmp_path / "wl.py"
    broken.write_text("import math\n\ndef workload(:\n    pass\n")
    with pytest.raises(WorkloadError) as caught:
        load_workload_function(f"{broken}:workload")
    assert f"(at {broken}:3)" in str(caught.value) and "frozen" not in str(caught.value)


@pytest.mark.parametrize("seconds", [-5.0, 0.0, float("inf")])
def test_a_rendezvous_timeout_that_is_no_positive_time_is_refused_with_the_cluster_flags(seconds):
    """`--rdzv-timeout -5` tried the rendezvous and then said 'could not reach node 0 ... within -5 s'."""
    from advisor.cluster import cluster_spec
    from advisor.errors import SetupError

    with pytest.raises(SetupError, match=f"--rdzv-timeout must be a positive number of seconds, not {seconds:g}"):
        cluster_spec(2, 1, "127.0.0.1:29611", None, seconds, environ={})


def test_the_script_door_checks_the_flags_before_its_first_look_runs_the_script(tmp_path):
    """`advisor plan --trial-steps 1 -- train.py ...` ran the script's first look (13.6 s at load 10) and then
    said '--trial-steps must be at least 4 ... Nothing was run.' The flag checks come first now."""
    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.door import script_session
    from advisor.method import MethodSettings
    from advisor.setup_checks import SetupRefused

    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    settings = MethodSettings(workload="script", adapter_name="ddp", nproc=2, device="cpu",
                              memory_budget_bytes=64 * 2**20, trial_steps=1)
    host = HostDevices("cpu", cpu_count=4, physical_memory=8 * 2**30)
    with pytest.raises(SetupRefused, match="--trial-steps must be at least 4"):
        script_session([str(script), "--bs", "{per_device}"], load_adapter("ddp"), settings, host)
    assert not marker.exists()


def test_the_plain_templates_toy_data_is_learnable(tmp_path):
    """docs/your-training.md's three steps (`advisor init`, `workloads --check`, `advisor plan`) ended in exit 3,
    NOT VALIDATED, 'check the base LR': the template's labels were random, so no sweep candidate could beat chance
    on validation (val acc 0.05-0.11 with 10 classes, 2 plans at load ~10). A short SGD run at the template's own
    LR and batch must now beat chance clearly, as the sweep's 'learned' verdict needs."""
    import torch

    from advisor.templates import render

    path = tmp_path / "workload.py"
    path.write_text(render("plain", str(path)))  # what `advisor init` writes
    wl = load_workload_function(f"{path}:workload")()
    torch.manual_seed(0)
    model = wl.build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=wl.current_lr, momentum=0.9)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny steps: a thread pool on a loaded 2-core machine made them 10x slower
    try:
        for x, y in torch.utils.data.DataLoader(wl.train_data, batch_size=wl.current_batch_size, shuffle=True):
            optimizer.zero_grad()  # one epoch: 14 steps
            wl.loss_fn(model(x), y).backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    x, y = wl.val_data.tensors
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    assert accuracy > 0.5, accuracy  # chance is 0.1; random labels scored 0.05-0.11


@pytest.mark.parametrize("argv, said", [
    (["plan", "--nproc", "abc"], "`advisor plan`: --nproc takes a whole number, not 'abc'."),
    (["init", "--template", "plian"], "--template is one of 'plain', 'transformers', 'timm', 'lightning', not 'plian'"),
    (["export", "R"], "`advisor export`: --to is missing."),
    (["plan", "--out"], "--out needs a value after it"),
])
def test_argparses_own_refusals_are_one_paragraph_without_the_usage(capsys, argv, said):
    """`advisor plan --nproc abc` printed the whole usage (12 lines) before 'advisor plan: error: argument --nproc:
    invalid int value: 'abc''; now one paragraph naming the option, what it takes and where the options are listed."""
    from advisor.cli import main

    assert main([str(REPO_RECIPE) if word == "R" else word for word in argv]) == 2
    err = capsys.readouterr().err
    assert said in err and f"`advisor {argv[0]} --help` lists what it takes" in err
    assert "usage:" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flags, said", [(["--nproc", "0"], "--nproc must be at least 1, not 0"),
                                         ([], "does not exist")])
def test_a_refused_script_plan_announces_no_first_look(tmp_path, capsys, flags, said):
    """A newcomer's `advisor plan --nproc 0 ... -- train.py ...` printed '== a first look at train.py' and then
    '... Nothing was run.'; a mistyped script path printed the same header before 'does not exist'."""
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the script ran')\n")
    target = str(script) if flags else str(tmp_path / "trian.py")
    code, err = in_process(capsys, "plan", "--device-memory", "1GiB", *flags, "--out", str(tmp_path / "r.toml"),
                           "--", target, "--bs", "{per_device}")
    assert code == 2 and said in err and "Traceback" not in err, err
    assert "a first look" not in err, err
