"""The first hour (issue 38): a workload file imports like `python file.py`, and a typo names what was meant.
Subprocesses as a user types them, from the user's folder; nothing trains."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from advisor.errors import WorkloadError
from advisor.workload import load_workload_function
from helpers import REPO


def advisor(*args, cwd):
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


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
def test_a_mistyped_command_names_the_command_meant(tmp_path, typed, meant):
    run = advisor(typed, "x", cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"Did you mean `advisor {meant}`?" in run.stderr


REPO_RECIPE = REPO / "recipes" / "digits-cnn.toml"


@pytest.mark.parametrize("memory, nproc", [("4TiB", "4"), ("8TB", "2")])
def test_replan_confirmed_on_this_host_makes_plans_host_checks(tmp_path, memory, nproc):
    """`replan --device-memory 24GiB --nproc 4` 'confirmed' on a 23.6 GiB host, which `plan` refuses (sizes past
    any test host's RAM here)."""
    run = advisor("replan", str(REPO_RECIPE), "--device-memory", memory, "--nproc", nproc, "--confirm",
                  cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "cannot run them" in run.stderr and "of RAM" in run.stderr and "--no-confirm" in run.stderr


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
def test_a_negative_memory_size_is_named_in_either_form(tmp_path, form):
    """`--device-memory -1GiB` (space form) gave argparse's 'expected one argument', and the = form 'cannot read
    the memory size': both name the size and say it must be larger than zero."""
    done = advisor("plan", "--workload", "digits-mlp", *form, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "'-1GiB' must be larger than zero" in done.stderr and "Traceback" not in done.stderr


def test_a_negative_number_after_any_flag_is_its_value(tmp_path):
    """A value that starts with '-' is the flag's value (argparse reads only plain negative numbers so): the
    message is the option's own check, not argparse's 'expected one argument'."""
    done = advisor("plan", "--workload", "digits-mlp", "--device-memory", "1GiB", "--start", "-3", cwd=tmp_path)
    assert done.returncode == 2 and "--start must be at least 1 sample per device, not -3" in done.stderr, done.stderr


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
