"""A recipe as the configuration another launcher reads: DeepSpeed JSON, Accelerate YAML, a torchrun line.

The DeepSpeed config built here is also the one the DeepSpeed adapter's workers run with, so a
probe measures what the export hands over. Reading a recipe imports nothing it names; an
export that the target cannot express raises ExportError with what to do instead.
"""

from __future__ import annotations

import json

from .adapters import LaunchSpec, env_prefix, shell_line, torchrun_launch_line, training_args
from .errors import ExportError

TARGETS = ("deepspeed", "accelerate", "torchrun")
DEEPSPEED_BUCKET_MAX = 500_000_000  # DeepSpeed's default reduce/allgather bucket (elements)
DEEPSPEED_BUCKET_MIN = 1 << 20
RENDEZVOUS_PORT = 29500
# DeepSpeed optimizers ZeRO was tested with; any other needs zero_allow_untested_optimizer.
ZERO_TESTED = {"adam", "adamw", "adagrad"}
DEEPSPEED_OPTIMIZER_TYPES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "adagrad": "Adagrad",
                             "rmsprop": "RMSprop", "lamb": "Lamb"}


def deepspeed_bucket(parameters: int | None) -> int:
    """ZeRO's gradient buckets sized to the model (DeepSpeed's 5e8-element default would dwarf a small one)."""
    if not parameters:
        return DEEPSPEED_BUCKET_MAX
    return int(min(DEEPSPEED_BUCKET_MAX, max(DEEPSPEED_BUCKET_MIN, parameters)))


def deepspeed_optimizer_block(optimizer: str, lr: float, device_type: str, momentum: float = 0.9,
                              weight_decay: float = 0.0) -> dict | None:
    """The config's "optimizer" entry, or None where DeepSpeed has no such optimizer (LARS)."""
    from .optimizers import LAMB_DEFAULTS

    optimizer = optimizer.lower()
    kind = DEEPSPEED_OPTIMIZER_TYPES.get(optimizer)
    if kind is None:
        return None
    params: dict = {"lr": lr, "weight_decay": weight_decay}
    if optimizer == "sgd":
        params["momentum"] = momentum
    elif optimizer in ("adam", "adamw"):
        params["adam_w_mode"] = optimizer == "adamw"  # DeepSpeed's "Adam" is AdamW unless told otherwise
        if device_type == "cpu":
            params["torch_adam"] = True  # DeepSpeed's CPU Adam op JIT-compiles for ~70 s on first use
    elif optimizer == "lamb":
        params.update(bias_correction=LAMB_DEFAULTS["bias_correction"], betas=list(LAMB_DEFAULTS["betas"]),
                      eps=LAMB_DEFAULTS["eps"], max_coeff=LAMB_DEFAULTS["max_coeff"],
                      min_coeff=LAMB_DEFAULTS["min_coeff"])
    return {"type": kind, "params": params}


def deepspeed_config(per_device: int, accumulation: int, world_size: int, optimizer: str, lr: float,
                     warmup_steps: int, precision: str, zero_stage: int, device_type: str = "cuda",
                     momentum: float = 0.9, weight_decay: float = 0.0, parameters: int | None = None,
                     client_optimizer: bool = False) -> dict:
    """The DeepSpeed config for a plan. ``client_optimizer``: the training passes its own optimizer object
    to ``deepspeed.initialize`` (LAMB on CPU, LARS), so the config names none."""
    bucket = deepspeed_bucket(parameters)
    config: dict = {
        "train_batch_size": per_device * accumulation * world_size,
        "train_micro_batch_size_per_gpu": per_device,
        "gradient_accumulation_steps": accumulation,
        "zero_optimization": {"stage": zero_stage, "reduce_bucket_size": bucket, "allgather_bucket_size": bucket},
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": precision == "fp16"},
        "steps_per_print": 1_000_000,
        "wall_clock_breakdown": False,
    }
    if not client_optimizer:
        block = deepspeed_optimizer_block(optimizer, lr, device_type, momentum, weight_decay)
        if block is None:
            raise ExportError(f"DeepSpeed has no {optimizer.upper()} optimizer, so a DeepSpeed config cannot name it. "
                              f"Pass a {optimizer.upper()} optimizer object to deepspeed.initialize(optimizer=...) "
                              "and keep the rest of the config (export with the optimizer left out is not offered: "
                              "the LR would be lost), or plan with --optimizer lamb.")
        config["optimizer"] = block
    if zero_stage > 0 and (client_optimizer or optimizer.lower() not in ZERO_TESTED):
        config["zero_allow_untested_optimizer"] = True
    if warmup_steps > 0:
        config["scheduler"] = {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": lr,
                                                               "warmup_num_steps": warmup_steps,
                                                               "warmup_type": "linear"}}
    return config


