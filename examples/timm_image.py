"""A timm image model (no pretrained weights) as a batch-advisor workload.

    pip install 'batch-advisor[timm]'   # timm needs the torchvision build that matches your torch
    advisor plan --workload examples/timm_image.py:workload --nproc 2 --device-memory 1GiB --out timm.toml

timm needs torchvision, and the registry has no CPU torchvision matching a CPU torch: the project's tests
run this example only where timm imports (pytest.importorskip); examples/hf_image.py is the same kind of
workload with a transformers vision model, tested everywhere.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload

CLASSES, IMAGE_SIZE = 4, 32


def build_model():
    import timm

    # pretrained=False: nothing is downloaded; the advisor's short trials measure the architecture.
    return timm.create_model("resnet10t", pretrained=False, num_classes=CLASSES)


def datasets():
    """Noise images with one bright quadrant, whose index is the class (learnable)."""
    g = torch.Generator().manual_seed(0)
    images = torch.randn(1152, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g)
    labels = torch.randint(0, CLASSES, (1152,), generator=g)
    half = IMAGE_SIZE // 2
    for image, label in zip(images, labels):
        row, col = divmod(int(label), 2)
        image[:, row * half:(row + 1) * half, col * half:(col + 1) * half] += 1.0
    return TensorDataset(images[:1024], labels[:1024]), TensorDataset(images[1024:], labels[1024:])


def workload() -> Workload:
    train, val = datasets()
    return Workload(name="timm-resnet10t", build_model=build_model, train_data=train, val_data=val,
                    loss_fn=nn.functional.cross_entropy, num_classes=CLASSES, task="image-classification",
                    optimizer="sgd", momentum=0.9, weight_decay=1e-4, current_batch_size=256, current_lr=0.1,
                    epochs=10)
