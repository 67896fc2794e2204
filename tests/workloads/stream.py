"""Streaming workloads: an IterableDataset of numbered samples with a stated train_size.

With ADVISOR_TEST_SEEN_DIR set, every training step appends the sample numbers it saw to
``<dir>/<launcher pid>-<rank>.txt``, so a test can check that the ranks of one job read different samples.
"""

import os
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import IterableDataset

from advisor import Workload

TRAIN_SIZE = 960
CLASSES = 4


def sample(i: int):
    """Sample ``i``: 16 features whose first four say its class, and its number."""
    g = torch.Generator().manual_seed(i)
    y = i % CLASSES
    x = torch.randn(16, generator=g)
    x[y] += 2.0
    return x, y, i


class NumberedStream(IterableDataset):
    """Samples 0, 1, 2, ... ``count - 1`` in order; no __len__ (a stream cannot be counted)."""

    def __init__(self, count: int):
        self.count = count

    def __iter__(self):
        return (sample(i) for i in range(self.count))


class SelfShardingStream(NumberedStream):
    """A stream that reads its rank itself, as split_dataset_by_node does: rank r of W takes a contiguous block."""

    def __iter__(self):
        import torch.distributed as dist

        rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        per_rank = self.count // world
        return (sample(i) for i in range(rank * per_rank, (rank + 1) * per_rank))


def _loss(model, batch):
    x, y, ids = batch
    seen_dir = os.environ.get("ADVISOR_TEST_SEEN_DIR")
    if seen_dir and model.training:
        with open(Path(seen_dir) / f"{os.getppid()}-{os.environ.get('RANK', '0')}.txt", "a") as out:
            out.write(" ".join(str(int(i)) for i in ids) + "\n")
    return nn.functional.cross_entropy(model(x), y)


def _model():
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def _accuracy(model, batch):
    x, y, _ = batch
    return {"accuracy": (model(x).argmax(dim=-1) == y).float().mean()}


def numbered_stream(stream=None, **fields):
    """An MLP trained on a stream of TRAIN_SIZE numbered samples, validated on 128 others."""
    return Workload(name="numbered-stream", build_model=_model, train_data=stream or NumberedStream(TRAIN_SIZE),
                    val_data=[sample(100_000 + i) for i in range(128)], compute_loss=_loss, evaluate=_accuracy,
                    metric="accuracy", train_size=TRAIN_SIZE, task="regression", optimizer="sgd",
                    current_batch_size=32, current_lr=0.05, **fields)


def self_sharding_stream():
    return numbered_stream(SelfShardingStream(TRAIN_SIZE), stream_shards_itself=True)


def stream_without_train_size():
    workload = numbered_stream()
    workload.train_size = None
    return workload
