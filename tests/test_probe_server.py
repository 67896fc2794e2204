"""Fast, still isolated jobs: probes, trials and sweep runs (1 or N ranks) fork from a pre-imported server
(advisor/probe_server.py).

Real processes throughout: the DDP adapter's worker, real RLIMIT_DATA budgets, real OOMs, real kills.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from advisor.adapters import load_adapter
from advisor.method.ceiling import search_ceiling
from advisor.errors import CancelledError, TrialError
from advisor.job import TrialJob
from advisor.launch import CancelToken, run_job, worker_env
from advisor.method import MethodSettings
from advisor.probe_server import ProbeServer
from advisor.runner import JobRunner
from helpers import advisor_processes, assert_none_left, REPO, workload_spec

MIB = 2**20


def _job(**kw) -> TrialJob:
    base = dict(kind="probe", workload="digits-mlp", per_device_batch=8, steps=2, workdir=str(REPO),
                memory_budget_bytes=64 * MIB)
    base.update(kw)
    return TrialJob(**base)


SHARED_SERVER_PIDS: set[int] = set()  # the module's shared server: alive between tests by design
KEPT_PROCESSES = SHARED_SERVER_PIDS  # conftest's no_leftover_processes leaves them alone


@pytest.fixture(scope="module")
def shared_server():
    """One server for the module's tests (its start imports torch: seconds on a busy machine)."""
    ddp = load_adapter("ddp")
    env = ddp.environment("cpu")
    probe_server = ProbeServer(ddp.worker_module, worker_env(_job(), env), str(REPO))
    assert probe_server.start(), probe_server.unavailable
    SHARED_SERVER_PIDS.add(probe_server.proc.pid)
    yield probe_server, env
    probe_server.close()
    assert probe_server.proc.poll() is not None and not advisor_processes()


def _ours_left() -> list:
    return [p for p in advisor_processes() if p.pid not in SHARED_SERVER_PIDS]


@pytest.fixture
def server(shared_server):
    """The shared server; after the test, no process of this engine but the server itself is left."""
    yield shared_server
    assert_none_left(_ours_left)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow  # fresh launches on both sides of the edge; the fast tier's fork check is the loss-curve test
def test_warm_workers_find_the_ceiling_fresh_torchrun_probes_find(no_leftover_processes):
    """The search runs on forked probes; fresh torchrun launches agree on both sides of its edge and measure
    the same peak at a fit batch (the same worker, environment and budget, only the start differs)."""
    settings = MethodSettings(workload="digits-mlp", adapter_name="ddp", nproc=1, device="cpu",
                              memory_budget_bytes=64 * MIB, workdir=str(REPO))
    fast = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken())
    fresh = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken(), warm_workers=False)
    try:
        result = search_ceiling(lambda b, p: fast.probe(b, p), settings.memory_budget_bytes, headroom=0.0)
        assert fast.probe_server is not None and fast.probe_server_unavailable is None
        step = result.smallest_oom - result.largest_ok
        assert 0 < step <= max(1, 0.05 * result.largest_ok)
        # Two bisection steps each side: near the limit the edge is a band of a few percent, not a line
        # (ENVIRONMENT.md; one step below the forked edge, a fresh launch ran out of memory once in CI2, under load).
        assert fresh.probe(result.largest_ok - 2 * step, "check").status == "ok"
        assert fresh.probe(result.smallest_oom + 2 * step, "check").status == "oom"
        fit = next(t for t in result.trials if t.purpose == "fit" and t.status == "ok")
        assert fresh.probe(fit.batch, "check").peak_bytes == fit.peak_bytes
    finally:
        fast.close()


def test_a_probe_after_an_oom_runs_in_a_new_process_with_the_memory_of_a_fresh_one(server):
    probe_server, env = server
    pids, peaks = [], []
    for batch, expected in ((64, "ok"), (100_000, "oom"), (64, "ok")):
        outcome = run_job(None, _job(per_device_batch=batch), 1, 120, env=env, server=probe_server)
        assert outcome.status == expected
        pids.append(outcome.first("started")["pid"])
        peaks.append(outcome.first("probe").get("peak_bytes"))
    assert len(set(pids)) == 3 and probe_server.proc.pid not in pids
    assert not any(_alive(pid) for pid in pids)  # each probe's process is gone once its answer is in
    assert peaks[2] == peaks[0]  # the OOM left nothing behind for the next probe


