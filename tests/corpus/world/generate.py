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
Batch 5 (the `gen-rg-*`, `gen-cl-*` and `gen-ae-*` runs, all held back) trains three new tasks: a regression on
scikit-learn's bundled diabetes data, a character GRU language model on this Python's argparse.py (validated on its
textwrap.py), and an autoencoder on the bundled breast-cancer features; it adds a Python-logging text format, a real
CPU OOM under `accelerate launch --cpu`, another under the `deepspeed` launcher, and a crash from a checkpoint save
into a missing folder.
Batch 6 (the `gen-wn-*` and `gen-sg-*` runs, all held back) trains two new tasks: an MLP on scikit-learn's bundled wine
data and a small 1-D conv net on synthetic noisy signals (four wave shapes).
Batch 7 (the `gen-tf-*`, `gen-tg-*`, `gen-va-*` and `gen-lr-*` runs, all held back) trains four new tasks: a tiny
Transformer reversing token sequences, a bidirectional GRU tagger, a VAE on the bundled digits, and logistic regression
on a make_classification table; it adds Keras' `verbose=2` console text, a step-line text format, a real CPU OOM from
written-out attention scores at a longer sequence length, and a crash from scikit-learn's f1_score on three tags.
Batch 8 (the `gen-sp-*` runs) trains an MLP on two interleaved spirals. Batch 9 (the `gen-ts-*` runs, all held back)
trains a new task: one-step-ahead forecasting of a seeded noisy two-sine series with an MLP (mean squared error), and
adds a real CPU OOM from a torch.cdist nearest-neighbour baseline under a capped data segment. Batch 10 (the `gen-mf-*`
runs, all held back) trains a new task: matrix factorization of synthetic user x item ratings (embeddings, mean squared
error), and adds a real crash from user ids the embedding table does not hold.
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



# ---- batch 5 (the `gen-rg-*`, `gen-cl-*` and `gen-ae-*` runs, all held back): three tasks new to the corpus -------
# rg: regression on scikit-learn's bundled diabetes data (442 patients, 10 features, target standardized; MSE, so
#     predicting the mean scores 1.0 on the standardized target). cl: a character-level GRU language model trained
#     on the text of this Python's argparse.py and validated on its textwrap.py (nats per character; uniform guessing
#     scores ln(vocabulary)). ae: an autoencoder through a 4-wide bottleneck on scikit-learn's bundled breast-cancer
#     features (569 x 30, standardized; reconstruction MSE, the mean image scores 1.0).

SCENARIOS5 = {
    "rg-healthy": dict(task="rg", n_train=300, epochs=30, batch=32, opt="adam", lr=1e-3, width=16),
    "rg-long": dict(task="rg", n_train=300, epochs=60, batch=32, opt="adam", lr=1e-3, width=64),
    "rg-overfit": dict(task="rg", n_train=30, epochs=400, batch=10, opt="adam", lr=3e-3, width=512),
    "rg-lr0.5": dict(task="rg", n_train=300, epochs=20, batch=32, opt="sgd", lr=0.5, momentum=0.9, width=64),
    "rg-lr0.08": dict(task="rg", n_train=300, epochs=30, batch=32, opt="sgd", lr=0.08, momentum=0.9, width=64),
    "rg-nan": dict(task="rg", n_train=300, epochs=12, batch=32, opt="sgd", lr=2.0, momentum=0.9, width=64),
    "rg-slow": dict(task="rg", n_train=300, epochs=40, batch=300, opt="sgd", lr=0.003, width=64),
    "rg-jitter": dict(task="rg", n_train=300, epochs=6, batch=1, opt="sgd", lr=0.05, width=64),
    "cl-healthy": dict(task="cl", epochs=6, batches=40, batch=32, opt="adam", lr=3e-3, width=96),
    "cl-explode": dict(task="cl", epochs=15, batches=40, batch=32, opt="sgd", lr=30.0, momentum=0.9, width=96),
    "cl-nan": dict(task="cl", epochs=12, batches=40, batch=32, opt="sgd", lr=3000.0, momentum=0.9, width=96),
    "cl-overfit": dict(task="cl", epochs=20, batches=40, batch=32, opt="adam", lr=3e-3, width=256, train_chars=3000),
    "cl-stuck": dict(task="cl", epochs=10, batches=40, batch=32, opt="sgd", lr=1e-4, width=96),
    "cl-slow": dict(task="cl", epochs=15, batches=40, batch=32, opt="sgd", lr=0.3, width=96),
    "cl-swing": dict(task="cl", epochs=15, batches=40, batch=32, opt="adam", lr=0.05, width=96),
    "cl-sequential": dict(task="cl", epochs=8, batches=48, batch=32, opt="adam", lr=3e-3, width=96, sequential=True),
    "cl-late-blowup": dict(task="cl", epochs=14, batches=40, batch=32, opt="adam", lr=3e-3, width=96, jump=(8, 3.0)),
    "ae-healthy": dict(task="ae", n_train=400, epochs=40, batch=16, opt="adam", lr=1e-3, width=64),
    "ae-stuck": dict(task="ae", n_train=400, epochs=30, batch=16, opt="sgd", lr=1e-7, width=64),
    "ae-jitter": dict(task="ae", n_train=400, epochs=8, batch=1, opt="sgd", lr=0.08, width=64),
    "ae-slow": dict(task="ae", n_train=400, epochs=40, batch=16, opt="sgd", lr=0.01, width=64),
    "ae-lr1": dict(task="ae", n_train=400, epochs=12, batch=16, opt="sgd", lr=1.0, momentum=0.9, width=64),
    "ae-periodic": dict(task="ae", n_train=400, epochs=15, batch=10, opt="adam", lr=3e-3, width=64, sorted=True),
    "ae-overfit": dict(task="ae", n_train=24, epochs=150, batch=8, opt="adam", lr=3e-3, width=512),
}
CHAR_WINDOW = 64


def regression_data(n_train: int):
    """Diabetes (scikit-learn's bundled copy): a seeded 300 / 142 split, features and target standardized on train."""
    import torch
    from sklearn.datasets import load_diabetes

    d = load_diabetes()
    x, y = torch.tensor(d.data, dtype=torch.float32), torch.tensor(d.target, dtype=torch.float32)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(5))
    train, val = order[:300], order[300:]
    mx, sx, my, sy = x[train].mean(0), x[train].std(0), y[train].mean(), y[train].std()
    x, y = (x - mx) / sx, ((y - my) / sy)[:, None]
    return x[train][:n_train], y[train][:n_train], x[val], y[val]


def breast_data(n_train: int, sorted_by_class: bool = False):
    """Breast-cancer features (scikit-learn's bundled copy), standardized: a seeded 400 / 169 split; the target of an
    autoencoder is its input. sorted_by_class: benign and malignant stored apart and never shuffled."""
    import torch
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    x, label = torch.tensor(d.data, dtype=torch.float32), torch.tensor(d.target)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(5))
    train, val = order[:400][:n_train], order[400:]
    if sorted_by_class:
        train = train[torch.argsort(label[train], stable=True)]
    mean, std = x[train].mean(0), x[train].std(0)
    x = (x - mean) / std
    return x[train], x[train], x[val], x[val]


def char_data(train_chars: int | None = None):
    """This Python's argparse.py for training, its textwrap.py for validation, as character ids."""
    import argparse
    import textwrap as tw

    import torch

    train_text = open(argparse.__file__, encoding="utf-8").read()
    val_text = open(tw.__file__, encoding="utf-8").read()
    vocab = sorted(set(train_text) | set(val_text))
    index = {c: i for i, c in enumerate(vocab)}
    encode = lambda t: torch.tensor([index[c] for c in t], dtype=torch.long)  # noqa: E731
    train = encode(train_text)
    return (train[:train_chars] if train_chars else train), encode(val_text), len(vocab)


class CharGRU:
    """Built lazily (torch imported inside): embedding 32 -> GRU -> next-character logits."""

    def __new__(cls, vocab: int, width: int):
        import torch

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.embed = torch.nn.Embedding(vocab, 32)
                self.gru = torch.nn.GRU(32, width, batch_first=True)
                self.head = torch.nn.Linear(width, vocab)

            def forward(self, x):
                return self.head(self.gru(self.embed(x))[0])

        return Model()


