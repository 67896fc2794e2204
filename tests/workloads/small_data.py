"""A workload whose data, not memory, bounds the batch: 142 training samples (the new user's case)."""

import dataclasses

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload

TRAIN_SIZE = 142


def _data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return TensorDataset(x, y)


def tiny_142():
    """A small MLP on 142 samples, trained today at a global batch of 16 with 20 warmup steps."""
    return Workload(name="tiny-142", build_model=lambda: nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)),
                    train_data=_data(TRAIN_SIZE, 0), val_data=_data(48, 1), loss_fn=nn.functional.cross_entropy,
                    task="regression", num_classes=2, optimizer="sgd", current_batch_size=16, current_lr=0.05,
                    current_warmup_steps=20)


def tiny_without_base_batch():
    """The same, with an LR but no global batch it was tuned at."""
    return dataclasses.replace(tiny_142(), current_batch_size=None, current_warmup_steps=None)
