"""The newcomer's runs of issue 37, really trained: plain SGD on the digits data at LR 5 and LR 50 (the loss
explodes by orders of magnitude, then sits at or above chance) and at a healthy LR 0.1, each run written in
three formats from the same numbers:

- HF Trainer style: `{'loss': ..., 'grad_norm': ..., 'learning_rate': ..., 'epoch': ...}` every 10 steps (the
  mean since the last log, as the Trainer reports it) and one `{'eval_loss': ..., 'eval_accuracy': ...}` an epoch;
- plain: `step N loss X` every 10 steps (that step's loss) and `Epoch N: train_loss=... val_loss=... val_acc=...`
  (the epoch's mean), the per-step and per-epoch lines mixed in one file;
- a Lightning CSVLogger-style metrics.csv: step rows with train_loss_step, epoch rows with train_loss_epoch,
  val_loss and val_acc.

Run: python tests/corpus/generate/newcomer_runs.py tests/corpus/logs
"""

import csv
import os
import sys

import torch
from sklearn.datasets import load_digits
from torch import nn

torch.set_num_threads(1)
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
LOG_EVERY = 10
BATCH = 32
EPOCHS = 6
RUNS = {"lr5": 5.0, "lr50": 50.0, "healthy": 0.1}


def digits():
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    return x[order[360:]], y[order[360:]], x[order[:360]], y[order[:360]]


def run(lr: float, seed: int = 0) -> list[dict]:
    """One training run; the records every format is written from."""
    torch.manual_seed(seed)
    xt, yt, xv, yv = digits()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    optim = torch.optim.SGD(model.parameters(), lr=lr)
    steps_per_epoch = len(yt) // BATCH
    records, window, step = [], [], 0
    for epoch in range(EPOCHS):
        order = torch.randperm(len(yt))
        epoch_losses = []
        for i in range(steps_per_epoch):
            idx = order[i * BATCH:(i + 1) * BATCH]
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            optim.zero_grad()
            loss.backward()
            # Measured, not clipped: clip_grad_norm_ would turn an infinite norm into nan gradients.
            norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])))
            optim.step()
            step += 1
            window.append(loss.item())
            epoch_losses.append(loss.item())
            if step % LOG_EVERY == 0:
                records.append({"kind": "step", "step": step, "epoch": step / steps_per_epoch, "loss": loss.item(),
                                "mean_loss": sum(window) / len(window), "grad_norm": norm, "lr": lr})
                window = []
        with torch.no_grad():
            out = model(xv)
            val_loss = float(nn.functional.cross_entropy(out, yv))
            val_acc = float((out.argmax(1) == yv).float().mean())
        records.append({"kind": "epoch", "step": step, "epoch": epoch + 1,
                        "train_loss": sum(epoch_losses) / len(epoch_losses), "val_loss": val_loss,
                        "val_acc": val_acc})
    return records


def write_hf(path: str, records: list[dict]) -> None:
    with open(path, "w") as f:
        f.write("***** Running training *****\n  Num examples = 1437\n  Num Epochs = 6\n"
                f"  Instantaneous batch size per device = {BATCH}\n  Total optimization steps = 264\n")
        for r in records:
            if r["kind"] == "step":
                f.write(f"{{'loss': {r['mean_loss']:.4g}, 'grad_norm': {r['grad_norm']:.6g}, "
                        f"'learning_rate': {r['lr']:g}, 'epoch': {r['epoch']:.2f}}}\n")
            else:
                f.write(f"{{'eval_loss': {r['val_loss']:.6g}, 'eval_accuracy': {r['val_acc']:.4f}, "
                        f"'eval_runtime': 0.0412, 'eval_samples_per_second': 8737.9, 'epoch': {r['epoch']:.1f}}}\n")
        epochs = [r for r in records if r["kind"] == "epoch"]
        mean = sum(r["train_loss"] for r in epochs) / len(epochs)
        f.write(f"{{'train_runtime': 3.21, 'train_samples_per_second': 2686.0, 'train_loss': {mean:.6g}, "
                f"'epoch': {EPOCHS:.1f}}}\n")


def write_plain(path: str, records: list[dict]) -> None:
    with open(path, "w") as f:
        for r in records:
            if r["kind"] == "step":
                f.write(f"step {r['step']} loss {r['loss']:.4f}\n")
            else:
                f.write(f"Epoch {r['epoch']}: train_loss={r['train_loss']:.4f} val_loss={r['val_loss']:.4f} "
                        f"val_acc={r['val_acc']:.4f}\n")


def write_csv(path: str, records: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["epoch", "step", "train_loss_step", "train_loss_epoch", "val_loss", "val_acc"])
        for r in records:
            if r["kind"] == "step":
                out.writerow([int(r["epoch"] - 1e-9), r["step"] - 1, f"{r['loss']:.6g}", "", "", ""])
            else:
                out.writerow([r["epoch"] - 1, r["step"] - 1, "", f"{r['train_loss']:.6g}", f"{r['val_loss']:.6g}",
                              f"{r['val_acc']:.4f}"])


if __name__ == "__main__":
    for name, lr in RUNS.items():
        records = run(lr)
        write_hf(os.path.join(OUT, f"newcomer_{name}_hf.log"), records)
        write_plain(os.path.join(OUT, f"newcomer_{name}_plain.log"), records)
        write_csv(os.path.join(OUT, f"newcomer_{name}_metrics.csv"), records)
        print(name, lr, "written")