def task5(cfg):
    """(model, loss_fn, training batches per epoch as a function of the epoch, validation (x, y))."""
    import torch

    if cfg["task"] in ("wn", "sg"):
        return task6(cfg)
    if cfg["task"] in ("tf", "tg", "va", "lr"):
        return task7(cfg)
    if cfg["task"] == "sp":
        return task8(cfg)
    if cfg["task"] == "ts":
        return task9(cfg)
    if cfg["task"] == "mf":
        return task10(cfg)
    if cfg["task"] == "cl":
        train, val, vocab = char_data(cfg.get("train_chars"))
        model = CharGRU(vocab, cfg["width"])

        def windows(text, n, seed):
            starts = torch.randint(0, len(text) - CHAR_WINDOW - 1, (n,), generator=torch.Generator().manual_seed(seed))
            chunk = torch.stack([text[s:s + CHAR_WINDOW + 1] for s in starts.tolist()])
            return chunk[:, :-1], chunk[:, 1:]

        def epoch_batches(epoch):
            if cfg.get("sequential"):  # the file read front to back in order every epoch, never shuffled
                starts = torch.arange(cfg["batches"] * cfg["batch"]) * CHAR_WINDOW
                chunks = torch.stack([train[s:s + CHAR_WINDOW + 1] for s in starts.tolist()])
                return [(c[:, :-1], c[:, 1:]) for c in chunks.split(cfg["batch"])]
            return [windows(train, cfg["batch"], 1000 * epoch + b) for b in range(cfg["batches"])]

        def loss_fn(logits, y):
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

        return model, loss_fn, epoch_batches, windows(val, 64, 99)
    if cfg["task"] == "rg":
        xt, yt, xv, yv = regression_data(cfg["n_train"])
        dims = (10, 1)
    else:
        xt, yt, xv, yv = breast_data(cfg["n_train"], cfg.get("sorted", False))
        dims = (30, 30)
    torch.manual_seed(0)
    w = cfg["width"]
    if cfg["task"] == "rg":
        model = torch.nn.Sequential(torch.nn.Linear(dims[0], w), torch.nn.ReLU(), torch.nn.Linear(w, w),
                                    torch.nn.ReLU(), torch.nn.Linear(w, dims[1]))
    else:
        model = torch.nn.Sequential(torch.nn.Linear(30, w), torch.nn.ReLU(), torch.nn.Linear(w, 4), torch.nn.ReLU(),
                                    torch.nn.Linear(4, w), torch.nn.ReLU(), torch.nn.Linear(w, 30))

    def epoch_batches(epoch):
        return [(xt[i], yt[i]) for i in batches(len(yt), cfg["batch"], not cfg.get("sorted", False), epoch)]

    return model, torch.nn.functional.mse_loss, epoch_batches, (xv, yv)


def training5(cfg, on_step, on_epoch, step_every: int):
    """The plain loop of batch 5: on_step(step, loss) every step_every steps, on_epoch(epoch, step, train, val)."""
    import torch

    torch.set_num_threads(1)
    model, loss_fn, epoch_batches, (xv, yv) = task5(cfg)
    opt = optimizer(model.parameters(), cfg)
    step = 0
    for epoch in range(cfg["epochs"]):
        if cfg.get("jump") and epoch == cfg["jump"][0]:  # a schedule bug: the LR is set 1000x too high mid-run
            for group in opt.param_groups:
                group["lr"] = cfg["jump"][1]
        total, seen = 0.0, 0
        for x, y in epoch_batches(epoch):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            total += loss.item() * len(x)
            seen += len(x)
            if step % step_every == 0:
                on_step(step, loss.item())
        with torch.no_grad():
            val = loss_fn(model(xv), yv).item()
        on_epoch(epoch, step, total / seen, val)


def steps5(cfg) -> int:
    per_epoch = cfg.get("batches") or math.ceil(cfg["n_train"] / cfg["batch"])
    return per_epoch * cfg["epochs"]


