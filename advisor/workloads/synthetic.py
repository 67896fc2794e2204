"""Synthetic workloads with learnable structure: a BatchNorm CNN and a small Transformer."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

from ..workload import Workload


def _pattern_images(n: int, num_classes: int, generator: torch.Generator):
    # Each class is a fixed random pattern; samples are noisy copies, so the task is learnable.
    patterns = torch.randn(num_classes, 3, 32, 32, generator=torch.Generator().manual_seed(1234))
    y = torch.randint(0, num_classes, (n,), generator=generator)
    x = patterns[y] * 0.5 + torch.randn(n, 3, 32, 32, generator=generator)
    return x, y


def bn_cnn() -> Workload:
    num_classes = 10
    x_train, y_train = _pattern_images(2048, num_classes, torch.Generator().manual_seed(1))
    x_val, y_val = _pattern_images(512, num_classes, torch.Generator().manual_seed(2))

    def build():
        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

        return nn.Sequential(*block(3, 32), nn.MaxPool2d(2), *block(32, 64), nn.MaxPool2d(2), *block(64, 64),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))

    return Workload(
        name="synthetic-bn-cnn", build_model=build, train_data=TensorDataset(x_train, y_train),
        val_data=TensorDataset(x_val, y_val), loss_fn=nn.functional.cross_entropy,
        task="image-classification", num_classes=num_classes, optimizer="sgd",
        current_batch_size=128, current_lr=0.1, description="BatchNorm CNN on synthetic class-pattern images",
    )


class TokenClassifier(nn.Module):
    def __init__(self, vocab: int, seq_len: int, num_classes: int, dim: int = 64, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.zeros(1, seq_len, dim))
        layer = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=4 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.position)
        return self.head(h.mean(dim=1))


def _token_data(n: int, vocab: int, seq_len: int, num_classes: int, generator: torch.Generator):
    # The label is which class's marker tokens dominate the sequence.
    x = torch.randint(num_classes, vocab, (n, seq_len), generator=generator)
    y = torch.randint(0, num_classes, (n,), generator=generator)
    marks = torch.rand(n, seq_len, generator=generator) < 0.15
    x[marks] = y.unsqueeze(1).expand(-1, seq_len)[marks]
    return x, y


def transformer_classifier() -> Workload:
    vocab, seq_len, num_classes = 1000, 64, 4
    x_train, y_train = _token_data(2048, vocab, seq_len, num_classes, torch.Generator().manual_seed(3))
    x_val, y_val = _token_data(512, vocab, seq_len, num_classes, torch.Generator().manual_seed(4))
    return Workload(
        name="synthetic-transformer", build_model=lambda: TokenClassifier(vocab, seq_len, num_classes),
        train_data=TensorDataset(x_train, y_train), val_data=TensorDataset(x_val, y_val),
        loss_fn=nn.functional.cross_entropy, task="nlp-classification", num_classes=num_classes,
        optimizer="adamw", current_batch_size=32, current_lr=5e-4,
        description="2-layer Transformer encoder classifying synthetic token sequences",
    )
