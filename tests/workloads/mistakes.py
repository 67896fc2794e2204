"""Workload files a new user gets wrong, one mistake each: `advisor workloads --check` names each one."""

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from advisor import Workload

X, Y = torch.randn(16, 4, generator=torch.Generator().manual_seed(0)), torch.randint(0, 3, (16,))


def _base(**kw) -> Workload:
    fields = dict(name="bad", build_model=lambda: nn.Linear(4, 3), train_data=TensorDataset(X, Y),
                  val_data=TensorDataset(X, Y), loss_fn=nn.functional.cross_entropy, task="nlp-classification",
                  num_classes=3, current_batch_size=8, current_lr=0.1)
    fields.update(kw)
    return Workload(**fields)


def wrong_return_type():
    return {"model": nn.Linear(4, 3)}


def model_not_a_module():
    return _base(build_model=lambda: "linear")


class BareTensors(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return X[i]  # no target


def dataset_of_the_wrong_shape():
    return _base(train_data=BareTensors())


def loss_not_a_scalar():
    return _base(loss_fn=lambda out, y: nn.functional.cross_entropy(out, y, reduction="none"))


def nan_at_step_one():
    return _base(train_data=TensorDataset(torch.full((16, 4), float("nan")), Y))


class Ragged(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.ones(4 + i % 3), torch.tensor(0)


def collate_error():
    return _base(train_data=Ragged())


def metric_missing():
    return _base(evaluate=lambda model, batch: {"acc": 1.0}, metric="f1")
