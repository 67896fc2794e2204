"""A plain torchrun training loop, as a user writes it: argparse flags, DDP on gloo, a validation print."""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--accumulation", type=int, default=1)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--warmup", type=int, default=0)
parser.add_argument("--precision", default="fp32")
parser.add_argument("--width", type=int, default=256)
parser.add_argument("--fixed-batch", type=int, help="a fault case: ignore --batch-size")
parser.add_argument("--ask", action="store_true", help="a fault case: ask for input")
parser.add_argument("--no-step", action="store_true", help="a fault case: never step the optimizer")
parser.add_argument("--hang-loader", action="store_true", help="a fault case: a data loader that never returns")
args = parser.parse_args()

if args.ask:
    input("Continue? [y/n] ")
dist.init_process_group("gloo")
torch.manual_seed(0)
generator = torch.Generator().manual_seed(0)
features = torch.randn(2048, 64, generator=generator)
labels = (features[:, :8].sum(1) > 0).long()
train = TensorDataset(features[:1792], labels[:1792])
val = TensorDataset(features[1792:], labels[1792:])


class Hang(TensorDataset):
    def __getitem__(self, index):
        import time
        time.sleep(3600)


if args.hang_loader:
    train = Hang(*train.tensors)
batch = args.fixed_batch or args.batch_size
loader = DataLoader(train, batch_size=batch, sampler=DistributedSampler(train, seed=0), drop_last=True)
model = DistributedDataParallel(nn.Sequential(nn.Linear(64, args.width), nn.ReLU(), nn.Linear(args.width, args.width),
                                              nn.ReLU(), nn.Linear(args.width, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
step = 0
while step < args.steps:
    for x, y in loader:
        for group in optimizer.param_groups:
            group["lr"] = args.lr * min(1.0, (step + 1) / max(1, args.warmup))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = nn.functional.cross_entropy(model(x), y) / args.accumulation
        loss.backward()
        if args.no_step:
            if step > 3:
                break
            step += 1
            continue
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        if step >= args.steps:
            break
    if args.no_step and step > 3:
        break
model.eval()
with torch.no_grad():
    x, y = val.tensors
    out = model(x)
    print(f"val_loss: {nn.functional.cross_entropy(out, y).item():.4f} val_acc: {(out.argmax(1) == y).float().mean().item():.4f}")
dist.destroy_process_group()
