"""Engine v2 on real processes: probes hold what training holds, the ceiling holds outside the tool, cancel."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.errors import CancelledError
from advisor.job import TrialJob
from advisor.launch import CancelToken, run_job
from advisor.method import MethodSettings
from advisor.session import Session, validate_setup
from helpers import advisor_processes, REPO, workload_spec

pytestmark = [pytest.mark.distributed, pytest.mark.usefixtures("no_leftover_processes")]
MIB = 2**20


def _peak(adapter, kind, workload, optimizer, batch):
    job = TrialJob(kind=kind, workload=workload, per_device_batch=batch, steps=2 if kind == "probe" else 4,
                   lr=1e-3, memory_budget_bytes=512 * MIB, workdir=str(REPO), extra={"optimizer": optimizer})
    outcome = run_job(adapter.command, job, 1, 120, env=adapter.environment("cpu"))
    event = outcome.first("probe" if kind == "probe" else "result")
    return event["peak_bytes"], event["breakdown"]


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_a_probe_holds_what_a_training_step_holds(optimizer):
    # Regression: probes ran forward/backward without optimizer.step(), so Adam's moments and SGD's
    # momentum were never allocated (digits-mlp Adam at 64: probe 1.50 MB, training 2.23 MB).
    ddp = load_adapter("ddp")
    probe_peak, probe_parts = _peak(ddp, "probe", "digits-mlp", optimizer, 64)
    train_peak, _ = _peak(ddp, "train", "digits-mlp", optimizer, 64)
    assert probe_peak == pytest.approx(train_peak, rel=0.02), (probe_peak, train_peak)
    assert probe_parts.get("Optstate", 0) > 0  # the optimizer state is part of the probe's peak
    assert any(k.startswith("ddp_buckets") for k in probe_parts)  # and DDP's all-reduce buckets


@pytest.mark.slow
def test_the_advised_ceiling_survives_a_plain_loop_with_the_recipe_env(tmp_path):
    # Regression: probes ran with MALLOC_MMAP_THRESHOLD_ set; a plain default-env loop then OOMed at the
    # advised ceiling. The recipe now carries the setting, and the ceiling holds with it.
    ddp = load_adapter("ddp")
    budget = 160 * MIB
    settings = MethodSettings(workload="digits-cnn", adapter_name="ddp", nproc=1, device="cpu",
                              memory_budget_bytes=budget, workdir=str(REPO))
    with Session(ddp, settings, validate_setup(settings, ddp, HostDevices("cpu"))) as session:
        ceiling = session.ceiling()
    assert ceiling.smallest_oom is not None, "the budget should be tight enough to meet a real OOM"
    env = {**os.environ, **session.runner.env}
    assert session.runner.env == {"MALLOC_MMAP_THRESHOLD_": "65536"}
    loop = subprocess.run([sys.executable, str(REPO / "tests" / "plain_loop.py"), "digits-cnn",
                           str(ceiling.per_device_max), str(budget), "50"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert loop.returncode == 0, loop.stdout + loop.stderr


def test_cancel_stops_a_running_probe_and_every_process_within_seconds():
    ddp = load_adapter("ddp")
    settings = MethodSettings(workload=workload_spec("slow_to_build"), adapter_name="ddp", nproc=1, device="cpu",
                              memory_budget_bytes=256 * MIB, workdir=str(REPO))
    session = Session(ddp, settings, validate_setup(settings, ddp, HostDevices("cpu")))
    errors = []

    def run():
        try:
            session.ceiling()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while not advisor_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert advisor_processes(), "the probe never started"
    time.sleep(1.0)
    asked = time.monotonic()
    session.cancel()
    thread.join(timeout=20)
    assert not thread.is_alive() and time.monotonic() - asked < 10
    assert len(errors) == 1 and isinstance(errors[0], CancelledError)
    assert "cancelled" in str(errors[0]) and errors[0].exit_code == 130


def test_run_job_cancel_token_from_another_thread():
    ddp = load_adapter("ddp")
    token = CancelToken()
    job = TrialJob(kind="train", workload=workload_spec("slow_linear"), per_device_batch=8, steps=10_000,
                   workdir=str(REPO))
    threading.Timer(4.0, token.cancel).start()
    started = time.monotonic()
    with pytest.raises(CancelledError):
        run_job(ddp.command, job, 2, timeout_s=120, cancel=token)
    assert time.monotonic() - started < 15
