"""The worker's timed loop in one process: the loader's wait kept out of the step, the batch stream's
sharding, the CUDA loader path (torch's accelerator calls patched, since this host has no GPU),
evaluation of regression and dict-batch workloads, and the noise hook's freedom from host syncs."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from advisor.job import TrialJob
from advisor.worker import BatchStream, _evaluate
from advisor.workload import Workload, resolve_workload
from helpers import plain_strategy, TEST_WORKLOADS, train_in_process


def known(function: str) -> Workload:
    return resolve_workload(f"{TEST_WORKLOADS / 'known_answers.py'}:{function}")


class SlowSamples(Dataset):
    """Each sample costs 100 ms to load, as a badly decoding-bound image pipeline does."""

    def __init__(self, n=64):
        self.x, self.y = torch.randn(n, 4), torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(0.1)
        return self.x[i], self.y[i]


def test_the_loaders_wait_is_reported_apart_from_the_step_time(capsys):
    data = SlowSamples()
    workload = Workload(name="slow-loader", build_model=lambda: nn.Linear(4, 2), train_data=data, val_data=data,
                        loss_fn=nn.functional.cross_entropy, task="regression", num_classes=2)
    result = train_in_process(workload, capsys, per_device_batch=4, steps=5)
    # 4 samples x 100 ms of loading per step against about a millisecond of compute for a 4x2 linear layer
    # (the bound leaves room for a loaded machine; a step that included the loading could not meet it).
    assert result["data_seconds"] >= 0.4
    assert result["step_seconds"] < 0.2
    assert result["throughput"] == pytest.approx(4 / result["step_seconds"])  # samples/s from the step alone


def shards(stream: BatchStream, steps: int) -> list[list[int]]:
    return [batch[0].flatten().tolist() for batch in stream.take(steps)[0]]


class IndexedSamples(Dataset):
    """Sample i is (i, i % 3): batches show which indices they hold, through DataLoader's collation."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        return torch.tensor([i]), torch.tensor(i % 3)


def test_each_epoch_is_split_into_disjoint_rank_shards_whatever_the_loader_workers():
    data = IndexedSamples()
    in_process = {"num_workers": 0, "pin_memory": False, "collate_fn": None}
    two_workers = {**in_process, "num_workers": 2}
    epoch = {rank: shards(BatchStream(data, 4, rank, 2, seed=3, loader=in_process), 5) for rank in (0, 1)}
    seen = [i for rank in (0, 1) for batch in epoch[rank] for i in batch]
    assert len(seen) == len(set(seen)) == 40  # 2 ranks x 5 batches of 4: the whole epoch, each sample once
    stream = BatchStream(data, 4, 1, 2, seed=3, loader=two_workers)
    try:
        assert shards(stream, 5) == epoch[1]  # the order is the sampler's, not the workers'
    finally:
        stream.close()
    # The TensorDataset fast path draws the same shards as the DataLoader path.
    tensors = TensorDataset(torch.arange(40).unsqueeze(1), torch.arange(40) % 3)
    assert shards(BatchStream(tensors, 4, 1, 2, seed=3), 5) == epoch[1]
    # Probes sample with replacement: any index, in batches of the asked size.
    probe = BatchStream(tensors, 64, 0, 2, seed=3, shard=False)
    assert not probe.sharded and len(shards(probe, 1)[0]) == 64


def test_the_workloads_collate_builds_the_batches():
    calls = []

    def collate(samples):
        calls.append(len(samples))
        return torch.stack([s[0] for s in samples]), torch.stack([s[1] for s in samples])

    stream = BatchStream(IndexedSamples(), 4, 0, 1, seed=0, collate_fn=collate)
    (inputs, targets), = stream.take(1)[0]
    assert calls == [4] and inputs.shape == (4, 1)


def test_on_cuda_batches_come_from_loader_workers_into_pinned_memory(monkeypatch):
    """The real DataLoader with worker processes and its pin-memory thread, for cuda:1.

    torch 2.13 decides pinning with torch.accelerator (dataloader.py) and pins with Tensor.pin_memory
    (utils/data/_utils/pin_memory.py); those are patched to act as a CUDA host would, nothing else.
    """
    from advisor.worker import loader_settings

    settings = loader_settings(torch.device("cuda:1"), world_size=2)
    assert settings["pin_memory"] and settings["num_workers"] >= 1
    assert loader_settings(torch.device("cpu"), world_size=2)["num_workers"] == 0  # the ranks own the cores
    assert not loader_settings(torch.device("cpu"), world_size=2)["pin_memory"]

    pinned = []

    def pin_memory(tensor, *args, **kwargs):
        pinned.append(tuple(tensor.shape))
        return tensor

    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: torch.device("cuda", 1))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 1)
    monkeypatch.setattr(torch.accelerator, "set_device_index", lambda index: None)
    monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
    stream = BatchStream(IndexedSamples(), 4, 0, 2, seed=0, device=torch.device("cuda:1"))
    try:
        assert stream.loader is not None and stream.loader.num_workers == settings["num_workers"]
        batches, _ = stream.take(2)
    finally:
        stream.close()
    assert [b[0].shape for b in batches] == [(4, 1), (4, 1)]
    # Both batches taken were pinned; the pin thread may already have pinned the next one (seen once in a full run).
    assert pinned.count((4, 1)) >= 2 and pinned.count((4,)) >= 2  # inputs and targets of both batches
    # The TensorDataset fast path pins too (in the rank's own process).
    pinned.clear()
    fast = BatchStream(TensorDataset(torch.zeros(16, 3), torch.zeros(16)), 4, 0, 1, seed=0, device="cuda:1")
    fast.take(1)
    assert pinned == [(4, 3), (4,)]


