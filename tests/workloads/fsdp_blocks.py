"""A residual MLP that declares its FSDP blocks (``fsdp_blocks``), for the fsdp adapter's tests.

Width 256, 4 blocks: 282,378 parameters (1.13 MB in fp32), 263,168 of them in the four equal blocks, so one
block gathered in flight is small next to the sharded state. Adam: its two moments double the state again.
"""

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload

WIDTH, DEPTH = 256, 4


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.relu(self.linear(x))


class BlockMLP(nn.Module):
    def __init__(self, width: int = WIDTH, depth: int = DEPTH):
        super().__init__()
        self.inp = nn.Linear(64, width)
        self.layers = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 10)

    def fsdp_blocks(self):
        return list(self.layers)

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def _data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 64, generator=g)
    return TensorDataset(x, (x[:, :10].argmax(dim=1)))


def workload() -> Workload:
    return Workload(name="fsdp-blocks", build_model=BlockMLP, train_data=_data(2048, 0), val_data=_data(256, 1),
                    loss_fn=nn.functional.cross_entropy, task="image-classification", num_classes=10,
                    optimizer="adam", current_batch_size=32, current_lr=1e-3)


def deep_meta_only() -> Workload:
    """tests/workloads/wide_mlp.py's deep MLP (32 layers of 512 x 512, 32.1 MiB of parameters), whose build refuses
    to run anywhere but on the meta device: a worker that built it whole first fails instead of passing quietly."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("wide_mlp", Path(__file__).with_name("wide_mlp.py"))
    wide_mlp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wide_mlp)
    workload = wide_mlp.deep_workload()
    build = workload.build_model

    def build_on_meta_only():
        if torch.empty(0).device.type != "meta":
            raise RuntimeError("built outside the meta device: this rank would have held the whole model")
        return build()

    workload.build_model = build_on_meta_only
    return workload
