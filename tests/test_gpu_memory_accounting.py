"""What a ceiling probe measures on CUDA, with torch.cuda patched at the device boundary (no GPU here), on
``cuda:1``; where a library decides (Accelerate's DDP wrapping), its own code is called."""

from __future__ import annotations

import types

import pytest
import torch

from advisor import device as dev
from advisor.adapters import load_adapter
from helpers import devices_of, install_fake_cuda

GIB, MIB = 2**30, 2**20


@pytest.fixture
def card_with_context(monkeypatch):
    """An 80 GiB card whose process already holds 600 MiB (context + NCCL) beside 2 MiB the allocator reserved."""
    return install_fake_cuda(monkeypatch, in_use_bytes=602 * MIB, reserved_bytes=2 * MIB)


def test_accelerate_probe_on_cuda_runs_where_accelerate_wraps_ddp():
    """Regression: a 1-process Accelerate probe on CUDA is not DDP-wrapped (no all-reduce buckets), so it
    under-measured what N-process training holds. Accelerate's own decision, through its public properties
    (``use_distributed``, ``multi_device``) for a torchrun job on GPUs, whose type is MULTI_GPU (accelerate's
    docs); the private ``PartialState._prepare_backend`` that derived it changed in accelerate 1.16."""
    from accelerate.accelerator import Accelerator
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    kind = DistributedType.MULTI_GPU

    def prepare_model_wraps_ddp(processes: int) -> bool:
        state = types.SimpleNamespace(distributed_type=kind, num_processes=processes)
        state.use_distributed = PartialState.use_distributed.fget(state)
        accelerator = types.SimpleNamespace(state=state, use_distributed=state.use_distributed, distributed_type=kind)
        return Accelerator.multi_device.fget(accelerator)  # prepare_model's condition for DDP on a GPU

    assert not prepare_model_wraps_ddp(1)  # what a 1-process probe would have measured: a bare model
    adapter = load_adapter("accelerate")
    assert prepare_model_wraps_ddp(adapter.probe_processes(2, {}))
    assert adapter.probe_processes(1, {}) == 1  # 1-process training has no DDP either: nothing left out


def test_cap_on_cuda_1_takes_the_context_and_nccl_buffers_off_the_budget(card_with_context):
    """Regression: --device-memory capped only the caching allocator, so a plan for an 8 GiB card let the
    allocator have all 8 GiB while the CUDA context and NCCL buffers sat on top of it."""
    from advisor.memory import apply_budget

    applied = apply_budget("cuda:1", 8 * GIB)
    assert applied["outside_allocator_bytes"] == 600 * MIB  # 602 MiB in use - 2 MiB the allocator reserved
    assert applied["allocator_budget_bytes"] == 8 * GIB - 600 * MIB
    fractions = [args for name, args, _ in card_with_context if name == "set_per_process_memory_fraction"]
    assert fractions == [(pytest.approx((8 * GIB - 600 * MIB) / (80 * GIB)), 1)]  # card 1, not 0
    assert torch.device("cuda", 1) in devices_of(card_with_context, "mem_get_info")
    assert torch.device("cuda", 1) in devices_of(card_with_context, "memory_reserved")


def test_a_budget_the_context_alone_fills_is_a_clear_out_of_memory(card_with_context):
    from advisor.oom import is_oom_exception

    with pytest.raises(MemoryError, match="CUDA context and NCCL buffers on cuda:1 already take") as caught:
        dev.cap_memory("cuda:1", 512 * MIB)
    assert is_oom_exception(caught.value) and "--device-memory" in str(caught.value)


def test_collectives_open_on_that_card_before_the_cap(card_with_context, monkeypatch):
    """NCCL allocates its buffers at the first collective: the worker runs one before measuring."""
    import torch.distributed as dist

    reduced = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "all_reduce", lambda tensor: reduced.append(tensor))
    monkeypatch.setattr(torch, "zeros", lambda *size, device=None: ("zeros", size, torch.device(device)))
    dev.open_collectives("cuda:1")
    assert reduced == [("zeros", (1,), torch.device("cuda", 1))]
    reduced.clear()
    dev.open_collectives("cpu")
    assert reduced == []


def test_the_recipe_says_what_was_taken_off_the_budget():
    """The probe's budget dict reaches the recipe's [ceiling] (stub runner: no processes)."""
    from advisor.device import HostDevices
    from advisor.method import MethodSettings
    from advisor.report import build_recipe
    from advisor.session import Session, validate_setup
    from tui_stub import EventStubRunner

    taken = {"enforced": True, "how": "set_per_process_memory_fraction", "outside_allocator_bytes": 600 * MIB,
             "allocator_budget_bytes": 7592 * MIB, "outside_allocator_how": "mem_get_info - memory_reserved"}

    class CudaLikeRunner(EventStubRunner):
        def probe(self, batch, purpose, precision="fp32"):
            trial = super().probe(batch, purpose, precision)
            trial.budget = dict(taken)
            return trial

    adapter = load_adapter("ddp")
    settings = MethodSettings(workload="digits-mlp", adapter_name="ddp", nproc=2, device="cpu",
                              memory_budget_bytes=128 * MIB, trial_steps=4, sweep_steps=4)
    session = Session(adapter, settings, validate_setup(settings, adapter, HostDevices("cpu")),
                      runner=CudaLikeRunner(lambda event: None))
    ceiling = build_recipe(session.run_all())["ceiling"]
    assert ceiling["outside_allocator_bytes"] == 600 * MIB and ceiling["allocator_budget_bytes"] == 7592 * MIB
    assert "memory_reserved" in ceiling["outside_allocator_reason"]


def test_a_model_bigger_than_the_device_gets_sharding_advice_not_shrink():
    """When the model alone does not fit, the advice names ZeRO-3 / more devices / offload: no batch helps."""
    from advisor.method.ceiling import ProbeTrial, search_ceiling
    from advisor.errors import AdvisorError

    def probe(batch, purpose):
        return ProbeTrial(batch, "oom", None, 0.1, purpose,
                          "the model itself does not fit: DefaultCPUAllocator: can't allocate memory")

    with pytest.raises(AdvisorError) as caught:
        search_ceiling(probe, 24 * MIB)
    advice = str(caught.value)
    assert "--zero-stage 3" in advice and "more devices" in advice and "offload" in advice.lower()
    assert "shrink the model" not in advice
