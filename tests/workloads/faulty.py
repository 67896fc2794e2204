"""Workloads that misbehave on purpose, for the failure-path tests."""

import os
import time

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload


def _data(n=256):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, 0] > 0).long()
    return TensorDataset(x, y)


class HangsOnRank1(nn.Module):
    """Rank 1 stops responding after a few steps, as a deadlocked data loader would."""

    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if os.environ.get("RANK") == "1" and self.calls > 4:
            time.sleep(3600)
        return self.net(x)


def _workload(build, name):
    return Workload(name=name, build_model=build, train_data=_data(), val_data=_data(64),
                    loss_fn=nn.functional.cross_entropy, task="regression", num_classes=2, optimizer="sgd",
                    current_batch_size=16, current_lr=0.1)


def hang_on_rank1():
    return _workload(HangsOnRank1, "hangs")


def slow_linear():
    class Slow(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(16, 2)

        def forward(self, x):
            time.sleep(0.05)
            return self.net(x)

    return _workload(Slow, "slow")


def crash_in_forward():
    class Crashes(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(16, 2)

        def forward(self, x):
            return self.net(x.view(-1, 3))  # a shape bug

    return _workload(Crashes, "crashes")


def crash_above_batch_4():
    """A bug that shows only past batch 4: the Setup's workload check (batch 2) passes, the probes at 8 crash."""
    class CrashesAbove4(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(16, 2)

        def forward(self, x):
            if x.shape[0] > 4:
                raise ValueError(f"a bug that shows at batch {x.shape[0]}")
            return self.net(x)

    return _workload(CrashesAbove4, "crashes-above-4")


def not_a_workload():
    return {"model": "oops"}


def raises_inside():
    raise ValueError("dataset path /data/train not found")


def slow_to_build():
    """Building the model takes a minute: a probe that is still running when the user cancels."""

    def build():
        time.sleep(60)
        return nn.Linear(16, 2)

    return _workload(build, "slow-build")


def segfault_when_forked():
    """Dies of SIGSEGV in a probe forked from the probe server (a library that is not fork-safe), works in a
    fresh launch: a forked probe's parent is the server, a fresh worker's is torchrun."""
    import signal

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().replace(b"\0", b" ").decode()
    if "advisor.probe_server" in parent:
        os.kill(os.getpid(), signal.SIGSEGV)
    return _workload(lambda: nn.Linear(16, 2), "segfault-when-forked")


def segfault_at_16():
    """Dies of SIGSEGV at 16 samples or more, as a native library that does not check a failed allocation does at
    the CPU memory edge."""
    import signal

    class Edge(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(16, 2)

        def forward(self, x):
            if x.shape[0] >= 16:
                os.kill(os.getpid(), signal.SIGSEGV)
            return self.net(x)

    return _workload(Edge, "segfault-at-16")


def digits_mlp_failing_where_marked() -> Workload:
    """digits-mlp, except in the workers (RANK set) of a host whose environment has ADVISOR_TEST_NODE_FAILS set (a
    node whose data is missing where its workers read it): the cluster tests' failing node."""
    if os.environ.get("ADVISOR_TEST_NODE_FAILS") and "RANK" in os.environ:
        raise FileNotFoundError("this node's copy of the data set is missing")
    from advisor.workloads.digits import digits_mlp

    return digits_mlp()
