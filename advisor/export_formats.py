"""The generic export formats: a recipe as a DeepSpeed JSON config, an Accelerate YAML, a torchrun line.

Every adapter gets these from ``AdapterBase.export_block``; a renderer asks the recipe's adapter only for what
differs (``ExportHooks``: its ZeRO stage, its Accelerate plugin, the variables its launch needs), so nothing here
imports the adapters. Which targets a recipe offers, and choosing its adapter, is advisor/export.py's; which ZeRO
stage a recipe runs is the DeepSpeed adapter's (adapters/deepspeed.py). The DeepSpeed config built here is also
the one the DeepSpeed adapter's workers run with, so a probe measures what the export hands over. Reading a
recipe imports nothing it names (never torch); an export that the target cannot express raises ExportError with
what to do instead.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Protocol

from .errors import ExportError
from .launch_line import LaunchSpec, env_prefix, shell_line, torchrun_launch_line, training_args
from .recipe import RecipeDocument


class ExportHooks(Protocol):
    """What a renderer asks the recipe's adapter (AdapterBase's defaults: plain data parallel)."""

    def export_zero_stage(self, data: dict) -> tuple[int, str | None]: ...

    def export_accelerate_plugin(self, data: dict) -> tuple[str, list[str]] | None: ...

    def export_launch_env(self, device_type: str) -> dict[str, str]: ...


DEEPSPEED_BUCKET_MAX = 500_000_000  # DeepSpeed's default reduce/allgather bucket (elements)
DEEPSPEED_BUCKET_MIN = 1 << 20
# ZeRO-3: what a rank gathers (prefetch, live parameters, reuse distance) and its reduce buffer, as a share of the
# model (1/32: a layer of a 32-layer model), never below 64k elements and never above DeepSpeed's own defaults.
ZERO3_SHARE_DIVISOR = 32
ZERO3_SHARE_MIN = 1 << 16
ZERO3_PREFETCH_DEFAULT = 50_000_000  # stage3_prefetch_bucket_size
ZERO3_LIVE_DEFAULT = 1_000_000_000  # stage3_max_live_parameters and stage3_max_reuse_distance
RENDEZVOUS_PORT = 29500
# DeepSpeed optimizers ZeRO was tested with. Other elementwise ones (SGD, RMSprop) give the same update on a
# flat partition as on whole tensors, so allowing them is safe; layer-wise ones are never allowed (below).
ZERO_TESTED = {"adam", "adamw", "adagrad"}
DEEPSPEED_OPTIMIZER_TYPES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "adagrad": "Adagrad",
                             "rmsprop": "RMSprop", "lamb": "Lamb"}


def layerwise_zero_problem(optimizer: str, zero_stage: int) -> str | None:
    """Why ``optimizer`` must not run at ``zero_stage``, or None. ZeRO 1/2 hand the optimizer one flat fp32
    partition per rank (ZeRO 3 flat partitions of every tensor), so a layer-wise trust ratio would be
    computed over a rank's slice: one ratio per rank, changing with the world size. At stage 0 DeepSpeed
    keeps one (fp32 master) tensor per parameter, in fp32, fp16 and bf16 alike."""
    from .optimizers import LAYERWISE

    name = optimizer.lower()
    if name not in LAYERWISE or zero_stage == 0:
        return None
    return (f"{name.upper()} computes its trust ratio per parameter tensor, but ZeRO stage {zero_stage} hands the "
            "optimizer flat fp32 partitions (one slice per rank), so it would compute one ratio per rank's slice "
            "and the result would change with the world size (neither LAMB nor LARS is among ZeRO's supported "
            f"optimizers). Use --zero-stage 0 (the default with {name.upper()}: whole tensors, at the cost of "
            "optimizer state and gradients replicated on every device), or an elementwise optimizer such as "
            "--optimizer adamw to shard state with ZeRO 1-3")


def deepspeed_bucket(parameters: int | None) -> int:
    """ZeRO's gradient buckets sized to the model (DeepSpeed's 5e8-element default would dwarf a small one)."""
    if not parameters:
        return DEEPSPEED_BUCKET_MAX
    return int(min(DEEPSPEED_BUCKET_MAX, max(DEEPSPEED_BUCKET_MIN, parameters)))


def zero3_working_set(parameters: int | None) -> dict:
    """ZeRO-3's gather and reduce sizes at a fraction of the model, so a rank holds its shards plus a few layers.

    DeepSpeed's defaults (1e9 live and reuse-distance elements, 5e7 prefetched, a 5e8-element reduce buffer
    allocated up front, 1e9-element optimizer sub-groups) keep a model below a billion parameters gathered
    whole after the first step and copy a rank's whole gradient shard at each step, so the peak would not
    reflect sharding. Capped at those defaults: a larger model keeps DeepSpeed's tuning."""
    if not parameters:
        return {}
    share = max(ZERO3_SHARE_MIN, parameters // ZERO3_SHARE_DIVISOR)  # a layer's scale in a deep model
    return {"reduce_bucket_size": min(DEEPSPEED_BUCKET_MAX, share),
            "stage3_prefetch_bucket_size": min(ZERO3_PREFETCH_DEFAULT, share),
            "stage3_max_live_parameters": min(ZERO3_LIVE_DEFAULT, 2 * share),
            "stage3_max_reuse_distance": min(ZERO3_LIVE_DEFAULT, share),
            # the optimizer step flattens one sub-group's gradient partitions at a time: a shard-sized copy by default
            "sub_group_size": min(ZERO3_LIVE_DEFAULT, share)}


def deepspeed_optimizer_block(optimizer: str, lr: float, hyperparameters: dict | None = None,
                              fused_ops: bool = True) -> dict | None:
    """The config's "optimizer" entry, or None where DeepSpeed has no such optimizer (LARS).

    ``hyperparameters``: advisor.optimizers.hyperparameters() of the workload (weight decay, momentum, betas,
    eps); ``fused_ops``: whether DeepSpeed's fused optimizer ops can run (CUDA with a toolkit that builds
    them); without them Adam/AdamW run torch's implementation (``torch_adam``)."""
    from .optimizers import LAMB_DEFAULTS, hyperparameters as defaults

    optimizer = optimizer.lower()
    kind = DEEPSPEED_OPTIMIZER_TYPES.get(optimizer)
    if kind is None:
        return None
    params: dict = {"lr": lr, **(hyperparameters if hyperparameters is not None else defaults(optimizer))}
    if optimizer in ("adam", "adamw"):
        params["adam_w_mode"] = optimizer == "adamw"  # DeepSpeed's "Adam" is AdamW unless told otherwise
        if not fused_ops:
            params["torch_adam"] = True  # else DeepSpeed JIT-compiles an Adam op (a crash without a toolkit)
    elif optimizer == "lamb":
        params.update(bias_correction=LAMB_DEFAULTS["bias_correction"], max_coeff=LAMB_DEFAULTS["max_coeff"],
                      min_coeff=LAMB_DEFAULTS["min_coeff"])
    return {"type": kind, "params": params}


def deepspeed_config(per_device: int, accumulation: int, world_size: int, optimizer: str, lr: float,
                     warmup_steps: int, precision: str, zero_stage: int, device_type: str = "cuda",
                     hyperparameters: dict | None = None, parameters: int | None = None,
                     client_optimizer: bool = False, fused_ops: bool | None = None) -> dict:
    """The DeepSpeed config for a plan: what the DeepSpeed adapter's workers run and what the export writes.

    ``client_optimizer``: the training passes its own optimizer object to ``deepspeed.initialize`` (LARS,
    or LAMB where DeepSpeed's fused LAMB cannot run), so the config names none. ``fused_ops``: whether
    DeepSpeed's fused optimizer ops can run here (default: on CUDA only)."""
    problem = layerwise_zero_problem(optimizer, zero_stage)
    if problem:
        raise ExportError(problem + ". Plan again (the advisor picks stage 0 for it).")
    if fused_ops is None:
        fused_ops = device_type != "cpu"
    bucket = deepspeed_bucket(parameters)
    config: dict = {
        "train_batch_size": per_device * accumulation * world_size,
        "train_micro_batch_size_per_gpu": per_device,
        "gradient_accumulation_steps": accumulation,
        "zero_optimization": {"stage": zero_stage, "reduce_bucket_size": bucket, "allgather_bucket_size": bucket,
                              **(zero3_working_set(parameters) if zero_stage == 3 else {})},
        "bf16": {"enabled": precision == "bf16"},
        # DeepSpeed casts the weights to half but leaves float inputs alone unless auto_cast: a float batch
        # would meet half weights and fail in the first layer.
        "fp16": {"enabled": True, "auto_cast": True} if precision == "fp16" else {"enabled": False},
        "steps_per_print": 1_000_000,
        "wall_clock_breakdown": False,
    }
    if not client_optimizer:
        block = deepspeed_optimizer_block(optimizer, lr, hyperparameters, fused_ops)
        if block is None:
            raise ExportError(f"DeepSpeed has no {optimizer.upper()} optimizer, so a DeepSpeed config cannot name it. "
                              f"Pass a {optimizer.upper()} optimizer object to deepspeed.initialize(optimizer=...) "
                              "and keep the rest of the config (export with the optimizer left out is not offered: "
                              "the LR would be lost), or plan with --optimizer lamb.")
        config["optimizer"] = block
    if zero_stage > 0 and (client_optimizer or optimizer.lower() not in ZERO_TESTED):
        config["zero_allow_untested_optimizer"] = True  # elementwise only: layer-wise ones were refused above
    if warmup_steps > 0:
        config["scheduler"] = {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": lr,
                                                               "warmup_num_steps": warmup_steps,
                                                               "warmup_type": "linear"}}
    return config


