"""A stand-in for the user's train.py that the export tests launch for real.

It reads the plan the way a training script would (its arguments, the DeepSpeed config file, the Accelerate
environment that `accelerate launch` sets up), asks the launched process group for its world size and rank,
and writes one JSON report per process (reports/rankN.json). Nothing is trained: the tests check that the
export's numbers reach a real launched process.
"""

import argparse
import json
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int)
parser.add_argument("--accumulation-steps", type=int)
parser.add_argument("--lr", type=float)
parser.add_argument("--warmup-steps", type=int)
parser.add_argument("--precision")
parser.add_argument("--deepspeed", action="store_true")
parser.add_argument("--deepspeed_config")
parser.add_argument("--local_rank", type=int)  # the deepspeed launcher passes it
# The optimizer and its hyper-parameters, as the launch line passes them (the DeepSpeed config holds its own).
parser.add_argument("--optimizer")
parser.add_argument("--momentum", type=float)
parser.add_argument("--weight-decay", type=float)
parser.add_argument("--eps", type=float)
parser.add_argument("--betas", type=lambda text: [float(v) for v in text.split(",")])
args = parser.parse_args()

if args.deepspeed_config:
    import deepspeed
    from deepspeed.runtime.config import DeepSpeedConfig

    deepspeed.init_distributed(dist_backend="gloo")
    # DeepSpeed's own reading of the file, against the real world size (it checks the batch identity).
    config = DeepSpeedConfig(args.deepspeed_config)
    world, rank = deepspeed.comm.get_world_size(), deepspeed.comm.get_rank()
    per_device, accumulation = config.train_micro_batch_size_per_gpu, config.gradient_accumulation_steps
    lr = config.optimizer_params["lr"]
    precision = "bf16" if config.bfloat16_config.enabled else "fp16" if config.float16_config.enabled else "fp32"
    launcher = "deepspeed"
    optimizer = {"name": config.optimizer_name, **{k: v for k, v in config.optimizer_params.items() if k != "lr"}}
elif "ACCELERATE_MIXED_PRECISION" in os.environ or "ACCELERATE_USE_CPU" in os.environ:
    from accelerate import Accelerator

    # `accelerate launch` passes the config's precision in the environment; under torchrun (Accelerate on
    # CPU) only the script's --precision argument carries it.
    asked = None if "ACCELERATE_MIXED_PRECISION" in os.environ else {"fp32": "no"}.get(args.precision, args.precision)
    accelerator = Accelerator(gradient_accumulation_steps=args.accumulation_steps, mixed_precision=asked)
    world, rank = accelerator.num_processes, accelerator.process_index
    per_device, accumulation, lr = args.batch_size, accelerator.gradient_accumulation_steps, args.lr
    precision = {"no": "fp32"}.get(str(accelerator.mixed_precision), str(accelerator.mixed_precision))
    launcher = "accelerate"
else:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    per_device, accumulation, lr, precision = args.batch_size, args.accumulation_steps, args.lr, args.precision
    launcher = "torch.distributed"

if not args.deepspeed_config:
    optimizer = {"name": args.optimizer, **{key: value for key in ("momentum", "weight_decay", "eps", "betas")
                                            if (value := getattr(args, key)) is not None}}
report = {"optimizer": optimizer, "launcher": launcher, "world": world, "rank": rank, "per_device": per_device,
          "accumulation": accumulation, "global": per_device * world * accumulation, "lr": lr,
          "precision": precision, "asked_precision": args.precision}
# One file per process: the processes share stdout, and their lines can interleave.
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
