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
        self.noise.sample(active, self.loss_scale() if active else 1.0)

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
    """|g|^2 per replica and after the all-reduce, per optimizer step, from a DDP communication hook.

    The hook adds each bucket's squares into the step's sums; ``sample`` (called before every step) closes
    the previous step and records it with the loss scale it ran under. The sums stay on the device as
    tensors: the hook runs inside timed steps, and reading a number back there would stall the device once
    per bucket. ``gradient_norms`` reads them once, after the run.
    """

    def __init__(self):
        self.state = {"local_sq": None, "global_sq": None, "steps": 0, "active": True}
        self.batch_small = 0
        self.measuring = False
        self.per_step: list[tuple] = []  # (local |g|^2, global |g|^2, loss scale) of each measured step

    def attach(self, ddp, job, world_size: int) -> None:
        if world_size > 1 and job.kind == "train" and isinstance(ddp, DistributedDataParallel):
            self.measuring = True
            self.batch_small = job.per_device_batch * job.accumulation_steps
            ddp.register_comm_hook(self.state, _noise_allreduce_hook)

    def sample(self, active: bool, loss_scale=1.0) -> None:
        self._close_step()
        self.state["active"] = active
        self.state["loss_scale"] = loss_scale

    def _close_step(self) -> None:
        if self.state["local_sq"] is not None and self.state["global_sq"] is not None:
            self.per_step.append((self.state["local_sq"], self.state["global_sq"], self.state.get("loss_scale", 1.0)))
        self.state["local_sq"] = self.state["global_sq"] = None

    def gradient_norms(self, device, world_size: int):
        """Each measured step's |g|^2 before (batch b, averaged over ranks) and after (batch b x N) the
        all-reduce, the loss scale divided out, non-finite steps (fp16 overflow) left out."""
        if not self.measuring:
            return None
        self._close_step()
        if not self.per_step:
            return None
        local, global_, scale = (torch.stack([torch.as_tensor(row[i], dtype=torch.float64, device=device)
                                              for row in self.per_step]) for i in range(3))
        # Gradients of a scaled loss are scaled too: their squared norms by the scale squared.
        local, global_ = local / scale.square(), global_ / scale.square()
        stats = torch.stack([local, global_])
        dist.all_reduce(stats)
        stats = (stats / world_size).cpu()
        finite = torch.isfinite(stats).all(dim=0)
        small, big = stats[0][finite].tolist(), stats[1][finite].tolist()
        skipped = int((~finite).sum())
        if not small:
            return None
        return GradNormSample(small_sq=sum(small) / len(small), big_sq=sum(big) / len(big),
                              b_small=self.batch_small, b_big=self.batch_small * world_size, steps=len(small),
                              small_sq_steps=tuple(small), big_sq_steps=tuple(big), skipped=skipped)


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
