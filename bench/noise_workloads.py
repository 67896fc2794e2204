"""Held-out workloads for the noise scale (issue 36, item 4): an Adam model and a loader-bound one, neither used to
tune any rule. `advisor plan --workload bench/noise_workloads.py:adam_mlp` (and `:loader_bound_mlp`) should end
with a known noise scale: a value with an interval, from the chosen sweep candidate's seeds.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from advisor import Workload

FEATURES, CLASSES = 24, 6


def _blobs(n: int, seed: int) -> TensorDataset:
    """Six Gaussian clusters in 24 dimensions, overlapping, with a nonlinear warp and 10% of the labels replaced at
    random: the loss stays well above zero (a first version with separable clusters reached loss 1e-4 within the
    sweep, where |G|^2 is ~0 and no noise scale can be measured)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(99)) * 0.3
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = centres[y] + torch.randn(n, FEATURES, generator=g)
    noisy = torch.rand(n, generator=g) < 0.1
    y[noisy] = torch.randint(0, CLASSES, (int(noisy.sum()),), generator=g)
    return TensorDataset(torch.sin(x) + 0.5 * x, y)


class MLP(nn.Module):
    def __init__(self, hidden: int = 96):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, CLASSES))

    def forward(self, x):
        return self.net(x)


def adam_mlp() -> Workload:
    """A two-hidden-layer MLP on warped Gaussian clusters, 3000 samples; AdamW at 2e-3 for global 32."""
    return Workload(name="adam-mlp", build_model=MLP, train_data=_blobs(3000, 0), val_data=_blobs(600, 1),
                    loss_fn=nn.functional.cross_entropy, task="nlp-classification", num_classes=CLASSES,
                    optimizer="adamw", current_batch_size=32, current_lr=2e-3, current_warmup_steps=10, epochs=5)


class SlowSamples(Dataset):
    """Each sample costs ``delay`` seconds to produce (decoding, augmentation): a loader-bound job."""

    def __init__(self, data: TensorDataset, delay: float = 0.001):
        self.data, self.delay = data, delay

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        time.sleep(self.delay)
        return self.data[index]


def loader_bound_mlp() -> Workload:
    """The same MLP with 1 ms per training sample in the loader (the model itself takes a few microseconds per
    sample): samples/s is the loader's; SGD with momentum at 0.05 for global 32."""
    return Workload(name="loader-bound-mlp", build_model=MLP, train_data=SlowSamples(_blobs(2000, 2)),
                    val_data=_blobs(400, 3), loss_fn=nn.functional.cross_entropy, task="nlp-classification",
                    num_classes=CLASSES, optimizer="sgd", current_batch_size=32, current_lr=0.05,
                    current_warmup_steps=10, epochs=5)
