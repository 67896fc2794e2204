"""What a ceiling probe measures on CUDA, with torch.cuda patched at the device boundary (no GPU here), on
``cuda:1``; where a library decides (Accelerate's DDP wrapping), its own code is called."""

from __future__ import annotations

import types

import pytest
import torch

from advisor import device as dev
from advisor.adapters import load_adapter

GIB, MIB = 2**30, 2**20


@pytest.fixture
def fake_cuda(monkeypatch):
    """An 80 GiB card whose process already holds 600 MiB (context + NCCL) beside 2 MiB the allocator reserved."""
    calls = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: types.SimpleNamespace(total_memory=80 * GIB, name="Fake H100"))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda fraction, index: calls.append(("fraction", fraction, index)))

    def mem_get_info(device):
        calls.append(("mem_get_info", torch.device(device)))
        return 80 * GIB - 602 * MIB, 80 * GIB

    def memory_reserved(device):
        calls.append(("memory_reserved", torch.device(device)))
        return 2 * MIB

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    monkeypatch.setattr(torch.cuda, "memory_reserved", memory_reserved)
    return calls


def test_accelerate_probe_on_cuda_runs_where_accelerate_wraps_ddp(monkeypatch):
    """Regression: a 1-process Accelerate probe on CUDA is not DDP-wrapped (no all-reduce buckets), so it
    under-measured what N-process training holds. Accelerate's own decision, with CUDA reported present."""
    from accelerate.accelerator import Accelerator
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")  # torchrun's second process: cuda:1
    _, kind = PartialState._prepare_backend(types.SimpleNamespace(), cpu=False)
    assert kind == DistributedType.MULTI_GPU

    def prepare_model_wraps_ddp(processes: int) -> bool:
        state = types.SimpleNamespace(distributed_type=kind, num_processes=processes)
        state.use_distributed = PartialState.use_distributed.fget(state)
        accelerator = types.SimpleNamespace(state=state, use_distributed=state.use_distributed, distributed_type=kind)
        return Accelerator.multi_device.fget(accelerator)  # prepare_model's condition for DDP on a GPU

    assert not prepare_model_wraps_ddp(1)  # what a 1-process probe would have measured: a bare model
    adapter = load_adapter("accelerate")
    assert prepare_model_wraps_ddp(adapter.probe_processes(2, {}))
    assert adapter.probe_processes(1, {}) == 1  # 1-process training has no DDP either: nothing left out
