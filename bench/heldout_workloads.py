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
from noise_workloads import SlowSamples  # the loader-bound dataset, one copy (the workload door puts bench/ on the path)

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


# -- Issue 36's done-when check: three workloads written after method v3's rules landed, tuned on by no rule --------
# (bench/time_to_accuracy.py presets "bn-small", "adam-edge" and "slow-loader"; each set up before its first plan.)

IMAGE_SIDE, IMAGE_CLASSES = 12, 4


def _patterns(n: int, seed: int) -> TensorDataset:
    """12x12 one-channel images: one of four oriented stripe patterns (horizontal, vertical, two diagonals) at a
    random phase and contrast, under strong pixel noise: a convolution has to average the noise over the stripes."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, IMAGE_CLASSES, (n,), generator=g)
    i, j = torch.meshgrid(torch.arange(IMAGE_SIDE), torch.arange(IMAGE_SIDE), indexing="ij")
    waves = torch.stack([i, j, i + j, i - j]).float() * (2 * torch.pi / 4)  # one per class, period 4 pixels
    phase = torch.rand(n, 1, 1, generator=g) * 2 * torch.pi
    contrast = 0.3 + 0.5 * torch.rand(n, 1, 1, generator=g)
    x = contrast * torch.sin(waves[y] + phase) + 1.4 * torch.randn(n, IMAGE_SIDE, IMAGE_SIDE, generator=g)
    return TensorDataset(x.unsqueeze(1), y)


class SmallBatchNormCNN(nn.Module):
    """A depthwise-separable CNN with BatchNorm2d (MobileNet-style): wide feature maps at little compute, so a small
    device budget holds only a few samples (a first version, a plain 16-channel CNN, needed ~55 KiB a sample: under a
    4 MiB CPU budget the interpreter's own allocations decided whether 2 per device fit, not the model)."""

    def __init__(self, width: int = 96):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                                 nn.Conv2d(width, width, 3, padding=1, groups=width), nn.BatchNorm2d(width), nn.ReLU(),
                                 nn.Conv2d(width, 16, 1), nn.BatchNorm2d(16), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64, IMAGE_CLASSES))

    def forward(self, x):
        return self.net(x)


def bn_small_ceiling() -> Workload:
    """A BatchNorm CNN on noisy stripe images, 2000 training samples; SGD with momentum at 0.05 for global 32. Planned
    under a small device budget (bench/time_to_accuracy.py's preset passes --device-memory), so that its memory
    ceiling is a few samples per device and the sweep meets the small-micro-batch BatchNorm rule.

    Measured 2026-12-07 (21:05): at 8 MiB this budget is below what the CPU's RLIMIT_DATA enforcement holds over a
    sweep run. A rank's data segment grew 2.3 MiB over 375 steps at 6 per device (VmData every 25 steps), while the
    Python objects it allocated grew under 0.2 MiB (tracemalloc): native allocator growth, not the model's tensors,
    and more than the ceiling's 15% headroom (1.2 MiB). The probes (2 steps) and the trial (40) fit at 12; the sweep
    runs (200-400 steps) ran out of memory at 6 and 12, so no candidate learned (exit 3, said as memory since); with
    --headroom 0.5 the ceiling was 7 and the sweep's 7 ran out again, leaving 3. A GPU budget counts tensors only."""
    return Workload(name="bn-small-ceiling", build_model=SmallBatchNormCNN, train_data=_patterns(2000, 0),
                    val_data=_patterns(600, 1), loss_fn=nn.functional.cross_entropy, task="image-classification",
                    num_classes=IMAGE_CLASSES, optimizer="sgd", current_batch_size=32, current_lr=0.05,
                    current_warmup_steps=10, epochs=10)


EDGE_FEATURES, EDGE_CLASSES = 40, 5


def _edge_data(n: int, seed: int) -> TensorDataset:
    """Gaussian features whose class is the argmax of a fixed random linear map, 5% of the labels replaced at random
    (a first version with features on scales 1e-2..10 and a two-layer teacher was too hard to learn: 0.45 accuracy
    after 6 epochs). The depth of the model without normalisation, not the data, puts Adam's edge near its base LR."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, EDGE_FEATURES, generator=g)
    y = (x @ torch.randn(EDGE_FEATURES, EDGE_CLASSES, generator=torch.Generator().manual_seed(77))).argmax(1)
    noisy = torch.rand(n, generator=g) < 0.05
    y[noisy] = torch.randint(0, EDGE_CLASSES, (int(noisy.sum()),), generator=g)
    return TensorDataset(x, y)


class DeepMLP(nn.Module):
    """Four hidden layers, no normalisation: nothing damps a too-large Adam step."""

    def __init__(self, hidden: int = 96):
        super().__init__()
        layers, width = [], EDGE_FEATURES
        for _ in range(4):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        self.net = nn.Sequential(*layers, nn.Linear(width, EDGE_CLASSES))

    def forward(self, x):
        return self.net(x)


# Set from a single-process LR scan at global 32 before any plan: 4 epochs at 0.004 and 0.016 reach 0.83-0.85
# accuracy, 0.032 0.77, 0.064 0.47 (the loss stays near 1): square-root scaling to global 512 lands past the edge.
ADAM_EDGE_LR = 0.016


def adam_edge_mlp() -> Workload:
    """A deep MLP without normalisation on noisy linear classes, 3000 samples; Adam at ADAM_EDGE_LR for global 32,
    a quarter of the LR where it stops learning."""
    return Workload(name="adam-edge-mlp", build_model=DeepMLP, train_data=_edge_data(3000, 0),
                    val_data=_edge_data(600, 1), loss_fn=nn.functional.cross_entropy, task="nlp-classification",
                    num_classes=EDGE_CLASSES, optimizer="adam", current_batch_size=32, current_lr=ADAM_EDGE_LR,
                    current_warmup_steps=10, epochs=10)


RING_FEATURES, RING_CLASSES = 10, 4


def _shells(n: int, seed: int) -> TensorDataset:
    """Points in 10 dimensions whose class is the radius shell they lie in (four shells), the radius blurred by
    noise: a small MLP learns it in a few epochs and then creeps up."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, RING_CLASSES, (n,), generator=g)
    direction = torch.nn.functional.normalize(torch.randn(n, RING_FEATURES, generator=g), dim=1)
    radius = 1.0 + y.float() + 0.35 * torch.randn(n, generator=g)
    return TensorDataset(direction * radius.unsqueeze(1), y)


class ShellMLP(nn.Module):
    def __init__(self, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(RING_FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, RING_CLASSES))

    def forward(self, x):
        return self.net(x)


def slow_loader_mlp() -> Workload:
    """A small MLP on radius shells, 2000 training samples that each cost 1 ms in the loader (the model takes
    microseconds a sample); SGD with momentum at 0.05 for global 32."""
    return Workload(name="slow-loader-mlp", build_model=ShellMLP, train_data=SlowSamples(_shells(2000, 5)),
                    val_data=_shells(500, 6), loss_fn=nn.functional.cross_entropy, task="nlp-classification",
                    num_classes=RING_CLASSES, optimizer="sgd", current_batch_size=32, current_lr=0.05,
                    current_warmup_steps=10, epochs=10)
