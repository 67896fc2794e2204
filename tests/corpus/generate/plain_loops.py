"""Generate labelled logs from real plain-PyTorch training loops (digits data, CPU).

Run: python tests/corpus/generate/plain_loops.py tests/corpus/logs
Each scenario really trains; the printed lines are the log. Label = the findings it should provoke.
"""

import json
import os
import resource
import sys
import traceback

import torch
from sklearn.datasets import load_digits
from torch import nn

torch.set_num_threads(1)
OUT = sys.argv[1] if len(sys.argv) > 1 else "."


def digits(n_train=None, sort_by_class=False, noisy_block=False, input_scale=1.0, split_seed=0):
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0 * input_scale
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(split_seed)
    order = torch.randperm(len(y), generator=g)
    val, train = order[:360], order[360:]
    if n_train:
        train = train[:n_train]
    xt, yt = x[train], y[train]
    if sort_by_class:
        idx = torch.argsort(yt, stable=True)
        xt, yt = xt[idx], yt[idx]
    if noisy_block:  # a contiguous 15% of the (never reshuffled) training order carries random labels
        yt = yt.clone()
        lo, hi = int(0.40 * len(yt)), int(0.55 * len(yt))
        yt[lo:hi] = torch.randint(0, 10, (hi - lo,), generator=g)
    return xt, yt, x[val], y[val]


def deep_tanh(depth=8, gain=0.6):
    # Small initial weights through many tanh layers: the loss sits on a plateau before it drops.
    layers = []
    for _ in range(depth):
        linear = nn.Linear(64, 64)
        nn.init.xavier_uniform_(linear.weight, gain=gain)
        layers += [linear, nn.Tanh()]
    return nn.Sequential(*layers, nn.Linear(64, 10))


def mlp(width=128, depth=2):
    layers, d = [], 64
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, 10))


def evaluate(model, xv, yv):
    with torch.no_grad():
        out = model(xv)
        return float(nn.functional.cross_entropy(out, yv)), float((out.argmax(1) == yv).float().mean())


def train(log, *, batch, lr, epochs, opt="sgd", n_train=None, sort_by_class=False, shuffle=True, width=128,
          depth=2, fmt="brackets", eval_every=None, seed=0, print_every=1, max_steps=None, noisy_block=False,
          input_scale=1.0, model="mlp"):
    torch.manual_seed(seed)
    xt, yt, xv, yv = digits(n_train, sort_by_class, noisy_block, input_scale)
    model = deep_tanh() if model == "deep-tanh" else mlp(width, depth)
    if opt == "sgd":
        optim = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    elif opt == "sgd-plain":
        optim = torch.optim.SGD(model.parameters(), lr=lr)
    else:
        optim = torch.optim.Adam(model.parameters(), lr=lr)
    steps_per_epoch = len(yt) // batch
    step = 0
    for epoch in range(1, epochs + 1):
        order = torch.randperm(len(yt)) if shuffle else torch.arange(len(yt))
        for i in range(steps_per_epoch):
            idx = order[i * batch:(i + 1) * batch]
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            optim.zero_grad()
            loss.backward()
            optim.step()
            step += 1
            value = loss.item()
            if step % print_every == 0:
                if fmt == "brackets":
                    log.write(f"Epoch [{epoch}/{epochs}] Step [{i + 1}/{steps_per_epoch}] Loss: {value:.4f}\n")
                elif fmt == "mnist":
                    seen = (i + 1) * batch
                    log.write(f"Train Epoch: {epoch} [{seen}/{len(yt)} ({100. * seen / len(yt):.0f}%)]"
                              f"\tLoss: {value:.6f}\n")
                elif fmt == "kv":
                    log.write(f"2026-11-29 21:00:00 INFO step={step} epoch={epoch} loss={value:.5f} lr={lr}\n")
                elif fmt == "jsonl":
                    log.write(json.dumps({"step": step, "epoch": epoch, "loss": value, "lr": lr}) + "\n")
                elif fmt == "iter":
                    log.write(f"iter {step}: loss {value:.4f}, time 12.31ms, mfu -100.00%\n")
            if eval_every and step % eval_every == 0:
                vl, acc = evaluate(model, xv, yv)
                if fmt == "nanogpt" or fmt == "iter":
                    tl = float(nn.functional.cross_entropy(model(xt[:512]), yt[:512]))
                    log.write(f"step {step}: train loss {tl:.4f}, val loss {vl:.4f}\n")
                elif fmt == "jsonl":
                    log.write(json.dumps({"step": step, "val_loss": vl, "val_acc": acc}) + "\n")
                elif fmt == "kv":
                    log.write(f"2026-11-29 21:00:00 INFO step={step} val_loss={vl:.5f} val_acc={acc:.4f}\n")
                else:
                    log.write(f"Validation set: Average loss: {vl:.4f}, Accuracy: {acc:.4f}\n")
            if max_steps and step >= max_steps:
                return
        if fmt == "mnist" and not eval_every:
            vl, acc = evaluate(model, xv, yv)
            log.write(f"\nTest set: Average loss: {vl:.4f}, Accuracy: {int(acc * len(yv))}/{len(yv)} "
                      f"({100 * acc:.0f}%)\n\n")


