"""Worker side of the DeepSpeed adapter: ``deepspeed.initialize`` with the config the plan produces.

The engine's own ``backward`` (which scales the loss by the accumulation count) and ``step`` (which
steps the optimizer and the warmup scheduler only at the accumulation boundary) run on every
micro-step. Under bf16 and fp16 DeepSpeed keeps the weights in that dtype, so float inputs are cast.
DeepSpeed's fused optimizer ops (FusedAdam, FusedLamb) are checked before ``initialize``: where they
cannot build, torch's Adam (``torch_adam``) or the advisor's LAMB (the same rule) runs instead, and
the recipe says so. Building them, and DeepSpeed's first process-group set-up, can take minutes:
heartbeat events keep the engine's idle timeout from taking that for a hang.
Under ZeRO-3 the model is built inside ``deepspeed.zero.Init`` with the same config, so a model larger
than one device is only ever held as shards.
"""

from __future__ import annotations

import contextlib
import datetime

import torch
import torch.distributed as dist

from advisor.device import worker_device
from advisor.extensions import heartbeat
from advisor.memory import meta_parameter_count, parameter_count
from advisor.worker import WorkerStrategy, emit, run_micro_batches, worker_main

from .deepspeed import DEFAULT_ZERO_STAGE

# The fused op each config optimizer runs on CUDA; LARS has none (DeepSpeed has no LARS).
FUSED_OPS = {"adam": "FusedAdamBuilder", "adamw": "FusedAdamBuilder", "lamb": "FusedLambBuilder"}
LOW_PRECISION = {"bf16": torch.bfloat16, "fp16": torch.float16}


def fused_op_usable(builder, accelerator: str | None = None) -> tuple[bool, str]:
    """(usable, why) for one of DeepSpeed's op builders: prebuilt for this accelerator, or buildable here
    (compatible, and a CUDA toolkit to JIT-compile with). DeepSpeed's own checks, called before it would
    try to build."""
    from deepspeed.git_version_info import accelerator_name, installed_ops

    if builder is None:
        return False, f"the {accelerator or 'current'} accelerator has no such op"
    if installed_ops.get(builder.NAME) and accelerator_name == accelerator:
        return True, f"{builder.NAME} is prebuilt"
    if not builder.is_compatible(verbose=False):
        return False, f"{builder.NAME} is not compatible with this system (DeepSpeed's is_compatible())"
    if hasattr(builder, "compute_capability_args"):  # a CUDA op: it needs nvcc to build
        from deepspeed.ops.op_builder.builder import installed_cuda_version

        try:
            installed_cuda_version(builder.NAME)
        except Exception as exc:  # noqa: BLE001 - MissingCUDAException and friends: no toolkit, no build
            return False, f"{builder.NAME} is not prebuilt and cannot be JIT-compiled: {exc}"
    return True, f"{builder.NAME} JIT-compiles on first use (minutes; the worker sends heartbeats meanwhile)"


def fused_ops_for(optimizer: str, device_type: str) -> tuple[bool, str]:
    """Whether the config optimizer ``optimizer`` can use DeepSpeed's fused op here, and why."""
    op = FUSED_OPS.get(optimizer)
    if op is None:
        return False, f"DeepSpeed has no fused {optimizer.upper()} op"
    if device_type != "cuda":
        return False, f"DeepSpeed's {op[:-7]} is a CUDA op; on {device_type} the torch implementation runs"
    from deepspeed.accelerator import get_accelerator

    accelerator = get_accelerator()
    usable, why = fused_op_usable(accelerator.create_op_builder(op), accelerator._name)
    if not usable:
        why += "; the torch implementation runs instead"
    return usable, why


