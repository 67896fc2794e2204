"""Workloads the method's rules were never tuned on, for bench/advice_check.py and bench/time_to_accuracy.py.

The rules (the health verdict, the sweep rule, the LR bound) were calibrated on the digits ledger only; these
check them on other kinds of job. A GRU here; the ragged-token Transformer and the 142-sample set live in
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
