"""Generate the second corpus batch from real CPU training runs: formats people paste, thin kinds.

Run: python tests/corpus/generate/v2_runs.py tests/corpus/logs
Every scenario really trains a small model on the digits set; only the *print format* imitates a framework
(timestamped nanoGPT, litgpt, DLLogger, Megatron, fairseq, timm, Keras, Time-Series-Library, HF Trainer
dict lines), written exactly as that framework prints it. The label of each log is set here, by design.
The collective timeout is a real 2-process gloo job under torchrun whose rank 1 stops answering.
"""

import csv
import datetime
import math
import os
import subprocess
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plain_loops  # noqa: E402 - the shared digits loader

torch.set_num_threads(1)
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
# --seed N: the same scenarios with other seeds (model init, data order, the validation split), names ending _sN
SEED = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
T0 = datetime.datetime(2026, 11, 30, 5, 0, 0)


def digits(n_train=None, sort_by_class=False):
    """The digits split for this run's seed (plain_loops' loader: each held-back seed gets its own split)."""
    return plain_loops.digits(n_train, sort_by_class, split_seed=SEED)


def mlp(width=128, depth=2, batchnorm=False):
    layers, d = [], 64
    for _ in range(depth):
        layers += [nn.Linear(d, width)] + ([nn.BatchNorm1d(width)] if batchnorm else []) + [nn.ReLU()]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, 10))


def evaluate(model, xv, yv):
    model.eval()
    with torch.no_grad():
        out = model(xv)
        loss, acc = float(nn.functional.cross_entropy(out, yv)), float((out.argmax(1) == yv).float().mean())
    model.train()
    return loss, acc


