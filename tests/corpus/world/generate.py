"""Write the generated part of the world corpus: run folders and files that the real libraries wrote while really
training small models on this CPU, in healthy and in sick situations (issue 37, item 5).

    python tests/corpus/world/generate.py [--only NAME ...] [--out tests/corpus/world]

Needs torch, lightning, transformers and the `tensorboard` package (SummaryWriter, Lightning's TensorBoardLogger
and the HF Trainer's report_to="tensorboard" write through it). Each run is short (seconds on 2 cores); every
folder stays far below 200 KB. The labels in labels.toml were set from the scenario's design and checked by reading
the curves each run wrote, before any detector read them.

Batches 1 and 2 train the same kind of task: 10 Gaussian clusters in 20 dimensions, overlapping (label noise by
overlap, so the validation loss has a real floor), an MLP, seeded. What differs is the setting a user got wrong.
Batch 3 (the `gen-dg-*` runs, all held back) trains a different task: scikit-learn's bundled 8x8 handwritten digits
(1797 real images, 10 classes; no download), 1300 for training and 497 for validation, an MLP, seeded.
Batch 4 (the `gen-tk-*` runs, all held back) trains a small text classifier: synthetic token sequences (vocabulary
200, 24 tokens, 4 topics each marked by a few keyword tokens among Zipf-distributed filler, 10% of labels flipped,
so the validation loss has a floor), a mean-of-embeddings model, seeded; and adds a nanoGPT-style text log.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import shutil
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
CLASSES, DIM = 10, 20

# name: what the user set. kinds and why live in labels.toml, not here.
SCENARIOS = {
    "healthy": dict(n_train=8000, epochs=8, batch=32, opt="adam", lr=1e-3, width=32),
    "diverged": dict(n_train=2000, epochs=8, batch=32, opt="sgd", lr=5.0, momentum=0.9, width=64),
    "overfit": dict(n_train=60, epochs=80, batch=15, opt="adam", lr=3e-3, width=512),
    "slow": dict(n_train=2000, epochs=30, batch=256, opt="sgd", lr=0.004, width=64),
    "jitter": dict(n_train=2000, epochs=3, batch=2, opt="sgd", lr=0.03, width=64),
    "nan": dict(n_train=2000, epochs=6, batch=2, opt="sgd", lr=0.4, width=64),
    "stuck": dict(n_train=2000, epochs=10, batch=64, opt="sgd", lr=1e-5, width=64),
    "periodic": dict(n_train=2000, epochs=10, batch=40, opt="adam", lr=3e-3, width=64, sorted=True),
    # batch 3: the digits task
    "d-healthy": dict(task="digits", n_train=1300, epochs=20, batch=32, opt="adam", lr=1e-3, width=64),
    "d-diverged": dict(task="digits", n_train=1300, epochs=15, batch=32, opt="sgd", lr=3.0, momentum=0.9, width=64),
    "d-overfit": dict(task="digits", n_train=40, epochs=150, batch=8, opt="adam", lr=3e-3, width=256),
    "d-slow": dict(task="digits", n_train=1300, epochs=25, batch=128, opt="sgd", lr=0.02, width=64),
    "d-jitter": dict(task="digits", n_train=1300, epochs=4, batch=1, opt="sgd", lr=0.1, width=64),
    "d-jitter2": dict(task="digits", n_train=1300, epochs=3, batch=2, opt="sgd", lr=0.1, width=64),
    "d-stuck": dict(task="digits", n_train=1300, epochs=12, batch=64, opt="sgd", lr=1e-5, width=64),
    "d-periodic": dict(task="digits", n_train=1300, epochs=12, batch=20, opt="adam", lr=3e-4, width=64, sorted=True),
    # batch 4: the token classifier
    "t-healthy": dict(task="tokens", n_train=3000, epochs=8, batch=32, opt="adam", lr=1e-3, width=64),
    "t-explode": dict(task="tokens", n_train=3000, epochs=10, batch=32, opt="sgd", lr=1.0, momentum=0.9, width=64),
    "t-diverged": dict(task="tokens", n_train=3000, epochs=12, batch=32, opt="sgd", lr=30.0, momentum=0.9, width=64),
    "t-overfit": dict(task="tokens", n_train=48, epochs=150, batch=8, opt="adam", lr=3e-3, width=256),
    "t-slow": dict(task="tokens", n_train=3000, epochs=25, batch=128, opt="sgd", lr=0.05, width=64),
    "t-stuck": dict(task="tokens", n_train=3000, epochs=12, batch=64, opt="sgd", lr=1e-6, width=64),
    "t-periodic": dict(task="tokens", n_train=3000, epochs=12, batch=25, opt="adam", lr=1e-3, width=64, sorted=True),
    "t-jitter": dict(task="tokens", n_train=3000, epochs=3, batch=1, opt="sgd", lr=0.15, width=64),
}
DIGITS_DIM = 64
VOCAB, SEQ, TOPICS = 200, 24, 4


def data(n_train: int, seed: int = 0, sorted_by_class: bool = False):
    import torch

    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLASSES, DIM, generator=g) * 1.2

    def draw(n):
        y = torch.randint(0, CLASSES, (n,), generator=g)
        return centers[y] + torch.randn(n, DIM, generator=g) * 1.6, y

    xt, yt = draw(n_train)
    xv, yv = draw(1000)
    if sorted_by_class:  # data written class by class and never shuffled: each class seen in a block
        order = torch.argsort(yt, stable=True)
        xt, yt = xt[order], yt[order]
    return xt, yt, xv, yv


def digits_data(n_train: int, sorted_by_class: bool = False):
    """scikit-learn's bundled 8x8 digits (real scans, no download): a seeded 1300 / 497 split, pixels scaled to 0-1."""
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train, val = order[:1300][:n_train], order[1300:]
    if sorted_by_class:  # the scans stored digit by digit and never shuffled
        train = train[torch.argsort(y[train], stable=True)]
    return x[train], y[train], x[val], y[val]


