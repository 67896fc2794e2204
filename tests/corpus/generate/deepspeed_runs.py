"""Generate DeepSpeed logs on CPU (2 processes, gloo, ZeRO-1, client optimizer).

Run (in an environment with deepspeed installed, not a project dependency):
    python tests/corpus/generate/deepspeed_runs.py tests/corpus/logs
fp16 is refused on CPU, so OVERFLOW / loss-scale lines cannot be produced here; the reader's test uses
the message formats from deepspeed/runtime/fp16/loss_scaler.py instead.
"""

import os
import subprocess
import sys


def worker(scenario: str) -> None:
    import deepspeed
    import torch
    from sklearn.datasets import load_digits
    from torch import nn

    torch.set_num_threads(1)
    settings = {"healthy": dict(micro=16, lr=3e-3, steps=240), "jitter": dict(micro=2, lr=0.05, steps=240)}[scenario]
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16
    y = torch.tensor(d.target)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["lr"])
    config = {"train_micro_batch_size_per_gpu": settings["micro"], "gradient_accumulation_steps": 1,
              "steps_per_print": 20, "wall_clock_breakdown": True, "zero_optimization": {"stage": 1},
              "zero_allow_untested_optimizer": True}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    # The "[Rank 0] step=..., skipped=..., lr=[...]" lines are INFO; DeepSpeed's logger and handler default to WARNING.
    deepspeed.utils.logger.setLevel("INFO")
    for handler in deepspeed.utils.logger.handlers:
        handler.setLevel("INFO")
    g = torch.Generator().manual_seed(engine.global_rank)
    for step in range(1, settings["steps"] + 1):
        idx = torch.randint(0, len(y), (settings["micro"],), generator=g)
        loss = nn.functional.cross_entropy(engine(x[idx]), y[idx])
        engine.backward(loss)
        engine.step()
        if engine.global_rank == 0:
            print(f"step: {step}, loss: {loss.item():.4f}", flush=True)


def drive(out: str) -> None:
    for scenario in ("healthy", "jitter"):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", __file__,
               "--worker", scenario]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
                              env=dict(os.environ, OMP_NUM_THREADS="1", DS_ACCELERATOR="cpu"))
        with open(os.path.join(out, f"deepspeed_{scenario}.log"), "w") as log:
            log.write(proc.stdout + proc.stderr)
        print("wrote", scenario, proc.returncode)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        drive(sys.argv[1] if len(sys.argv) > 1 else ".")
