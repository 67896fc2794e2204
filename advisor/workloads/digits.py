"""Workloads on the handwritten-digits set that scikit-learn ships (no download)."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

from ..workload import Workload

_SPLIT_SEED = 0
_VAL_FRACTION = 0.2


def _digits_arrays():
    """(images N x 8 x 8, labels N) from the file scikit-learn ships, read with numpy: the same arrays as
    ``sklearn.datasets.load_digits`` (checked in tests) without importing scikit-learn, which costs ~0.8 CPU-s
    in every worker process. scikit-learn itself is the fallback when the file is not where it ships."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            import numpy as np

            data = np.loadtxt(path, delimiter=",")
            return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
    from sklearn.datasets import load_digits  # optional dependency: batch-advisor[examples]

    digits = load_digits()
    return digits.images, digits.target


def _digits_tensors(image_size: int | None):
    images, labels = _digits_arrays()
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0  # N x 1 x 8 x 8, in [0, 1]
    y = torch.tensor(labels, dtype=torch.long)
    if image_size:
        x = nn.functional.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False)
    x = (x - x.mean()) / x.std()
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(_SPLIT_SEED))
    n_val = int(len(y) * _VAL_FRACTION)
    val, train = order[:n_val], order[n_val:]
    return TensorDataset(x[train], y[train]), TensorDataset(x[val], y[val])


class DigitsCNN(nn.Module):
    def __init__(self, width: int = 32, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.head = nn.Linear(2 * width * 8 * 8, num_classes)

    def forward(self, x):
        return self.head(self.features(x))


def digits_cnn() -> Workload:
    train, val = _digits_tensors(image_size=32)
    return Workload(
        name="digits-cnn", build_model=DigitsCNN, train_data=train, val_data=val,
        loss_fn=nn.functional.cross_entropy, task="image-classification", num_classes=10,
        optimizer="sgd", current_batch_size=64, current_lr=0.02,
        description="CNN on scikit-learn's handwritten digits, upsampled to 32x32",
    )


def digits_mlp() -> Workload:
    train, val = _digits_tensors(image_size=None)

    def build():
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))

    return Workload(
        name="digits-mlp", build_model=build, train_data=train, val_data=val,
        loss_fn=nn.functional.cross_entropy, task="image-classification", num_classes=10,
        optimizer="adam", current_batch_size=32, current_lr=1e-3,
        description="MLP on scikit-learn's handwritten digits (64 pixels)",
    )
