"""The Lightning integration in one process: a LightningModule + LightningDataModule factory mapped onto a
Workload (training_step's loss, what validation_step logs, configure_optimizers with its param groups), with
one message for each way it cannot work; and lightning stays an optional import."""

from __future__ import annotations

import subprocess
import sys
import warnings

import lightning as L
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from advisor.errors import WorkloadError
from advisor.integrations.lightning import lightning_workload
from advisor.workload import resolve_workload
from helpers import REPO, train_in_process

EXAMPLE = f"{REPO / 'examples' / 'lightning_module.py'}:workload"


class Tiny(L.LightningModule):
    def __init__(self, step_returns="tensor", optimizers=1):
        super().__init__()
        self.net = nn.Linear(4, 3)
        self.step_returns, self.optimizer_count = step_returns, optimizers

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        return {"tensor": loss, "dict": {"loss": loss, "logits": None}, "no-loss": {"l": loss},
                "none": None}[self.step_returns]

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log_dict({"val_acc": (self.net(x).argmax(-1) == y).float().mean()})
        return {"seen": len(y), "preds": self.net(x)}  # a number is a metric; a non-scalar tensor is not

    def configure_optimizers(self):
        opts = [torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9) for _ in range(self.optimizer_count)]
        return opts if self.optimizer_count > 1 else opts[0]


class TinyData(L.LightningDataModule):
    def setup(self, stage):
        g = torch.Generator().manual_seed(0)
        self.data = TensorDataset(torch.randn(32, 4, generator=g), torch.randint(0, 3, (32,), generator=g))

    def train_dataloader(self):
        return DataLoader(self.data, batch_size=8, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.data, batch_size=8)


def tiny(**module_kw):
    return lightning_workload(lambda: (Tiny(**module_kw), TinyData()), task="regression")


def test_lightning_log_without_a_trainer_warns_and_drops_the_value():
    # What the capture relies on (lightning/pytorch/core/module.py, LightningModule.log): with no Trainer
    # attached, log() checks the value, warns and returns; nothing is stored anywhere.
    module = Tiny()
    with pytest.warns(UserWarning, match="self.trainer` reference is not registered"):
        assert module.log("val_acc", torch.tensor(0.5)) is None
    assert module._trainer is None and "log" not in vars(module)


def test_the_example_maps_its_steps_optimizer_and_data(capsys):
    workload = resolve_workload(EXAMPLE)
    assert (workload.name, workload.optimizer, workload.current_lr) == ("digits-lightning", "adamw", 2e-3)
    assert len(workload.train_data) == 1438 and len(workload.val_data) == 359 and workload.collate_fn is None
    assert "CosineAnnealingLR) is ignored" in workload.description
    model = workload.build_model()
    optimizer = workload.optimizer_for(model, 0.01)
    assert [g["lr"] for g in optimizer.param_groups] == [0.01, 0.01]
    assert [g["weight_decay"] for g in optimizer.param_groups] == [1e-2, 0.0]
    batch = next(iter(DataLoader(workload.val_data, batch_size=16)))
    with warnings.catch_warnings(), torch.no_grad():  # as the worker's validation runs
        warnings.filterwarnings("error", message=".*self.trainer")  # no "log() without a Trainer": captured
        loss, metrics = workload.eval_batch(model, batch)
    assert set(metrics) == {"val_acc", "val_loss"} and 0 <= metrics["val_acc"] <= 1 and loss > 0
    assert abs(metrics["val_loss"] - loss) < 1e-5  # training_step's loss on the same batch is the val loss
    assert "log" not in vars(model.module)  # Lightning's own log() is back after each step
    result = train_in_process(workload, capsys, per_device_batch=32, steps=4, evaluate=True, lr=2e-3)
    assert result["val_metric_name"] == "val_acc" and result["ranking"]["higher_is_better"] is True


