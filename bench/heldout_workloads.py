"""Workloads the method's rules were never tuned on, for bench/advice_check.py and bench/time_to_accuracy.py.

The rules (the health verdict, the sweep rule, the LR bound) were calibrated on the digits ledger only; these
check them on other kinds of job. A GRU and a BatchNorm MLP on noisy tabular data here; the ragged-token Transformer and the 142-sample set live in
tests/workloads (tokens.py:tagger, small_data.py:tiny_142) and are used as they are.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload

STEPS, FEATURES, CLASSES = 20, 8, 4


def _sequences(n: int, seed: int) -> TensorDataset:
    """Noisy sequences whose class is the feature (of the first four) with the largest sum over time: a GRU has
    to integrate over the whole sequence; a bag of the last step alone is near chance."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, STEPS, FEATURES, generator=g)
    y = x[:, :, :CLASSES].sum(dim=1).argmax(dim=1)
    return TensorDataset(x, y)


class GRUClassifier(nn.Module):
    def __init__(self, hidden: int = 48):
        super().__init__()
        self.gru = nn.GRU(FEATURES, hidden, batch_first=True)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        _, last = self.gru(x)
        return self.head(last[-1])


def gru_sequences() -> Workload:
    """A one-layer GRU over 20-step sequences, 4 classes, 3000 training samples; Adam at 3e-3 for global 32."""
    return Workload(name="gru-sequences", build_model=GRUClassifier, train_data=_sequences(3000, 0),
                    val_data=_sequences(600, 1), loss_fn=nn.functional.cross_entropy, task="nlp-classification",
                    num_classes=CLASSES, optimizer="adam", current_batch_size=32, current_lr=3e-3,
                    current_warmup_steps=20, epochs=10)


TABULAR_FEATURES, TABULAR_CLASSES, LABEL_NOISE = 32, 8, 0.1


def _tabular(n: int, seed: int) -> TensorDataset:
    """Gaussian features whose class is the argmax of a fixed random linear map of a nonlinear transform, with
    LABEL_NOISE of the labels replaced at random: no model gets past ~1 - LABEL_NOISE x 7/8 = 0.91 accuracy (this
    MLP on 4000 samples peaks near 0.72-0.75, then overfits the noisy labels)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, TABULAR_FEATURES, generator=g)
    mix = torch.randn(TABULAR_FEATURES, TABULAR_CLASSES, generator=torch.Generator().manual_seed(1234))
    y = (torch.tanh(x) * x.abs().sqrt() @ mix).argmax(dim=1)
    noisy = torch.rand(n, generator=g) < LABEL_NOISE
    y[noisy] = torch.randint(0, TABULAR_CLASSES, (int(noisy.sum()),), generator=g)
    return TensorDataset(x, y)


class TabularMLP(nn.Module):
    """Two hidden layers with BatchNorm (the plan's SyncBN path under DDP)."""

    def __init__(self, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(TABULAR_FEATURES, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Linear(hidden, TABULAR_CLASSES))

    def forward(self, x):
        return self.net(x)


def tabular_mlp() -> Workload:
    """An MLP with BatchNorm on 32 tabular features, 8 classes with 10% label noise, 4000 training samples; SGD with
    momentum at 0.05 for global 64. Added in session 13, after the sweep rule's last change, as a check it was not
    tuned on (bench/time_to_accuracy.py's preset "tabular")."""
    return Workload(name="tabular-mlp", build_model=TabularMLP, train_data=_tabular(4000, 0),
                    # The task table has no tabular entry; with a base batch, step 2 starts from it anyway.
                    val_data=_tabular(800, 1), loss_fn=nn.functional.cross_entropy, task="image-classification",
                    num_classes=TABULAR_CLASSES, optimizer="sgd", current_batch_size=64, current_lr=0.05,
                    current_warmup_steps=0, epochs=10)