# ---------------------------------------------------------------------------------------------------------------
# From a recipe

def _cluster(doc: RecipeDocument) -> tuple[int, int, int]:
    """(world size, nodes, processes per node) of the recipe's target cluster."""
    world = doc.batch.world_size
    nodes = int(doc.inputs.nodes or 1)
    if nodes < 1 or world % nodes:
        raise ExportError(f"The recipe's world size {world} does not split evenly over {nodes} node(s), and every "
                          "launcher here starts the same number of processes on each node. Plan again with "
                          "--nodes and --gpus-per-node (world size = nodes x GPUs per node).")
    return world, nodes, world // nodes


@dataclass(frozen=True)
class ExportNumbers:
    """What every export renders: the recipe's numbers, with the defaults an export assumes."""

    per_device: int
    accumulation: int
    world: int
    global_: int
    lr: float
    warmup: int
    precision: str
    optimizer: str
    hyperparameters: dict | None  # the [optimizer] table's, for this optimizer; None: a recipe without one
    device: str


def recipe_numbers(recipe: dict | RecipeDocument) -> ExportNumbers:
    doc = RecipeDocument.of(recipe)
    b = doc.batch
    optimizer = (doc.lr.optimizer or doc.workload.optimizer or "sgd").lower()
    return ExportNumbers(b.per_device, b.accumulation_steps, b.world_size, b.global_, float(doc.lr.value),
                         int(doc.warmup.steps), doc.precision.mode or "fp32", optimizer,
                         _recipe_hyperparameters(doc, optimizer), doc.inputs.device or "cuda")


