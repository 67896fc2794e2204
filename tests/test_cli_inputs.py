"""Bad paths, counts and closed pipes at the command line: a clear message, nothing run, nothing lost, no
traceback. Subprocesses, as a user types them; none starts a training process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from helpers import REPO

from advisor.device import HostDevices


def advisor(*args, cwd=REPO, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, **kw)


def test_an_out_path_in_a_folder_that_does_not_exist_is_refused_before_anything_runs(tmp_path):
    """Regression (issue 25): `--out` with a typo in a top-level folder silently created that folder at the root."""
    typo = tmp_path / "recipess" / "deeper" / "r.toml"
    started = time.monotonic()
    run = advisor("plan", "--workload", "digits-mlp", "--device-memory", "64MiB", "--out", str(typo))
    assert run.returncode == 2 and time.monotonic() - started < 60
    assert f"the folder {typo.parent} does not exist" in run.stderr and "mkdir -p" in run.stderr
    assert "Nothing was run" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "recipess").exists()  # nothing created on the way


def test_replan_and_export_refuse_a_missing_out_folder_too(tmp_path):
    from advisor.recipe import RecipeError, check_output_path

    with pytest.raises(RecipeError, match="does not exist"):
        check_output_path(tmp_path / "nope" / "r.toml")
    check_output_path(tmp_path / "r.toml")  # an existing folder is fine


@pytest.mark.parametrize("command", [["history"], ["plan", "--workload", "digits-mlp", "--device-memory", "64MiB"]])
@pytest.mark.parametrize("where", ["--history", "env"])
def test_a_history_path_that_is_a_directory_is_refused_before_anything_runs(tmp_path, command, where):
    """`advisor history --history DIR`, `ADVISOR_HISTORY=DIR` and `advisor plan --history DIR` were tracebacks
    (the plan's only after its workload check): now one paragraph naming the source and a file path to use."""
    folder = tmp_path / "runs"
    folder.mkdir()
    env = {**os.environ, "ADVISOR_HISTORY": str(folder)} if where == "env" else None
    extra = ["--history", str(folder)] if where == "--history" else []
    started = time.monotonic()
    run = advisor(*command, *extra, cwd=tmp_path, env=env)
    assert run.returncode == 2 and time.monotonic() - started < 30
    named = "--history" if where == "--history" else "$ADVISOR_HISTORY"
    assert f"{named} names {folder}, a directory" in run.stderr and ".history.jsonl" in run.stderr
    assert "Traceback" not in run.stderr and list(folder.iterdir()) == []


@pytest.mark.parametrize("args", [["history", "--json", "--history", "HISTORY"], ["workloads"], ["adapters"],
                                  ["diagnose", "LOG"]])
def test_every_command_survives_a_reader_that_closed_the_pipe(tmp_path, args):
    """`advisor history | head` printed a BrokenPipeError traceback. The reader closes before the command writes
    anything, so every write fails: the command exits quietly with 141 (a SIGPIPE'd process's status)."""
    history = tmp_path / "history.jsonl"
    history.write_text((REPO / "recipes" / ".history.jsonl").read_text() * 20)
    log = tmp_path / "run.log"
    log.write_text("".join(f"step {i} loss {2.0 / (i + 1):.4f}\n" for i in range(200)))
    args = [{"HISTORY": str(history), "LOG": str(log)}.get(a, a) for a in args]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte
    try:
        run = subprocess.run([sys.executable, "-m", "advisor.cli", *args], stdout=write, stderr=subprocess.PIPE,
                             text=True, cwd=REPO, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in run.stderr and "BrokenPipeError" not in run.stderr, run.stderr
    assert run.returncode == 141


def test_far_more_processes_than_cpu_cores_is_refused_and_a_few_more_is_costed():
    """Regression (issue 25): `--nproc 64` on a 2-core CPU host was accepted."""
    from advisor.adapters import load_adapter
    from advisor.errors import SetupError
    from advisor.method import MethodSettings
    from advisor.session import MAX_CPU_OVERSUBSCRIPTION, validate_setup

    adapter = load_adapter("ddp")
    host = HostDevices("cpu", cpu_count=2, physical_memory=64 * 2**30)

    def settings(nproc):
        return MethodSettings(workload="digits-mlp", adapter_name="ddp", nproc=nproc, device="cpu",
                              memory_budget_bytes=64 * 2**20)

    with pytest.raises(SetupError, match=r"--nproc 64 on this CPU host's 2 core\(s\).*use --nproc 8 or fewer"):
        validate_setup(settings(64), adapter, host)
    setup = validate_setup(settings(2 * MAX_CPU_OVERSUBSCRIPTION), adapter, host)
    assert any("every run takes about 4.0x as long" in note for note in setup.notes)


def test_a_module_function_spec_resolves_from_the_current_folder_with_the_installed_command(tmp_path):
    """Regression (issue 25): `advisor plan --workload mywl:fn` failed from the folder holding mywl.py, while the
    hint said to run from there (the console script's folder, not the user's, heads sys.path). `python -m`
    would hide it, so this runs the installed `advisor` command."""
    script = os.path.join(os.path.dirname(sys.executable), "advisor")
    if not os.path.exists(script):
        pytest.skip("the advisor console script is not installed in this environment")
    (tmp_path / "mywl.py").write_text((REPO / "tests" / "workloads" / "small_data.py").read_text())
    run = subprocess.run([script, "plan", "--workload", "mywl:tiny_142", "--device-memory", "64MiB",
                          "--trial-steps", "0"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 2 and "--trial-steps must be at least" in run.stderr  # stopped on the bad count ...
    assert "Cannot import the workload module" not in run.stderr  # ... not on the module


def test_plan_runs_the_workload_check_before_its_first_probe(tmp_path):
    """Issue 25: `advisor plan` did not run the few-second workload check, so a shape bug in the user's model
    first showed as a worker's traceback after the memory probes had started."""
    from helpers import workload_spec

    started = time.monotonic()
    run = advisor("plan", "--workload", workload_spec("crash_in_forward"), "--device-memory", "64MiB",
                  "--out", str(tmp_path / "r.toml"), timeout=300)
    assert run.returncode == 2 and time.monotonic() - started < 120
    assert "== checking the workload" in run.stderr and "== 1. memory ceiling" not in run.stderr
    assert "Traceback" not in run.stderr and "is invalid for input of size" in run.stderr  # the check says why
    assert not (tmp_path / "r.toml").exists()
