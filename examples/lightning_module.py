"""A LightningModule and its LightningDataModule as a batch-advisor workload (needs batch-advisor[lightning,examples]).

The data is the handwritten-digits set scikit-learn ships (no download). Try:

    advisor workloads --check examples/lightning_module.py:workload
    advisor plan --workload examples/lightning_module.py:workload --nproc 2 --device-memory 64MiB
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from advisor.integrations.lightning import lightning_workload


class DigitsClassifier(L.LightningModule):
    """An MLP over the 8x8 digits; logs what a Trainer run would show."""

    def __init__(self, hidden: int = 128, lr: float = 2e-3, weight_decay: float = 1e-2):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.LayerNorm(hidden), nn.ReLU(),
                                 nn.Linear(hidden, 10))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return {"loss": loss}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(dim=-1) == y).float().mean())

    def configure_optimizers(self):
        # No weight decay on norms and biases: two param groups.
        decay = [p for p in self.parameters() if p.ndim > 1]
        no_decay = [p for p in self.parameters() if p.ndim <= 1]
        optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": self.hparams.weight_decay},
                                       {"params": no_decay, "weight_decay": 0.0}], lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


class DigitsData(L.LightningDataModule):
    def __init__(self, batch_size: int = 32, val_fraction: float = 0.2):
        super().__init__()
        self.batch_size, self.val_fraction = batch_size, val_fraction

    def setup(self, stage: str):
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
        y = torch.tensor(digits.target, dtype=torch.long)
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
        n_val = int(len(y) * self.val_fraction)
        self.train = TensorDataset(x[order[n_val:]], y[order[n_val:]])
        self.val = TensorDataset(x[order[:n_val]], y[order[:n_val]])

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=self.batch_size)


def workload():
    return lightning_workload(lambda: (DigitsClassifier(), DigitsData()), name="digits-lightning",
                              task="image-classification", num_classes=10, metric="val_acc",
                              current_batch_size=32)