def _recipe_hyperparameters(doc: RecipeDocument, optimizer: str) -> dict | None:
    """The optimizer's hyper-parameters from the recipe's [optimizer] table; None in a recipe without one."""
    from .optimizers import HYPERPARAMETERS

    if doc.optimizer is None:
        return None
    table = doc.optimizer.hyperparameters
    return {key: table[key] for key in HYPERPARAMETERS.get(optimizer, ()) if key in table}


def _hyperparameter_notes(n: ExportNumbers) -> list[str]:
    if n.hyperparameters is None:
        return ["The recipe records no optimizer hyper-parameters (it predates [optimizer]); the export uses "
                "the optimizer's defaults. Check weight decay and momentum against your training."]
    return []


def hyperparameter_text(n: ExportNumbers) -> str:
    """'weight_decay 0.05, momentum 0.8' for a config comment or a note."""
    values = n.hyperparameters or {}
    return ", ".join(f"{k} {v}" for k, v in values.items()) or "none besides the LR"


def export_deepspeed(recipe: dict | RecipeDocument, adapter: ExportHooks) -> tuple[str, list[str]]:
    """The DeepSpeed JSON config at the ZeRO stage the recipe's adapter gives (``export_zero_stage``)."""
    doc = RecipeDocument.of(recipe)
    n = recipe_numbers(doc)
    _cluster(doc)
    options = doc.adapter.options
    notes = _hyperparameter_notes(n)
    stage, why = adapter.export_zero_stage(doc.data)
    if why:
        notes.append(why)
    if n.precision == "fp16" and n.device == "cpu":
        raise ExportError("The recipe plans fp16 on CPU, and DeepSpeed refuses fp16 on CPU. Plan again with "
                          "--precision bf16 or fp32.")
    fused_ops = options.get("fused_ops", n.device != "cpu")
    config = deepspeed_config(n.per_device, n.accumulation, n.world, n.optimizer, n.lr, n.warmup, n.precision, stage,
                              n.device, hyperparameters=n.hyperparameters, parameters=doc.workload.parameters,
                              fused_ops=fused_ops)
    if not fused_ops and options.get("fused_ops_reason"):
        notes.append(options["fused_ops_reason"])
    if n.optimizer == "lamb" and not fused_ops:
        notes.append("DeepSpeed's Lamb (FusedLamb) cannot run here (CUDA with a toolkit only). Drop the optimizer "
                     "block and pass advisor.optimizers.Lamb(model.parameters(), lr=..., "
                     f"{hyperparameter_text(n)}) to deepspeed.initialize(optimizer=...): it applies the same rule "
                     "(the advisor's probes ran it).")
    return json.dumps(config, indent=2) + "\n", notes + _env_notes(doc, DEEPSPEED_ENV_WHERE)


