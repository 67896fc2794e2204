"""A plain DeepSpeed loop, as a user writes it: the deepspeed launcher, deepspeed.initialize with a config dict
and a client optimizer (ZeRO 1)."""
import argparse

import deepspeed
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--local_rank", type=int, default=-1)
args = parser.parse_args()
assert args.local_rank >= 0, "start me with the deepspeed launcher (it passes --local_rank)"

deepspeed.init_distributed()
torch.manual_seed(0)
generator = torch.Generator().manual_seed(0)
features = torch.randn(2048, 64, generator=generator)
labels = (features[:, :8].sum(1) > 0).long()
train = TensorDataset(features[:1792], labels[:1792])
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
config = {"train_micro_batch_size_per_gpu": args.batch_size, "gradient_accumulation_steps": 1,
          "zero_optimization": {"stage": 1, "reduce_bucket_size": 5e6, "allgather_bucket_size": 5e6},
          "zero_allow_untested_optimizer": True}
engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
loader = DataLoader(train, batch_size=args.batch_size, sampler=DistributedSampler(train, seed=0), drop_last=True)
step = 0
while step < args.steps:
    for x, y in loader:
        loss = nn.functional.cross_entropy(engine(x), y)
        engine.backward(loss)
        engine.step()
        step += 1
        if step >= args.steps:
            break
print(f"val_loss: {loss.item():.4f}")