def token_data(n_train: int, sorted_by_class: bool = False):
    """Synthetic token sequences: 4 topics, each marked by 3 of its 6 keyword tokens among 21 Zipf-distributed filler
    tokens; 10% of the labels flipped. A seeded draw of n_train for training and 1000 for validation."""
    import torch

    g = torch.Generator().manual_seed(4)
    filler = torch.distributions.Categorical(probs=1.0 / torch.arange(1, VOCAB - 6 * TOPICS + 1).float())

    def draw(n):
        y = torch.randint(0, TOPICS, (n,), generator=g)
        x = filler.sample((n, SEQ)) + 6 * TOPICS
        keys = 6 * y[:, None] + torch.randint(0, 6, (n, 3), generator=g)
        x[:, :3] = keys
        x = x[:, torch.randperm(SEQ, generator=g)]
        flip = torch.rand(n, generator=g) < 0.1
        y = torch.where(flip, torch.randint(0, TOPICS, (n,), generator=g), y)
        return x, y

    torch.manual_seed(4)  # Categorical.sample draws from the global generator
    xt, yt = draw(n_train)
    xv, yv = draw(1000)
    if sorted_by_class:  # the examples stored topic by topic and never shuffled
        order = torch.argsort(yt, stable=True)
        xt, yt = xt[order], yt[order]
    return xt, yt, xv, yv


def task_data(cfg):
    if cfg.get("task") == "tokens":
        return token_data(cfg["n_train"], sorted_by_class=cfg.get("sorted", False))
    if cfg.get("task") == "digits":
        return digits_data(cfg["n_train"], sorted_by_class=cfg.get("sorted", False))
    return data(cfg["n_train"], sorted_by_class=cfg.get("sorted", False))


def task_model(cfg):
    if cfg.get("task") == "tokens":
        import torch

        class MeanOfEmbeddings(torch.nn.Module):
            def __init__(self, width):
                super().__init__()
                torch.manual_seed(0)
                self.embed = torch.nn.EmbeddingBag(VOCAB, 32, mode="mean")
                self.head = torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, TOPICS))

            def forward(self, x):
                return self.head(self.embed(x))

        return MeanOfEmbeddings(cfg["width"])
    return mlp(cfg["width"], DIGITS_DIM if cfg.get("task") == "digits" else DIM)


