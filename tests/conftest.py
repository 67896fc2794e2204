import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_WORKLOADS = REPO / "tests" / "workloads"
WORKER_MARKERS = ("advisor_adapters.", "torch.distributed.run")


def advisor_processes():
    """Worker or launcher processes that this checkout's advisor started and that are still alive.

    Only processes running this interpreter count: other checkouts on the same machine run their own
    tests at the same time, and their workers are theirs to clean up.
    """
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        argv = proc.info["cmdline"] or []
        cmd = " ".join(argv)
        if argv and argv[0] != sys.executable:
            continue
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(m in cmd for m in WORKER_MARKERS):
            found.append(proc)
    return found


@pytest.fixture
def no_leftover_processes():
    """Fail the test if any worker survives it; kill survivors so later tests stay clean."""
    yield
    deadline = time.monotonic() + 5
    while advisor_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = advisor_processes()
    for proc in survivors:
        proc.kill()
    assert not survivors, f"processes left behind: {[p.info['cmdline'] for p in survivors]}"


@pytest.fixture
def ddp():
    from advisor.adapters import load_adapter

    return load_adapter("ddp")


def workload_spec(function: str) -> str:
    return f"{TEST_WORKLOADS / 'faulty.py'}:{function}"
