"""Worker side of the DeepSpeed adapter: ``deepspeed.initialize`` with the config the plan produces.

The engine's own ``backward`` (which scales the loss by the accumulation count) and ``step`` (which
steps the optimizer and the warmup scheduler only at the accumulation boundary) run on every
micro-step. Under bf16 DeepSpeed keeps the weights in bf16, so inputs are cast.
"""

from __future__ import annotations

import contextlib
import datetime

import torch
import torch.distributed as dist

from advisor.device import worker_device
from advisor.worker import WorkerStrategy, to_device, worker_main

# Optimizers the config cannot name here: DeepSpeed's Lamb is CUDA-only, it has no LARS.
CLIENT_ON_CPU = {"lamb", "lars"}


def _cast_floats(obj, dtype):
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, dict):
        return {k: _cast_floats(v, dtype) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(_cast_floats(o, dtype) for o in obj)
    return obj


class DeepSpeedStrategy(WorkerStrategy):
    def setup(self, job):
        import deepspeed

        self.device, backend = worker_device(job.device)
        deepspeed.init_distributed(dist_backend=backend, timeout=datetime.timedelta(seconds=job.collective_timeout_s))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.zero_stage = int(job.extra.get("adapter_options", {}).get("zero_stage", 2))

    def make_optimizer(self, workload, model, job):
        """A client optimizer where the config cannot name it (LAMB on CPU, LARS); else the config's own."""
        name = self.optimizer_name = workload.optimizer.lower()
        self.client = name == "lars" or (name in CLIENT_ON_CPU and self.device.type == "cpu")
        if not self.client:
            return None
        return workload.make_optimizer(model.parameters(), job.lr)

    def prepare(self, model, optimizer, job):
        import deepspeed

        from advisor.export import deepspeed_config

        self.config = deepspeed_config(
            job.per_device_batch, job.accumulation_steps, self.world_size, self.optimizer_name,
            job.lr, job.warmup_steps, job.precision, self.zero_stage, self.device.type,
            parameters=sum(p.numel() for p in model.parameters()), client_optimizer=self.client)
        self.bf16 = job.precision == "bf16"
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
        return f"{what} ({how}, inside {type(optimizer).__name__}, ZeRO stage {self.zero_stage})"

    @staticmethod
    def _inner(optimizer):
        return getattr(optimizer, "optimizer", optimizer)

    def precision_context(self, job):
        # DeepSpeed casts the model itself; autocast only lets fp32 evaluation inputs meet bf16 weights.
        if self.bf16:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def train_cycle(self, engine, optimizer, next_batch, workload, job, between_micro):
        losses = []
        for micro in range(job.accumulation_steps):
            if micro:
                between_micro()
            batch = to_device(next_batch(), self.device)
            if self.bf16:
                batch = _cast_floats(batch, torch.bfloat16)
            loss = workload.batch_loss(engine, batch)
            engine.backward(loss)  # scales by 1 / gradient_accumulation_steps itself
            engine.step()  # steps optimizer and scheduler at the accumulation boundary only
            losses.append(loss.detach().float())
        return torch.stack(losses).mean()

    def set_lr(self, optimizer, lr: float) -> None:
        if self.scheduler is None:  # else DeepSpeed's WarmupLR from the config runs the warmup
            super().set_lr(optimizer, lr)

    def eval_model(self, engine):
        return engine.module

    def memory_view(self, engine, optimizer):
        # MemTracker rejects DeepSpeed's ZeRO wrapper: count the module and the torch optimizer inside.
        return engine.module, self._inner(optimizer)

    def extra_memory(self, engine) -> dict[str, int]:
        """ZeRO's flat fp32 partitions (the inner optimizer's parameters, made at initialize time)."""
        own = {p.data_ptr() for p in engine.module.parameters()}
        inner = self._inner(engine.optimizer)
        flat = sum(p.numel() * p.element_size() for group in getattr(inner, "param_groups", [])
                   for p in group["params"] if p.data_ptr() not in own)
        return {"zero_partitions (computed)": int(flat)} if flat else {}

    def all_reduce_sum(self, tensor):
        dist.all_reduce(tensor)
        return tensor

    def shutdown(self):
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    worker_main(DeepSpeedStrategy())