def test_evaluation_of_a_dict_batch_regression_reports_a_loss_and_no_metric():
    workload = known("dict_regression")
    job = TrialJob(kind="train", workload=workload.name, per_device_batch=16)
    model = workload.build_model()
    result = _evaluate(job, workload, plain_strategy(job), model)
    data = workload.val_data
    with torch.no_grad():
        expected = nn.functional.mse_loss(model(data.features), data.target)
    assert result == {"val_loss": pytest.approx(float(expected), rel=1e-5)}  # 40 samples in chunks 16, 16, 8


def test_a_metric_that_was_not_computed_is_not_reported():
    # num_classes=2 but one logit per sample: accuracy by argmax would be meaningless, so none is reported.
    workload = known("binary_logit")
    job = TrialJob(kind="train", workload=workload.name, per_device_batch=16)
    result = _evaluate(job, workload, plain_strategy(job), workload.build_model())
    assert set(result) == {"val_loss"} and result["val_loss"] > 0


def test_a_dict_batch_workload_trains_and_validates(capsys):
    result = train_in_process(known("dict_regression"), capsys, per_device_batch=8, steps=4, evaluate=True)
    assert result["val_loss"] > 0 and "val_metric" not in result
    assert result["data_seconds"] >= 0 and result["step_seconds"] > 0


HOST_READS = ("item", "tolist", "__float__", "__int__", "__bool__", "cpu")


def test_the_noise_hook_never_reads_a_number_back_to_the_host(one_rank_group, monkeypatch):
    from torch.nn.parallel import DistributedDataParallel

    from advisor.process_group import GradNoiseMeter, _noise_allreduce_hook

    torch.manual_seed(0)
    ddp = DistributedDataParallel(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    meter = GradNoiseMeter()
    ddp.register_comm_hook(meter.state, _noise_allreduce_hook)  # attach() skips 1 rank: nothing to compare there
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    reads = []
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            reads.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    for _ in range(2):
        nn.functional.mse_loss(ddp(x), y).backward()
        grads = [p.grad.clone() for p in ddp.parameters()]
        ddp.zero_grad()
    monkeypatch.undo()
    assert reads == [], f"the hook read device values back inside the step: {reads}"
    assert isinstance(meter.state["local_sq"], torch.Tensor) and meter.state["steps"] == 2
    # What it summed is |g|^2 of both steps (one rank: the all-reduce leaves the gradient as it is).
    squared = sum(float(g.double().pow(2).sum()) for g in grads)
    assert float(meter.state["global_sq"]) == pytest.approx(2 * squared, rel=1e-5)
    assert float(meter.state["local_sq"]) == pytest.approx(2 * squared, rel=1e-5)


def test_the_noise_meter_keeps_each_step_divides_out_the_loss_scale_and_skips_overflow(one_rank_group):
    """Three steps on the same batch: plain, under a loss scale of 8 (as a GradScaler runs fp16), and one
    whose gradients overflowed. The first two report the same |g|^2; the third is left out and counted."""
    from torch.nn.parallel import DistributedDataParallel

    from advisor.process_group import GradNoiseMeter, _noise_allreduce_hook

    torch.manual_seed(0)
    ddp = DistributedDataParallel(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    meter = GradNoiseMeter()
    ddp.register_comm_hook(meter.state, _noise_allreduce_hook)
    meter.measuring, meter.batch_small = True, 16
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    for scale in (1.0, 8.0, float("inf")):
        meter.sample(True, scale if scale != float("inf") else 1.0)
        (nn.functional.mse_loss(ddp(x), y) * scale).backward()
        if scale == 1.0:
            squared = sum(float(p.grad.double().pow(2).sum()) for p in ddp.parameters())
        ddp.zero_grad()
    sample = meter.gradient_norms(torch.device("cpu"), 1)
    assert sample.steps == 2 and sample.skipped == 1
    assert sample.small_sq_steps == pytest.approx((squared, squared), rel=1e-5)
    assert sample.big_sq_steps == pytest.approx((squared, squared), rel=1e-5)