ACCELERATE_CONFIG_NAME = "accelerate.yaml"


def recipe_launch_spec(recipe: dict | RecipeDocument, script: str, adapter: ExportHooks) -> LaunchSpec:
    """The recipe's plan as a LaunchSpec, with what its adapter's launch needs besides [launch.env]
    (``export_launch_env``: Accelerate on CPU gets its CPU switch, else every process is rank 0)."""
    doc = RecipeDocument.of(recipe)
    n = recipe_numbers(doc)
    world, nodes, per_node = _cluster(doc)
    env = dict(doc.launch.env)
    for key, value in adapter.export_launch_env(n.device).items():
        env.setdefault(key, value)
    return LaunchSpec(per_node, nodes, n.per_device, n.accumulation, n.lr, n.warmup, n.precision,
                      env, script, n.optimizer, n.hyperparameters or {})


def accelerate_launch_line(data: dict | RecipeDocument, config_path: str, script: str,
                           adapter: ExportHooks) -> list[str]:
    """How the Accelerate export is run: `accelerate launch --config_file` with the plan's numbers as script
    arguments (an Accelerate config has no key for the batch size or the LR). On a multi-process CPU plan it is
    the torchrun line, because `accelerate launch` starts one process for any CPU config."""
    n = recipe_numbers(data)
    spec = recipe_launch_spec(data, script, adapter)
    if n.device == "cpu" and n.world > 1:  # Accelerate under torchrun on CPU: each process is rank 0 of 1
        # ... without ACCELERATE_USE_CPU=1, whichever adapter measured the recipe
        return torchrun_launch_line(dataclasses.replace(spec, env={**spec.env, "ACCELERATE_USE_CPU": "1"}))
    return [*env_prefix(spec.env), "accelerate", "launch", f"--config_file={config_path}", script,
            *training_args(spec)]


