import os
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]

# DeepSpeed's CPU comm op is JIT-built once per venv into torch's extension cache: `make setup` builds it there
# (.ci/prebuild_extensions.py, the same folder). Checkouts whose venvs differ name other include paths in their
# build files, so sharing one cache makes each rebuild it under the others' lock; the venv's own folder does not.
if "TORCH_EXTENSIONS_DIR" not in os.environ:
    import sys

    os.environ["TORCH_EXTENSIONS_DIR"] = str(Path(sys.prefix) / "torch_extensions")
# One ninja for every build of that cache: torch runs the `ninja` it finds on PATH, and ninja versions hash the
# build commands in .ninja_log differently, so a build by another ninja reads as "command line changed" and
# recompiles the op (40-75 s on 2 cores). The venv's own (pip's ninja, a DeepSpeed dependency) comes first for
# every process a test starts, as it already did for the export tests' launch lines (they need the venv's
# deepspeed/accelerate/torchrun on PATH) while workers and scripts found /usr/bin/ninja: each switch between
# them rebuilt the op. .ci/prebuild_extensions.py builds with the same one.
_VENV_BIN = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _VENV_BIN:
    os.environ["PATH"] = os.pathsep.join([_VENV_BIN, os.environ.get("PATH", "")])
TEST_WORKLOADS = REPO / "tests" / "workloads"
WORKER_MARKERS = ("advisor_adapters.", "torch.distributed.run", "advisor.shim")


def advisor_processes(engine_pids=None, include_self=True):
    """Worker or launcher processes that an advisor engine in this test run started and that are still alive.

    Workers carry BATCH_ADVISOR_ENGINE_PID; only those of this process (or the given engine pids, e.g. a
    CLI subprocess) count, so other advisor runs on the same machine are left alone. ``include_self=False``:
    only the given engines' (a test waiting for its CLI's workers must not see an earlier test's last ones).
    """
    owners = ({str(os.getpid())} if include_self else set()) | {str(p) for p in (engine_pids or ())}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if proc.info["status"] == psutil.STATUS_ZOMBIE or not any(m in cmd for m in WORKER_MARKERS):
            continue
        try:
            owner = proc.environ().get("BATCH_ADVISOR_ENGINE_PID")
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if owner in owners or (engine_pids is None and owner is not None and not psutil.pid_exists(int(owner))):
            found.append(proc)  # ours, or orphaned by an engine that is gone
    return found


def assert_none_left(find) -> None:
    """Give the processes ``find()`` lists 5 s to end; kill any survivor (so later tests stay clean) and fail."""
    deadline = time.monotonic() + 5
    while find() and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = find()
    described = []
    for proc in survivors:
        try:
            described.append(proc.cmdline())
        except psutil.Error:
            described.append(f"pid {proc.pid} (gone)")
        proc.kill()
    assert not survivors, f"processes left behind: {described}"


@pytest.fixture
def no_leftover_processes():
    """Fail the test if any worker survives it; kill survivors so later tests stay clean."""
    yield
    assert_none_left(advisor_processes)


@pytest.fixture(scope="session")
def plain_loop_door_plan(tmp_path_factory):
    """One `advisor plan -- plain_loop.py ...` (tests/door_plans.py), shared by the script door's test and the fsdp
    adapter's comparison against it: the slow tier launches it once."""
    from door_plans import PLAIN_ARGS, PLAIN_LOOP_OPTIONS, plan_through_door

    return plan_through_door(tmp_path_factory.mktemp("plain-loop-plan"), ["plain_loop.py", *PLAIN_ARGS],
                             *PLAIN_LOOP_OPTIONS)


@pytest.fixture
def ddp():
    from advisor.adapters import load_adapter

    return load_adapter("ddp")


def workload_spec(function: str) -> str:
    return f"{TEST_WORKLOADS / 'faulty.py'}:{function}"


@pytest.fixture(autouse=True)
def private_history(tmp_path_factory, monkeypatch):
    """Every test reads and writes a history of its own, never the repository's recipes/.history.jsonl or another
    test's: a plan seeded by earlier runs would decide differently. Tests of the history itself set or unset
    ADVISOR_HISTORY as they need."""
    monkeypatch.setenv("ADVISOR_HISTORY", str(tmp_path_factory.mktemp("history") / ".history.jsonl"))


def plain_strategy(job):
    """The worker's plain single-process strategy (CPU), set up for ``job``."""
    from advisor.worker import WorkerStrategy

    strategy = WorkerStrategy()
    strategy.setup(job)
    return strategy


def train_in_process(workload, capsys, **job_kw) -> dict:
    """run_training in this process with the plain strategy; returns its result event."""
    from advisor.job import EventReader, TrialJob
    from advisor.worker import run_training

    job = TrialJob(kind="train", workload=workload.name, **job_kw)
    strategy = plain_strategy(job)
    model = workload.build_model()
    optimizer = strategy.make_optimizer(workload, model, job)
    model, optimizer = strategy.prepare(model, optimizer, job)
    run_training(job, workload, strategy, model, optimizer, {"enforced": False})
    found = [e for e in map(EventReader().feed, capsys.readouterr().out.splitlines()) if e]
    return next(e for e in found if e["event"] == "result")


def analytic_linear_regression_b_simple(dim: int, distance_sq: float, noise_var: float) -> float:
    """B_simple for least squares 0.5(w.x - y)^2, x ~ N(0, I_dim), y = w*.x + N(0, noise_var), at |w - w*|^2 = distance_sq.

    G = d, Sigma = (|d|^2 + noise_var) I + d d^T (Isserlis), so tr(Sigma) = dim(|d|^2 + noise_var) + |d|^2.
    Checks advisor.method.noise's estimator against a value known in closed form.
    """
    return (dim * (distance_sq + noise_var) + distance_sq) / distance_sq


_CHECKED_WORKLOADS: dict = {}  # (spec, cwd, file stamp) -> WorkloadSummary or the WorkloadError it raised


def _workload_stamp(spec: str):
    """What a check's answer depends on besides the spec: the workload file's size and time, when it is a file."""
    location = spec.rpartition(":")[0]
    path = Path(location)
    if location.endswith(".py") and path.is_file():
        stat = path.stat()
        return stat.st_size, stat.st_mtime_ns
    return None


@pytest.fixture(autouse=True)
def memoised_workload_check(request, monkeypatch):
    """In the app's tests the Setup's workload check (a child process importing torch, ~2 CPU-s) runs once per
    workload for the whole session, not once per app: its answer depends only on the workload. Tests marked
    ``real_workload_check`` (the check's own process, cancel and count) get the real one every time."""
    if not request.module.__name__.startswith("test_tui") or request.node.get_closest_marker("real_workload_check"):
        yield
        return
    import advisor.workload_check as workload_check
    from advisor.errors import WorkloadError

    real = workload_check.check_in_process

    def check_once(spec, **kw):
        key = (spec, os.getcwd(), _workload_stamp(spec))
        if key not in _CHECKED_WORKLOADS:
            try:
                _CHECKED_WORKLOADS[key] = real(spec, **kw)
            except WorkloadError as exc:
                _CHECKED_WORKLOADS[key] = exc
        answer = _CHECKED_WORKLOADS[key]
        if isinstance(answer, WorkloadError):
            raise answer
        return answer

    monkeypatch.setattr(workload_check, "check_in_process", check_once)
    yield
