"""Generate PyTorch Lightning logs: tqdm bars (TTY and not), rich bars, CSVLogger metrics.csv.

Run (in an environment with lightning installed, not a project dependency):
    python tests/corpus/generate/lightning_runs.py tests/corpus/logs
Each scenario runs in a child process; the TTY one under `script` so tqdm draws as on a terminal.
"""

import os
import shutil
import subprocess
import sys
import tempfile


def run(scenario: str, workdir: str) -> None:
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
    from lightning.pytorch.loggers import CSVLogger
    from sklearn.datasets import load_digits
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    settings = {
        "healthy": dict(batch=32, lr=0.02, epochs=8, n_train=None, bar="tqdm"),
        "overfit": dict(batch=16, lr=0.003, epochs=120, n_train=48, bar="rich", width=512, opt="adam"),
        "jitter": dict(batch=2, lr=0.3, epochs=1, n_train=None, bar="tqdm"),
    }[scenario]
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(y), generator=g)
    val, train = order[:360], order[360:]
    if settings["n_train"]:
        train = train[:settings["n_train"]]
    width = settings.get("width", 128)

    class Digits(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                     nn.Linear(width, 10))

        def training_step(self, batch, _):
            loss = nn.functional.cross_entropy(self.net(batch[0]), batch[1])
            self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True)
            return loss

        def validation_step(self, batch, _):
            self.log("val_loss", nn.functional.cross_entropy(self.net(batch[0]), batch[1]), prog_bar=True)

        def configure_optimizers(self):
            if settings.get("opt") == "adam":
                return torch.optim.Adam(self.parameters(), lr=settings["lr"])
            return torch.optim.SGD(self.parameters(), lr=settings["lr"], momentum=0.9)

    L.seed_everything(0)
    train_dl = DataLoader(TensorDataset(x[train], y[train]), batch_size=settings["batch"], shuffle=True)
    val_dl = DataLoader(TensorDataset(x[val], y[val]), batch_size=120)
    bar = RichProgressBar() if settings["bar"] == "rich" else TQDMProgressBar(refresh_rate=1)
    trainer = L.Trainer(max_epochs=settings["epochs"], accelerator="cpu", devices=1, logger=CSVLogger(workdir),
                        callbacks=[bar], log_every_n_steps=1, enable_model_summary=False,
                        limit_val_batches=1.0, val_check_interval=None)
    trainer.fit(Digits(), train_dl, val_dl)


def run_in_terminal(cmd: list[str], capture: str) -> None:
    """Run in a real tmux pseudo-terminal, keeping the raw bytes it drew (\r frames, ANSI codes)."""
    import shlex

    session = f"advisor-corpus-{os.getpid()}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "40"], check=True)
    try:
        subprocess.run(["tmux", "pipe-pane", "-t", session, "-o", f"cat >> {shlex.quote(capture)}"], check=True)
        line = f"OMP_NUM_THREADS=1 {shlex.join(cmd)}; tmux wait-for -S {session}-done"
        subprocess.run(["tmux", "send-keys", "-t", session, line, "Enter"], check=True)
        subprocess.run(["tmux", "wait-for", f"{session}-done"], check=True, timeout=900)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def drive(out: str) -> None:
    for scenario, tty in (("healthy", False), ("overfit", True), ("jitter", True)):
        work = tempfile.mkdtemp()
        cmd = [sys.executable, __file__, "--run", scenario, work]
        name = f"lightning_{scenario}_{'tty' if tty else 'notty'}.log"
        path = os.path.join(out, name)
        if tty:  # tqdm and rich draw with \r and ANSI codes only on a terminal
            if os.path.exists(path):
                os.remove(path)
            run_in_terminal(cmd, path)
        else:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
                                  env=dict(os.environ, OMP_NUM_THREADS="1"))
            with open(path, "w") as log:
                log.write(proc.stdout + proc.stderr)
        for root, _, files in os.walk(work):
            if "metrics.csv" in files:
                shutil.copy(os.path.join(root, "metrics.csv"), os.path.join(out, f"lightning_{scenario}_metrics.csv"))
        shutil.rmtree(work, ignore_errors=True)
        print("wrote", name)


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--run":
        run(sys.argv[2], sys.argv[3])
    else:
        drive(sys.argv[1] if len(sys.argv) > 1 else ".")
