"""An Accelerate training loop as its examples write it; the batch comes from a placeholder flag."""

import argparse

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--accumulation", type=int, default=1)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--mixed-precision", default="no")
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()

accelerator = Accelerator(gradient_accumulation_steps=args.accumulation,
                          mixed_precision="no" if args.mixed_precision == "fp32" else args.mixed_precision)
generator = torch.Generator().manual_seed(0)
features = torch.randn(1280, 32, generator=generator)
labels = (features[:, :4].sum(1) > 0).long()
loader = DataLoader(TensorDataset(features[:1024], labels[:1024]), batch_size=args.batch_size, shuffle=True)
val_loader = DataLoader(TensorDataset(features[1024:], labels[1024:]), batch_size=64)
model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
model, optimizer, loader, val_loader = accelerator.prepare(model, optimizer, loader, val_loader)
for epoch in range(args.epochs):
    model.train()
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in val_loader:
            predictions = accelerator.gather_for_metrics(model(x).argmax(1))
            correct += int((predictions == accelerator.gather_for_metrics(y)).sum())
            total += len(predictions)
    accelerator.print(f"epoch {epoch}: val_accuracy {correct / total:.4f}")
