"""plain_loop.py's model and data as a Workload: the same job through the Workload door, for comparison."""

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload


def workload(width: int = 1024) -> Workload:
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(2048, 64, generator=generator)
    labels = (features[:, :8].sum(1) > 0).long()
    return Workload(name="plain-loop-as-workload",
                    build_model=lambda: nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width),
                                                      nn.ReLU(), nn.Linear(width, 2)),
                    train_data=TensorDataset(features[:1792], labels[:1792]),
                    val_data=TensorDataset(features[1792:], labels[1792:]), loss_fn=nn.functional.cross_entropy,
                    task="nlp-classification", num_classes=2, optimizer="sgd", momentum=0.9, current_lr=0.05,
                    current_batch_size=64)


def conv_workload() -> Workload:
    """conv_loop.py's model and data as a Workload."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))  # conv_data.py sits beside this file, as beside the script
    from conv_data import conv_model, conv_split

    train, val = conv_split()
    return Workload(name="conv-loop-as-workload", build_model=conv_model, train_data=train, val_data=val,
                    loss_fn=nn.functional.cross_entropy, task="image-classification", num_classes=2,
                    optimizer="sgd", momentum=0.9, current_lr=0.05, current_batch_size=32)
