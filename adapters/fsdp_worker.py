"""Worker side of the FSDP2 adapter: ``fully_shard`` on each block, then the root, one process per device.

The model is sharded in ``build_model``, before the optimizer exists: ``fully_shard`` replaces the module's
parameters with DTensor shards, and an optimizer made earlier would step the replaced full tensors. Gradient
accumulation skips the reduce-scatter on every micro-step but the last (``set_requires_gradient_sync``).
"""

from __future__ import annotations

import contextlib
import datetime

import torch
import torch.distributed as dist
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard

try:  # torch's own reduce-scatter and its divide factors (private, as of torch 2.13): the noise meter wraps them
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import (DefaultReduceScatter,
                                                                       _get_gradient_divide_factors)
except ImportError:  # another torch: train and probe as usual, and leave the noise scale unmeasured
    DefaultReduceScatter = object
    _get_gradient_divide_factors = None

from advisor.device import worker_device
from advisor.process_group import GradNoiseMeter, ProcessGroupStrategy, _add_squared_norm
from advisor.worker import worker_main
from advisor_adapters.fsdp import DEFAULT_MIN_BLOCK_PARAMS

LOW_PRECISION = {"bf16": torch.bfloat16, "fp16": torch.float16}


def shard_blocks(model, min_params: int = DEFAULT_MIN_BLOCK_PARAMS) -> tuple[list, str]:
    """(the modules to ``fully_shard`` before the root, bottom-up; how they were chosen): the model's own
    ``fsdp_blocks`` (attribute or method), a Hugging Face model's ``_no_split_modules``, else the size policy."""
    declared = getattr(model, "fsdp_blocks", None)
    if declared is not None:
        blocks = list(declared() if callable(declared) else declared)
        return blocks, f"the model's fsdp_blocks ({len(blocks)})"
    no_split = set(getattr(model, "_no_split_modules", None) or ())
    if no_split:
        blocks = [m for m in model.modules() if type(m).__name__ in no_split and m is not model]
        return blocks, f"the model's _no_split_modules {sorted(no_split)} ({len(blocks)})"
    blocks: list = []
    _size_policy(model, min_params, blocks, root=True)
    return blocks, f"size policy: submodules with >= {min_params} parameters not in a smaller block ({len(blocks)})"


def _size_policy(module, min_params: int, out: list, root: bool) -> int:
    """Post-order: a submodule whose parameters outside already chosen blocks reach ``min_params`` is a block.
    Returns the parameters of ``module`` left for its parent."""
    left = sum(p.numel() for p in module.parameters(recurse=False))
    for child in module.children():
        left += _size_policy(child, min_params, out, root=False)
    if not root and left >= min_params:
        out.append(module)
        return 0
    return left


class ShardNoiseMeter(GradNoiseMeter):
    """GradNoiseMeter's replica pair read from FSDP2's reduce-scatter: its input is this rank's whole local gradient
    (after accumulation), its output this rank's shard of the averaged gradient. The meter averages both sums
    over the ranks; the reduced one must be summed over the shards instead, so each rank records its shard's
    squares times the world size."""

    def attach(self, model, job, world_size: int, optimizer=None) -> None:
        if job.kind != "train" or world_size < 2 or _get_gradient_divide_factors is None:
            return
        self.measuring = True
        self.batch_small = job.per_device_batch * job.accumulation_steps
        comm = MeasuredReduceScatter(self.state, world_size)
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.set_custom_reduce_scatter(comm)


class MeasuredReduceScatter(DefaultReduceScatter):
    """FSDP2's default reduce-scatter, adding |input|^2 and world x |output|^2 to the meter's step sums. Under an
    fp16 reduction FSDP pre-divides the input and post-divides the output (its overflow guard): both undone here."""

    def __init__(self, state: dict, world_size: int):
        self.state, self.world_size = state, world_size

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        active = self.state["active"]
        pre, post, _, _ = _get_gradient_divide_factors(group, None, input_tensor.dtype, input_tensor.device.type)
        if active:
            _add_squared_norm(self.state, "local_sq", input_tensor * (pre or 1))
        work = super().__call__(output_tensor, input_tensor, group, op, async_op=async_op)
        if active:
            if async_op and work is not None:
                work.wait()
            _add_squared_norm(self.state, "global_sq", output_tensor * (self.world_size ** 0.5 / (post or 1)))
        return work


class FSDPStrategy(ProcessGroupStrategy):
    def setup(self, job):
        self.device, backend = worker_device(job.device)
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=job.collective_timeout_s))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.options = {"reshard_after_forward": True, "mixed_precision": "autocast", "cpu_offload": False,
                        "min_block_params": DEFAULT_MIN_BLOCK_PARAMS, "meta_init": False,
                        **job.adapter_options}
        if self.options["cpu_offload"] and self.device.type != "cuda":
            raise ValueError("--cpu-offload true moves FSDP2's shards from the GPU to CPU memory; on CPU they are "
                             "there already. Plan without it.")
        self.fsdp_precision = self.options["mixed_precision"] == "fsdp" and job.precision in LOW_PRECISION
        self.noise = ShardNoiseMeter()

    def _shard(self, model, job) -> str:
        """fully_shard each block, then the root; returns how the blocks were chosen."""
        dtype = LOW_PRECISION.get(job.precision) if self.fsdp_precision else None
        settings = {"reshard_after_forward": bool(self.options["reshard_after_forward"]),
                    "mp_policy": MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32 if dtype else None),
                    "offload_policy": CPUOffloadPolicy() if self.options["cpu_offload"] else OffloadPolicy()}
        blocks, how = shard_blocks(model, int(self.options["min_block_params"]))
        self.block_classes = sorted({type(b).__name__ for b in blocks})  # before fully_shard renames them FSDP<name>
        for block in blocks:
            fully_shard(block, **settings)
        fully_shard(model, **settings)
        return how

    def build_model(self, workload, job):
        if not self.options["meta_init"]:
            model = super().build_model(workload, job)
            self.blocks_how = self._shard(model, job)
            return model
        with torch.device("meta"):
            model = workload.build_model()
        self.blocks_how = self._shard(model, job)
        # Only this rank's shards are ever allocated: to_empty gives them memory, reset_parameters their values.
        model.to_empty(device="cpu" if self.options["cpu_offload"] else self.device)
        with torch.no_grad():
            for module in model.modules():
                if callable(getattr(module, "reset_parameters", None)):
                    module.reset_parameters()
        return model

    def prepare(self, model, optimizer, job):
        model, optimizer = super().prepare(model, optimizer, job)
        self.noise.attach(model, job, self.world_size, optimizer)
        return model, optimizer

    def precision_context(self, job):
        # Under FSDP2's MixedPrecisionPolicy the blocks compute in the low dtype already.
        return contextlib.nullcontext() if self.fsdp_precision else super().precision_context(job)

    def sync_context(self, model, sync):
        model.set_requires_gradient_sync(sync)  # FSDP2 skips the reduce-scatter until a micro-step with sync
        return contextlib.nullcontext()

    def recipe_extras(self) -> dict:
        extras = {"blocks": self.blocks_how}
        if self.block_classes and not self.blocks_how.startswith("size policy"):
            extras["block_classes"] = self.block_classes  # the accelerate export wraps by class name
        return extras


if __name__ == "__main__":
    worker_main(FSDPStrategy())
