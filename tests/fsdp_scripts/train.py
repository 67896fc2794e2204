"""A user's FSDP2 train.py that the fsdp adapter's export tests launch for real (2 CPU processes).

Launched by `accelerate launch --config_file` (ACCELERATE_USE_FSDP set) it lets Accelerate's FSDP plugin shard the
model; by torchrun it calls ``fully_shard`` itself. Either way it trains a few steps with the plan's numbers and
writes one JSON report per process (reports/rankN.json): world, rank, the plan's numbers, the FSDP version that
ran, the local and global rows of a sharded weight, and the losses.
"""

import argparse
import json
import os
import sys

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int)
parser.add_argument("--accumulation-steps", type=int)
parser.add_argument("--lr", type=float)
parser.add_argument("--warmup-steps", type=int)
parser.add_argument("--precision")
parser.add_argument("--optimizer")
parser.add_argument("--momentum", type=float)
parser.add_argument("--weight-decay", type=float)
parser.add_argument("--eps", type=float)
parser.add_argument("--betas", type=lambda text: [float(v) for v in text.split(",")])
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))

if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
    from accelerate import Accelerator
    from accelerate.utils import FullyShardedDataParallelPlugin

    accelerator = Accelerator(gradient_accumulation_steps=args.accumulation_steps)
    world, rank = accelerator.num_processes, accelerator.process_index
    distributed_type = accelerator.distributed_type.value
    # Accelerate 1.x applies its FSDP plugin on GPUs and the like only; on CPU it runs MULTI_CPU data parallel.
    # The plugin the launched environment describes is read either way.
    plugin = getattr(accelerator.state, "fsdp_plugin", None) or FullyShardedDataParallelPlugin()
    fsdp_version, min_num_params = plugin.fsdp_version, plugin.min_num_params
    model = accelerator.prepare_model(model)
    optimizer = accelerator.prepare_optimizer(torch.optim.AdamW(model.parameters(), lr=args.lr))
    launcher = "accelerate"

    def backward(loss):
        accelerator.backward(loss)

    def micro(step):
        return accelerator.accumulate(model)
else:
    import contextlib

    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo")
    world, rank, launcher = dist.get_world_size(), dist.get_rank(), "torch.distributed"
    distributed_type, fsdp_version, min_num_params = "fully_shard", 2, None
    fully_shard(model[0])
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    def backward(loss):
        (loss / args.accumulation_steps).backward()

    def micro(step):
        model.set_requires_gradient_sync(step % args.accumulation_steps == args.accumulation_steps - 1)
        return contextlib.nullcontext()

weight = getattr(model, "module", model)[0].weight  # DDP (Accelerate on CPU) wraps it
losses = []
for step in range(2 * args.accumulation_steps):
    start = (rank * args.batch_size + step * world * args.batch_size) % len(x)
    with micro(step):
        loss = nn.functional.cross_entropy(model(x[start:start + args.batch_size]), y[start:start + args.batch_size])
        backward(loss)
        if launcher == "accelerate" or step % args.accumulation_steps == args.accumulation_steps - 1:
            optimizer.step()
            optimizer.zero_grad()
    losses.append(loss.item())

report = {"launcher": launcher, "world": world, "rank": rank, "per_device": args.batch_size,
          "accumulation": args.accumulation_steps, "lr": args.lr, "precision": args.precision,
          "distributed_type": distributed_type, "fsdp_version": fsdp_version, "min_num_params": min_num_params, "dtensor": type(weight).__name__ == "DTensor",
          "local_rows": weight.to_local().shape[0] if hasattr(weight, "to_local") else weight.shape[0],
          "global_rows": weight.shape[0], "losses": losses}
os.makedirs("reports", exist_ok=True)
with open(os.path.join("reports", f"rank{rank}.json"), "w") as handle:
    json.dump(report, handle)
try:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
finally:
    sys.stdout.flush()
    os._exit(0)  # gloo workers can abort at interpreter exit (ENVIRONMENT.md)