def scenario(name, **kw):
    path = os.path.join(OUT, name)
    with open(path, "w") as log:
        log.write(f"# generated by tests/corpus/generate/plain_loops.py: {json.dumps(kw)}\n")
        train(log, **kw)
    print("wrote", path)


def oom_scenario(name):
    """A real CPU out-of-memory: the data segment is capped (RLIMIT_DATA), then the batch grows."""
    path = os.path.join(OUT, name)
    xt, yt, _, _ = digits()
    model = nn.Sequential(nn.Linear(64, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10))
    optim = torch.optim.SGD(model.parameters(), lr=0.01)
    with open("/proc/self/status") as status:
        data = next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmData"))
    with open(path, "w") as log:
        log.write("# generated by plain_loops.py: real CPU OOM under RLIMIT_DATA\n")
        resource.setrlimit(resource.RLIMIT_DATA, (data + 600 * 2**20, resource.RLIM_INFINITY))
        try:
            for step, batch in enumerate([64, 128, 256, 8192, 65536], 1):
                idx = torch.randint(0, len(yt), (batch,))
                x = xt[idx].repeat(1, 1)
                loss = nn.functional.cross_entropy(model(x), yt[idx])
                optim.zero_grad()
                loss.backward()
                optim.step()
                log.write(f"Epoch [1/1] Step [{step}/5] Loss: {loss.item():.4f}\n")
                log.flush()
        except RuntimeError:
            log.write(traceback.format_exc())
    print("wrote", path)


def crash_scenario(name):
    """A real crash that is not an OOM: a shape bug after a few healthy steps."""
    path = os.path.join(OUT, name)
    xt, yt, _, _ = digits()
    model = mlp()
    optim = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with open(path, "w") as log:
        log.write("# generated by plain_loops.py: a shape bug, not an OOM\n")
        try:
            for step in range(1, 200):
                idx = torch.randint(0, len(yt), (32,))
                x = xt[idx] if step < 180 else xt[idx].view(32, 8, 8)
                loss = nn.functional.cross_entropy(model(x), yt[idx])
                optim.zero_grad()
                loss.backward()
                optim.step()
                log.write(f"Epoch [1/1] Step [{step}/199] Loss: {loss.item():.4f}\n")
        except RuntimeError:
            log.write(traceback.format_exc())
    print("wrote", path)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    scenario("plain_healthy_brackets.log", batch=32, lr=0.02, epochs=4)
    scenario("plain_healthy_noisy_batch8.log", batch=8, lr=0.01, epochs=2)
    scenario("plain_healthy_nanogpt.log", batch=64, lr=0.05, epochs=10, fmt="iter", eval_every=20, print_every=5)
    scenario("plain_jitter_batch2_mnist.log", batch=2, lr=0.2, epochs=1, fmt="mnist")
    scenario("plain_jitter_batch4_kv.log", batch=4, lr=0.15, epochs=1, fmt="kv")
    scenario("plain_periodic_noisy_block_kv.log", batch=32, lr=0.02, epochs=20, noisy_block=True, shuffle=False,
             fmt="kv")
    scenario("plain_overfit_nanogpt.log", batch=16, lr=0.01, epochs=300, n_train=64, width=512, fmt="iter",
             eval_every=40, print_every=4, opt="adam")
    scenario("plain_slow_jsonl.log", batch=64, lr=0.0003, epochs=15, fmt="jsonl", eval_every=40)
    scenario("plain_slow_brackets.log", batch=256, lr=0.0005, epochs=30, depth=4)
    # Unnormalised inputs (raw 0-16 pixels) with a large plain-SGD step: the loss overflows to nan.
    scenario("plain_diverged_nan.log", batch=32, lr=0.5, epochs=2, opt="sgd-plain", width=1024, input_scale=160.0)
    scenario("plain_diverged_explode_jsonl.log", batch=32, lr=20.0, epochs=3, fmt="jsonl")
    scenario("plain_plateau_then_drop.log", batch=32, lr=0.05, epochs=14, model="deep-tanh", fmt="iter")
    oom_scenario("plain_oom_cpu_rlimit.log")
    crash_scenario("plain_crash_shape_not_oom.log")
