"""A plain torchrun loop over a small convolutional net on 64x64 images: activations (about 1 MiB per sample)
dominate its memory, so its OOM edge is set by the batch, not by a few MiB of process overhead."""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from conv_data import conv_model, conv_split

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(0)
train, val = conv_split()
loader = DataLoader(train, batch_size=args.batch_size, sampler=DistributedSampler(train, seed=0), drop_last=True)
model = DistributedDataParallel(conv_model())
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
step = 0
while step < args.steps:
    for x, y in loader:
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
    print(f"val_loss: {nn.functional.cross_entropy(model(x), y).item():.4f}")
dist.destroy_process_group()