def mlp(width: int, dim: int = DIM):
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(dim, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, CLASSES))


def optimizer(params, cfg):
    import torch

    if cfg["opt"] == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"])
    return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg.get("momentum", 0.0))


def batches(n: int, batch: int, shuffle: bool, epoch: int):
    import torch

    order = torch.randperm(n, generator=torch.Generator().manual_seed(epoch)) if shuffle else torch.arange(n)
    return [order[i:i + batch] for i in range(0, n, batch)]


def evaluate(model, xv, yv):
    import torch

    with torch.no_grad():
        logits = model(xv)
        return torch.nn.functional.cross_entropy(logits, yv).item(), (logits.argmax(1) == yv).float().mean().item()


def plain_training(cfg, on_step, on_epoch, step_every: int):
    """The loop every plain-PyTorch format shares: on_step(step, loss) every step_every steps, on_epoch(...)."""
    import torch

    torch.set_num_threads(1)
    xt, yt, xv, yv = task_data(cfg)
    model = task_model(cfg)
    opt = optimizer(model.parameters(), cfg)
    step = 0
    for epoch in range(cfg["epochs"]):
        seen, total, right = 0, 0.0, 0
        for idx in batches(len(yt), cfg["batch"], not cfg.get("sorted", False), epoch):
            logits = model(xt[idx])
            loss = torch.nn.functional.cross_entropy(logits, yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if math.isfinite(loss.item()):
                total += loss.item() * len(idx)
            else:
                total = float("nan")
            right += (logits.argmax(1) == yt[idx]).sum().item()
            seen += len(idx)
            if step % step_every == 0:
                on_step(step, loss.item())
        val_loss, val_acc = evaluate(model, xv, yv)
        on_epoch(epoch, step, total / seen, right / seen, val_loss, val_acc)


# ---- torch SummaryWriter: runs/<name>/events.out.tfevents.* -------------------------------------------------


def summarywriter(name: str, scenario: str, out: str) -> None:
    from torch.utils.tensorboard import SummaryWriter

    cfg = SCENARIOS[scenario]
    writer = SummaryWriter(log_dir=os.path.join(out, name, "runs", "exp1"))
    every = max(1, (cfg["n_train"] // cfg["batch"]) * cfg["epochs"] // 300)
    plain_training(cfg, lambda s, l: writer.add_scalar("Loss/train", l, s),
                   lambda e, s, tl, ta, vl, va: (writer.add_scalar("Loss/val", vl, e),
                                                 writer.add_scalar("Accuracy/val", va, e),
                                                 writer.add_scalar("Accuracy/train", ta, e)), every)
    writer.close()


# ---- Keras-style CSV (what Keras' CSVLogger writes), from a plain loop ---------------------------------------


def keras_csv(name: str, scenario: str, out: str) -> None:
    cfg = SCENARIOS[scenario]
    os.makedirs(os.path.join(out, name), exist_ok=True)
    with open(os.path.join(out, name, "training.log"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["epoch", "accuracy", "loss", "val_accuracy", "val_loss"])
        plain_training(cfg, lambda s, l: None,
                       lambda e, s, tl, ta, vl, va: (w.writerow([e, ta, tl, va, vl]), f.flush()), 10**9)


# ---- plain text: what a hand-written loop prints (step lines and epoch summary lines mixed) --------------------


def plain_text(name: str, scenario: str, out: str) -> None:
    cfg = SCENARIOS[scenario]
    os.makedirs(os.path.join(out, name), exist_ok=True)
    every = max(1, (cfg["n_train"] // cfg["batch"]) * cfg["epochs"] // 200)
    with open(os.path.join(out, name, "train.log"), "w") as f:
        plain_training(cfg, lambda s, l: print(f"step {s} loss {l:.4f}", file=f),
                       lambda e, s, tl, ta, vl, va: print(f"Epoch {e + 1}: train_loss={tl:.4f} val_loss={vl:.4f} "
                                                          f"val_acc={va:.4f}", file=f, flush=True), every)


# ---- nanoGPT-style text log: "iter N: loss X, time Yms" lines and "step N: train loss X, val loss Y" evaluations ----


def nanogpt_text(name: str, scenario: str, out: str) -> None:
    cfg = SCENARIOS[scenario]
    os.makedirs(os.path.join(out, name), exist_ok=True)
    every = max(1, (cfg["n_train"] // cfg["batch"]) * cfg["epochs"] // 250)
    with open(os.path.join(out, name, "train.log"), "w") as f:
        print(f"tokens per iteration will be: {cfg['batch'] * SEQ:,}", file=f)
        plain_training(cfg, lambda s, l: print(f"iter {s}: loss {l:.4f}, time {3.1 + (s % 7) * 0.1:.2f}ms", file=f),
                       lambda e, s, tl, ta, vl, va: print(f"step {s}: train loss {tl:.4f}, val loss {vl:.4f}", file=f,
                                                          flush=True), every)


# ---- Lightning, TensorBoardLogger or CSVLogger: lightning_logs/version_0/ --------------------------------------


def lightning(name: str, scenario: str, out: str, logger_kind: str, fail: str | None = None) -> None:
    import lightning as L
    import torch
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    torch.set_num_threads(1)
    cfg = SCENARIOS[scenario]
    xt, yt, xv, yv = task_data(cfg)

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = task_model(cfg)

        def training_step(self, batch, index):
            x, y = batch
            if fail and self.current_epoch == 2 and index == 7:
                if fail == "crash":  # a corrupt sample of the wrong width reaches the model
                    x = torch.cat([x, torch.zeros(len(x), 3)], dim=1)
                else:  # a resize bug: the batch comes in 3000x too large
                    x, y = x.repeat(3000, 1), y.repeat(3000)
                    big = torch.nn.Linear(DIM, 8192)
                    big(x).relu().sum().backward()
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            logits = self.net(x)
            self.log("val_loss", torch.nn.functional.cross_entropy(logits, y), on_epoch=True)
            self.log("val_acc", (logits.argmax(1) == y).float().mean(), on_epoch=True)

        def configure_optimizers(self):
            return optimizer(self.parameters(), cfg)

    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, yt), batch_size=cfg["batch"],
                                        shuffle=not cfg.get("sorted", False))
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xv, yv), batch_size=500)
    save_dir = os.path.join(out, name)
    logger = (TensorBoardLogger(save_dir, name="lightning_logs", version=0) if logger_kind == "tb"
              else CSVLogger(save_dir, name="lightning_logs", version=0))
    steps = (cfg["n_train"] // cfg["batch"]) * cfg["epochs"]
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(max_epochs=cfg["epochs"], logger=logger, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        log_every_n_steps=max(1, steps // 300), num_sanity_val_steps=0)
    trainer.fit(Module(), train, val)


# ---- HF Trainer: output_dir with trainer_state.json and runs/ (report_to="tensorboard") -------------------------


def hf_trainer(name: str, scenario: str, out: str) -> None:
    import torch
    from transformers import Trainer, TrainingArguments

    torch.set_num_threads(1)
    cfg = SCENARIOS[scenario]
    xt, yt, xv, yv = task_data(cfg)

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = task_model(cfg)

        def forward(self, x, labels=None):
            logits = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    class Rows(torch.utils.data.Dataset):
        def __init__(self, x, y):
            self.x, self.y = x, y

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    def accuracy(pred):
        return {"accuracy": float((pred.predictions.argmax(-1) == pred.label_ids).mean())}

    output_dir = os.path.join(out, name)
    steps = math.ceil(cfg["n_train"] / cfg["batch"]) * cfg["epochs"]
    args = TrainingArguments(
        output_dir=output_dir, learning_rate=cfg["lr"], num_train_epochs=cfg["epochs"],
        per_device_train_batch_size=cfg["batch"], per_device_eval_batch_size=500,
        logging_steps=max(1, steps // 150), eval_strategy="epoch", save_strategy="no", report_to=["tensorboard"],
        disable_tqdm=True, use_cpu=True, seed=0, lr_scheduler_type="constant",
        optim="adamw_torch" if cfg["opt"] == "adam" else "sgd", weight_decay=0.0, max_grad_norm=1e9,
        dataloader_drop_last=False)
    if cfg["opt"] == "sgd" and cfg.get("momentum"):
        args.optim_args = f"momentum={cfg['momentum']}"
    trainer = Trainer(model=Classifier(), args=args, train_dataset=Rows(xt, yt), eval_dataset=Rows(xv, yv),
                      compute_metrics=accuracy)
    trainer.train()
    trainer.save_state()  # trainer_state.json in output_dir, as a user's save or checkpoint writes it


# ---- plain text logs of runs that died: a real exception, a real CPU OOM, a real segfault, a real SIGKILL -------

DEATH_SCRIPT = textwrap.dedent('''
    import ctypes, os, resource, signal, sys
    import torch
    sys.path.insert(0, {here!r})
    from generate import data, mlp
    torch.set_num_threads(1)
    how = sys.argv[1]
    xt, yt, xv, yv = data(2000)
    model = mlp(64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    big = torch.nn.Sequential(torch.nn.Linear(20, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096))
    if how == "oom":
        with open("/proc/self/status") as status:
            used = next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmData"))
        resource.setrlimit(resource.RLIMIT_DATA, (used + 400 * 2**20, resource.RLIM_INFINITY))
    step = 0
    for epoch in range(1, 4):
        for i in range(0, 2000, 50):
            x, y = xt[i:i + 50], yt[i:i + 50]
            step += 1
            if epoch == 3 and step % 40 == 12:
                if how == "crash":  # a corrupt sample of the wrong width reaches the model
                    x = torch.cat([x, torch.zeros(len(x), 3)], dim=1)
                elif how == "oom":  # a resize bug: the batch comes in 600x too large
                    x = x.repeat(600, 1)
                    y = y.repeat(600)
                    big(x).sum().backward()
                elif how == "segfault":  # a native extension reading freed memory
                    ctypes.string_at(0)
                elif how == "killed":  # the host's OOM killer or the scheduler
                    os.kill(os.getpid(), signal.SIGKILL)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 5 == 0:
                print(f"epoch {{epoch}} step {{step}} loss {{loss.item():.4f}}", flush=True)
        with torch.no_grad():
            val = torch.nn.functional.cross_entropy(model(xv), yv).item()
        print(f"Epoch {{epoch}}: train_loss={{loss.item():.4f}} val_loss={{val:.4f}}", flush=True)
''')


def lightning_death(name: str, how: str, out: str) -> None:
    """A Lightning run (CSVLogger) that dies at epoch 3: its folder holds the partial metrics.csv and train.log,
    the console output captured as `python train.py > train.log 2>&1` would."""
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "train.log"), "w") as log:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--lightning-dies", how, "--out", out, name],
                       stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"})


def lightning_dies(name: str, how: str, out: str) -> None:
    """Inside the child: cap the data segment for an OOM, then train until the failure."""
    if how == "oom":
        import resource

        import torch  # noqa: F401  (loaded before measuring, as a real run would have it)
        with open("/proc/self/status") as status:
            used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData"))
        resource.setrlimit(resource.RLIMIT_DATA, (used + 700 * 2**20, resource.RLIM_INFINITY))
    lightning(name, "healthy", out, "csv", fail=how)


def death(name: str, how: str, out: str) -> None:
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    script = os.path.join(folder, "_train.py")
    with open(script, "w") as f:
        f.write(DEATH_SCRIPT.format(here=HERE))
    # Run under bash as a user's shell would, so the shell's own line for a signal death ("Segmentation fault
    # (core dumped)", "Killed") lands in the captured log as in a nohup.out.
    command = f"cd {folder} && {sys.executable} _train.py {how}; echo \"exit status $?\""
    with open(os.path.join(folder, "train.log"), "w") as log:
        subprocess.run(["bash", "-c", command], stdout=log, stderr=subprocess.STDOUT, env={**os.environ,
                       "MALLOC_MMAP_THRESHOLD_": "65536"})
    os.remove(script)
    shutil.rmtree(os.path.join(folder, "__pycache__"), ignore_errors=True)


LOADER_DEATH_SCRIPT = textwrap.dedent('''
    import os, signal, sys
    import torch
    sys.path.insert(0, {here!r})
    from generate import digits_data, mlp, DIGITS_DIM
    torch.set_num_threads(1)
    how = sys.argv[1]
    xt, yt, xv, yv = digits_data(1300)
    if how in ("oom", "leak"):  # the host has little memory left for this process: cap its data segment
        import resource
        with open("/proc/self/status") as status:
            used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData"))
        cap = 250 if how == "leak" else 300
        resource.setrlimit(resource.RLIMIT_DATA, (used + cap * 2**20, resource.RLIM_INFINITY))

    class Scans(torch.utils.data.Dataset):
        epoch = 1  # set before each epoch: the workers start then and get a copy

        def __len__(self):
            return len(yt)

        def __getitem__(self, i):
            if how == "killed" and self.epoch == 3 and i == 777:  # the worker process dies (the host's OOM killer picks it): SIGKILL, no Python error
                os.kill(os.getpid(), signal.SIGKILL)
            return xt[i], yt[i]

    model = mlp(2048 if how == "leak" else 64, DIGITS_DIM)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    running = 0.0  # how == "leak": summed as a tensor, so every step's autograd graph stays alive
    scans = Scans()
    loader = torch.utils.data.DataLoader(scans, batch_size=32, shuffle=True, num_workers=1 if how == "killed" else 0,
                                         generator=torch.Generator().manual_seed(0))
    seen = 0
    for epoch in range(1, 11 if how == "leak" else 6):
        scans.epoch = epoch
        for step, (x, y) in enumerate(loader, 1):
            if how == "oom" and epoch == 3 and step == 20:  # a resize bug: scans upsampled 128x, a first layer to fit
                x = torch.nn.functional.interpolate(x.view(-1, 1, 8, 8), scale_factor=128).flatten(1)
                model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), *list(model)[1:])
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward(retain_graph=how == "leak")
            opt.step()
            running = running + (loss if how == "leak" else loss.item())
            seen += 1
            if step % 5 == 0:
                print(f"Epoch {{epoch}} [{{step * 32}}/1300] loss: {{loss.item():.4f}} avg: {{float(running) / seen:.4f}}",
                      flush=True)
        with torch.no_grad():
            logits = model(xv)
            val = torch.nn.functional.cross_entropy(logits, yv).item()
            acc = (logits.argmax(1) == yv).float().mean().item()
        print(f"Epoch {{epoch}}: val_loss={{val:.4f}} val_acc={{acc:.4f}}", flush=True)
''')


def token_death(name: str, how: str, out: str) -> None:
    """A plain loop on the token classifier whose data pipeline hands over, in epoch 2, a batch holding a token id
    past the vocabulary (a tokenizer updated without resizing the embedding): the real IndexError ends the run.
    Run under bash as `python train.py > train.log 2>&1; echo "exit status $?"` would be."""
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    command = (f"{sys.executable} {os.path.abspath(__file__)} --token-dies {how} --out {out} {name}; "
               "echo \"exit status $?\"")
    with open(os.path.join(folder, "train.log"), "w") as log:
        subprocess.run(["bash", "-c", command], stdout=log, stderr=subprocess.STDOUT)


def token_dies(how: str) -> None:
    """Inside the child: train on the tokens, printing as a hand-written loop does, until the bad batch."""
    import torch

    cfg = SCENARIOS[how]
    torch.set_num_threads(1)
    xt, yt, xv, yv = task_data(cfg)
    model = task_model(cfg)
    opt = optimizer(model.parameters(), cfg)
    for epoch in range(1, cfg["epochs"] + 1):
        for step, idx in enumerate(batches(len(yt), cfg["batch"], True, epoch), 1):
            x = xt[idx]
            if epoch == 2 and step == 57:  # new tokens from an updated tokenizer: ids past the embedding table
                x = x.clone()
                x[:, 5] = VOCAB + 17
            loss = torch.nn.functional.cross_entropy(model(x), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
        val_loss, val_acc = evaluate(model, xv, yv)
        print(f"epoch {epoch} done: val_loss {val_loss:.4f} val_acc {val_acc:.4f}", flush=True)


def loader_death(name: str, how: str, out: str) -> None:
    """A plain loop on the digits that dies in epoch 3: its DataLoader worker SIGKILLed (how="killed": the console
    shows torch's own error), or a real CPU out-of-memory under a capped data segment (how="oom": a resize bug in
    epoch 3; how="leak": the running loss summed as a tensor keeps every step's graph alive until memory runs out)."""
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    script = os.path.join(folder, "_train.py")
    with open(script, "w") as f:
        f.write(LOADER_DEATH_SCRIPT.format(here=HERE))
    with open(os.path.join(folder, "train.log"), "w") as log:
        subprocess.run([sys.executable, "_train.py", how], cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"})
    os.remove(script)
    shutil.rmtree(os.path.join(folder, "__pycache__"), ignore_errors=True)


# name -> (writer, scenario or death kind)
RUNS = {
    "gen-sw-01": ("summarywriter", "healthy"),
    "gen-sw-02": ("summarywriter", "diverged"),
    "gen-sw-03": ("summarywriter", "overfit"),
    "gen-sw-04": ("summarywriter", "slow"),
    "gen-sw-05": ("summarywriter", "jitter"),
    "gen-sw-06": ("summarywriter", "periodic"),
    "gen-sw-07": ("summarywriter", "nan"),
    "gen-pltb-01": ("lightning-tb", "healthy"),
    "gen-pltb-02": ("lightning-tb", "overfit"),
    "gen-pltb-03": ("lightning-tb", "diverged"),
    "gen-pltb-04": ("lightning-tb", "slow"),
    "gen-plcsv-01": ("lightning-csv", "healthy"),
    "gen-plcsv-02": ("lightning-csv", "overfit"),
    "gen-plcsv-03": ("lightning-csv", "jitter"),
    "gen-plcsv-04": ("lightning-csv", "periodic"),
    "gen-plcsv-05": ("lightning-csv", "diverged"),
    "gen-hf-01": ("hf", "healthy"),
    "gen-hf-02": ("hf", "overfit"),
    "gen-hf-03": ("hf", "diverged"),
    "gen-hf-04": ("hf", "slow"),
    "gen-keras-01": ("keras", "healthy"),
    "gen-keras-02": ("keras", "overfit"),
    "gen-keras-03": ("keras", "slow"),
    "gen-keras-04": ("keras", "diverged"),
    "gen-text-01": ("death", "crash"),
    "gen-text-02": ("death", "oom"),
    "gen-text-03": ("death", "segfault"),
    "gen-text-04": ("death", "killed"),
    # second batch (labels.toml batch = 2, drawn on its own)
    "gen-sw-08": ("summarywriter", "stuck"),
    "gen-plcsv-06": ("lightning-csv", "stuck"),
    "gen-pltb-05": ("lightning-tb", "jitter"),
    "gen-pltb-06": ("lightning-tb", "periodic"),
    "gen-hf-05": ("hf", "jitter"),
    "gen-text-05": ("plain-text", "diverged"),
    "gen-text-06": ("plain-text", "slow"),
    "gen-text-07": ("plain-text", "healthy"),
    "gen-pldeath-01": ("lightning-death", "crash"),
    "gen-pldeath-02": ("lightning-death", "oom"),
    # third batch (labels.toml batch = 3, all held back): the digits task
    "gen-dg-sw-01": ("summarywriter", "d-healthy"),
    "gen-dg-sw-02": ("summarywriter", "d-diverged"),
    "gen-dg-plcsv-01": ("lightning-csv", "d-overfit"),
    "gen-dg-plcsv-02": ("lightning-csv", "d-healthy"),
    "gen-dg-pltb-01": ("lightning-tb", "d-slow"),
    "gen-dg-hf-01": ("hf", "d-healthy"),
    "gen-dg-hf-02": ("hf", "d-diverged"),
    "gen-dg-keras-01": ("keras", "d-overfit"),
    "gen-dg-text-01": ("plain-text", "d-jitter"),
    "gen-dg-text-02": ("loader-death", "killed"),
    "gen-dg-sw-03": ("summarywriter", "d-periodic"),
    "gen-dg-text-03": ("loader-death", "oom"),
    "gen-dg-pltb-02": ("lightning-tb", "d-jitter2"),
    "gen-dg-plcsv-03": ("lightning-csv", "d-stuck"),
    "gen-dg-keras-02": ("keras", "d-slow"),
    "gen-dg-hf-03": ("hf", "d-overfit"),
    "gen-dg-text-04": ("plain-text", "d-diverged"),
    "gen-dg-text-05": ("loader-death", "leak"),
    "gen-dg-pltb-03": ("lightning-tb", "d-periodic"),
    # fourth batch (labels.toml batch = 4, all held back): the token classifier
    "gen-tk-sw-01": ("summarywriter", "t-healthy"),
    "gen-tk-sw-02": ("summarywriter", "t-stuck"),
    "gen-tk-plcsv-01": ("lightning-csv", "t-diverged"),
    "gen-tk-plcsv-02": ("lightning-csv", "t-healthy"),
    "gen-tk-pltb-01": ("lightning-tb", "t-overfit"),
    "gen-tk-pltb-02": ("lightning-tb", "t-periodic"),
    "gen-tk-hf-01": ("hf", "t-slow"),
    "gen-tk-hf-02": ("hf", "t-healthy"),
    "gen-tk-keras-01": ("keras", "t-explode"),
    "gen-tk-keras-02": ("keras", "t-healthy"),
    "gen-tk-text-01": ("nanogpt-text", "t-healthy"),
    "gen-tk-text-02": ("nanogpt-text", "t-diverged"),
    "gen-tk-text-03": ("nanogpt-text", "t-overfit"),
    "gen-tk-text-04": ("plain-text", "t-jitter"),
    "gen-tk-hf-03": ("hf", "t-explode"),
    "gen-tk-text-05": ("token-death", "t-healthy"),
}


def generate(name: str, out: str) -> None:
    writer, what = RUNS[name]
    target = os.path.join(out, name)
    shutil.rmtree(target, ignore_errors=True)
    if writer == "summarywriter":
        summarywriter(name, what, out)
    elif writer == "lightning-tb":
        lightning(name, what, out, "tb")
    elif writer == "lightning-csv":
        lightning(name, what, out, "csv")
    elif writer == "hf":
        hf_trainer(name, what, out)
    elif writer == "keras":
        keras_csv(name, what, out)
    elif writer == "plain-text":
        plain_text(name, what, out)
    elif writer == "nanogpt-text":
        nanogpt_text(name, what, out)
    elif writer == "lightning-death":
        lightning_death(name, what, out)
    elif writer == "token-death":
        token_death(name, what, out)
    elif writer == "loader-death":
        loader_death(name, what, out)
    else:
        death(name, what, out)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(target) for f in fs)
    print(f"{name}: {writer} {what}, {size / 1024:.0f} KB", flush=True)
    assert size < 200 * 1024, f"{name} is {size} bytes: keep corpus folders under 200 KB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="names to (re)generate (default: all)")
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--lightning-dies", choices=("crash", "oom"), help=argparse.SUPPRESS)
    parser.add_argument("--token-dies", help=argparse.SUPPRESS)
    parser.add_argument("name", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.token_dies:
        token_dies(args.token_dies)
        return
    if args.lightning_dies:
        lightning_dies(args.name, args.lightning_dies, args.out)
        return
    for name in args.only or RUNS:
        generate(name, args.out)


if __name__ == "__main__":
    main()
