"""Streaming training data (an IterableDataset with a stated train_size), in one process: each rank's share,
passes that repeat, a stream that shards itself, and the messages for what cannot work."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn
from torch.utils.data import IterableDataset

from advisor.errors import WorkloadError
from advisor.job import TrialJob
from advisor.worker import BatchStream, probe_batches
from advisor.workload import Workload, resolve_workload
from helpers import plain_strategy, TEST_WORKLOADS, train_in_process

IN_PROCESS = {"num_workers": 0, "pin_memory": False, "collate_fn": None}


class Numbered(IterableDataset):
    """Samples ``(features, class, number)`` numbered start, start + 1, ...; records each set_epoch call."""

    def __init__(self, count: int, start: int = 0):
        self.count, self.start, self.epochs = count, start, []

    def __iter__(self):
        return ((torch.full((2,), float(i)), i % 2, i) for i in range(self.start, self.start + self.count))

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


def stream_workload(function: str = "numbered_stream") -> Workload:
    return resolve_workload(f"{TEST_WORKLOADS / 'stream.py'}:{function}")


def ids(stream: BatchStream, count: int) -> list[list[int]]:
    batches, _ = stream.take(count)
    return [batch[2].tolist() for batch in batches]


def test_each_rank_reads_its_own_share_of_a_stream_and_a_new_pass_follows_the_last():
    data = Numbered(40)
    share = {rank: ids(BatchStream(data, 4, rank, 2, seed=0, loader=IN_PROCESS, stream_of=("s", False)), 6)
             for rank in (0, 1)}
    first_pass = [i for rank in (0, 1) for batch in share[rank][:5] for i in batch]
    assert sorted(first_pass) == list(range(40))  # one pass: every sample once, on one rank only
    assert all(i % 2 == 0 for b in share[0] for i in b) and all(i % 2 == 1 for b in share[1] for i in b)
    assert share[0][5] == share[0][0] and data.epochs == [0, 1, 0, 1]  # the 6th batch opens pass 2 (epoch 1)


def test_loader_workers_split_a_ranks_share_without_reading_a_sample_twice():
    with_workers = {**IN_PROCESS, "num_workers": 2}
    stream = BatchStream(Numbered(48), 4, 1, 2, seed=0, loader=with_workers, stream_of=("s", False))
    try:
        seen = [i for batch in ids(stream, 6) for i in batch]  # each worker batches its 12 samples: 3 batches
    finally:
        stream.close()
    assert sorted(seen) == list(range(1, 48, 2))  # the rank's share as without workers, each sample once


def test_a_stream_that_shards_itself_is_read_as_it_yields():
    own_block = Numbered(8, start=100)  # stands for "rank 1's block", chosen by the dataset itself
    stream = BatchStream(own_block, 4, 1, 2, seed=0, loader=IN_PROCESS, stream_of=("s", True))
    assert ids(stream, 2) == [[100, 101, 102, 103], [104, 105, 106, 107]]


def test_a_stream_shorter_than_one_batch_per_rank_is_named():
    stream = BatchStream(Numbered(6), 4, 1, 2, seed=0, loader=IN_PROCESS, stream_of=("tiny", False))
    with pytest.raises(WorkloadError, match="'tiny'.*gave rank 1 fewer than 4 samples in a whole pass"):
        stream.take(1)


def test_a_stream_trains_and_validates_in_the_worker_loop_and_probes_read_it(capsys):
    workload = stream_workload()
    assert workload.train_length == 960  # epochs, warmup and the per-device cap count the stated size
    result = train_in_process(workload, capsys, per_device_batch=16, steps=4, evaluate=True, lr=0.05)
    assert result["val_metric_name"] == "accuracy" and 0 <= result["val_metric"] <= 1
    job = TrialJob(kind="probe", workload=workload.name, per_device_batch=8)
    probe = probe_batches(job, workload, plain_strategy(job))
    assert probe.take(1)[0][0][2].tolist() == list(range(8))  # as the stream yields them


def test_a_stream_without_train_size_or_a_streamed_validation_set_gets_its_fix():
    with pytest.raises(WorkloadError, match="train_data is an IterableDataset .* train_size is not set: state its "
                                            "samples per epoch, train_size=N"):
        stream_workload("stream_without_train_size")
    workload = stream_workload()
    for bad, expected in (({"val_data": workload.train_data}, "val_data is an IterableDataset: validation compares "
                                                              "every run on the same fixed samples"),
                          ({"train_size": 0}, "train_size must be a positive whole number"),
                          ({"train_size": 9.5}, "train_size must be a positive whole number")):
        with pytest.raises(WorkloadError, match=expected):
            dataclasses.replace(workload, **bad).validate("w")


def test_workloads_check_reads_a_stream_and_exits_2_without_train_size(capsys):
    from advisor.cli import main

    assert main(["workloads", "--check", f"{TEST_WORKLOADS / 'stream.py'}:numbered_stream"]) == 0
    out = capsys.readouterr().out
    assert "a stream (NumberedStream), train_size 960 stated; each rank keeps every world-size-th sample" in out
    assert "batches as the stream yields them" in out
    assert main(["workloads", "--check", f"{TEST_WORKLOADS / 'stream.py'}:stream_without_train_size"]) == 2
    err = capsys.readouterr().err
    assert "train_size is not set" in err and "Traceback" not in err


def test_a_map_style_dataset_is_still_indexed_not_streamed():
    from torch.utils.data import TensorDataset

    data = TensorDataset(torch.arange(8).unsqueeze(1), torch.zeros(8, dtype=torch.long))
    workload = Workload(name="m", build_model=lambda: nn.Linear(1, 2), train_data=data, val_data=data,
                        loss_fn=nn.functional.cross_entropy, task="regression").validate("m")
    stream = BatchStream(data, 4, 0, 2, seed=0)
    assert stream.indices is not None and workload.train_length == 8


def test_a_stream_with_probe_batch_is_probed_on_the_stated_worst_case():
    from advisor.batches import select_probe_samples

    longest = (torch.zeros(8, 16), torch.zeros(8, dtype=torch.long), torch.arange(8))
    workload = dataclasses.replace(stream_workload(), probe_batch=lambda n: tuple(t[:n] for t in longest))
    assert select_probe_samples(workload).kind == "probe_batch"
    job = TrialJob(kind="probe", workload=workload.name, per_device_batch=4)
    batch = probe_batches(job, workload, plain_strategy(job)).take(1)[0][0]
    assert batch[0].shape == (4, 16) and batch[0].abs().sum() == 0  # the stated batch, not the stream's