def export_accelerate(recipe: dict | RecipeDocument, adapter: ExportHooks) -> tuple[str, list[str]]:
    """The Accelerate config YAML, with the plugin section the recipe's adapter gives (``export_accelerate_plugin``)."""
    doc = RecipeDocument.of(recipe)
    n = recipe_numbers(doc)
    world, nodes, per_node = _cluster(doc)
    notes = _hyperparameter_notes(n)
    cpu = n.device == "cpu"
    if n.precision == "fp16" and cpu:
        raise ExportError("The recipe plans fp16 on CPU, which Accelerate silently ignores there (it would train "
                          "in fp32). Plan again with --precision bf16 or fp32.")
    plugin = adapter.export_accelerate_plugin(doc.data)
    distributed, plugin_lines = plugin if plugin is not None else (
        "NO" if world == 1 else ("MULTI_CPU" if cpu else "MULTI_GPU"), [])
    # Quoted: a bare `no` is the boolean false in YAML, and `accelerate launch` then fails on it.
    mixed_precision = "no" if n.precision == "fp32" else n.precision
    lines = [
        "# Accelerate config written by `advisor export` from a batch-advisor recipe.",
        f"# Per device {n.per_device} x {world} processes x {n.accumulation} accumulation = global "
        f"{n.global_}; lr {n.lr:.6g}, warmup {n.warmup} steps.",
        "# The config cannot hold the batch size or the LR: the launch line passes them to the script, which",
        "# gives gradient_accumulation_steps to Accelerator(...) and the batch size to its DataLoader.",
        f"# Optimizer {n.optimizer} ({hyperparameter_text(n)}): the values the advisor's runs used.",
        f"# Launch: {shell_line(accelerate_launch_line(doc, ACCELERATE_CONFIG_NAME, 'train.py', adapter))}",
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
    lines += plugin_lines
    if cpu and world > 1:
        notes.append("On CPU, `accelerate launch --cpu --num_processes N` starts one process (multi-process CPU "
                     "wants MPI); start the processes with torchrun and ACCELERATE_USE_CPU=1 instead: the Launch "
                     "line in the config's header.")
    return "\n".join(lines) + "\n", notes + _env_notes(doc, ACCELERATE_ENV_WHERE)


def export_torchrun(recipe: dict | RecipeDocument, adapter: ExportHooks,
                    script: str = "train.py") -> tuple[str, list[str]]:
    """The torchrun line; it starts with `env NAME=VALUE`, so it carries [launch.env] itself."""
    doc = RecipeDocument.of(recipe)
    n = recipe_numbers(doc)
    _, nodes, _ = _cluster(doc)
    notes = _hyperparameter_notes(n)
    if nodes > 1:
        notes.append(f"Run the line on each of the {nodes} nodes with NODE_RANK (0..{nodes - 1}) and MASTER_ADDR "
                     "(the first node's address) set.")
    return shell_line(torchrun_launch_line(recipe_launch_spec(doc, script, adapter))) + "\n", notes


def deepspeed_hostfile(recipe: dict | RecipeDocument) -> str:
    """A hostfile template (`NAME slots=N` a node) for a launcher that reads one (an ExportTarget's ``hostfile``)."""
    world, nodes, per_node = _cluster(RecipeDocument.of(recipe))
    return "".join(f"node{i} slots={per_node}\n" for i in range(nodes))


# A config file cannot hold environment variables: where each target's run gets them ({pairs}: NAME=VALUE ...).
DEEPSPEED_ENV_WHERE = ("put each NAME=VALUE on its own line in ./.deepspeed_env or ~/.deepspeed_env (the deepspeed "
                       "launcher exports those to every worker on every node), or start the launcher with "
                       "`env {pairs} deepspeed ...`")
ACCELERATE_ENV_WHERE = "start it as `env {pairs} accelerate launch ...` (or torchrun; see --to torchrun)"


def _env_notes(doc: RecipeDocument, where: str) -> list[str]:
    """A config file cannot hold environment variables; say how the run gets the ones the ceiling needs."""
    env = doc.launch.env
    if not env:
        return []
    pairs = " ".join(f"{k}={v}" for k, v in sorted(env.items()))
    where = where.format(pairs=pairs)
    return [f"The ceiling was measured with {pairs} and holds only with it ([launch.env]); this config cannot "
            f"carry variables, so {where}. Inside the training script, advisor.load_recipe(path).apply_env() "
            "also sets them (the mmap threshold through mallopt)."]
