"""A model whose parameters are larger than the per-device budget of its test (ZeRO-3 must shard it)."""

import os

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload

# 8 x 1024 x 1024 fp32 weights: 32 MiB of parameters (bench/gpu_smoke.sh widens it to exceed a GPU budget)
WIDTH, DEPTH = int(os.environ.get("WIDE_MLP_WIDTH", 1024)), 8


def _data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 64, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def build() -> nn.Module:
    layers = [nn.Linear(64, WIDTH), nn.ReLU()]
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH, bias=False), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(WIDTH, 2))


def workload() -> Workload:
    return Workload(name="wide-mlp", build_model=build, train_data=_data(1024, 0), val_data=_data(256, 1),
                    loss_fn=nn.functional.cross_entropy, task="nlp-classification", num_classes=2, optimizer="sgd",
                    current_batch_size=32, current_lr=0.01)
