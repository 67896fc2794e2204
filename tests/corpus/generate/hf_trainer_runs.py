"""Generate HF Transformers Trainer logs (printed dict lines) and trainer_state.json.

Run (in an environment with transformers + accelerate, not project dependencies):
    python tests/corpus/generate/hf_trainer_runs.py tests/corpus/logs
A tiny BERT built from a config (no download) classifies synthetic token sequences.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile


def run(scenario: str, workdir: str) -> None:
    import torch
    from torch.utils.data import Dataset
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.set_num_threads(1)
    settings = {
        "healthy": dict(n_train=1024, lr=5e-4, epochs=3, batch=16),
        "diverged": dict(n_train=1024, lr=3.0, epochs=2, batch=16),
        "overfit": dict(n_train=64, lr=5e-4, epochs=40, batch=8, noise=0.45),
    }[scenario]
    vocab, seq = 200, 32
    g = torch.Generator().manual_seed(0)

    def make(n, noise=0.0):
        y = torch.randint(0, 2, (n,), generator=g)
        x = torch.randint(4, vocab, (n, seq), generator=g)
        marks = torch.rand(n, seq, generator=g) < 0.2
        x[marks] = (y.unsqueeze(1).expand(-1, seq)[marks] + 2)
        if noise:  # label noise: memorisable on a tiny train set, harmful on validation
            flip = torch.rand(n, generator=g) < noise
            y = torch.where(flip, 1 - y, y)
        return x, y

    class Tokens(Dataset):
        def __init__(self, n, noise=0.0):
            self.x, self.y = make(n, noise)

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            return {"input_ids": self.x[i], "attention_mask": torch.ones(seq, dtype=torch.long), "labels": self.y[i]}

    config = BertConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64, num_labels=2)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=workdir, learning_rate=settings["lr"], num_train_epochs=settings["epochs"],
        per_device_train_batch_size=settings["batch"], per_device_eval_batch_size=64, logging_steps=2 if scenario == "diverged" else 4,
        eval_strategy="epoch" if scenario == "overfit" else "steps", eval_steps=40, save_strategy="epoch",
        save_total_limit=1, report_to=[], disable_tqdm=True, use_cpu=True, seed=0,
        warmup_steps=20 if scenario == "diverged" else 0,  # warm up into a far too high constant LR
        max_grad_norm=1e9 if scenario == "diverged" else 1.0,
        lr_scheduler_type="constant_with_warmup" if scenario == "diverged" else "linear")
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(settings["n_train"], settings.get("noise", 0.0)),
                      eval_dataset=Tokens(256))
    trainer.train()


def drive(out: str) -> None:
    for scenario in ("healthy", "diverged", "overfit"):
        work = tempfile.mkdtemp()
        proc = subprocess.run([sys.executable, __file__, "--run", scenario, work], capture_output=True, text=True,
                              timeout=1800, stdin=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS="1"))
        with open(os.path.join(out, f"hf_{scenario}.log"), "w") as log:
            log.write(proc.stdout + proc.stderr)
        states = sorted(glob.glob(os.path.join(work, "checkpoint-*", "trainer_state.json")),
                        key=lambda p: int(p.split("checkpoint-")[1].split(os.sep)[0]))
        if states:
            shutil.copy(states[-1], os.path.join(out, f"hf_{scenario}_trainer_state.json"))
        shutil.rmtree(work, ignore_errors=True)
        print("wrote", scenario, proc.returncode, len(states))


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--run":
        run(sys.argv[2], sys.argv[3])
    else:
        drive(sys.argv[1] if len(sys.argv) > 1 else ".")
