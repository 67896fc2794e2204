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
from helpers import devices_of

GIB = 2**30


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
    strategy.setup(types.SimpleNamespace(device="cpu"))  # the default strategy runs on the job's device
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with _Measured(strategy, model, optimizer, measure=True) as measured:
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()
    assert measured.peak["how"].startswith("MemTracker") and measured.peak["peak_bytes"] > 0


def test_mixed_precision_before_halving_picks_what_the_device_runs():
    assert dev.mixed_precision_for("cpu", bf16_native=False) == "bf16"  # CPU autocast is bf16
    assert dev.mixed_precision_for("cuda:1", bf16_native=True) == "bf16"
    assert dev.mixed_precision_for("cuda:1", bf16_native=False) == "fp16"  # a V100 or T4: fp16 with a GradScaler


@pytest.fixture
def cuda_below_torch(monkeypatch):
    """CUDA patched beneath torch.cuda's public functions, so the real is_bf16_supported/get_device_properties
    run: ``gpus`` is what the driver reports, ``inits`` records every CUDA initialisation, ``bf16_tensor`` how
    often torch made a bf16 tensor on a card to test for (emulated) support."""
    state = types.SimpleNamespace(gpus=[], inits=[], bf16_tensor=[])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(state.gpus))
    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: state.inits.append("_lazy_init"))
    monkeypatch.setattr(torch.cuda, "init", lambda: state.inits.append("init"))
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    monkeypatch.setattr(torch.cuda, "_get_device_properties", lambda index: state.gpus[index], raising=False)

    def make_bf16_tensor(device):  # what a pre-Ampere card does: the tensor is created, bf16 is emulated
        state.bf16_tensor.append(device)
        return True

    monkeypatch.setattr(torch.cuda, "_check_bf16_tensor_supported", make_bf16_tensor)
    return state


def gpu(name, major, minor, memory=16 * GIB):
    return types.SimpleNamespace(name=name, total_memory=memory, major=major, minor=minor)


def test_a_v100_is_planned_with_fp16_although_torch_counts_its_bf16_emulation(cuda_below_torch, monkeypatch):
    """Regression: detect() asked torch.cuda.is_bf16_supported(), which counts emulation by default."""
    from advisor.adapters import load_adapter
    from advisor.errors import SetupError
    from advisor.method import MethodSettings, choose_precision
    from advisor.session import validate_setup

    cuda_below_torch.gpus = [gpu("Tesla V100-SXM2-16GB", 7, 0)]
    # The installed torch's own answer, pinned: True by default (emulation), False for real support.
    assert torch.cuda.is_bf16_supported() is True
    assert torch.cuda.is_bf16_supported(including_emulation=False) is False
    monkeypatch.setattr(dev, "query_cuda_devices", dev.cuda_inventory)  # the child process's code, run here
    host = dev.detect()
    assert host.capabilities == [(7, 0)] and host.bf16 is False and host.tf32 is False
    assert dev.mixed_precision_for("cuda", host.bf16) == "fp16"
    auto = choose_precision("auto", "cuda", host.bf16, {"bf16", "fp16"})
    assert (auto.measure, auto.mixed, auto.tf32) == ("fp32", "fp16", False)
    settings = MethodSettings("digits-mlp", "ddp", 1, "cuda", 2 * GIB, precision="bf16")
    with pytest.raises(SetupError, match="compute capability 8.0"):
        validate_setup(settings, load_adapter("ddp"), host)

    cuda_below_torch.gpus = [gpu("NVIDIA A100-SXM4-80GB", 8, 0, 80 * GIB), gpu("NVIDIA H100", 9, 0, 80 * GIB)]
    ampere = dev.detect()
    assert ampere.bf16 and ampere.tf32 and ampere.capabilities == [(8, 0), (9, 0)]


