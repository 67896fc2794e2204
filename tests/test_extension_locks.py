"""A build of torch's JIT extensions killed midway leaves its ``lock`` file, and every later DeepSpeed worker
on the host waits for it forever. The advisor names such a lock before launching, and a worker waiting on one
stops sending heartbeats (which would hide the hang from the idle timeout) and says why."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from contextlib import redirect_stdout

import pytest

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.errors import SetupError
from advisor.extensions import FRESH_LOCK_S, stale_build_locks
from advisor.job import EVENT_PREFIX
from advisor.launch import JobOutcome, _hung_message
from advisor.method import MethodSettings
from advisor.session import validate_setup


def make_lock(root, name="deepspeed_shm_comm", age_s=FRESH_LOCK_S + 60):
    folder = root / "py311_cpu" / name
    folder.mkdir(parents=True)
    lock = folder / "lock"
    lock.touch()
    then = time.time() - age_s
    os.utime(lock, (then, then))
    return lock


def test_a_lock_no_build_holds_is_stale_and_a_building_or_fresh_one_is_not(tmp_path):
    stale = make_lock(tmp_path)
    fresh = make_lock(tmp_path, "fresh_op", age_s=0)
    building = make_lock(tmp_path, "building_op")
    # torch runs ninja in the build folder for the whole build: a process working there holds the lock.
    ninja = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=building.parent)
    try:
        time.sleep(0.2)
        assert stale_build_locks(tmp_path) == [stale]
    finally:
        ninja.kill()
        ninja.wait()
    assert set(stale_build_locks(tmp_path)) == {stale, building}  # its build is gone now
    assert fresh not in stale_build_locks(tmp_path)


def test_planning_with_deepspeed_names_the_stale_lock_and_the_command_that_removes_it(tmp_path, monkeypatch):
    lock = make_lock(tmp_path)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    adapter = load_adapter("deepspeed")
    settings = MethodSettings(workload="digits-mlp", adapter_name="deepspeed", nproc=2, device="cpu",
                              memory_budget_bytes=300 * 2**20, trial_steps=8, sweep_steps=8)
    with pytest.raises(SetupError, match=rf"stale build lock.*rm {lock}"):
        validate_setup(settings, adapter, HostDevices("cpu"))
    lock.unlink()
    validate_setup(settings, adapter, HostDevices("cpu"))  # gone: nothing else stands in the way


def test_a_worker_waiting_on_a_stale_lock_stops_its_heartbeats_and_the_hang_message_says_why(tmp_path, monkeypatch):
    from advisor_adapters.deepspeed_worker import heartbeat

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    out = io.StringIO()
    with redirect_stdout(out), heartbeat("initialize", every_s=0.05):
        time.sleep(0.3)  # a healthy wait: heartbeats
        lock = make_lock(tmp_path)
        time.sleep(0.4)  # now the wait can never end
    events = [json.loads(line[len(EVENT_PREFIX):]) for line in out.getvalue().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "heartbeat" and kinds[-1] == "stalled" and kinds.count("stalled") == 1
    message = _hung_message("ceiling probe", JobOutcome("ok", events), 2, "made no progress for 180 s",
                            "a rank is stuck")
    assert f"rm {lock}" in message and "a rank is stuck" not in message
