"""Per-epoch runs of issue 37, really trained on the digits data (CPU), each written as a Keras CSVLogger file
(epoch,accuracy,loss,val_accuracy,val_loss), a Lightning CSVLogger metrics.csv (training and validation on separate
rows) and Keras's text lines, from the same numbers: so each rule is judged alike on CSV and on text.

- jitter: Adam at LR 0.03 and a 40-sample validation set: validation loss jumps (0.01 <-> 0.6) epoch to epoch;
- overfit: 50 training samples, a 512-wide MLP, Adam 0.01: validation bottoms at epoch 4 then rises while training
  falls to ~0;
- healthy: 1,000 samples, SGD 0.05 with momentum, 20 epochs.

Run: python tests/corpus/generate/epoch_csv_runs.py tests/corpus/logs
"""

import os
import sys

import torch
from sklearn.datasets import load_digits
from torch import nn

torch.set_num_threads(1)
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
RUNS = {
    "jitter": dict(n_train=1000, n_val=40, lr=0.03, opt="adam", epochs=25, width=256),
    "overfit": dict(n_train=50, n_val=300, lr=0.01, opt="adam", epochs=40, width=512),
    "healthy": dict(n_train=1000, n_val=300, lr=0.05, opt="sgd", epochs=20, width=128),
}


def run(n_train, n_val, lr, opt, epochs, width, seed=0, batch=32):
    """(epoch, train accuracy, train loss, validation accuracy, validation loss) an epoch."""
    d = load_digits()
    x, y = torch.tensor(d.data, dtype=torch.float32) / 16, torch.tensor(d.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    xv, yv = x[order[:n_val]], y[order[:n_val]]
    xt, yt = x[order[400:400 + n_train]], y[order[400:400 + n_train]]
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    optim = (torch.optim.Adam(model.parameters(), lr=lr) if opt == "adam"
             else torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9))
    rows = []
    for epoch in range(epochs):
        perm, total, correct = torch.randperm(len(yt)), 0.0, 0
        for i in range(0, len(yt), batch):
            idx = perm[i:i + batch]
            out = model(xt[idx])
            loss = nn.functional.cross_entropy(out, yt[idx])
            optim.zero_grad()
            loss.backward()
            optim.step()
            total += loss.item() * len(idx)
            correct += (out.argmax(1) == yt[idx]).sum().item()
        with torch.no_grad():
            out = model(xv)
            val_loss = nn.functional.cross_entropy(out, yv).item()
            val_acc = (out.argmax(1) == yv).float().mean().item()
        rows.append((epoch, correct / len(yt), total / len(yt), val_acc, val_loss, (epoch + 1) * -(-len(yt) // batch)))
    return rows


def write(name, rows):
    with open(os.path.join(OUT, f"epochs_{name}_keras.csv"), "w") as f:
        f.write("epoch,accuracy,loss,val_accuracy,val_loss\n")
        f.writelines(f"{e},{a},{loss},{va},{vl}\n" for e, a, loss, va, vl, _ in rows)
    with open(os.path.join(OUT, f"epochs_{name}_lightning_metrics.csv"), "w") as f:
        f.write("epoch,step,train_acc,train_loss,val_acc,val_loss\n")
        for e, a, loss, va, vl, step in rows:
            f.write(f"{e},{step - 1},,,{va},{vl}\n")
            f.write(f"{e},{step - 1},{a},{loss},,\n")
    with open(os.path.join(OUT, f"epochs_{name}_keras.log"), "w") as f:
        for e, a, loss, va, vl, step in rows:
            f.write(f"Epoch {e + 1}/{len(rows)}\n{step // (e + 1)}/{step // (e + 1)} [==============================] "
                    f"- 0s 2ms/step - loss: {loss:.4f} - accuracy: {a:.4f} - val_loss: {vl:.4f} - val_accuracy: "
                    f"{va:.4f}\n")


if __name__ == "__main__":
    for name, config in RUNS.items():
        write(name, run(**config))
        print(name, "written")