def test_detect_creates_no_cuda_context_in_the_orchestrator(cuda_below_torch, monkeypatch):
    """Regression: get_device_properties and is_bf16_supported initialised CUDA in the engine process (a context
    on GPU 0 for the whole plan; the emulation check even allocates there). The child process reads them."""
    from advisor.adapters import load_adapter
    from advisor.method import MethodSettings
    from advisor.session import Session, validate_setup

    cuda_below_torch.gpus = [gpu("Tesla T4", 7, 5), gpu("Tesla T4", 7, 5)]
    asked = []
    monkeypatch.setattr(dev, "query_cuda_devices",
                        lambda: asked.append(1) or [{"name": "Tesla T4", "total_memory": 16 * GIB,
                                                     "capability": [7, 5]}] * 2)
    host = dev.detect()
    settings = MethodSettings("digits-mlp", "ddp", 2, "cuda:1", 2 * GIB)
    adapter = load_adapter("ddp")
    session = Session(adapter, settings, validate_setup(settings, adapter, host), runner=types.SimpleNamespace())
    assert asked == [1] and host.count == 2 and not host.bf16 and session.mixed == "fp16"
    assert cuda_below_torch.inits == [] and cuda_below_torch.bf16_tensor == []


def test_the_device_query_runs_in_a_real_child_process():
    assert dev.query_cuda_devices() == [] if not torch.cuda.is_available() else dev.query_cuda_devices()


def test_tf32_is_enabled_on_cuda_workers_and_carried_to_the_launch_env(monkeypatch):
    from advisor.adapters import load_adapter
    from advisor.job import TrialJob
    from advisor.launch import CancelToken
    from advisor.method import MethodSettings
    from advisor.runner import JobRunner

    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        assert dev.enable_tf32(torch.device("cpu")) is False and torch.backends.cuda.matmul.allow_tf32 is False
        assert dev.enable_tf32(torch.device("cuda", 1)) is True
        assert torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
    settings = MethodSettings("digits-mlp", "ddp", 2, "cuda", 2 * GIB)
    runner = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken(), tf32=True)
    job = runner._job(kind="probe", per_device_batch=2)
    assert TrialJob.from_json(job.to_json()).tf32 is True  # what the worker reads
    assert runner.env["TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] == "1"  # workers and the user's launch line
    plain = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken())
    assert not plain._job(kind="probe", per_device_batch=2).tf32 and "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE" not in plain.env


def test_host_detection_lists_every_gpu(fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(dev, "query_cuda_devices", dev.cuda_inventory)  # the child process's code, run here
    host = dev.detect()
    assert host.type == "cuda" and host.count == 2 and host.memories == [80 * GIB] * 2
    assert "Fake H100" in host.describe() and host.bf16 and host.capabilities == [(9, 0)] * 2
    assert dev.detect("cpu").type == "cpu"


def test_the_default_strategy_runs_on_the_jobs_device_not_always_the_cpu(fake_cuda, monkeypatch):
    """A plugin's plain WorkerStrategy takes the job's device: ``cuda:1`` for a lone process, ``cuda:LOCAL_RANK``
    under a launcher, the CPU for a CPU job."""
    from advisor.job import TrialJob

    monkeypatch.setattr(torch.cuda, "set_device", lambda device: fake_cuda.append(("set_device", (device,), {})))
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    strategy = WorkerStrategy()
    strategy.setup(TrialJob(kind="probe", workload="digits-mlp", per_device_batch=8, device="cuda:1"))
    assert strategy.device == torch.device("cuda", 1) and devices_of(fake_cuda, "set_device") == [strategy.device]
    monkeypatch.setenv("LOCAL_RANK", "3")
    strategy.setup(TrialJob(kind="probe", workload="digits-mlp", per_device_batch=8, device="cuda"))
    assert strategy.device == torch.device("cuda", 3)
    strategy.setup(TrialJob(kind="probe", workload="digits-mlp", per_device_batch=8, device="cpu"))
    assert strategy.device == torch.device("cpu")
