"""Workload specs and the adapter registry: every bad input gives one clear message."""

import subprocess
import sys
import types

import pytest

from advisor.adapters import Adapter, available_adapters, load_adapter
from advisor.cli import main
from advisor.errors import AdapterError, WorkloadError
from advisor.workload import builtin_names, resolve_workload
from helpers import REPO, workload_spec


@pytest.mark.parametrize("name", sorted(builtin_names()))
def test_every_builtin_builds_and_runs_a_batch(name):
    w = resolve_workload(name)
    model = w.build_model()
    x, y = w.train_data[0:4]
    loss = w.loss_fn(model(x), y)
    assert loss.ndim == 0 and len(w.val_data) > 0 and w.current_lr and w.current_batch_size


def test_file_spec_and_module_spec(tmp_path, monkeypatch):
    assert resolve_workload(workload_spec("slow_linear")).name == "slow"
    monkeypatch.syspath_prepend(str(REPO / "tests" / "workloads"))
    assert resolve_workload("faulty:hang_on_rank1").name == "hangs"


@pytest.mark.parametrize("spec, expected", [
    ("no-such-builtin", "Unknown workload"),
    ("not_a_module_anywhere:fn", "Cannot import the workload module"),
    ("/nowhere/file.py:fn", "does not exist"),
    (workload_spec("missing_function"), "has no function 'missing_function'"),
    (workload_spec("not_a_workload"), "returned dict, not advisor.Workload"),
    (workload_spec("raises_inside"), "ValueError: dataset path /data/train not found"),
])
def test_bad_workload_specs(spec, expected):
    with pytest.raises(WorkloadError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        resolve_workload(spec)


def test_workload_with_a_syntax_error(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("def workload(:\n")
    with pytest.raises(WorkloadError, match="SyntaxError"):
        resolve_workload(f"{bad}:workload")


def test_invalid_workload_fields(tmp_path):
    src = tmp_path / "w.py"
    src.write_text("from advisor import Workload\n"
                   "def workload():\n"
                   "    return Workload(name='x', build_model=None, train_data=[], val_data=[1], loss_fn=len,"
                   " task='poetry', optimizer='magic', current_warmup_steps=-1, epochs=0)\n")
    with pytest.raises(WorkloadError) as err:
        resolve_workload(f"{src}:workload")
    text = str(err.value)
    for part in ("build_model", "train_data is empty", "task 'poetry'", "optimizer 'magic'",
                 "current_warmup_steps must be a whole number", "epochs must be positive"):
        assert part in text


def test_registry_loads_ddp():  # listing without importing: tests/test_architecture.py
    assert available_adapters()["ddp"] == "advisor_adapters.ddp:DDPAdapter"
    adapter = load_adapter("ddp")
    assert isinstance(adapter, Adapter) and adapter.capabilities.multi_process
    assert "torch.distributed.run" in adapter.command("/tmp/job.json", 2)


def test_unknown_adapter_names_the_installed_ones(capsys):
    with pytest.raises(AdapterError, match="Unknown adapter 'horovod'.*ddp"):
        load_adapter("horovod")
    assert main(["plan", "--adapter", "horovod", "--device-memory", "1GiB"]) == 2
    err = capsys.readouterr().err
    assert "Unknown adapter" in err and "Traceback" not in err


def test_a_broken_plugin_warns_and_the_rest_keep_working(monkeypatch, capsys):
    import advisor.adapters as registry

    broken = types.SimpleNamespace(name="broken", value="no_such_pkg:Adapter",
                                   load=lambda: (_ for _ in ()).throw(ImportError("no module named no_such_pkg")))
    real = list(registry.entry_points(group=registry.ENTRY_POINT_GROUP))
    monkeypatch.setattr(registry, "entry_points", lambda group: real + [broken])
    rows = {row.name: row for row in registry.adapter_statuses()}
    assert rows["ddp"].available and not rows["broken"].available
    assert "failed to import" in capsys.readouterr().err


def test_cli_listings_and_bare_help():
    run = lambda *a: subprocess.run([sys.executable, "-m", "advisor.cli", *a], capture_output=True, text=True,  # noqa: E731
                                    stdin=subprocess.DEVNULL, timeout=60)
    workloads = run("workloads")
    assert workloads.returncode == 0 and "digits-cnn" in workloads.stdout and "synthetic-transformer" in workloads.stdout
    adapters = run("adapters")
    assert adapters.returncode == 0 and "ddp" in adapters.stdout
    bare = run()  # no terminal here: the app cannot open, so bare `advisor` prints the help instead of hanging
    assert bare.returncode == 0 and "plan" in bare.stdout and "check" in bare.stdout
    assert "needs a terminal" in bare.stderr
    tui = run("tui")
    assert tui.returncode == 2 and "needs a terminal" in tui.stderr and "Traceback" not in tui.stderr


@pytest.mark.parametrize("args, expected", [
    (["--device-memory", "lots"], "Cannot read the memory size"),
    (["--device-memory", "256", "--workload", "digits-mlp"], "has no unit, so it reads as 256 bytes"),
    ([], "Pass --device-memory"),
    (["--device-memory", "1GiB", "--workload", "nope"], "Unknown workload"),
    (["--device-memory", "64MiB", "--workload", "digits-mlp", "--sweep-extensions", "-1"],
     "--sweep-extensions must be 0 or more"),
    (["--device-memory", "64MiB", "--workload", "digits-mlp", "--sweep-walk", "-1"],  # its former name still reads
     "--sweep-extensions must be 0 or more"),
])
def test_plan_argument_errors_are_one_paragraph(capsys, args, expected):
    assert main(["plan", *args]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_digits_read_with_numpy_are_the_arrays_scikit_learn_loads(monkeypatch):
    """The built-in digits workloads read scikit-learn's bundled file with numpy (0.01 CPU-s, not sklearn's
    0.8 in every worker): the same images and labels; without the file, scikit-learn itself is the fallback."""
    import importlib.util

    import numpy as np
    from sklearn.datasets import load_digits

    from advisor.workloads import digits

    images, labels = digits._digits_arrays()
    reference = load_digits()
    assert np.array_equal(images, reference.images) and np.array_equal(labels, reference.target)
    assert images.dtype == reference.images.dtype and labels.dtype == reference.target.dtype
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # the file not where it ships
    images, labels = digits._digits_arrays()
    assert np.array_equal(images, reference.images) and np.array_equal(labels, reference.target)
