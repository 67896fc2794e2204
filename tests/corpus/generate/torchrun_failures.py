"""Generate torchrun logs of failing 2-process gloo jobs: a SIGKILLed worker, a crash, an OOM on one rank.

Run: python tests/corpus/generate/torchrun_failures.py tests/corpus/logs
The driver launches torchrun on this same file (worker mode) and keeps everything it printed.
SIGKILL is sent by the worker to itself: the same signal and the same torchrun report as the kernel's
OOM killer, which this shared machine cannot safely provoke.
"""

import os
import resource
import signal
import subprocess
import sys


def worker(mode: str) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if mode == "oom" and rank == 1:
        with open("/proc/self/status") as status:
            data = next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmData"))
        resource.setrlimit(resource.RLIMIT_DATA, (data + 256 * 2**20, resource.RLIM_INFINITY))
    for step in range(1, 61):
        batch = 32 if not (mode == "oom" and step == 40) else 400_000
        x, y = torch.randn(batch, 64), torch.randint(0, 10, (batch,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"Epoch [1/1] Step [{step}/60] Loss: {loss.item():.4f}", flush=True)
        if mode == "killed" and rank == 1 and step == 30:
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "crash" and rank == 1 and step == 30:
            raise ValueError("label 11 out of range for 10 classes in batch 30")
    dist.destroy_process_group()


def drive(out: str) -> None:
    for mode, name in (("killed", "torchrun_killed_sigkill.log"), ("crash", "torchrun_crash_not_oom.log"),
                       ("oom", "torchrun_oom_rank1.log")):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               __file__, "--worker", mode]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        with open(os.path.join(out, name), "w") as log:
            log.write(f"$ torchrun --standalone --nproc-per-node=2 train.py   # mode {mode}, exit {proc.returncode}\n")
            log.write(proc.stdout)
            log.write(proc.stderr)
        print("wrote", name, proc.returncode)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        drive(sys.argv[1] if len(sys.argv) > 1 else ".")