# ---------------------------------------------------------------------------------------------------------------
# From a recipe

def _cluster(data: dict) -> tuple[int, int, int]:
    """(world size, nodes, processes per node) of the recipe's target cluster."""
    world = data["batch"]["world_size"]
    nodes = int(data.get("inputs", {}).get("nodes", 1) or 1)
    if nodes < 1 or world % nodes:
        raise ExportError(f"The recipe's world size {world} does not split evenly over {nodes} node(s), and every "
                          "launcher here starts the same number of processes on each node. Plan again with "
                          "--nodes and --gpus-per-node (world size = nodes x GPUs per node).")
    return world, nodes, world // nodes


def _recipe_numbers(data: dict) -> dict:
    b, lr = data["batch"], data["lr"]
    return {"per_device": b["per_device"], "accumulation": b["accumulation_steps"], "world": b["world_size"],
            "global": b["global"], "lr": float(lr["value"]), "warmup": int(data["warmup"]["steps"]),
            "precision": data.get("precision", {}).get("mode", "fp32"),
            "optimizer": (lr.get("optimizer") or data.get("workload", {}).get("optimizer") or "sgd").lower(),
            "device": data.get("inputs", {}).get("device", "cuda"),
            "adapter": data.get("adapter", {}).get("name") or data.get("inputs", {}).get("adapter", "ddp")}


def export_deepspeed(data: dict) -> tuple[str, list[str]]:
    n = _recipe_numbers(data)
    _cluster(data)
    adapter = data.get("adapter", {})
    stage = int(adapter.get("zero_stage", 0 if n["adapter"] != "deepspeed" else 2))
    notes = []
    if n["precision"] == "fp16" and n["device"] == "cpu":
        raise ExportError("The recipe plans fp16 on CPU, and DeepSpeed refuses fp16 on CPU. Plan again with "
                          "--precision bf16 or fp32.")
    config = deepspeed_config(n["per_device"], n["accumulation"], n["world"], n["optimizer"], n["lr"], n["warmup"],
                              n["precision"], stage, n["device"], parameters=data.get("workload", {}).get("parameters"))
    if n["optimizer"] == "lamb" and n["device"] == "cpu":
        notes.append("DeepSpeed's Lamb (FusedLamb) runs on CUDA only. On CPU, drop the optimizer block and pass "
                     "advisor.optimizers.Lamb(model.parameters(), lr=...) to deepspeed.initialize(optimizer=...): "
                     "it applies the same rule (the advisor's CPU probes ran it).")
    return json.dumps(config, indent=2) + "\n", notes


ACCELERATE_CONFIG_NAME = "accelerate.yaml"


def recipe_launch_spec(data: dict, script: str = "train.py") -> LaunchSpec:
    """The recipe's plan as a LaunchSpec; Accelerate on CPU gets its CPU switch (else every process is rank 0)."""
    n = _recipe_numbers(data)
    world, nodes, per_node = _cluster(data)
    env = dict(data.get("launch", {}).get("env", {}))
    if n["adapter"] == "accelerate" and n["device"] == "cpu":
        env.setdefault("ACCELERATE_USE_CPU", "1")
    return LaunchSpec(per_node, nodes, n["per_device"], n["accumulation"], n["lr"], n["warmup"], n["precision"],
                      env, script)


def accelerate_launch_line(data: dict, config_path: str = ACCELERATE_CONFIG_NAME,
                           script: str = "train.py") -> list[str]:
    """How the Accelerate export is run: `accelerate launch --config_file` with the plan's numbers as script
    arguments (an Accelerate config has no key for the batch size or the LR). On a multi-process CPU plan it is
    the torchrun line, because `accelerate launch` starts one process for any CPU config."""
    n = _recipe_numbers(data)
    spec = recipe_launch_spec(data, script)
    if n["device"] == "cpu" and n["world"] > 1:
        return torchrun_launch_line(spec)
    return [*env_prefix(spec.env), "accelerate", "launch", f"--config_file={config_path}", script,
            *training_args(spec)]