def test_forked_probes_run_with_the_launch_env(server):
    """glibc reads MALLOC_MMAP_THRESHOLD_ at start-up: the server starts with it, and a fork inherits it."""
    probe_server, env = server
    assert env["MALLOC_MMAP_THRESHOLD_"] == "65536"
    outcome = run_job(None, _job(), 1, 120, env=env, server=probe_server)
    pid = outcome.first("started")["pid"]
    assert pid != probe_server.proc.pid
    assert psutil.Process(probe_server.proc.pid).environ()["MALLOC_MMAP_THRESHOLD_"] == "65536"


def test_a_job_that_ends_before_the_engine_takes_its_pid_is_still_seen_to_end(server, monkeypatch):
    """The server reports a job's pid, and its exit as soon as it reaps it: a forked probe can end within 0.2 s,
    before the thread that asked for it has run again (a busy app's main thread holds the GIL; seen in the
    app's full walk, which then waited the whole 900 s trial timeout for an exit already reported). Here the
    asking thread is held until the job is gone and its exit has been sent: the job must still end at once."""
    import advisor.probe_server as probe_server_module

    probe_server, env = server
    fdopen = os.fdopen

    def late_fdopen(*args, **kwargs):  # the asking thread, descheduled right after the pid came back
        deadline = time.monotonic() + 30
        while psutil.Process(probe_server.proc.pid).children() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # the server's exit reply (sent on its next 50 ms turn) is in and read
        return fdopen(*args, **kwargs)

    monkeypatch.setattr(probe_server_module.os, "fdopen", late_fdopen)
    began = time.monotonic()
    outcome = run_job(None, _job(), 1, 20, env=env, server=probe_server)
    monkeypatch.undo()
    assert outcome.status == "ok" and outcome.first("probe")["status"] == "ok"
    assert time.monotonic() - began < 10  # not the trial timeout (20 s here)


def test_cancelling_a_forked_probe_stops_it_and_leaves_no_process(server):
    probe_server, env = server
    cancel, started = CancelToken(), []

    def on_event(event):
        if event["event"] == "started":
            started.append(event["pid"])
            threading.Timer(1.0, cancel.cancel).start()

    job = _job(kind="train", workload=workload_spec("slow_linear"), steps=10_000, memory_budget_bytes=None)
    with pytest.raises(CancelledError, match="cancelled"):
        run_job(None, job, 1, 120, on_event=on_event, env=env, cancel=cancel, server=probe_server)
    assert started and not _alive(started[0])
    assert probe_server.proc.poll() is None  # the server itself keeps serving
    assert run_job(None, _job(), 1, 120, env=env, server=probe_server).status == "ok"


def test_a_hung_forked_probe_times_out_with_a_message(server):
    probe_server, env = server
    job = _job(kind="train", workload=workload_spec("slow_linear"), steps=10_000, memory_budget_bytes=None,
               loss_every=10**9)
    began = time.monotonic()
    with pytest.raises(TrialError, match="made no progress for 3 s") as err:
        run_job(None, job, 1, 120, idle_timeout_s=3, env=env, server=probe_server)
    assert time.monotonic() - began < 30 and "stopped" in str(err.value)


