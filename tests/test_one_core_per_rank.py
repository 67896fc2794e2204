"""A CPU plan's ranks each get a core of their own (advisor.worker.one_core_per_rank): two ranks of a short timing
run left on one core measured exactly half the samples/s and decided step 4's walk. Real processes, real
affinity; each case runs in a child so the test process keeps its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = ("import json, os; from advisor.worker import one_core_per_rank; core = one_core_per_rank(); "
         "print(json.dumps([core, sorted(os.sched_getaffinity(0))]))")

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                                reason="needs CPU affinity and two cores")


def pinned(**env: str) -> tuple[int | None, list[int]]:
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_WORLD_SIZE")}
    out = subprocess.run([sys.executable, "-c", CHILD], env={**clean, "PYTHONPATH": REPO, **env}, check=True,
                         capture_output=True, text=True).stdout
    core, allowed = json.loads(out)
    return core, allowed


def test_each_rank_of_a_host_that_has_the_cores_gets_its_own():
    allowed = sorted(os.sched_getaffinity(0))
    assert pinned(RANK="0", LOCAL_WORLD_SIZE="2") == (allowed[0], [allowed[0]])
    assert pinned(RANK="1", LOCAL_WORLD_SIZE="2") == (allowed[1], [allowed[1]])
    # A second node's ranks (global 2 and 3 of 4, two a node) land on distinct cores too.
    assert {pinned(RANK=str(r), LOCAL_WORLD_SIZE="2")[0] for r in (2, 3)} == {allowed[0], allowed[1]}


def test_a_single_rank_more_ranks_than_cores_or_no_torchrun_environment_is_left_to_the_kernel():
    allowed = sorted(os.sched_getaffinity(0))
    assert pinned(RANK="0", LOCAL_WORLD_SIZE="1") == (None, allowed)
    assert pinned(RANK="0", LOCAL_WORLD_SIZE=str(len(allowed) + 1)) == (None, allowed)
    assert pinned() == (None, allowed)
    assert pinned(RANK="x", LOCAL_WORLD_SIZE="2") == (None, allowed)
