"""conv_loop.py's model and data, shared with its Workload twin (conv_workload in plain_workload.py)."""

import torch
from torch import nn
from torch.utils.data import TensorDataset


def conv_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 2))


def conv_split() -> tuple[TensorDataset, TensorDataset]:
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(640, 3, 64, 64, generator=generator)
    labels = (images[:, 0].mean((1, 2)) > 0).long()
    return TensorDataset(images[:512], labels[:512]), TensorDataset(images[512:], labels[512:])