def test_a_killed_engine_takes_its_probe_server_and_probes_with_it(tmp_path):
    script = tmp_path / "engine.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from advisor.adapters import load_adapter
        from advisor.launch import run_job, worker_env
        from advisor.probe_server import ProbeServer
        from helpers import workload_spec
        from advisor.job import TrialJob
        ddp = load_adapter("ddp")
        env = ddp.environment("cpu")
        # Silent after its first step: a probe that writes would die of SIGPIPE anyway, this one must be ended.
        job = TrialJob(kind="train", workload=workload_spec("slow_linear"), per_device_batch=8, steps=10_000,
                       loss_every=10**9, workdir={str(REPO)!r})
        server = ProbeServer(ddp.worker_module, worker_env(job, env), {str(REPO)!r})
        assert server.start(), server.unavailable
        print("server", server.proc.pid, flush=True)
        pid = []
        def on_event(event):
            if event["event"] == "started":
                pid.append(event["pid"])
            if event["event"] == "progress":  # its last output line: from here on the probe is silent
                print("probe", pid[0], flush=True)
        run_job(None, job, 1, 600, on_event=on_event, env=env, server=server)
    """))
    engine = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    pids = {}
    for line in engine.stdout:
        name, pid = line.split()
        pids[name] = int(pid)
        if "probe" in pids:
            break
    time.sleep(1.0)
    engine.kill()  # SIGKILL: no cleanup code of the engine runs
    engine.wait()
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = [p for p in pids.values() if _alive(p)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert set(pids) == {"server", "probe"} and not survivors


@pytest.mark.slow  # the fast tier's fallback check is the forked trial's (the same _fresh_after_fork_failure)
def test_a_forked_probe_that_crashes_is_probed_again_with_a_fresh_launch(no_leftover_processes):
    """A forked probe killed by a signal (seen: SIGSEGV in a transformers model) is not an answer: the same
    probe runs again as a fresh launch (the reference path), the user is told, and later probes launch fresh."""
    from advisor.events import Note

    settings = MethodSettings(workload=workload_spec("segfault_when_forked"), adapter_name="ddp", nproc=1,
                              device="cpu", memory_budget_bytes=64 * MIB, workdir=str(REPO))
    events = []
    runner = JobRunner(load_adapter("ddp"), settings, events.append, CancelToken())
    try:
        assert runner.warm_workers
        trial = runner.probe(8, "edge")
        assert trial.status == "ok" and trial.peak_bytes
        notes = [e.message for e in events if isinstance(e, Note)]
        assert any("forked memory probe at batch 8 failed" in n and "fresh launch" in n for n in notes), notes
        assert not runner.warm_workers and runner.probe_server is None
        assert runner.probe(4, "edge").status == "ok"  # and the next one launches fresh
    finally:
        runner.close()


@pytest.mark.slow  # a CPU memory-edge rule, not a launch path: two probes each way
@pytest.mark.parametrize("fast", [True, False], ids=["forked", "fresh"])
def test_a_cpu_probe_killed_by_sigsegv_under_its_memory_limit_counts_as_out_of_memory(fast, no_leftover_processes):
    """Under RLIMIT_DATA a native library that ignores a failed allocation dies of SIGSEGV at the edge (a
    transformers ResNet did, forked and fresh): that probe is an OOM answer with the reason, not a crashed plan.
    Without a memory limit the same death stays a crash."""
    settings = MethodSettings(workload=workload_spec("segfault_at_16"), adapter_name="ddp", nproc=1, device="cpu",
                              memory_budget_bytes=64 * MIB, workdir=str(REPO))
    runner = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken(), warm_workers=fast)
    try:
        assert runner.probe(8, "edge").status == "ok"
        edge = runner.probe(16, "edge")
        assert edge.status == "oom" and "SIGSEGV under the memory limit" in edge.message
    finally:
        runner.close()
    unlimited = MethodSettings(workload=workload_spec("segfault_at_16"), adapter_name="ddp", nproc=1, device="cpu",
                               memory_budget_bytes=None, workdir=str(REPO))
    runner = JobRunner(load_adapter("ddp"), unlimited, lambda event: None, CancelToken(), warm_workers=False)
    with pytest.raises(TrialError, match="SIGSEGV"):
        runner.probe(16, "edge")


def _train_job(**kw) -> TrialJob:
    return _job(**{"kind": "train", "per_device_batch": 16, "steps": 12, "lr": 0.05, "loss_every": 1,
                   "evaluate": True, "memory_budget_bytes": None, **kw})


def _by_rank(outcome, kind="result") -> dict:
    return {e["rank"]: e for e in outcome.all(kind)}


def test_a_forked_two_rank_trial_gives_the_loss_curve_of_a_fresh_torchrun_launch(server):
    """The same seed, job and environment: two ranks forked from the warm server train exactly as torchrun's
    workers do (same losses to 1e-6, same validation), each rank its own new process."""
    probe_server, env = server
    job = _train_job()
    forked = run_job(None, job, 2, 180, env=env, server=probe_server)
    fresh = run_job(load_adapter("ddp").command, job, 2, 180, env=env)
    for outcome in (forked, fresh):
        started = _by_rank(outcome, "started")
        assert set(started) == {0, 1} and all(e["world_size"] == 2 for e in started.values())
    forked_lead, fresh_lead = _by_rank(forked)[0], _by_rank(fresh)[0]
    assert len(forked_lead["losses"]) == 12
    assert forked_lead["losses"] == pytest.approx(fresh_lead["losses"], abs=1e-6)
    assert forked_lead["val_loss"] == pytest.approx(fresh_lead["val_loss"], abs=1e-6)
    pids = {e["pid"] for e in forked.all("started")}
    assert len(pids) == 2 and probe_server.proc.pid not in pids


def test_ranks_that_ran_out_of_memory_are_never_reused(server):
    """A 2-rank job that runs out of memory leaves nothing behind: the next job gets new processes, forked from
    the same clean parent, and trains; the parent never ran a job."""
    probe_server, env = server
    oom = run_job(None, _train_job(per_device_batch=100_000, memory_budget_bytes=64 * MIB, evaluate=False), 2,
                  180, env=env, server=probe_server)
    assert oom.status == "oom"
    oom_pids = {e["pid"] for e in oom.all("started")}
    after = run_job(None, _train_job(memory_budget_bytes=64 * MIB, evaluate=False), 2, 180, env=env,
                    server=probe_server)
    assert after.status == "ok" and set(_by_rank(after)) == {0, 1}
    after_pids = {e["pid"] for e in after.all("started")}
    assert len(oom_pids) == 2 and len(after_pids) == 2 and not oom_pids & after_pids
    assert probe_server.proc.pid not in oom_pids | after_pids
    assert not any(_alive(pid) for pid in oom_pids | after_pids)


def test_a_forked_rank_killed_by_a_signal_is_named_like_torchruns(server):
    """The leader reports a rank's death as torchrun does (its root-cause block), so the engine names the rank
    and the signal; the peer it stopped is not blamed."""
    probe_server, env = server
    job = _train_job(workload=workload_spec("segfault_when_forked"), steps=4, evaluate=False)
    with pytest.raises(TrialError, match=r"rank [01] was killed by SIGSEGV"):
        run_job(None, job, 2, 180, env=env, server=probe_server)


def test_a_forked_trial_that_crashes_runs_again_with_a_fresh_launch(no_leftover_processes):
    """A rank killed by a signal in a forked run may be the fork's doing: the fresh launch (the reference path)
    runs the same job, the user is told, and the rest of the plan launches fresh."""
    from advisor.events import Note

    settings = MethodSettings(workload=workload_spec("segfault_when_forked"), adapter_name="ddp", nproc=2,
                              device="cpu", memory_budget_bytes=None, workdir=str(REPO))
    events = []
    runner = JobRunner(load_adapter("ddp"), settings, events.append, CancelToken())
    try:
        record = runner.train("trial", 8, 4, 0.05)
        assert record.status == "ok" and record.world_size == 2
        notes = [e.message for e in events if isinstance(e, Note)]
        assert any("forked trial at 8 per device failed" in n and "fresh launch" in n for n in notes), notes
        assert not runner.warm_workers and runner.probe_server is None
    finally:
        runner.close()


def test_a_workload_error_in_a_forked_trial_is_reported_once_not_rerun(no_leftover_processes):
    """An error the workload raises is the run's answer whichever way it started: no second, fresh launch."""
    settings = MethodSettings(workload=workload_spec("crash_in_forward"), adapter_name="ddp", nproc=2,
                              device="cpu", memory_budget_bytes=None, workdir=str(REPO))
    events = []
    runner = JobRunner(load_adapter("ddp"), settings, events.append, CancelToken())
    try:
        with pytest.raises(TrialError, match="failed on rank"):
            runner.train("trial", 8, 4, 0.05)
        assert runner.warm_workers and runner.probe_server is not None  # no fallback for the workload's own error
    finally:
        runner.close()


