"""A small MLP with SGD (momentum 0.8, weight decay 0.05) and 33 validation samples: with 2 ranks and 16 per
chunk, rank 0 gets 17 samples (2 chunks) and rank 1 gets 16 (1 chunk). The first layer (131k weights) is above
ZeRO-3's parameter persistence threshold (1e5 elements), so under ZeRO-3 each forward gathers it collectively."""

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload


def _data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def odd_val():
    return Workload(name="odd-val", build_model=lambda: nn.Sequential(nn.Linear(16, 8192), nn.ReLU(), nn.Linear(8192, 2)),
                    train_data=_data(256, 0), val_data=_data(33, 1), loss_fn=nn.functional.cross_entropy,
                    task="image-classification", num_classes=2, optimizer="sgd", current_batch_size=32,
                    current_lr=0.05, momentum=0.8, weight_decay=0.05)