def test_param_group_lr_ratios_and_a_dict_loss_are_kept():
    class TwoRates(Tiny):
        def configure_optimizers(self):
            opt = torch.optim.AdamW([{"params": [self.net.weight]}, {"params": [self.net.bias], "lr": 0.01}],
                                    lr=0.1)
            return [opt], [torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.0)]  # warmup from 0

    workload = lightning_workload(lambda: (TwoRates(step_returns="dict"), TinyData()), task="regression")
    assert workload.current_lr == 0.1 and "LambdaLR) is ignored" in workload.description
    model = workload.build_model()
    assert [g["lr"] for g in workload.optimizer_for(model, 0.5).param_groups] == pytest.approx([0.5, 0.05])
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    assert workload.batch_loss(model, (x, y)).dim() == 0
    with torch.no_grad():
        _, metrics = workload.eval_batch(model, (x, y))
    assert set(metrics) == {"val_acc", "seen"}


@pytest.mark.parametrize("make, expected", [
    (lambda: tiny(step_returns="no-loss"), "training_step returned a dict without a 'loss' key"),
    (lambda: tiny(step_returns="none"), "training_step returned None"),
    (lambda: tiny(optimizers=2), "gives 2 optimizers"),
    (lambda: lightning_workload(lambda: TinyData(), task="regression"), r"returned \(TinyData\): return "
                                                                        r"\(LightningModule, LightningDataModule\)"),
    (lambda: lightning_workload(lambda: (Tiny(), L.LightningDataModule()), task="regression"),
     "LightningDataModule.train_dataloader\\(\\) failed"),
])
def test_each_lightning_mistake_gets_its_message(make, expected):
    with pytest.raises(WorkloadError, match=expected):
        workload = make()
        model = workload.build_model()
        workload.batch_loss(model, (torch.randn(8, 4), torch.randint(0, 3, (8,))))


def test_manual_optimization_and_an_unknown_optimizer_family_are_refused():
    class Manual(Tiny):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

    class Unknown(Tiny):
        def configure_optimizers(self):
            return torch.optim.Adamax(self.parameters())

    with pytest.raises(WorkloadError, match="automatic_optimization = False"):
        lightning_workload(lambda: (Manual(), TinyData()), task="regression")
    with pytest.raises(WorkloadError, match="returns Adamax.*pass optimizer="):
        lightning_workload(lambda: (Unknown(), TinyData()), task="regression")
    assert lightning_workload(lambda: (Unknown(), TinyData()), task="regression", optimizer="adam").optimizer == "adam"


def test_missing_lightning_is_one_clear_message(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("lightning", "pytorch_lightning") else real(name, *a))
    with pytest.raises(WorkloadError, match=r"needs Lightning installed: pip install 'batch-advisor\[lightning\]'"):
        tiny()


def test_importing_advisor_and_the_integration_does_not_import_lightning():
    code = ("import sys, advisor, advisor.integrations.lightning, advisor.workload, advisor.worker; "
            "print(sorted(m for m in sys.modules if 'lightning' in m and not m.startswith('advisor')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert run.stdout.strip() == "[]"


def test_workloads_check_runs_the_lightning_example(capsys):
    from advisor.cli import main

    assert main(["workloads", "--check", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert "val_acc" in out and "sweep ranks by      val_acc (higher is better" in out
    assert "2 param group(s)" in out and "CosineAnnealingLR) is ignored" in out


def test_the_lightning_template_uses_the_integration_and_passes_the_check(tmp_path, capsys):
    from advisor.cli import main

    path = tmp_path / "workload.py"
    assert main(["init", "--template", "lightning", "--out", str(path)]) == 0
    assert "lightning_workload(" in path.read_text()
    assert main(["workloads", "--check", f"{path}:workload"]) == 0
    assert "sweep ranks by      val_acc (higher is better" in capsys.readouterr().out


def test_the_warmup_keeps_the_param_groups_lr_ratios():
    from advisor.job import TrialJob
    from helpers import plain_strategy

    class TwoRates(Tiny):
        def configure_optimizers(self):
            return torch.optim.SGD([{"params": [self.net.weight]}, {"params": [self.net.bias], "lr": 0.01}], lr=0.1)

    workload = lightning_workload(lambda: (TwoRates(), TinyData()), task="regression")
    job = TrialJob(kind="train", workload=workload.name, per_device_batch=8)
    strategy = plain_strategy(job)
    optimizer = workload.optimizer_for(workload.build_model(), 0.4)
    for lr in (0.1, 0.2, 0.4):  # warmup steps towards the trial's LR
        strategy.set_lr(optimizer, lr)
        assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([lr, lr / 10])