def _cast_floats(obj, dtype):
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, dict):
        return {k: _cast_floats(v, dtype) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(_cast_floats(o, dtype) for o in obj)
    return obj


def zero3_buffers(zero_optimizer) -> dict[str, list]:
    """The tensors a ZeRO-3 optimizer allocates at ``initialize`` beside the parameter shards, by name: the fp32
    copy of this rank's shards, its gradient partitions and the reduce buffer. The inner torch optimizer sees
    the fp32 partitions only during its step (DeepSpeed swaps them into its param_groups and out again), so
    neither the module nor the memory tracker holds them."""
    buckets = getattr(zero_optimizer, "ipg_buckets", {}).values()
    found = {
        "zero3_fp32_partitions": list(getattr(zero_optimizer, "fp32_partitioned_groups_flat", None) or []),
        "zero3_gradient_partitions": [getattr(zero_optimizer, "grad_partitions_flat_buffer", None)],
        "zero3_reduce_buffer": [getattr(bucket, "buffer", None) for bucket in buckets],
    }
    return {name: [t for t in tensors if t is not None] for name, tensors in found.items()}


def _computed(named: dict[str, list]) -> dict[str, int]:
    """Bytes by name ("... (computed)": summed from the tensors, not measured), the empty ones left out."""
    from advisor.memory import storage_bytes

    return {f"{name} (computed)": storage_bytes(tensors) for name, tensors in named.items() if tensors}


class DeepSpeedStrategy(WorkerStrategy):
    config = None  # the DeepSpeed config; under ZeRO-3 made before the model, which is built under it
    config_parameters = None  # the parameter count the config's buckets were sized for

    def setup(self, job):
        import deepspeed

        self.device, backend = worker_device(job.device)
        with heartbeat("setting up DeepSpeed's process group (its first use builds a small extension)"):
            deepspeed.init_distributed(dist_backend=backend,
                                       timeout=datetime.timedelta(seconds=job.collective_timeout_s))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.zero_stage = int(job.adapter_options.get("zero_stage", DEFAULT_ZERO_STAGE))
        self.low_precision = LOW_PRECISION.get(job.precision)

    def _choose_optimizer(self, workload) -> None:
        """Which optimizer runs and how: DeepSpeed's config optimizer (fused op or torch's) or a client one."""
        name = self.optimizer_name = workload.optimizer.lower()
        self.hyperparameters = workload.optimizer_hyperparameters()
        self.fused_ops, self.fused_ops_reason = fused_ops_for(name, self.device.type)
        # A workload's own optimizer_factory (param groups) can only go in as a client optimizer.
        self.client = name == "lars" or (name == "lamb" and not self.fused_ops) or workload.optimizer_factory is not None

    def _config(self, job, parameters: int | None) -> dict:
        from advisor.export import deepspeed_config

        return deepspeed_config(
            job.per_device_batch, job.accumulation_steps, self.world_size, self.optimizer_name,
            job.lr, job.warmup_steps, job.precision, self.zero_stage, self.device.type,
            hyperparameters=self.hyperparameters, parameters=parameters, client_optimizer=self.client,
            fused_ops=self.fused_ops)

    def build_model(self, workload, job):
        """ZeRO-3 partitions parameters: the model is built inside ``deepspeed.zero.Init`` with the run's own
        config, so each layer is split over the processes as it is made and no rank ever holds the whole model
        (built whole first, a model larger than one device could never reach ``initialize``)."""
        if self.zero_stage < 3:
            return super().build_model(workload, job)
        import deepspeed

        self._choose_optimizer(workload)
        self.config_parameters = meta_parameter_count(workload)
        self.config = self._config(job, self.config_parameters)
        # remote_device None: the shards stay on this rank's device (cuda:LOCAL_RANK, as worker_device chose)
        with deepspeed.zero.Init(config_dict_or_path=self.config, remote_device=None):
            return workload.build_model()

    def make_optimizer(self, workload, model, job):
        """A client optimizer where the config cannot name it (LARS, LAMB without DeepSpeed's fused op);
        else None and the config's own."""
        self._choose_optimizer(workload)
        if not self.client:
            return None
        return workload.optimizer_for(model, job.lr)

    def prepare(self, model, optimizer, job):
        import deepspeed

        parameters = parameter_count(model)
        if self.config is None or self.config_parameters != parameters:
            self.config, self.config_parameters = self._config(job, parameters), parameters
        with heartbeat("deepspeed.initialize (a fused optimizer op may be compiling)"):
            engine, ds_optimizer, _, scheduler = deepspeed.initialize(
                model=model, optimizer=optimizer, model_parameters=None if optimizer else model.parameters(),
                config=self.config)
        self.scheduler = scheduler
        self.client_implementation = getattr(optimizer, "advisor_implementation", None)
        return engine, ds_optimizer

    def optimizer_implementation(self, optimizer) -> str:
        inner = self._inner(optimizer)
        what = self.client_implementation or f"{type(inner).__module__}.{type(inner).__qualname__}"
        how = "client optimizer" if self.client else f"config optimizer {self.config['optimizer']['type']!r}"
        if not self.client and self.config["optimizer"]["params"].get("torch_adam"):
            how += " with torch_adam"
        return f"{what} ({how}, inside {type(optimizer).__name__}, ZeRO stage {self.zero_stage})"

    def recipe_extras(self) -> dict:
        return {"fused_ops": self.fused_ops, "fused_ops_reason": self.fused_ops_reason}

    def cast_inputs(self, batch):
        """Float inputs in the weights' dtype under bf16/fp16 (DeepSpeed casts the weights, not the batch)."""
        return _cast_floats(batch, self.low_precision) if self.low_precision is not None else batch

    @staticmethod
    def _inner(optimizer):
        return getattr(optimizer, "optimizer", optimizer)

    def precision_context(self, job):
        # DeepSpeed casts the model itself; autocast only lets fp32 evaluation inputs meet bf16/fp16 weights.
        if self.low_precision is not None:
            return torch.autocast(device_type=self.device.type, dtype=self.low_precision)
        return contextlib.nullcontext()

    def train_cycle(self, engine, optimizer, next_batch, workload, job, between_micro):
        def micro_step(batch, last: bool):
            loss = workload.batch_loss(engine, self.cast_inputs(batch))
            engine.backward(loss)  # scales by 1 / gradient_accumulation_steps itself
            engine.step()  # steps optimizer and scheduler at the accumulation boundary only
            return loss

        return run_micro_batches(job, next_batch, between_micro, self.device, micro_step)

    def set_lr(self, optimizer, lr: float) -> None:
        if self.scheduler is None:  # else DeepSpeed's WarmupLR from the config runs the warmup
            super().set_lr(optimizer, lr)

    def eval_model(self, engine):
        return engine.module

    def memory_view(self, engine, optimizer):
        # MemTracker rejects DeepSpeed's ZeRO wrapper: count the module and the torch optimizer inside.
        return engine.module, self._inner(optimizer)

    def extra_memory(self, engine) -> dict[str, int]:
        """ZeRO's flat fp32 partitions (the inner optimizer's parameters, made at initialize time); under ZeRO-3
        also its gradient partitions and reduce buffer, all allocated by ``initialize``."""
        if self.zero_stage == 3:
            return _computed(zero3_buffers(engine.optimizer))
        own = {p.data_ptr() for p in engine.module.parameters()}
        inner = self._inner(engine.optimizer)
        flat = sum(p.numel() * p.element_size() for group in getattr(inner, "param_groups", [])
                   for p in group["params"] if p.data_ptr() not in own)
        return {"zero_partitions (computed)": int(flat)} if flat else {}

    def counted_apart(self, engine) -> tuple[dict[str, int], list]:
        """ZeRO-3: the module's parameters are emptied placeholders, and the step writes in place into the
        shards and buffers made at ``initialize`` (which a tracker would count as new memory): count each once,
        by name. Gathered parameters, full gradients and activations stay with the tracker."""
        if self.zero_stage != 3:
            return {}, []
        named = {"zero3_parameter_shards": [p.ds_tensor for p in engine.module.parameters()
                                            if getattr(p, "ds_tensor", None) is not None],
                 **zero3_buffers(engine.optimizer)}
        return _computed(named), [t for tensors in named.values() for t in tensors]

    def all_reduce_sum(self, tensor):
        dist.all_reduce(tensor)
        return tensor

    def shutdown(self):
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    worker_main(DeepSpeedStrategy())
