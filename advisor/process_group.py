"""Worker machinery every torch.distributed flavour shares, for built-in adapters and plugins alike.

``ProcessGroupStrategy``: the collectives, the gradient-noise meter and the teardown of a process
group (subclass it and set ``self.noise = GradNoiseMeter()`` in ``setup``). ``GradNoiseMeter``: the
per-replica and all-reduced squared gradient norms, from a DDP communication hook, that
``advisor.noise`` turns into the noise scale.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .noise import GradNormSample
from .worker import WorkerStrategy


class ProcessGroupStrategy(WorkerStrategy):
    """What every torch.distributed-based strategy shares: the collectives, the noise meter, the teardown."""

    noise: "GradNoiseMeter"

    def extra_memory(self, model) -> dict[str, int]:
        return ddp_bucket_bytes(model)

    def all_reduce_sum(self, tensor):
        if self.world_size > 1:
            dist.all_reduce(tensor)
        return tensor

    def sample_noise(self, active):
        self.noise.sample(active)

    def gradient_norms(self):
        return self.noise.gradient_norms(self.device, self.world_size)

    def shutdown(self):
        if dist.is_initialized():
            dist.destroy_process_group()


def ddp_bucket_bytes(model) -> dict[str, int]:
    """DDP's reducer keeps flat all-reduce buckets the size of the gradients (gradient_as_bucket_view=False,
    the default), allocated at wrap time, so a tensor tracker entered later does not see them."""
    if not isinstance(model, DistributedDataParallel) or getattr(model, "gradient_as_bucket_view", False):
        return {}
    size = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return {"ddp_buckets_computed": int(size)}  # sized from the parameters, not measured


class GradNoiseMeter:
    """|g|^2 per replica and after the all-reduce, from a DDP communication hook (any DDP-wrapped model).

    The sums stay on the device as tensors: the hook runs inside timed steps, and reading a number back
    there would stall the device once per bucket. ``gradient_norms`` reads them once, after the run.
    """

    def __init__(self):
        self.state = {"local_sq": None, "global_sq": None, "steps": 0, "active": True}
        self.batch_small = 0
        self.measuring = False

    def attach(self, ddp, job, world_size: int) -> None:
        if world_size > 1 and job.kind == "train" and isinstance(ddp, DistributedDataParallel):
            self.measuring = True
            self.batch_small = job.per_device_batch * job.accumulation_steps
            ddp.register_comm_hook(self.state, _noise_allreduce_hook)

    def sample(self, active: bool) -> None:
        self.state["active"] = active

    def gradient_norms(self, device, world_size: int):
        """Mean |g|^2 per step before (batch b) and after (batch b x N) the all-reduce, over every rank."""
        if not self.measuring:
            return None
        zero = torch.zeros((), dtype=torch.float64, device=device)
        sums = [self.state[key] if self.state[key] is not None else zero for key in ("local_sq", "global_sq")]
        stats = torch.stack([sums[0].to(device, torch.float64), sums[1].to(device, torch.float64),
                             torch.tensor(float(self.state["steps"]), dtype=torch.float64, device=device)])
        dist.all_reduce(stats)
        stats = stats.cpu()
        steps = float(stats[2]) / world_size
        if not steps:
            return None
        return GradNormSample(small_sq=float(stats[0]) / world_size / steps,
                              big_sq=float(stats[1]) / world_size / steps,
                              b_small=self.batch_small, b_big=self.batch_small * world_size, steps=int(steps))


def _add_squared_norm(state, key: str, tensor) -> None:
    """state[key] += |tensor|^2, as an fp32 device tensor: no host sync, no fp64 copy of the bucket."""
    squared = torch.linalg.vector_norm(tensor, dtype=torch.float32).square()
    if state[key] is None:
        state[key] = squared
    else:
        state[key].add_(squared)


def _noise_allreduce_hook(state, bucket):
    """Average gradients like DDP's default hook, recording |g|^2 before and after the all-reduce."""
    buffer = bucket.buffer()
    active = state["active"]
    if active:
        _add_squared_norm(state, "local_sq", buffer)
    buffer.div_(dist.get_world_size())
    future = dist.all_reduce(buffer, async_op=True).get_future()

    def done(fut):
        averaged = fut.value()[0]
        if active:
            _add_squared_norm(state, "global_sq", averaged)
            if bucket.is_last():
                state["steps"] += 1
        return averaged

    return future.then(done)
