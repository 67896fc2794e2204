"""Workloads whose right answers the tests know independently of the advisor's own code.

Every tensor comes from a local generator, so each rank (and the test that recomputes the answer) builds
the same data and the same initial weights whatever the global RNG did before.
"""

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from advisor import Workload

# Least squares at a fixed point (learning rate 0): B_simple is known in closed form
# (tests/helpers.py: analytic_linear_regression_b_simple(DIM, DISTANCE_SQ, NOISE_VAR)).
DIM, DISTANCE_SQ, NOISE_VAR = 16, 1.0, 1.0
LEAST_SQUARES_SAMPLES = 40_000  # more than any test draws in one epoch: no sample is seen twice


def _half_mse(outputs, targets):
    return 0.5 * nn.functional.mse_loss(outputs, targets)


def least_squares() -> Workload:
    """0.5 (w.x - y)^2 with x ~ N(0, I), y = w*.x + N(0, NOISE_VAR), the model at |w - w*|^2 = DISTANCE_SQ."""
    g = torch.Generator().manual_seed(7)
    w_star = torch.randn(DIM, generator=g)
    d = torch.randn(DIM, generator=g)
    d *= (DISTANCE_SQ / d.pow(2).sum()).sqrt()
    x = torch.randn(LEAST_SQUARES_SAMPLES, DIM, generator=g)
    y = (x @ w_star + NOISE_VAR ** 0.5 * torch.randn(LEAST_SQUARES_SAMPLES, generator=g)).unsqueeze(1)

    def build():
        model = nn.Linear(DIM, 1, bias=False)
        with torch.no_grad():
            model.weight.copy_((w_star + d).unsqueeze(0))
        return model

    return Workload(name="least-squares", build_model=build, train_data=TensorDataset(x, y),
                    val_data=TensorDataset(x[:256], y[:256]), loss_fn=_half_mse, task="regression",
                    optimizer="sgd", momentum=0.0, current_batch_size=32, current_lr=0.01)


def small_mlp_model():
    """A small MLP with weights from its own generator (no dropout, no BatchNorm: a step is deterministic)."""
    g = torch.Generator().manual_seed(11)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def small_mlp_data(n=512):
    g = torch.Generator().manual_seed(12)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, :3].argmax(dim=1) + (x[:, 3] > 1).long()) % 3
    return TensorDataset(x, y)


def small_mlp() -> Workload:
    """Plain SGD (no momentum) on a 3-class problem: the accumulation test recomputes its steps by hand."""
    return Workload(name="small-mlp", build_model=small_mlp_model, train_data=small_mlp_data(),
                    val_data=small_mlp_data(64), loss_fn=nn.functional.cross_entropy, task="regression",
                    num_classes=3, optimizer="sgd", momentum=0.0, current_batch_size=32, current_lr=0.5)


class DictSamples(Dataset):
    """Samples as dicts, as tokenizer-style pipelines yield them."""

    def __init__(self, n):
        g = torch.Generator().manual_seed(13)
        self.features = torch.randn(n, 4, generator=g)
        self.target = self.features.sum(dim=1, keepdim=True)

    def __len__(self):
        return len(self.features)

    def __getitem__(self, i):
        return {"features": self.features[i], "target": self.target[i]}


class DictWorkload(Workload):
    def batch_loss(self, model, batch):
        return nn.functional.mse_loss(model(batch["features"]), batch["target"])


def dict_regression() -> Workload:
    """Dict batches and a regression head ((N, 1) outputs, no classes): validation has a loss, no metric."""
    return DictWorkload(name="dict-regression", build_model=lambda: nn.Linear(4, 1), train_data=DictSamples(256),
                        val_data=DictSamples(40), loss_fn=nn.functional.mse_loss, task="regression",
                        optimizer="sgd", current_batch_size=16, current_lr=0.01)


def binary_logit() -> Workload:
    """A binary classifier with one logit (BCE): num_classes is 2, yet outputs are (N, 1), so no accuracy is scored."""
    g = torch.Generator().manual_seed(14)
    x = torch.randn(96, 4, generator=g)
    y = (x[:, :1] > 0).float()
    return Workload(name="binary-logit", build_model=lambda: nn.Linear(4, 1), train_data=TensorDataset(x, y),
                    val_data=TensorDataset(x[:40], y[:40]), loss_fn=nn.functional.binary_cross_entropy_with_logits,
                    task="regression", num_classes=2, optimizer="sgd", current_batch_size=16, current_lr=0.01)