def test_a_server_started_early_serves_the_first_probe(no_leftover_processes):
    """`advisor plan` starts the fork server while its workload check runs (start_server_early): the first probe
    waits for that start and forks from that server; it does not start a second one."""
    settings = MethodSettings(workload="digits-mlp", adapter_name="ddp", nproc=1, device="cpu",
                              memory_budget_bytes=64 * MIB, workdir=str(REPO))
    runner = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken())
    try:
        runner.start_server_early()
        early = runner.probe_server
        assert early is not None and early.proc is not None  # launched at once: its imports run meanwhile
        assert runner.probe(8, "fit").status == "ok"
        assert runner.probe_server is early and runner.probe_server_unavailable is None
    finally:
        runner.close()


def test_a_plan_whose_workload_check_fails_stops_the_server_it_started_early(tmp_path, capsys):
    """The early server's start overlaps the check; a check that fails ends the plan (exit 2, the check's
    paragraph) with that server stopped at once, not left to the engine's exit (a caller that goes on, the app)."""
    import gc

    from advisor.cli import main

    gc.disable()  # the runner's finalizer would close the server once collected: the plan itself must close it
    try:
        code = main(["plan", "--workload", workload_spec("crash_in_forward"), "--device-memory", "64MiB", "--nproc",
                     "1", "--out", str(tmp_path / "r.toml")])
        assert code == 2 and "is invalid for input of size" in capsys.readouterr().err
        assert _ours_left() == []  # no wait: closed before the plan returned (the module's shared server aside)
    finally:
        gc.enable()
    assert not (tmp_path / "r.toml").exists()