def stamp(seconds: float) -> str:
    return (T0 + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")


class Run:
    """One real training run; ``emit(kind, **values)`` is called by the loop, the format writes lines."""

    def __init__(self, *, batch, lr, epochs, opt="sgd", n_train=None, sort_by_class=False, shuffle=True,
                 width=128, depth=2, batchnorm=False, eval_every_epoch=False, eval_every=None, seed=0,
                 clip=None, precision="fp32", init_scale=2.0 ** 16, growth_interval=2000, blowup_at=None,
                 full_batch=False, zero_grad_bug=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        self.seed = seed + SEED

    def train(self, emit):
        torch.manual_seed(self.seed)
        xt, yt, xv, yv = digits(self.n_train, self.sort_by_class)
        model = mlp(self.width, self.depth, self.batchnorm)
        if self.opt == "sgd":
            optim = torch.optim.SGD(model.parameters(), lr=self.lr, momentum=0.9)
        elif self.opt == "sgd-plain":
            optim = torch.optim.SGD(model.parameters(), lr=self.lr)
        else:
            optim = torch.optim.Adam(model.parameters(), lr=self.lr)
        scaler = (torch.amp.GradScaler("cpu", init_scale=self.init_scale, growth_interval=self.growth_interval)
                  if self.precision == "fp16" else None)
        batch = len(yt) if self.full_batch else self.batch
        steps_per_epoch = len(yt) // batch
        step = 0
        for epoch in range(1, self.epochs + 1):
            order = torch.randperm(len(yt)) if self.shuffle else torch.arange(len(yt))
            epoch_losses = []
            for i in range(steps_per_epoch):
                idx = order[i * batch:(i + 1) * batch]
                x = xt[idx]
                if self.blowup_at and step >= self.blowup_at:
                    x = x * 1e4  # a corrupt shard: activations beyond fp16's range from here on
                optim.zero_grad()
                if scaler:
                    with torch.autocast("cpu", dtype=torch.float16):
                        loss = nn.functional.cross_entropy(model(x).float(), yt[idx])
                    scale = scaler.get_scale()
                    scaler.scale(loss).backward()
                    scaler.unscale_(optim)
                    norm = float(nn.utils.clip_grad_norm_(model.parameters(), self.clip or 1e9))
                    scaler.step(optim)
                    scaler.update()
                    skipped = scaler.get_scale() < scale
                else:
                    loss = nn.functional.cross_entropy(model(x), yt[idx])
                    loss.backward()
                    if self.zero_grad_bug:  # the classic bug: gradients cleared between backward and step
                        optim.zero_grad()
                    norm = float(nn.utils.clip_grad_norm_(model.parameters(), self.clip or 1e9))
                    optim.step()
                    scale, skipped = None, False
                step += 1
                epoch_losses.append(loss.item())
                emit("step", step=step, epoch=epoch, i=i + 1, steps_per_epoch=steps_per_epoch, loss=loss.item(),
                     lr=self.lr, grad_norm=norm, scale=scaler.get_scale() if scaler else None, skipped=skipped,
                     seconds=step * 0.25)
                if self.eval_every and step % self.eval_every == 0:
                    vl, acc = evaluate(model, xv, yv)
                    emit("eval", step=step, epoch=epoch, val_loss=vl, val_acc=acc, seconds=step * 0.25)
            if self.eval_every_epoch:
                vl, acc = evaluate(model, xv, yv)
                emit("epoch", step=step, epoch=epoch, epochs=self.epochs, steps_per_epoch=steps_per_epoch,
                     train_loss=sum(epoch_losses) / len(epoch_losses), val_loss=vl, val_acc=acc,
                     seconds=step * 0.25)


def seeded(name):
    stem, ext = os.path.splitext(name)
    return f"{stem}_s{SEED}{ext}" if SEED else name


def write(name, run, fmt, header=""):
    path = os.path.join(OUT, seeded(name))
    with open(path, "w") as log:
        if header:
            log.write(header)
        run.train(lambda kind, **v: log.write(fmt(kind, v)))
    print("wrote", path, flush=True)


# ------------------------------------------------------------------ print formats, as each framework prints

def nanogpt_timestamped(kind, v):
    if kind == "step":
        return f"{stamp(v['seconds'])} iter {v['step']}: loss {v['loss']:.4f}, time 31.20ms, mfu 1.21%\n"
    if kind == "eval":
        return f"{stamp(v['seconds'])} step {v['step']}: train loss {v['val_loss'] - 0.02:.4f}, val loss {v['val_loss']:.4f}\n"
    return ""


def litgpt(kind, v):  # litgpt <= 0.3 pretrain/finetune loops
    if kind == "step":
        return (f"iter {v['step'] * 2} step {v['step']}: loss {v['loss']:.4f}, iter time: "
                f"{212.4 + (v['step'] % 7):.2f}ms (optimizer.step)\n")
    if kind == "eval":
        return f"step {v['step']}: val loss {v['val_loss']:.4f}, val time: 1203.11ms\n"
    return ""


def dllogger(kind, v):  # NVIDIA DeepLearningExamples, dllogger StdOutBackend
    ts = (T0 + datetime.timedelta(seconds=v["seconds"])).strftime("%Y-%m-%d %H:%M:%S.%f")
    if kind == "step":
        return (f"DLL {ts} - ({v['epoch'] - 1}, {v['step']}) step_loss : {v['loss']:.4f}  average_loss : "
                f"{v['loss']:.4f}  learning_rate : {v['lr']}  throughput_train : 1843.2\n")
    if kind == "eval":
        return f"DLL {ts} - ({v['epoch'] - 1},) val_loss : {v['val_loss']:.4f}  val_accuracy : {v['val_acc']:.4f}\n"
    return ""


def dllogger_header(batch, lr):
    return (f"DLL {stamp(0)}.000000 - PARAMETER batch_size : {batch}  learning_rate : {lr}  "
            "amp : False  loss_scale : 0\n")


def megatron(kind, v):  # Megatron-LM training_log / evaluate_and_print_results
    if kind == "step":
        return (f" iteration {v['step']:8d}/{600:8d} | consumed samples: {v['step'] * 32:12d} | elapsed time per "
                f"iteration (ms): 312.4 | learning rate: {v['lr']:.3E} | global batch size: {32:5d} | lm loss: "
                f"{v['loss']:.6E} | loss scale: {v['scale']:.1f} | grad norm: {v['grad_norm']:.3f} | number of "
                f"skipped iterations: {int(v['skipped']):3d} | number of nan iterations: "
                f"{int(not math.isfinite(v['loss'])):3d} |\n")
    if kind == "eval":
        return ("-" * 100 + f"\n validation loss at iteration {v['step']} | lm loss value: {v['val_loss']:.6E} | "
                f"lm loss PPL: {math.exp(min(v['val_loss'], 50)):.6E} | \n" + "-" * 100 + "\n")
    return ""


def fairseq(kind, v):  # fairseq_cli/train.py progress_bar=simple
    if kind == "step":
        return (f"{stamp(v['seconds'])} | INFO | train_inner | epoch {v['epoch']:03d}:  {v['i']:5d} / "
                f"{v['steps_per_epoch']} loss={v['loss']:.3f}, ppl={min(2 ** v['loss'], 1e9):.2f}, wps=12345, ups=3.2, "
                f"wpb=4096, bsz=32, num_updates={v['step']}, lr={v['lr']}, gnorm={v['grad_norm']:.3f}, "
                f"loss_scale={v['scale']:g}, train_wall=30, gb_free=10.1, wall={int(v['seconds'])}\n")
    if kind == "epoch":
        return (f"{stamp(v['seconds'])} | INFO | valid | epoch {v['epoch']:03d} | valid on 'valid' subset | loss "
                f"{v['val_loss']:.3f} | ppl {2 ** v['val_loss']:.2f} | wps 45678 | wpb 4096 | bsz 32 | num_updates "
                f"{v['step']}\n")
    return ""


def timm(kind, v):  # timm train.py / validate
    if kind == "step":
        pct = 100.0 * v["i"] / v["steps_per_epoch"]
        return (f"Train: {v['epoch'] - 1} [{v['i']:4d}/{v['steps_per_epoch']} ({pct:3.0f}%)]  Loss: {v['loss']:#.3g} "
                f"({v['loss']:#.3g})  Time: 0.245s, 1045.23/s  (0.250s, 1024.00/s)  LR: {v['lr']:.3e}  "
                f"Data: 0.012 (0.015)\n")
    if kind == "epoch":
        return (f"Test: [  11/11]  Time: 0.100 (0.120)  Loss:  {v['val_loss']:.4f} ({v['val_loss']:.4f})  "
                f"Acc@1: {100 * v['val_acc']:.4f} ({100 * v['val_acc']:.4f})  Acc@5: 99.0000 (99.0000)\n")
    return ""


def keras(kind, v):  # tf.keras model.fit(verbose=2): one line per epoch
    if kind == "epoch":
        return (f"Epoch {v['epoch']}/{v['epochs']}\n{v['steps_per_epoch']}/{v['steps_per_epoch']} - 1s - 5ms/step - "
                f"loss: {v['train_loss']:.4f} - accuracy: {0.9:.4f} - val_loss: {v['val_loss']:.4f} - val_accuracy: "
                f"{v['val_acc']:.4f}\n")
    return ""


def epoch_summary(kind, v):  # the usual hand-written per-epoch print
    if kind == "epoch":
        return (f"Epoch {v['epoch']}/{v['epochs']} - Training Loss: {v['train_loss']:.4f}  Validation Loss: "
                f"{v['val_loss']:.4f}  Val Acc: {v['val_acc']:.4f}\n")
    return ""


class TSL:
    """Time-Series-Library (thuml) exp_long_term_forecasting: per-epoch line plus EarlyStopping messages."""

    def __init__(self):
        self.best = math.inf

    def __call__(self, kind, v):
        if kind == "step" and v["i"] % 4 == 0:
            return f"\titers: {v['i']}, epoch: {v['epoch']} | loss: {v['loss']:.7f}\n"
        if kind == "epoch":
            out = (f"Epoch: {v['epoch']}, Steps: {v['steps_per_epoch']} | Train Loss: {v['train_loss']:.7f} Vali "
                   f"Loss: {v['val_loss']:.7f} Test Loss: {v['val_loss'] * 1.02:.7f}\n")
            if v["val_loss"] < self.best:
                out += f"Validation loss decreased ({self.best:.6f} --> {v['val_loss']:.6f}).  Saving model ...\n"
                self.best = v["val_loss"]
            else:
                out += "EarlyStopping counter: 1 out of 100\n"
            return out
        return ""


def hf_dict(kind, v):  # transformers Trainer with logging_steps=1: epoch rounded to 2 decimals
    epoch = round(v["epoch"] - 1 + v.get("i", v.get("steps_per_epoch", 1)) / v.get("steps_per_epoch", 1), 2)
    if kind == "step":
        return (f"{{'loss': {round(v['loss'], 4)}, 'grad_norm': {v['grad_norm']}, 'learning_rate': {v['lr']}, "
                f"'epoch': {epoch}}}\n")
    if kind == "epoch":
        return (f"{{'eval_loss': {v['val_loss']}, 'eval_runtime': 0.31, 'eval_samples_per_second': 1161.3, "
                f"'eval_steps_per_second': 36.3, 'epoch': {float(v['epoch'])}}}\n")
    return ""


def stuck_kv(kind, v):
    if kind == "step":
        return f"{stamp(v['seconds'])} | INFO | step {v['step']} | loss {v['loss']:.6f} | lr {v['lr']}\n"
    return ""


def csv_rows(name, run):
    """A Lightning CSVLogger-style metrics.csv: step rows carry train_loss, epoch-end rows val_loss."""
    path = os.path.join(OUT, seeded(name))
    rows = []

    def emit(kind, **v):
        if kind == "step":
            rows.append({"epoch": v["epoch"] - 1, "step": v["step"] - 1, "train_loss": f"{v['loss']:.6f}",
                         "val_loss": "", "val_acc": ""})
        elif kind == "epoch":
            rows.append({"epoch": v["epoch"] - 1, "step": v["step"] - 1, "train_loss": "",
                         "val_loss": f"{v['val_loss']:.6f}", "val_acc": f"{v['val_acc']:.4f}"})

    run.train(emit)
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["epoch", "step", "train_loss", "val_loss", "val_acc"])
        writer.writeheader()
        writer.writerows(rows)
    print("wrote", path, flush=True)


# ------------------------------------------------------------------ a real collective timeout (gloo)

def timeout_worker():
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=8))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(mlp())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xt, yt, _, _ = digits()
    for step in range(1, 41):
        if rank == 1 and step == 25:
            time.sleep(60)  # a rank that stops answering: a hung data loader, a stuck filesystem
        idx = torch.randint(0, len(yt), (32,), generator=torch.Generator().manual_seed(step * 2 + rank))
        loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"{stamp(step)} INFO step={step} loss={loss.item():.4f} lr=0.05", flush=True)
    dist.destroy_process_group()


