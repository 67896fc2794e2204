"""A user's FSDP2 training loop: it calls ``fully_shard`` itself (each block, then the root), as torchtitan-style
scripts do, with argparse flags, gloo, and a validation print. The script door measures it as it is."""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--warmup", type=int, default=0)
parser.add_argument("--width", type=int, default=256)
args = parser.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(0)
generator = torch.Generator().manual_seed(0)
features = torch.randn(2048, 64, generator=generator)
labels = (features[:, :8].sum(1) > 0).long()
train = TensorDataset(features[:1792], labels[:1792])
val = TensorDataset(features[1792:], labels[1792:])
loader = DataLoader(train, batch_size=args.batch_size, sampler=DistributedSampler(train, seed=0), drop_last=True)
blocks = [nn.Sequential(nn.Linear(64, args.width), nn.ReLU()), nn.Sequential(nn.Linear(args.width, args.width),
                                                                             nn.ReLU())]
model = nn.Sequential(*blocks, nn.Linear(args.width, 2))
for block in blocks:
    fully_shard(block)
fully_shard(model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
step = 0
while step < args.steps:
    for x, y in loader:
        for group in optimizer.param_groups:
            group["lr"] = args.lr * min(1.0, (step + 1) / max(1, args.warmup))
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        if step >= args.steps:
            break
model.eval()
with torch.no_grad():
    x, y = val.tensors
    out = model(x)
    print(f"val_loss: {nn.functional.cross_entropy(out, y).item():.4f} "
          f"val_acc: {(out.argmax(1) == y).float().mean().item():.4f}")
dist.destroy_process_group()
