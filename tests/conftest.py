import os
import sys
from pathlib import Path

import pytest

from helpers import (PLUGIN, PROTOCOL_PLUGIN, advisor_processes, assert_none_left, dist_info,
                     install_fake_cuda)

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
@pytest.fixture
def no_leftover_processes(request):
    """Fail the test if any worker survives it; kill survivors so later tests stay clean. A module whose processes
    outlive its tests on purpose (a shared server) names their pids in KEPT_PROCESSES."""
    yield
    kept = getattr(request.module, "KEPT_PROCESSES", set())
    assert_none_left(lambda: [p for p in advisor_processes() if p.pid not in kept])


@pytest.fixture
def one_rank_group():
    """A one-rank gloo process group in this process."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """The example plugins 'installed', plus a broken one whose module does not exist."""
    site = tmp_path / "site"
    dist_info(site, "advisor_single", "single = advisor_single:SingleProcessAdapter")
    dist_info(site, "advisor_protocol", "protocol = advisor_protocol:ProtocolAdapter")
    dist_info(site, "advisor_broken", "broken = advisor_no_such_module:Adapter")
    path = os.pathsep.join([str(PLUGIN), str(PROTOCOL_PLUGIN), str(site)])
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(PLUGIN))
    monkeypatch.syspath_prepend(str(PROTOCOL_PLUGIN))
    monkeypatch.setenv("PYTHONPATH", path + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return path


@pytest.fixture
def fake_cuda(monkeypatch):
    """An 80 GiB card at torch.cuda's device boundary, nothing held beside the allocator (helpers.install_fake_cuda):
    the calls made, as (name, args, kwargs)."""
    return install_fake_cuda(monkeypatch)


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


@pytest.fixture(autouse=True)
def private_history(tmp_path_factory, monkeypatch):
    """Every test reads and writes a history of its own, never the repository's recipes/.history.jsonl or another
    test's: a plan seeded by earlier runs would decide differently. Tests of the history itself set or unset
    ADVISOR_HISTORY as they need."""
    monkeypatch.setenv("ADVISOR_HISTORY", str(tmp_path_factory.mktemp("history") / ".history.jsonl"))


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
