"""Run under torchrun: one LAMB step through the DeepSpeed worker's own strategy (the stage the adapter plans
for LAMB), then compare the trust ratios LAMB computed inside DeepSpeed with per-tensor ones computed on
rank 0 from the same global batch by a plain LAMB. Prints one JSON line on rank 0."""

import json
import os
import sys

import torch
import torch.distributed as dist

from advisor.job import TrialJob
from advisor.optimizers import Lamb
from advisor_adapters.deepspeed_worker import DeepSpeedStrategy

job = TrialJob.from_json(open(sys.argv[1]).read())


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 3))


class Work:  # the part of advisor.Workload the strategy uses
    optimizer = "lamb"

    def optimizer_hyperparameters(self):
        return {"betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}

    optimizer_factory = None  # the default: one param group, built from the workload's name

    def make_optimizer(self, params, lr):
        return Lamb(params, lr=lr, weight_decay=0.01)

    def optimizer_for(self, model, lr):
        return self.make_optimizer(model.parameters(), lr)

    def batch_loss(self, model, batch):
        return torch.nn.functional.cross_entropy(model(batch[0]), batch[1])


strategy = DeepSpeedStrategy()
strategy.setup(job)
g = torch.Generator().manual_seed(1)
x, y = torch.randn(8 * strategy.world_size, 8, generator=g), torch.randint(0, 3, (8 * strategy.world_size,), generator=g)
mine = slice(8 * strategy.rank, 8 * (strategy.rank + 1))
model = build_model()
optimizer = strategy.make_optimizer(Work(), model, job)
engine, ds_optimizer = strategy.prepare(model, optimizer, job)
strategy.train_cycle(engine, ds_optimizer, lambda: (x[mine], y[mine]), Work(), job, lambda: None)
inside = strategy._inner(ds_optimizer).lamb_coeffs
if strategy.rank == 0:
    reference_model = build_model()
    reference = Lamb(reference_model.parameters(), lr=job.lr, weight_decay=0.01)
    torch.nn.functional.cross_entropy(reference_model(x), y).backward()
    reference.step()
    print("RESULT " + json.dumps({"inside": inside, "per_tensor": reference.lamb_coeffs,
                                  "zero_stage": strategy.zero_stage, "world": strategy.world_size,
                                  "tensors": len(list(model.parameters()))}), flush=True)
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)