def summarywriter5(name: str, scenario: str, out: str) -> None:
    from torch.utils.tensorboard import SummaryWriter

    cfg = scenario_config(scenario)
    writer = SummaryWriter(log_dir=os.path.join(out, name, "runs", scenario))
    training5(cfg, lambda s, l: writer.add_scalar("train/loss", l, s),
              lambda e, s, tl, vl: (writer.add_scalar("epoch/train_loss", tl, e), writer.add_scalar("epoch/val_loss", vl, e)),
              max(1, steps5(cfg) // 300))
    writer.close()


def keras5(name: str, scenario: str, out: str) -> None:
    """The file Keras' CSVLogger writes (epoch,loss,val_loss), from the plain loop."""
    cfg = scenario_config(scenario)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    with open(os.path.join(out, name, "history.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["epoch", "loss", "val_loss"])
        training5(cfg, lambda s, l: None, lambda e, s, tl, vl: (w.writerow([e, tl, vl]), f.flush()), 10**9)


def text5(name: str, scenario: str, out: str) -> None:
    """What a hand-written loop prints through Python's logging: step lines, and a validation line each epoch."""
    cfg = scenario_config(scenario)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    total = steps5(cfg)
    every = max(1, total // 200)
    clock = [0]

    def stamp():
        clock[0] += 1
        return f"2026-12-07 01:{50 + clock[0] // 3000:02d}:{clock[0] // 50 % 60:02d},{clock[0] * 37 % 1000:03d} INFO"

    metric = {"cl": "ppl", "rg": "rmse", "ae": "rmse", "mf": "rmse"}.get(cfg["task"], "loss")
    shown = {"cl": lambda v: math.exp(min(v, 700)), "wn": lambda v: v, "sg": lambda v: v}.get(
        cfg["task"], lambda v: math.sqrt(v) if v >= 0 else v)
    with open(os.path.join(out, name, "train.log"), "w") as f:
        print(f"{stamp()} training {scenario.split('-')[0]} model: {cfg}", file=f)
        training5(cfg, lambda s, l: print(f"{stamp()} step {s}/{total} loss={l:.4f} {metric}={shown(l):.3f}", file=f),
                  lambda e, s, tl, vl: print(f"{stamp()} valid | epoch {e + 1:03d} | loss {vl:.4f} | {metric} "
                                             f"{shown(vl):.3f} | train_loss {tl:.4f}", file=f, flush=True), every)


def lightning5(name: str, scenario: str, out: str, logger_kind: str) -> None:
    import lightning as L
    import torch
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    torch.set_num_threads(1)
    cfg = scenario_config(scenario)
    model, loss_fn, epoch_batches, (xv, yv) = task5(cfg)

    class Batches(torch.utils.data.IterableDataset):
        def __init__(self):
            self.epoch = 0

        def __iter__(self):
            chosen = epoch_batches(self.epoch)
            self.epoch += 1
            return iter(chosen)

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = model

        def training_step(self, batch, index):
            loss = loss_fn(self.net(batch[0]), batch[1])
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, _):
            self.log("val_loss", loss_fn(self.net(batch[0]), batch[1]), on_epoch=True)

        def configure_optimizers(self):
            return optimizer(self.parameters(), cfg)

    train = torch.utils.data.DataLoader(Batches(), batch_size=None)
    val = torch.utils.data.DataLoader([(xv, yv)], batch_size=None)
    save_dir = os.path.join(out, name)
    logger = (TensorBoardLogger(save_dir, name="lightning_logs", version=0) if logger_kind == "tb"
              else CSVLogger(save_dir, name="lightning_logs", version=0))
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(max_epochs=cfg["epochs"], logger=logger, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        log_every_n_steps=max(1, steps5(cfg) // 300), num_sanity_val_steps=0)
    trainer.fit(Module(), train, val)


def hf5(name: str, scenario: str, out: str) -> None:
    import torch
    from transformers import Trainer, TrainingArguments

    torch.set_num_threads(1)
    cfg = scenario_config(scenario)
    model, loss_fn, epoch_batches, (xv, yv) = task5(cfg)
    xt = torch.cat([x for x, _ in epoch_batches(0)]) if cfg["task"] not in ("rg", "ae") else None
    yt = torch.cat([y for _, y in epoch_batches(0)]) if cfg["task"] not in ("rg", "ae") else None
    if cfg["task"] in ("rg", "ae"):
        xt, yt, _, _ = regression_data(cfg["n_train"]) if cfg["task"] == "rg" else breast_data(cfg["n_train"])

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, x, labels=None):
            out = self.net(x)
            return {"loss": loss_fn(out, labels), "logits": out}

    class Rows(torch.utils.data.Dataset):
        def __init__(self, x, y):
            self.x, self.y = x, y

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    output_dir = os.path.join(out, name)
    steps = math.ceil(len(yt) / cfg["batch"]) * cfg["epochs"]
    args = TrainingArguments(
        output_dir=output_dir, learning_rate=cfg["lr"], num_train_epochs=cfg["epochs"],
        per_device_train_batch_size=cfg["batch"], per_device_eval_batch_size=256,
        logging_steps=max(1, steps // 150), eval_strategy="epoch", save_strategy="no", report_to=["tensorboard"],
        disable_tqdm=True, use_cpu=True, seed=0, lr_scheduler_type="constant",
        optim="adamw_torch" if cfg["opt"] == "adam" else "sgd", weight_decay=0.0, max_grad_norm=1e9)
    if cfg["opt"] == "sgd" and cfg.get("momentum"):
        args.optim_args = f"momentum={cfg['momentum']}"
    trainer = Trainer(model=Wrapped(), args=args, train_dataset=Rows(xt, yt), eval_dataset=Rows(xv, yv))
    trainer.train()
    trainer.save_state()


ACCELERATE_OOM_SCRIPT = textwrap.dedent('''
    """The char LM under Accelerate, on a host with little memory left (the data segment capped); at epoch 3 the
    batch is raised to 4096 windows "to use the machine better": the real allocator error ends the run."""
    import resource, sys
    import torch
    from accelerate import Accelerator
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS5, task5
    torch.set_num_threads(1)
    with open("/proc/self/status") as status:
        used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData"))
    resource.setrlimit(resource.RLIMIT_DATA, (used + 600 * 2**20, resource.RLIM_INFINITY))
    accelerator = Accelerator(cpu=True)
    cfg = dict(SCENARIOS5["cl-healthy"])
    model, loss_fn, epoch_batches, (xv, yv) = task5(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    model, opt = accelerator.prepare(model, opt)
    accelerator.print(f"training on {{accelerator.device}}, {{accelerator.num_processes}} process(es)")
    step = 0
    for epoch in range(1, 6):
        if epoch == 3:
            cfg["batch"] = 4096
        for x, y in epoch_batches(epoch):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            accelerator.backward(loss)
            opt.step()
            step += 1
            if step % 5 == 0:
                accelerator.print(f"epoch {{epoch}} step {{step}} loss {{loss.item():.4f}}")
        with torch.no_grad():
            accelerator.print(f"epoch {{epoch}} val_loss {{loss_fn(model(xv), yv).item():.4f}}")
''')


def accelerate_oom(name: str, out: str) -> None:
    """`accelerate launch --cpu train.py > train.log 2>&1` of the script above (a real CPU OOM inside Accelerate)."""
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    script = os.path.join(folder, "train.py")
    with open(script, "w") as f:
        f.write(ACCELERATE_OOM_SCRIPT.format(here=HERE))
    launcher = os.path.join(os.path.dirname(sys.executable), "accelerate")
    with open(os.path.join(folder, "train.log"), "w") as log:
        subprocess.run([launcher, "launch", "--cpu", "--num_processes", "1", "--num_machines", "1",
                        "--mixed_precision", "no", "--dynamo_backend", "no", "train.py"], cwd=folder, stdout=log,
                       stderr=subprocess.STDOUT, env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"})
    os.remove(script)
    shutil.rmtree(os.path.join(folder, "__pycache__"), ignore_errors=True)



DEEPSPEED_OOM_SCRIPT = textwrap.dedent('''
    """The char LM under DeepSpeed ZeRO stage 1 with its default bucket sizes, on a host with ~600 MB left for this
    process (the data segment capped after initialize): the first backward asks for the 5e8-element reduce bucket."""
    import resource, sys
    import torch
    import deepspeed
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS5, task5
    torch.set_num_threads(1)
    cfg = dict(SCENARIOS5["cl-healthy"])
    model, loss_fn, epoch_batches, (xv, yv) = task5(cfg)
    ds_config = {{"train_micro_batch_size_per_gpu": 32, "gradient_accumulation_steps": 1,
                 "optimizer": {{"type": "Adam", "params": {{"lr": 3e-3, "torch_adam": True}}}},
                 "zero_optimization": {{"stage": 1}}, "steps_per_print": 1000}}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
    with open("/proc/self/status") as status:
        used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData"))
    resource.setrlimit(resource.RLIMIT_DATA, (used + 600 * 2**20, resource.RLIM_INFINITY))
    step = 0
    for epoch in range(1, cfg["epochs"] + 1):
        for x, y in epoch_batches(epoch):
            loss = loss_fn(engine(x), y)
            engine.backward(loss)
            engine.step()
            step += 1
            if step % 5 == 0:
                print(f"epoch {{epoch}} step {{step}} loss {{loss.item():.4f}}", flush=True)
        with torch.no_grad():
            print(f"epoch {{epoch}} val_loss {{loss_fn(engine(xv), yv).item():.4f}}", flush=True)
''')


def deepspeed_oom(name: str, out: str) -> None:
    """`deepspeed --num_gpus 1 train.py > train.log 2>&1` of the script above on CPU (DeepSpeed picks its CPU
    accelerator and gloo): a real allocator OOM inside ZeRO's gradient bucketing, with the launcher's own lines."""
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    script = os.path.join(folder, "train.py")
    with open(script, "w") as f:
        f.write(DEEPSPEED_OOM_SCRIPT.format(here=HERE))
    launcher = os.path.join(os.path.dirname(sys.executable), "deepspeed")
    with open(os.path.join(folder, "train.log"), "w") as log:
        subprocess.run([launcher, "--num_gpus", "1", "train.py"], cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu",
                            "MALLOC_MMAP_THRESHOLD_": "65536"})
    os.remove(script)
    shutil.rmtree(os.path.join(folder, "__pycache__"), ignore_errors=True)

CHECKPOINT_CRASH_SCRIPT = textwrap.dedent('''
    """The autoencoder, saving a checkpoint after epoch 3 into a folder nobody created: the real error ends it."""
    import sys
    import torch
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS5, training5

    def epoch_done(epoch, step, train_loss, val_loss):
        print(f"Epoch [{{epoch + 1}}/40] train_loss: {{train_loss:.5f}} val_loss: {{val_loss:.5f}}", flush=True)
        if epoch + 1 == 3:
            torch.save({{"epoch": epoch}}, "checkpoints/ae_epoch3.pt")

    training5(SCENARIOS5["ae-healthy"], lambda s, l: print(f"  step {{s}} loss {{l:.5f}}", flush=True), epoch_done, 5)
''')


def crashing_script_log(name: str, out: str, script_name: str, source: str, leftovers: tuple[str, ...] = (),
                        env: dict | None = None) -> None:
    """Run ``source`` as ``script_name`` in the entry's folder under bash, as a user runs a script that crashes, and
    keep what it printed (and the shell's exit status line) as train.log; the script and ``leftovers`` go after."""
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, script_name), "w") as f:
        f.write(source.format(here=HERE))
    command = f"{sys.executable} {script_name}; echo \"exit status $?\""
    with open(os.path.join(folder, "train.log"), "w") as log:
        subprocess.run(["bash", "-c", command], cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, **(env or {})})
    for leftover in (script_name, *leftovers):
        if os.path.exists(os.path.join(folder, leftover)):
            os.remove(os.path.join(folder, leftover))
    shutil.rmtree(os.path.join(folder, "__pycache__"), ignore_errors=True)


def checkpoint_crash(name: str, out: str) -> None:
    crashing_script_log(name, out, "train_ae.py", CHECKPOINT_CRASH_SCRIPT)

# ---- batch 6 (the `gen-wn-*` and `gen-sg-*` runs, all held back): two tasks new to the corpus ---------------------
# wn: scikit-learn's bundled wine data (178 x 13, 3 cultivars), standardized, a seeded 120 / 58 split, an MLP,
#     cross-entropy (chance: ln 3 = 1.099). sg: a small 1-D conv net classifying synthetic noisy signals (sine, square,
#     sawtooth, triangle at random frequency and phase, Gaussian noise 0.8, length 64; 600 train / 200 validation).

SCENARIOS6 = {
    "wn-healthy": dict(task="wn", n_train=120, epochs=40, batch=16, opt="adam", lr=3e-3, width=32),
    "wn-short": dict(task="wn", n_train=120, epochs=5, batch=16, opt="adam", lr=3e-3, width=32),
    "wn-lr5": dict(task="wn", n_train=120, epochs=25, batch=16, opt="sgd", lr=5.0, momentum=0.9, width=64),
    "wn-stuck": dict(task="wn", n_train=120, epochs=40, batch=16, opt="sgd", lr=1e-6, width=32),
    "wn-overfit": dict(task="wn", n_train=9, epochs=300, batch=9, opt="adam", lr=3e-3, width=512),
    "wn-periodic": dict(task="wn", n_train=120, epochs=20, batch=8, opt="adam", lr=1e-2, width=32, sorted=True),
    "wn-jitter": dict(task="wn", n_train=120, epochs=10, batch=1, opt="sgd", lr=0.3, width=32),
    "wn-slow": dict(task="wn", n_train=120, epochs=40, batch=120, opt="sgd", lr=0.003, width=32),
    "sg-healthy": dict(task="sg", n_train=600, epochs=15, batch=32, opt="adam", lr=3e-3, width=16),
    "sg-lr0.5": dict(task="sg", n_train=600, epochs=15, batch=32, opt="adam", lr=0.5, width=16),
    "sg-overfit": dict(task="sg", n_train=16, epochs=200, batch=16, opt="adam", lr=3e-3, width=64),
    "sg-slow": dict(task="sg", n_train=600, epochs=20, batch=64, opt="sgd", lr=0.003, width=16),
    "sg-nan": dict(task="sg", n_train=600, epochs=10, batch=32, opt="sgd", lr=50.0, momentum=0.9, width=16),
    "sg-stuck": dict(task="sg", n_train=600, epochs=15, batch=32, opt="sgd", lr=1e-7, width=16),
}


def scenario_config(scenario: str) -> dict:
    return (SCENARIOS5.get(scenario) or SCENARIOS6.get(scenario) or SCENARIOS7.get(scenario)
            or SCENARIOS8.get(scenario) or SCENARIOS9.get(scenario) or SCENARIOS10[scenario])


def wine_data(n_train: int, sorted_by_class: bool = False):
    """Wine (scikit-learn's bundled copy): a seeded 120 / 58 split, standardized on train. sorted_by_class: the rows
    stored by cultivar and never shuffled."""
    import torch
    from sklearn.datasets import load_wine

    d = load_wine()
    x, y = torch.tensor(d.data, dtype=torch.float32), torch.tensor(d.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(6))
    train, val = order[:120][:n_train], order[120:]
    if sorted_by_class:
        train = train[torch.argsort(y[train], stable=True)]
    mean, std = x[train].mean(0), x[train].std(0) + 1e-6
    x = (x - mean) / std
    return x[train], y[train], x[val], y[val]


def signal_data(n: int, seed: int):
    """n noisy signals of 64 samples, 4 shapes (the label) at random frequency (1-4 cycles) and phase."""
    import torch

    g = torch.Generator().manual_seed(seed)
    label = torch.randint(0, 4, (n,), generator=g)
    freq = 1 + 3 * torch.rand(n, 1, generator=g)
    phase = torch.rand(n, 1, generator=g)
    t = (torch.arange(64) / 64.0)[None, :] * freq + phase
    frac = t - t.floor()
    shapes = torch.stack([torch.sin(2 * math.pi * t), torch.sign(torch.sin(2 * math.pi * t)), 2 * frac - 1,
                          4 * (frac - 0.5).abs() - 1])
    x = shapes[label, torch.arange(n)] + 0.8 * torch.randn(n, 64, generator=g)
    return x[:, None, :], label


def task6(cfg):
    """(model, loss_fn, training batches per epoch as a function of the epoch, validation (x, y)) of batch 6."""
    import torch

    w = cfg["width"]
    if cfg["task"] == "wn":
        xt, yt, xv, yv = wine_data(cfg["n_train"], cfg.get("sorted", False))
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(13, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(),
                                    torch.nn.Linear(w, 3))
    else:
        xt, yt = signal_data(600, 61)
        xt, yt = xt[:cfg["n_train"]], yt[:cfg["n_train"]]
        xv, yv = signal_data(200, 62)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv1d(1, w, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool1d(2),
                                    torch.nn.Conv1d(w, w, 5, padding=2), torch.nn.ReLU(),
                                    torch.nn.AdaptiveAvgPool1d(1), torch.nn.Flatten(), torch.nn.Linear(w, 4))

    def epoch_batches(epoch):
        return [(xt[i], yt[i]) for i in batches(len(yt), cfg["batch"], not cfg.get("sorted", False), epoch)]

    return model, torch.nn.functional.cross_entropy, epoch_batches, (xv, yv)



SIGNAL_CRASH_SCRIPT = textwrap.dedent('''
    """The 1-D conv net, writing its metrics as JSON after epoch 4 with a tensor in them: the real TypeError ends it."""
    import json
    import sys
    import torch
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS6, training5

    def epoch_done(epoch, step, train_loss, val_loss):
        print(f"Epoch {{epoch + 1}}/15 - step {{step}} - train_loss {{train_loss:.4f}} - val_loss {{val_loss:.4f}}", flush=True)
        if epoch + 1 == 4:
            with open("metrics.json", "w") as f:
                json.dump({{"epoch": epoch + 1, "val_loss": torch.tensor(val_loss)}}, f)

    training5(SCENARIOS6["sg-healthy"], lambda s, l: print(f"  step {{s}} loss {{l:.4f}}", flush=True), epoch_done, 5)
''')


def signal_crash(name: str, out: str) -> None:
    crashing_script_log(name, out, "train_signals.py", SIGNAL_CRASH_SCRIPT, leftovers=("metrics.json",))

# ---- batch 7 (the `gen-tf-*`, `gen-tg-*`, `gen-va-*` and `gen-lr-*` runs, all held back): four tasks new to the corpus --
# tf: a tiny hand-written Transformer encoder (2 layers, 4 heads, attention written out as softmax(QK^T)V) reversing
#     random sequences of 12 tokens from a vocabulary of 16 (cross-entropy per token; chance: ln 16 = 2.77); the
#     overfitting and batch-1 runs replace 40% of the target tokens at random (train and validation alike).
# tg: a bidirectional GRU tagging synthetic sequences (vocabulary 30, length 20, 3 tags; a token's tag is the sum of
#     it and the token before it mod 3, 5% of tags flipped; chance: ln 3 = 1.10).
# va: a small VAE on scikit-learn's bundled 8x8 digits (pixels as Bernoulli probabilities; loss = reconstruction BCE
#     summed over the 64 pixels + KL, per image; a decoder that outputs the mean image scores ~28).
# lr: logistic regression on a seeded scikit-learn make_classification table (2000 / 400 rows, 20 features, 5% of
#     labels flipped; binary cross-entropy, chance ln 2 = 0.693); "unscaled" leaves five columns in raw units (x1000).

SCENARIOS7 = {
    "tf-healthy": dict(task="tf", n_train=2000, epochs=12, batch=32, opt="adam", lr=1e-3, width=64),
    "tf-short": dict(task="tf", n_train=2000, epochs=2, batch=32, opt="adam", lr=1e-3, width=64),
    "tf-overfit": dict(task="tf", n_train=40, epochs=250, batch=20, opt="adam", lr=1e-3, width=64, noise=0.4),
    "tf-lr0.5": dict(task="tf", n_train=2000, epochs=12, batch=32, opt="adam", lr=0.5, width=64),
    "tf-stuck": dict(task="tf", n_train=2000, epochs=8, batch=32, opt="sgd", lr=1e-6, width=64),
    "tf-jitter": dict(task="tf", n_train=1000, epochs=3, batch=1, opt="sgd", lr=0.1, width=64, noise=0.4),
    "tg-healthy": dict(task="tg", n_train=1500, epochs=12, batch=32, opt="adam", lr=3e-3, width=32),
    "tg-slow": dict(task="tg", n_train=1500, epochs=25, batch=64, opt="sgd", lr=0.3, width=32),
    "tg-lr80": dict(task="tg", n_train=1500, epochs=10, batch=32, opt="sgd", lr=80.0, momentum=0.9, width=32),
    "tg-overfit": dict(task="tg", n_train=24, epochs=300, batch=8, opt="adam", lr=3e-3, width=128),
    "va-healthy": dict(task="va", n_train=1300, epochs=30, batch=32, opt="adam", lr=1e-3, width=64),
    "va-overfit": dict(task="va", n_train=20, epochs=500, batch=20, opt="adam", lr=3e-3, width=1024),
    "va-stuck": dict(task="va", n_train=1300, epochs=20, batch=32, opt="sgd", lr=1e-7, width=64),
    "va-lr1": dict(task="va", n_train=1300, epochs=15, batch=32, opt="sgd", lr=1.0, momentum=0.9, width=64),
    "va-slow": dict(task="va", n_train=1300, epochs=30, batch=64, opt="sgd", lr=2e-4, width=64),
    "va-periodic": dict(task="va", n_train=1300, epochs=12, batch=25, opt="adam", lr=1e-3, width=64, sorted=True),
    "lr-healthy": dict(task="lr", n_train=2000, epochs=25, batch=32, opt="sgd", lr=0.05, width=0),
    "lr-short": dict(task="lr", n_train=2000, epochs=3, batch=32, opt="adam", lr=1e-2, width=0),
    "lr-unscaled": dict(task="lr", n_train=2000, epochs=20, batch=32, opt="sgd", lr=0.01, width=0, unscaled=True),
    "lr-periodic": dict(task="lr", n_train=2000, epochs=12, batch=40, opt="sgd", lr=0.05, width=0, sorted=True),
    "lr-slow": dict(task="lr", n_train=2000, epochs=30, batch=200, opt="sgd", lr=1e-3, width=0),
    "lr-jitter": dict(task="lr", n_train=2000, epochs=4, batch=1, opt="sgd", lr=0.05, width=0),
}
REVERSE_LEN, REVERSE_VOCAB = 12, 16
TAG_LEN, TAG_VOCAB, TAGS = 20, 30, 3


def reverse_data(n: int, seed: int, noise: float = 0.0):
    """n random sequences and their reversal; `noise`: that share of the target tokens replaced at random (a noisy
    labelling, so the validation loss has a floor and a model that memorizes its training targets gets worse)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, REVERSE_VOCAB, (n, REVERSE_LEN), generator=g)
    y = x.flip(1)
    flip = torch.rand(n, REVERSE_LEN, generator=g) < noise
    return x, torch.where(flip, torch.randint(0, REVERSE_VOCAB, (n, REVERSE_LEN), generator=g), y)


def tagging_data(n: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, TAG_VOCAB, (n, TAG_LEN), generator=g)
    before = torch.cat([torch.zeros(n, 1, dtype=torch.long), x[:, :-1]], dim=1)
    tags = (x + before) % TAGS
    flip = torch.rand(n, TAG_LEN, generator=g) < 0.05
    return x, torch.where(flip, torch.randint(0, TAGS, (n, TAG_LEN), generator=g), tags)


def table_data(n_train: int, unscaled: bool = False, sorted_by_class: bool = False):
    """make_classification (seeded): 2000 / 400 rows; standardized on train unless `unscaled` (then five columns stay
    in raw units, 1000x the others, as a table of dollar amounts fed in without a scaler)."""
    import torch
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=2400, n_features=20, n_informative=8, n_redundant=4, flip_y=0.05,
                               class_sep=1.0, random_state=7)
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)[:, None]
    xt, yt, xv, yv = x[:2000][:n_train], y[:2000][:n_train], x[2000:], y[2000:]
    if unscaled:
        scale = torch.ones(20)
        scale[:5] = 1000.0
        xt, xv = xt * scale, xv * scale
    else:
        mean, std = xt.mean(0), xt.std(0)
        xt, xv = (xt - mean) / std, (xv - mean) / std
    if sorted_by_class:  # the rows exported class by class and never shuffled
        order = torch.argsort(yt[:, 0], stable=True)
        xt, yt = xt[order], yt[order]
    return xt, yt, xv, yv


class TinyTransformer:
    """Built lazily (torch imported inside): token + position embeddings, 2 pre-norm blocks whose attention is written
    out (scores = QK^T / sqrt(d), softmax, times V), a linear head per position."""

    def __new__(cls, vocab: int, width: int, max_len: int = 2048):
        import torch

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
                self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
                self.ff = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                              torch.nn.Linear(2 * width, width))

            def forward(self, h):
                b, n, d = h.shape
                q, k, v = self.qkv(self.norm1(h)).view(b, n, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
                scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // 4)
                h = h + self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d))
                return h + self.ff(self.norm2(h))

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.embed, self.position = torch.nn.Embedding(vocab, width), torch.nn.Embedding(max_len, width)
                self.blocks = torch.nn.Sequential(Block(), Block())
                self.head = torch.nn.Linear(width, vocab)

            def forward(self, x):
                h = self.embed(x) + self.position(torch.arange(x.shape[1]))[None]
                return self.head(self.blocks(h))

        return Model()


class Tagger:
    def __new__(cls, width: int):
        import torch

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.embed = torch.nn.Embedding(TAG_VOCAB, 16)
                self.gru = torch.nn.GRU(16, width, batch_first=True, bidirectional=True)
                self.head = torch.nn.Linear(2 * width, TAGS)

            def forward(self, x):
                return self.head(self.gru(self.embed(x))[0])

        return Model()


class DigitsVAE:
    def __new__(cls, width: int):
        import torch

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.encoder = torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, 8))
                self.decoder = torch.nn.Sequential(torch.nn.Linear(4, width), torch.nn.ReLU(), torch.nn.Linear(width, 64))

            def forward(self, x):
                mu, logvar = self.encoder(x).chunk(2, dim=1)
                z = mu + torch.randn_like(mu) * (0.5 * logvar).exp() if self.training else mu
                return self.decoder(z), mu, logvar

        return Model()


def vae_loss(out, x):
    """Per-image negative ELBO: Bernoulli reconstruction (BCE summed over the 64 pixels) + KL to N(0, I)."""
    import torch

    logits, mu, logvar = out
    reconstruction = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (reconstruction + kl) / len(x)


def sequence_loss(logits, y):
    import torch

    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def task7(cfg):
    """(model, loss_fn, training batches per epoch as a function of the epoch, validation (x, y)) of batch 7."""
    import torch

    task = cfg["task"]
    if task == "tf":
        noise = cfg.get("noise", 0.0)
        (xt, yt), (xv, yv) = reverse_data(cfg["n_train"], 71, noise), reverse_data(500, 72, noise)
        model, loss_fn = TinyTransformer(REVERSE_VOCAB, cfg["width"]), sequence_loss
    elif task == "tg":
        (xt, yt), (xv, yv) = tagging_data(cfg["n_train"], 73), tagging_data(500, 74)
        model, loss_fn = Tagger(cfg["width"]), sequence_loss
    elif task == "va":
        images, labels, val, _ = digits_data(cfg["n_train"], sorted_by_class=cfg.get("sorted", False))
        xt, yt, xv, yv = images, images, val, val
        del labels
        model, loss_fn = DigitsVAE(cfg["width"]), vae_loss
    else:
        xt, yt, xv, yv = table_data(cfg["n_train"], cfg.get("unscaled", False), cfg.get("sorted", False))
        torch.manual_seed(0)
        model, loss_fn = torch.nn.Linear(20, 1), torch.nn.functional.binary_cross_entropy_with_logits

    def epoch_batches(epoch):
        return [(xt[i], yt[i]) for i in batches(len(yt), cfg["batch"], not cfg.get("sorted", False), epoch)]

    return model, loss_fn, epoch_batches, (xv, yv)


def keras_console7(name: str, scenario: str, out: str) -> None:
    """What `model.fit(..., verbose=2)` prints to a redirected console: `Epoch N/E` and one summary line an epoch."""
    cfg = scenario_config(scenario)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    per_epoch = steps5(cfg) // cfg["epochs"]
    with open(os.path.join(out, name, "train.log"), "w") as f:
        print(f"Model: \"{scenario.split('-')[0]}_model\"", file=f)

        def epoch_done(e, s, tl, vl):
            ms = 3 + (e * 7) % 5
            print(f"Epoch {e + 1}/{cfg['epochs']}\n{per_epoch}/{per_epoch} - {per_epoch * ms // 1000 + 1}s - "
                  f"loss: {tl:.4f} - val_loss: {vl:.4f} - {per_epoch * ms}ms/epoch - {ms}ms/step", file=f, flush=True)

        training5(cfg, lambda s, l: None, epoch_done, 10**9)


def step_text7(name: str, scenario: str, out: str) -> None:
    """A hand-written loop's prints: `Epoch 001 Step 00120 | loss 0.6431 | lr 0.5` and a validation line an epoch."""
    cfg = scenario_config(scenario)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    total = steps5(cfg)
    per_epoch = total // cfg["epochs"]
    with open(os.path.join(out, name, "train.log"), "w") as f:
        print(f"config: {cfg}", file=f)
        training5(cfg, lambda s, l: print(f"Epoch {(s - 1) // per_epoch + 1:03d} Step {s:05d} | loss {l:.4f} | "
                                          f"lr {cfg['lr']}", file=f),
                  lambda e, s, tl, vl: print(f"Epoch {e + 1:03d} | train_loss {tl:.4f} | val_loss {vl:.4f}", file=f,
                                             flush=True), max(1, total // 250))


ATTENTION_OOM_SCRIPT = textwrap.dedent('''
    """The reversal Transformer on a host with ~500 MB left for this process (the data segment capped): a curriculum
    raises the sequence length from 12 to 1536 at epoch 3, and the written-out attention scores (batch x heads x
    length x length floats) no longer fit: the real allocator error ends the run."""
    import resource, sys
    import torch
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS7, task7
    torch.set_num_threads(1)
    cfg = dict(SCENARIOS7["tf-healthy"])
    model, loss_fn, epoch_batches, (xv, yv) = task7(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    with open("/proc/self/status") as status:
        used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData"))
    resource.setrlimit(resource.RLIMIT_DATA, (used + 500 * 2**20, resource.RLIM_INFINITY))
    step = 0
    for epoch in range(1, 9):
        repeat = 128 if epoch >= 3 else 1  # curriculum: long sequences from epoch 3
        print(f"epoch {{epoch}}: sequence length {{12 * repeat}}", flush=True)
        for x, y in epoch_batches(epoch):
            x, y = x.repeat(1, repeat), y.repeat(1, repeat)
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                print(f"epoch {{epoch}} step {{step}} loss {{loss.item():.4f}}", flush=True)
        with torch.no_grad():
            model.eval()
            print(f"epoch {{epoch}} val_loss {{loss_fn(model(xv), yv).item():.4f}}", flush=True)
            model.train()
''')

TAGGER_CRASH_SCRIPT = textwrap.dedent('''
    """The tagger, scoring its validation tags with scikit-learn's f1_score at its default average='binary' after
    epoch 2: three tags are no binary target, and the real ValueError ends the run."""
    import sys
    import torch
    from sklearn.metrics import f1_score
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS7, task7
    torch.set_num_threads(1)
    cfg = SCENARIOS7["tg-healthy"]
    model, loss_fn, epoch_batches, (xv, yv) = task7(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    step = 0
    for epoch in range(1, cfg["epochs"] + 1):
        for x, y in epoch_batches(epoch):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                print(f"[epoch {{epoch}}] step {{step}} loss={{loss.item():.4f}}", flush=True)
        with torch.no_grad():
            logits = model(xv)
            print(f"[epoch {{epoch}}] val_loss={{loss_fn(logits, yv).item():.4f}}", flush=True)
        if epoch == 2:
            f1 = f1_score(yv.flatten().numpy(), logits.argmax(-1).flatten().numpy())
            print(f"[epoch {{epoch}}] val_f1={{f1:.4f}}", flush=True)
''')


def attention_oom(name: str, out: str) -> None:
    crashing_script_log(name, out, "train_reverse.py", ATTENTION_OOM_SCRIPT, env={"MALLOC_MMAP_THRESHOLD_": "65536"})


def tagger_crash(name: str, out: str) -> None:
    crashing_script_log(name, out, "train_tagger.py", TAGGER_CRASH_SCRIPT)


# ---- batch 8 (the `gen-sp-*` runs, all held back): a task new to the corpus ----------------------------------------
# sp: a small MLP (2 -> width -> width -> 1, ReLU) classifying the two interleaved spirals (a seeded 2-D point cloud,
#     1.5 turns per arm, Gaussian noise 0.3; binary cross-entropy, chance ln 2 = 0.693); validation: 400 fresh points.
#     "sorted" feeds the points arm by arm, each arm from its centre outwards, never shuffled.

SCENARIOS8 = {
    "sp-healthy": dict(task="sp", n_train=1000, epochs=40, batch=32, opt="adam", lr=3e-3, width=64),
    "sp-lr40": dict(task="sp", n_train=1000, epochs=15, batch=32, opt="sgd", lr=40.0, momentum=0.9, width=64),
    "sp-overfit": dict(task="sp", n_train=30, epochs=400, batch=30, opt="adam", lr=3e-3, width=256, noise=1.0),
    "sp-stuck": dict(task="sp", n_train=1000, epochs=15, batch=32, opt="sgd", lr=1e-7, width=64),
    "sp-periodic": dict(task="sp", n_train=1000, epochs=12, batch=25, opt="sgd", lr=0.05, width=64, sorted=True),
}


def spiral_data(n: int, seed: int, noise: float = 0.3, sorted_by_arm: bool = False):
    """Two interleaved spirals, n points (half an arm each), seeded; x in the plane, y = the arm (0 or 1)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    arm = torch.arange(n) % 2
    t = torch.rand(n, generator=g) * 3 * math.pi + 0.5
    if sorted_by_arm:  # the points exported arm by arm, each arm from the centre outwards
        order = torch.argsort(arm * 100 + t, stable=True)
        arm, t = arm[order], t[order]
    sign = 1 - 2 * arm.float()
    x = torch.stack([sign * t * torch.cos(t), sign * t * torch.sin(t)], 1) / 3
    x = x + noise * torch.randn(n, 2, generator=g)
    return x, arm.float()[:, None]


def task8(cfg):
    """(model, loss_fn, training batches per epoch as a function of the epoch, validation (x, y)) of batch 8."""
    import torch

    noise = cfg.get("noise", 0.3)
    xt, yt = spiral_data(cfg["n_train"], 81, noise, cfg.get("sorted", False))
    xv, yv = spiral_data(400, 82, noise)
    torch.manual_seed(0)
    w = cfg["width"]
    model = torch.nn.Sequential(torch.nn.Linear(2, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(),
                                torch.nn.Linear(w, 1))

    def epoch_batches(epoch):
        return [(xt[i], yt[i]) for i in batches(len(yt), cfg["batch"], not cfg.get("sorted", False), epoch)]

    return model, torch.nn.functional.binary_cross_entropy_with_logits, epoch_batches, (xv, yv)


SPIRAL_CRASH_SCRIPT = textwrap.dedent('''
    """The spiral classifier, switched after epoch 3 to a validation file that carries a third column (the radius,
    added by a later export): the first layer expects 2 features, and the real RuntimeError ends the run."""
    import sys
    import torch
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS8, task8
    torch.set_num_threads(1)
    cfg = SCENARIOS8["sp-healthy"]
    model, loss_fn, epoch_batches, (xv, yv) = task8(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    step = 0
    for epoch in range(1, cfg["epochs"] + 1):
        total = 0.0
        for x, y in epoch_batches(epoch):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            total += loss.item()
            if step % 8 == 0:
                print(f"epoch={{epoch}} step={{step}} loss={{loss.item():.4f}}", flush=True)
        if epoch > 3:  # the new export
            xv = torch.cat([xv, xv.norm(dim=1, keepdim=True)], 1)
        with torch.no_grad():
            print(f"epoch={{epoch}} train_loss={{total / len(epoch_batches(epoch)):.4f}} "
                  f"val_loss={{loss_fn(model(xv), yv).item():.4f}}", flush=True)
''')


def spiral_crash(name: str, out: str) -> None:
    crashing_script_log(name, out, "train_spirals.py", SPIRAL_CRASH_SCRIPT)


# ---- batch 9 (the `gen-ts-*` runs, all held back): a task new to the corpus ----------------------------------------
# ts: one-step-ahead forecasting of a seeded noisy series (two sines, periods 25 and 7, amplitudes 1 and 0.5, Gaussian
#     noise 0.3): from the last 32 values predict the next one, an MLP (32 -> width -> width -> 1), mean squared error.
#     Predicting the series' mean scores ~0.72, the noise floor is 0.09. Training windows come from one series (seed
#     91), validation windows (500) from another (seed 92). "sorted" feeds the windows ordered by their target value,
#     lowest first, never shuffled; "noise" raises the series' noise (the overfitting run: 32 windows at noise 1.0);
#     "jump" is the schedule bug of batch 5 (the LR set to 3.0 after 6 good epochs).

SCENARIOS9 = {
    "ts-healthy": dict(task="ts", n_train=2000, epochs=12, batch=32, opt="adam", lr=1e-4, width=64),
    "ts-lr": dict(task="ts", n_train=2000, epochs=12, batch=32, opt="adam", lr=1e-3, width=64, jump=(6, 3.0)),
    "ts-jitter": dict(task="ts", n_train=2000, epochs=4, batch=1, opt="sgd", lr=0.01, width=64),
    "ts-periodic": dict(task="ts", n_train=2000, epochs=10, batch=25, opt="adam", lr=3e-3, width=64, sorted=True),
    "ts-overfit": dict(task="ts", n_train=32, epochs=120, batch=32, opt="adam", lr=3e-3, width=256, noise=1.0),
    "ts-slow": dict(task="ts", n_train=2000, epochs=30, batch=250, opt="sgd", lr=2e-3, width=64),
}
SERIES_WINDOW = 32


def series_data(n: int, seed: int, sorted_by_target: bool = False, noise: float = 0.3):
    """n windows of SERIES_WINDOW values of a seeded noisy two-sine series, and the value that follows each."""
    import torch

    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n + SERIES_WINDOW, dtype=torch.float32)
    phase = torch.rand(2, generator=g) * 2 * math.pi
    s = (torch.sin(2 * math.pi * t / 25 + phase[0]) + 0.5 * torch.sin(2 * math.pi * t / 7 + phase[1])
         + noise * torch.randn(len(t), generator=g))
    x, y = s.unfold(0, SERIES_WINDOW, 1)[:n].contiguous(), s[SERIES_WINDOW:SERIES_WINDOW + n][:, None].contiguous()
    if sorted_by_target:  # the windows exported ordered by the value to forecast
        order = torch.argsort(y[:, 0])
        x, y = x[order], y[order]
    return x, y


def task9(cfg):
    """(model, loss_fn, training batches per epoch as a function of the epoch, validation (x, y)) of batch 9."""
    import torch

    xt, yt = series_data(cfg["n_train"], 91, cfg.get("sorted", False), cfg.get("noise", 0.3))
    xv, yv = series_data(500, 92, noise=cfg.get("noise", 0.3))
    torch.manual_seed(0)
    w = cfg["width"]
    model = torch.nn.Sequential(torch.nn.Linear(SERIES_WINDOW, w), torch.nn.ReLU(), torch.nn.Linear(w, w),
                                torch.nn.ReLU(), torch.nn.Linear(w, 1))

    def epoch_batches(epoch):
        return [(xt[i], yt[i]) for i in batches(len(yt), cfg["batch"], not cfg.get("sorted", False), epoch)]

    return model, torch.nn.functional.mse_loss, epoch_batches, (xv, yv)


SERIES_OOM_SCRIPT = textwrap.dedent('''
    """The series forecaster on a host with ~400 MB left for this process (the data segment capped): from epoch 3 the
    validation adds a nearest-neighbour baseline, the distance from each of 20000 recent windows to each of 60000
    history windows in one torch.cdist call (4.8 GB of floats): the real allocator error ends the run."""
    import resource, sys
    import torch
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS9, series_data, task9
    torch.set_num_threads(1)
    cfg = SCENARIOS9["ts-healthy"]
    model, loss_fn, epoch_batches, (xv, yv) = task9(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    history, _ = series_data(60000, 93)
    recent, _ = series_data(20000, 94)
    with open("/proc/self/status") as status:
        used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData"))
    resource.setrlimit(resource.RLIMIT_DATA, (used + 400 * 2**20, resource.RLIM_INFINITY))
    step = 0
    for epoch in range(1, cfg["epochs"] + 1):
        total = 0.0
        for x, y in epoch_batches(epoch):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            total += loss.item()
            if step % 20 == 0:
                print(f"epoch {{epoch}} | step {{step}} | mse {{loss.item():.4f}}", flush=True)
        with torch.no_grad():
            print(f"epoch {{epoch}} | train_mse {{total / len(epoch_batches(epoch)):.4f}} | "
                  f"val_mse {{loss_fn(model(xv), yv).item():.4f}}", flush=True)
            if epoch >= 3:  # the nearest-neighbour baseline
                nearest = torch.cdist(recent, history).argmin(1)
                print(f"epoch {{epoch}} | knn baseline over {{len(nearest)}} windows", flush=True)
''')


def series_oom(name: str, out: str) -> None:
    crashing_script_log(name, out, "train_forecaster.py", SERIES_OOM_SCRIPT, env={"MALLOC_MMAP_THRESHOLD_": "65536"})


# ---- batch 10 (the `gen-mf-*` runs, all held back): a task new to the corpus ---------------------------------------
# mf: matrix factorization of synthetic ratings: 300 users x 200 items whose true rating is 3 + a rank-3 product of
#     Gaussian factors (variance 3) + Gaussian noise 0.5; training pairs (seed 101) and 2000 validation pairs (seed 102)
#     drawn at random; the model is user and item embeddings (width w, init std 0.1) with biases, the prediction their
#     dot product + biases + 3, mean squared error. Predicting 3 everywhere scores ~3.25, the noise floor is 0.25.
#     "sorted" feeds the pairs ordered by their rating, lowest first, never shuffled.

SCENARIOS10 = {
    "mf-healthy": dict(task="mf", n_train=20000, epochs=12, batch=256, opt="adam", lr=1e-2, width=4),
    "mf-overfit": dict(task="mf", n_train=8000, epochs=60, batch=64, opt="adam", lr=3e-3, width=16),
    "mf-periodic": dict(task="mf", n_train=20000, epochs=8, batch=200, opt="adam", lr=3e-3, width=8, sorted=True),
    "mf-stuck": dict(task="mf", n_train=20000, epochs=10, batch=256, opt="sgd", lr=1e-4, width=8),
    "mf-lr": dict(task="mf", n_train=20000, epochs=12, batch=256, opt="sgd", lr=16.0, width=8),
    "mf-jitter": dict(task="mf", n_train=20000, epochs=3, batch=1, opt="sgd", lr=0.05, width=8),
    "mf-slow": dict(task="mf", n_train=20000, epochs=25, batch=512, opt="adam", lr=1e-3, width=8),
}
MF_USERS, MF_ITEMS, MF_RANK = 300, 200, 3


def rating_data(n: int, seed: int, sorted_by_rating: bool = False):
    """n (user, item) pairs and their ratings, from one seeded ground truth (seed 100)."""
    import torch

    truth = torch.Generator().manual_seed(100)
    users = torch.randn(MF_USERS, MF_RANK, generator=truth)
    items = torch.randn(MF_ITEMS, MF_RANK, generator=truth)
    g = torch.Generator().manual_seed(seed)
    u = torch.randint(0, MF_USERS, (n,), generator=g)
    i = torch.randint(0, MF_ITEMS, (n,), generator=g)
    r = 3 + (users[u] * items[i]).sum(1) + 0.5 * torch.randn(n, generator=g)
    x, y = torch.stack([u, i], 1), r[:, None]
    if sorted_by_rating:  # the pairs exported ordered by rating
        order = torch.argsort(y[:, 0])
        x, y = x[order], y[order]
    return x, y


def factorization(width: int, users: int = MF_USERS, items: int = MF_ITEMS):
    import torch

    class Factorization(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.user, self.item = torch.nn.Embedding(users, width), torch.nn.Embedding(items, width)
            self.user_bias, self.item_bias = torch.nn.Embedding(users, 1), torch.nn.Embedding(items, 1)
            for table in (self.user, self.item):
                torch.nn.init.normal_(table.weight, std=0.1)
            for table in (self.user_bias, self.item_bias):
                torch.nn.init.zeros_(table.weight)

        def forward(self, x):
            u, i = x[:, 0], x[:, 1]
            dot = (self.user(u) * self.item(i)).sum(1, keepdim=True)
            return dot + self.user_bias(u) + self.item_bias(i) + 3

    return Factorization()


def task10(cfg):
    """(model, loss_fn, training batches per epoch as a function of the epoch, validation (x, y)) of batch 10."""
    import torch

    xt, yt = rating_data(cfg["n_train"], 101, cfg.get("sorted", False))
    xv, yv = rating_data(2000, 102)
    torch.manual_seed(0)
    model = factorization(cfg["width"])

    def epoch_batches(epoch):
        return [(xt[i], yt[i]) for i in batches(len(yt), cfg["batch"], not cfg.get("sorted", False), epoch)]

    return model, torch.nn.functional.mse_loss, epoch_batches, (xv, yv)


RATINGS_CRASH_SCRIPT = textwrap.dedent('''
    """The rating model, refreshed after epoch 3 with the week's new sign-ups (users 300-339) whose ids the embedding
    table, sized when the run started, does not hold: the real IndexError ends the run."""
    import sys
    import torch
    sys.path.insert(0, {here!r})
    from generate import SCENARIOS10, rating_data, task10
    torch.set_num_threads(1)
    cfg = SCENARIOS10["mf-healthy"]
    model, loss_fn, epoch_batches, (xv, yv) = task10(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    step = 0
    for epoch in range(1, cfg["epochs"] + 1):
        batches = epoch_batches(epoch)
        if epoch > 3:  # the refreshed export: new users appended
            x, y = rating_data(2000, 103)
            x[:, 0] = 300 + x[:, 0] % 40
            batches = batches + [(x[k:k + 256], y[k:k + 256]) for k in range(0, 2000, 256)]
        total = 0.0
        for x, y in batches:
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            total += loss.item()
            if step % 20 == 0:
                print(f"[{{epoch}}/{{cfg['epochs']}}] step {{step}} train_mse={{loss.item():.4f}}", flush=True)
        with torch.no_grad():
            print(f"[{{epoch}}/{{cfg['epochs']}}] train_mse={{total / len(batches):.4f}} "
                  f"val_mse={{loss_fn(model(xv), yv).item():.4f}}", flush=True)
''')


def ratings_crash(name: str, out: str) -> None:
    crashing_script_log(name, out, "train_ratings.py", RATINGS_CRASH_SCRIPT)



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
    # fifth batch (labels.toml batch = 5, all held back): regression, a character LM, an autoencoder
    "gen-rg-sw-01": ("summarywriter5", "rg-healthy"),
    "gen-rg-plcsv-01": ("lightning-csv5", "rg-overfit"),
    "gen-rg-keras-01": ("keras5", "rg-lr0.5"),
    "gen-rg-hf-01": ("hf5", "rg-slow"),
    "gen-rg-text-01": ("text5", "rg-long"),
    "gen-rg-pltb-01": ("lightning-tb5", "rg-lr0.08"),
    "gen-rg-text-02": ("text5", "rg-jitter"),
    "gen-rg-text-03": ("text5", "rg-nan"),
    "gen-cl-hf-01": ("hf5", "cl-healthy"),
    "gen-cl-hf-02": ("hf5", "cl-stuck"),
    "gen-cl-text-01": ("text5", "cl-healthy"),
    "gen-cl-text-02": ("text5", "cl-overfit"),
    "gen-cl-pltb-01": ("lightning-tb5", "cl-slow"),
    "gen-cl-plcsv-01": ("lightning-csv5", "cl-nan"),
    "gen-cl-sw-01": ("summarywriter5", "cl-swing"),
    "gen-cl-text-03": ("accelerate-oom", "cl-healthy"),
    "gen-cl-text-04": ("text5", "cl-late-blowup"),
    "gen-cl-text-05": ("text5", "cl-sequential"),
    "gen-ae-sw-01": ("summarywriter5", "ae-healthy"),
    "gen-ae-sw-02": ("summarywriter5", "ae-lr1"),
    "gen-ae-plcsv-01": ("lightning-csv5", "ae-stuck"),
    "gen-ae-keras-01": ("keras5", "ae-slow"),
    "gen-ae-text-02": ("text5", "ae-jitter"),
    "gen-ae-pltb-01": ("lightning-tb5", "ae-periodic"),
    "gen-ae-hf-01": ("hf5", "ae-overfit"),
    "gen-ae-text-01": ("checkpoint-crash", "ae-healthy"),
    "gen-ae-plcsv-02": ("lightning-csv5", "ae-healthy"),
    "gen-rg-keras-02": ("keras5", "rg-healthy"),
    "gen-cl-text-06": ("deepspeed-oom", "cl-healthy"),
    # sixth batch (labels.toml batch = 6, all held back): wine, a 1-D conv on synthetic signals
    "gen-wn-sw-01": ("summarywriter5", "wn-healthy"),
    "gen-wn-text-01": ("text5", "wn-lr5"),
    "gen-wn-keras-01": ("keras5", "wn-stuck"),
    "gen-wn-pltb-01": ("lightning-tb5", "wn-overfit"),
    "gen-wn-plcsv-01": ("lightning-csv5", "wn-periodic"),
    "gen-wn-text-02": ("text5", "wn-jitter"),
    "gen-wn-sw-02": ("summarywriter5", "wn-slow"),
    "gen-wn-plcsv-02": ("lightning-csv5", "wn-healthy"),
    "gen-sg-text-01": ("text5", "sg-healthy"),
    "gen-sg-keras-01": ("keras5", "sg-healthy"),
    "gen-sg-pltb-01": ("lightning-tb5", "sg-healthy"),
    "gen-sg-sw-01": ("summarywriter5", "sg-lr0.5"),
    "gen-sg-keras-02": ("keras5", "sg-overfit"),
    "gen-sg-plcsv-01": ("lightning-csv5", "sg-slow"),
    "gen-sg-text-02": ("text5", "sg-nan"),
    "gen-sg-sw-02": ("summarywriter5", "sg-stuck"),
    "gen-wn-keras-02": ("keras5", "wn-short"),
    "gen-wn-text-03": ("text5", "wn-short"),
    "gen-sg-sw-03": ("summarywriter5", "sg-healthy"),
    "gen-sg-text-03": ("signal-crash", "sg-healthy"),
    # seventh batch (labels.toml batch = 7, all held back): a Transformer reversing sequences, a GRU tagger, a VAE on the
    # digits, logistic regression on a table
    "gen-tf-sw-01": ("summarywriter5", "tf-healthy"),
    "gen-tf-keras-01": ("keras5", "tf-short"),
    "gen-tf-plcsv-01": ("lightning-csv5", "tf-overfit"),
    "gen-tf-text-01": ("keras-console7", "tf-lr0.5"),
    "gen-tf-hf-01": ("hf5", "tf-stuck"),
    "gen-tf-pltb-01": ("lightning-tb5", "tf-jitter"),
    "gen-tf-text-02": ("attention-oom", "tf-healthy"),
    "gen-tg-hf-01": ("hf5", "tg-healthy"),
    "gen-tg-sw-01": ("summarywriter5", "tg-slow"),
    "gen-tg-keras-01": ("keras5", "tg-lr80"),
    "gen-tg-pltb-01": ("lightning-tb5", "tg-overfit"),
    "gen-tg-text-01": ("tagger-crash", "tg-healthy"),
    "gen-tg-text-02": ("keras-console7", "tg-healthy"),
    "gen-va-plcsv-01": ("lightning-csv5", "va-healthy"),
    "gen-va-keras-01": ("keras5", "va-overfit"),
    "gen-va-sw-01": ("summarywriter5", "va-stuck"),
    "gen-va-hf-01": ("hf5", "va-lr1"),
    "gen-va-text-01": ("keras-console7", "va-slow"),
    "gen-va-pltb-01": ("lightning-tb5", "va-periodic"),
    "gen-lr-keras-01": ("keras5", "lr-healthy"),
    "gen-lr-hf-01": ("hf5", "lr-short"),
    "gen-lr-text-01": ("keras-console7", "lr-unscaled"),
    "gen-lr-sw-01": ("summarywriter5", "lr-periodic"),
    "gen-lr-plcsv-01": ("lightning-csv5", "lr-slow"),
    "gen-lr-text-02": ("step-text7", "lr-jitter"),
    # eighth batch (labels.toml batch = 8, all held back): an MLP on two interleaved spirals
    "gen-sp-sw-01": ("summarywriter5", "sp-healthy"),
    "gen-sp-keras-01": ("keras5", "sp-lr40"),
    "gen-sp-plcsv-01": ("lightning-csv5", "sp-overfit"),
    "gen-sp-hf-01": ("hf5", "sp-stuck"),
    "gen-sp-pltb-01": ("lightning-tb5", "sp-periodic"),
    "gen-sp-text-01": ("spiral-crash", "sp-healthy"),
    # ninth batch (labels.toml batch = 9, all held back): one-step-ahead forecasting of a noisy two-sine series
    "gen-ts-sw-01": ("summarywriter5", "ts-healthy"),
    "gen-ts-keras-01": ("keras5", "ts-lr"),
    "gen-ts-plcsv-01": ("lightning-csv5", "ts-jitter"),
    "gen-ts-pltb-01": ("lightning-tb5", "ts-periodic"),
    "gen-ts-hf-01": ("hf5", "ts-overfit"),
    "gen-ts-text-01": ("series-oom", "ts-healthy"),
    "gen-ts-text-02": ("step-text7", "ts-slow"),
    # tenth batch (labels.toml batch = 10, all held back): matrix factorization of synthetic ratings
    "gen-mf-sw-01": ("summarywriter5", "mf-healthy"),
    "gen-mf-plcsv-01": ("lightning-csv5", "mf-overfit"),
    "gen-mf-pltb-01": ("lightning-tb5", "mf-periodic"),
    "gen-mf-hf-01": ("hf5", "mf-stuck"),
    "gen-mf-keras-01": ("keras5", "mf-lr"),
    "gen-mf-text-01": ("step-text7", "mf-jitter"),
    "gen-mf-text-02": ("ratings-crash", "mf-healthy"),
    "gen-mf-text-03": ("text5", "mf-slow"),
}


def generate(name: str, out: str) -> None:
    writer, what = RUNS[name]
    target = os.path.join(out, name)
    shutil.rmtree(target, ignore_errors=True)
    batch5 = {"summarywriter5": summarywriter5, "keras5": keras5, "text5": text5, "hf5": hf5,
              "lightning-tb5": lambda n, w, o: lightning5(n, w, o, "tb"),
              "lightning-csv5": lambda n, w, o: lightning5(n, w, o, "csv"),
              "accelerate-oom": lambda n, w, o: accelerate_oom(n, o),
              "checkpoint-crash": lambda n, w, o: checkpoint_crash(n, o),
              "deepspeed-oom": lambda n, w, o: deepspeed_oom(n, o),
              "signal-crash": lambda n, w, o: signal_crash(n, o),
              "keras-console7": keras_console7, "step-text7": step_text7,
              "attention-oom": lambda n, w, o: attention_oom(n, o),
              "tagger-crash": lambda n, w, o: tagger_crash(n, o),
              "spiral-crash": lambda n, w, o: spiral_crash(n, o),
              "series-oom": lambda n, w, o: series_oom(n, o),
              "ratings-crash": lambda n, w, o: ratings_crash(n, o)}
    if writer in batch5:
        batch5[writer](name, what, out)
    elif writer == "summarywriter":
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