def export_accelerate(data: dict) -> tuple[str, list[str]]:
    n = _recipe_numbers(data)
    world, nodes, per_node = _cluster(data)
    notes = []
    cpu = n["device"] == "cpu"
    if n["precision"] == "fp16" and cpu:
        raise ExportError("The recipe plans fp16 on CPU, which Accelerate silently ignores there (it would train "
                          "in fp32). Plan again with --precision bf16 or fp32.")
    if n["adapter"] == "deepspeed":
        stage = int(data.get("adapter", {}).get("zero_stage", 2))
        distributed = "DEEPSPEED"
    else:
        distributed = "NO" if world == 1 else ("MULTI_CPU" if cpu else "MULTI_GPU")
    # Quoted: a bare `no` is the boolean false in YAML, and `accelerate launch` then fails on it.
    mixed_precision = "no" if n["precision"] == "fp32" else n["precision"]
    lines = [
        "# Accelerate config written by `advisor export` from a batch-advisor recipe.",
        f"# Per device {n['per_device']} x {world} processes x {n['accumulation']} accumulation = global "
        f"{n['global']}; lr {n['lr']:.6g}, warmup {n['warmup']} steps.",
        "# The config cannot hold the batch size or the LR: the launch line passes them to the script, which",
        "# gives gradient_accumulation_steps to Accelerator(...) and the batch size to its DataLoader.",
        f"# Launch: {shell_line(accelerate_launch_line(data))}",
        "compute_environment: LOCAL_MACHINE",
        f"distributed_type: {distributed}",
        f'mixed_precision: "{mixed_precision}"',
        f"use_cpu: {'true' if cpu else 'false'}",
        "debug: false",
        f"num_processes: {world}",
        f"num_machines: {nodes}",
        "machine_rank: 0",
    ]
    if nodes > 1:
        lines += ["main_process_ip: 127.0.0.1  # the first node's address", f"main_process_port: {RENDEZVOUS_PORT}",
                  "rdzv_backend: static", "same_network: true"]
        notes.append(f"Set machine_rank (0..{nodes - 1}) and main_process_ip on each of the {nodes} machines.")
    if distributed == "DEEPSPEED":
        lines += ["deepspeed_config:", f"  zero_stage: {stage}",
                  f"  gradient_accumulation_steps: {n['accumulation']}",
                  "  offload_optimizer_device: none", "  offload_param_device: none",
                  "  deepspeed_multinode_launcher: standard"]
    if cpu and world > 1:
        notes.append("On CPU, `accelerate launch --cpu --num_processes N` starts one process (multi-process CPU "
                     "wants MPI); start the processes with torchrun and ACCELERATE_USE_CPU=1 instead "
                     "(`advisor export --to torchrun`, and the Launch line in the config's header).")
    return "\n".join(lines) + "\n", notes


def export_torchrun(data: dict, script: str = "train.py") -> tuple[str, list[str]]:
    _, nodes, _ = _cluster(data)
    notes = []
    if nodes > 1:
        notes.append(f"Run the line on each of the {nodes} nodes with NODE_RANK (0..{nodes - 1}) and MASTER_ADDR "
                     "(the first node's address) set.")
    return shell_line(torchrun_launch_line(recipe_launch_spec(data, script))) + "\n", notes


def deepspeed_hostfile(data: dict) -> str:
    """A hostfile template for the `deepspeed` launcher on the recipe's cluster."""
    world, nodes, per_node = _cluster(data)
    return "".join(f"node{i} slots={per_node}\n" for i in range(nodes))


def export_recipe(data: dict, target: str) -> tuple[str, list[str]]:
    """(text, notes) for ``target``; notes say what the text could not carry."""
    if target == "torchrun":
        return export_torchrun(data)  # its line starts with `env NAME=VALUE`: it carries [launch.env] itself
    if target == "deepspeed":
        text, notes = export_deepspeed(data)
    elif target == "accelerate":
        text, notes = export_accelerate(data)
    else:
        raise ExportError(f"Unknown export target {target!r}: choose one of {', '.join(TARGETS)}.")
    return text, notes + _env_notes(data, target)


def _env_notes(data: dict, target: str) -> list[str]:
    """A config file cannot hold environment variables; say how the run gets the ones the ceiling needs."""
    env = data.get("launch", {}).get("env", {})
    if not env:
        return []
    pairs = " ".join(f"{k}={v}" for k, v in sorted(env.items()))
    where = ("put each NAME=VALUE on its own line in ./.deepspeed_env or ~/.deepspeed_env (the deepspeed "
             "launcher exports those to every worker on every node), or start the launcher with "
             f"`env {pairs} deepspeed ...`" if target == "deepspeed"
             else f"start it as `env {pairs} accelerate launch ...` (or torchrun; see --to torchrun)")
    return [f"The ceiling was measured with {pairs} and holds only with it ([launch.env]); this config cannot "
            f"carry variables, so {where}. Inside the training script, advisor.load_recipe(path).apply_env() "
            "also sets them (the mmap threshold through mallopt)."]
