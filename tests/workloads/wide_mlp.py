"""Models whose parameters are larger than the per-device budget of their test (ZeRO-3 must shard them)."""

import os

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload

# 8 x 1024 x 1024 fp32 weights: 32 MiB of parameters (bench/gpu_smoke.sh widens it to exceed a GPU budget)
WIDTH, DEPTH = int(os.environ.get("WIDE_MLP_WIDTH", 1024)), 8
# 32 x 512 x 512: the same 32 MiB in 1 MiB layers (bench/gpu_smoke.sh widens it: 4096 gives 2 GiB)
DEEP_WIDTH, DEEP_DEPTH = int(os.environ.get("DEEP_MLP_WIDTH", 512)), 32


def _data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 64, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def build(width: int = WIDTH, depth: int = DEPTH) -> nn.Module:
    layers = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(depth):
        layers += [nn.Linear(width, width, bias=False), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 2))


def _workload(name: str, build_model) -> Workload:
    # SGD without momentum: no optimizer state, so what a rank holds is its shards of the parameters, their fp32
    # copy and their gradients.
    return Workload(name=name, build_model=build_model, train_data=_data(1024, 0), val_data=_data(256, 1),
                    loss_fn=nn.functional.cross_entropy, task="nlp-classification", num_classes=2, optimizer="sgd",
                    momentum=0.0, current_batch_size=32, current_lr=0.01)


def workload() -> Workload:
    return _workload("wide-mlp", build)


def deep_workload() -> Workload:
    """The same 32 MiB in 32 layers of 1 MiB: under ZeRO-3 a rank gathers a layer or two at a time, so on 8
    processes (an eighth of the parameters each, their fp32 copy and gradients: 3/8 of the model, plus that
    working set) it fits a budget well below the model's size. On 4 the shards alone are 3/4 of the model and
    the working set (gathered layers, full gradients before they are reduced) takes the rest."""
    return _workload("deep-mlp", lambda: build(DEEP_WIDTH, DEEP_DEPTH))
