"""A Hugging Face image classifier (a tiny ResNet from a config, random weights) as a batch-advisor workload.

    advisor plan --workload examples/hf_image.py:workload --nproc 2 --device-memory 256MiB --out image.toml

transformers' ResNetForImageClassification takes ``pixel_values`` and ``labels`` and returns its own loss;
its logits are (N, num_labels), so the sweep ranks by accuracy. The images are made here: noise with one
bright quadrant, whose index is the class (learnable). It has BatchNorm, which the recipe warns about at
small per-device batches. For timm users: examples/timm_image.py (timm needs torchvision).
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from advisor import Workload

CLASSES, IMAGE_SIZE = 4, 32


def build_model():
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                          num_labels=CLASSES)
    return ResNetForImageClassification(config)


class BrightQuadrant(Dataset):
    """3 x IMAGE_SIZE x IMAGE_SIZE noise; the class's quadrant is brighter."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(n, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g)
        self.labels = torch.randint(0, CLASSES, (n,), generator=g)
        half = IMAGE_SIZE // 2
        for image, label in zip(self.images, self.labels):
            row, col = divmod(int(label), 2)
            image[:, row * half:(row + 1) * half, col * half:(col + 1) * half] += 1.0

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"pixel_values": self.images[i], "labels": self.labels[i]}


def workload() -> Workload:
    return Workload(name="hf-resnet-image", build_model=build_model, train_data=BrightQuadrant(1024, seed=1),
                    val_data=BrightQuadrant(128, seed=2), num_classes=CLASSES, task="image-classification",
                    optimizer="sgd", momentum=0.9, weight_decay=1e-4, current_batch_size=256, current_lr=0.1,
                    epochs=10)