def timeout_run(name):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", __file__,
           "--timeout-worker"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          timeout=240)
    with open(os.path.join(OUT, seeded(name)), "w") as log:
        log.write(f"$ torchrun --standalone --nproc-per-node=2 train.py   # exit {proc.returncode}\n")
        log.write(proc.stdout)
        log.write(proc.stderr)
    print("wrote", name, proc.returncode, flush=True)


if __name__ == "__main__":
    if "--timeout-worker" in sys.argv:
        timeout_worker()
        sys.exit(0)
    os.makedirs(OUT, exist_ok=True)
    only = {a for a in sys.argv[2:] if not a.startswith("--") and not a.isdigit()}

    def want(name):
        return not only or name in only

    # periodic: shuffling off on class-sorted data
    if want("v2_periodic_sorted_ts.log"):
        write("v2_periodic_sorted_ts.log", Run(batch=32, lr=0.02, epochs=12, sort_by_class=True, shuffle=False),
              nanogpt_timestamped)
    if want("v2_periodic_sorted_timm.log"):
        write("v2_periodic_sorted_timm.log", Run(batch=16, lr=0.001, epochs=6, opt="adam", sort_by_class=True,
                                                 shuffle=False, eval_every_epoch=True), timm)
    # slow convergence: LR too low; batch raised 16x without scaling the LR
    if want("v2_slow_lowlr_litgpt.log"):
        write("v2_slow_lowlr_litgpt.log", Run(batch=32, lr=0.0005, epochs=8, opt="sgd-plain", eval_every=100),
              litgpt)
    if want("v2_slow_bigbatch_dllogger.log"):
        write("v2_slow_bigbatch_dllogger.log", Run(batch=512, lr=0.01, epochs=120, opt="sgd-plain",
                                                   eval_every=30), dllogger, dllogger_header(512, 0.01))
    # oscillation: per-device batch 2 with BatchNorm
    if want("v2_jitter_bn_batch2_hf.log"):
        write("v2_jitter_bn_batch2_hf.log", Run(batch=2, lr=0.05, epochs=1, batchnorm=True), hf_dict)
    # fp16: an overflow cascade (a corrupt shard from step 150) and a healthy run whose scale breathes
    if want("v2_fp16_cascade_megatron.log"):
        write("v2_fp16_cascade_megatron.log", Run(batch=32, lr=0.02, epochs=6, precision="fp16", init_scale=1024.0,
                                                  growth_interval=50, blowup_at=150, eval_every=50), megatron)
    if want("v2_fp16_healthy_fairseq.log"):
        write("v2_fp16_healthy_fairseq.log", Run(batch=32, lr=0.02, epochs=5, precision="fp16", init_scale=2.0 ** 20,
                                                 growth_interval=25, eval_every_epoch=True), fairseq)
    # overfitting: small data, many epochs; validation printed beside training
    if want("v2_overfit_epoch_summary.log"):
        write("v2_overfit_epoch_summary.log", Run(batch=16, lr=0.003, epochs=60, opt="adam", n_train=80, width=512,
                                                  eval_every_epoch=True), epoch_summary)
    if want("v2_overfit_tsl.log"):
        write("v2_overfit_tsl.log", Run(batch=16, lr=0.003, epochs=40, opt="adam", n_train=96, width=512,
                                        eval_every_epoch=True), TSL())
    if want("v2_overfit_small_metrics.csv"):
        csv_rows("v2_overfit_small_metrics.csv", Run(batch=16, lr=0.003, epochs=40, opt="adam", n_train=64,
                                                     width=512, eval_every_epoch=True))
    # healthy, in formats the first corpus lacked
    if want("v2_healthy_keras.log"):
        write("v2_healthy_keras.log", Run(batch=32, lr=0.02, epochs=12, eval_every_epoch=True), keras)
    if want("v2_healthy_timm.log"):
        write("v2_healthy_timm.log", Run(batch=32, lr=0.001, epochs=5, opt="adam", eval_every_epoch=True), timm)
    if want("v2_healthy_tsl.log"):
        write("v2_healthy_tsl.log", Run(batch=32, lr=0.001, epochs=30, opt="adam", eval_every_epoch=True), TSL())
    # divergence: LR far too high under HF-style logging (grad_norm goes non-finite); a run that does not learn
    # (gradients zeroed between backward() and step(): full-batch loss stuck at one value)
    if want("v2_diverged_hf_highlr.log"):
        write("v2_diverged_hf_highlr.log", Run(batch=32, lr=30.0, epochs=2, opt="sgd", width=512), hf_dict)
    if want("v2_stuck_zero_grad_bug.log"):
        write("v2_stuck_zero_grad_bug.log", Run(batch=0, lr=0.1, epochs=150, opt="sgd", full_batch=True,
                                                      zero_grad_bug=True),
              stuck_kv)
    if want("v2_timeout_gloo_torchrun.log"):
        timeout_run("v2_timeout_gloo_torchrun.log")
