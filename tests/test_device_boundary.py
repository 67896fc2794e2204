"""Every device-dependent branch, on ``cuda:1``, with torch.cuda patched at the boundary (no GPU here).

Regression: DDP set the device to ``cuda:N`` but the memory and timing code compared with ``== "cuda"``,
so on a GPU the budget fell to the CPU RLIMIT path, MemTracker replaced max_memory_allocated, and step
times were taken without synchronising.
"""

from __future__ import annotations

import resource
import types

import pytest
import torch

from advisor import device as dev
from advisor.memory import apply_budget, measure_peak
from advisor.worker import WorkerStrategy, _Measured

GIB = 2**30


@pytest.fixture
def fake_cuda(monkeypatch):
    calls = []
    rec = lambda name: (lambda *a, **k: calls.append((name, a, k)))  # noqa: E731
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", rec("synchronize"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", rec("reset_peak_memory_stats"))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", rec("set_per_process_memory_fraction"))

    def max_allocated(device=None):
        calls.append(("max_memory_allocated", (device,), {}))
        return 123 * 2**20

    monkeypatch.setattr(torch.cuda, "max_memory_allocated", max_allocated)

    def props(index):
        calls.append(("get_device_properties", (index,), {}))
        return types.SimpleNamespace(total_memory=80 * GIB, name="Fake H100")

    monkeypatch.setattr(torch.cuda, "get_device_properties", props)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    # Nothing held outside the allocator here (tests/test_gpu_memory_accounting.py covers what is).
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * GIB, 80 * GIB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    return calls


def devices_of(calls, name):
    return [torch.device(c[1][0]) if not isinstance(c[1][0], int) else torch.device("cuda", c[1][0])
            for c in calls if c[0] == name]


def test_normalize_gives_every_cuda_string_an_index(fake_cuda):
    assert dev.normalize("cuda") == torch.device("cuda", 0)
    assert dev.normalize("cuda:1") == torch.device("cuda", 1) and dev.is_cuda("cuda:1")
    assert dev.normalize(torch.device("cpu")).type == "cpu" and not dev.is_cuda("cpu")


def test_budget_on_cuda_1_caps_that_card_not_the_cpu_rlimit(fake_cuda):
    before = resource.getrlimit(resource.RLIMIT_DATA)
    applied = apply_budget("cuda:1", 8 * GIB)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before  # the CPU path did not run
    assert applied["how"] == "set_per_process_memory_fraction" and applied["fraction"] == pytest.approx(0.1)
    fraction_call = next(c for c in fake_cuda if c[0] == "set_per_process_memory_fraction")
    assert fraction_call[1] == (pytest.approx(0.1), 1)  # device index 1, not the current device
    assert ("get_device_properties", (1,), {}) in fake_cuda


def test_peak_on_cuda_1_comes_from_max_memory_allocated_of_that_device(fake_cuda):
    with measure_peak(torch.device("cuda", 1), None, None) as peak:
        pass
    assert peak["how"] == "torch.cuda.max_memory_allocated" and peak["peak_bytes"] == 123 * 2**20
    assert devices_of(fake_cuda, "reset_peak_memory_stats") == [torch.device("cuda", 1)]
    assert devices_of(fake_cuda, "max_memory_allocated") == [torch.device("cuda", 1)]


def test_step_times_on_cuda_1_are_taken_with_the_device_synchronised(fake_cuda):
    strategy = WorkerStrategy()
    strategy.device = torch.device("cuda", 1)
    with _Measured(strategy, None, None, measure=False):
        assert devices_of(fake_cuda, "synchronize") == [torch.device("cuda", 1)]  # before the clock starts
    assert devices_of(fake_cuda, "synchronize") == [torch.device("cuda", 1)] * 2  # and before it stops


def test_cpu_path_uses_rlimit_and_the_tracker():
    strategy = WorkerStrategy()
    strategy.setup(None)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with _Measured(strategy, model, optimizer, measure=True) as measured:
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()
    assert measured.peak["how"].startswith("MemTracker") and measured.peak["peak_bytes"] > 0


def test_mixed_precision_before_halving_picks_what_the_device_runs(fake_cuda, monkeypatch):
    assert dev.mixed_precision_for("cpu") == "bf16"
    assert dev.mixed_precision_for("cuda:1") == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert dev.mixed_precision_for("cuda:1") == "fp16"  # e.g. a V100


def test_host_detection_lists_every_gpu(fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    host = dev.detect()
    assert host.type == "cuda" and host.count == 2 and host.memories == [80 * GIB] * 2
    assert "Fake H100" in host.describe()
    assert dev.detect("cpu").type == "cpu"
