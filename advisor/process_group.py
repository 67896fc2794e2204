"""Worker machinery every torch.distributed flavour shares, for built-in adapters and plugins alike.

``ProcessGroupStrategy``: the collectives, the gradient-noise meter and the teardown of a process
group (subclass it and set ``self.noise = GradNoiseMeter()`` in ``setup``). ``GradNoiseMeter``: squared
gradient norms at two batch sizes, which ``advisor.method.noise`` turns into the noise scale: per replica and
all-reduced (a DDP communication hook, 2+ processes), or, on one process with accumulation >= 2, of the
first micro-batch and of the accumulated gradient.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .method.noise import GradNormSample
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

    def between_micro_batches(self):
        self.noise.between_micro_batches()

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
    """Squared gradient norms at two batch sizes, per optimizer step, in one of two modes.

    Replicas (2+ processes): a DDP communication hook adds each bucket's squares before (batch b) and after
    (batch b x N) the all-reduce. Accumulation (one process, ``accumulation_steps`` s >= 2): after the first
    micro-batch's backward p.grad holds g_0 / s (times the loss scale), read in ``between_micro_batches``;
    just before the optimizer steps, a step pre-hook reads the accumulated gradient (batch b x s), already
    unscaled by a GradScaler. A step a GradScaler skips (fp16 overflow) never reaches the pre-hook: its
    micro-batch norm is dropped and counted as skipped.

    ``sample`` (called before every step) closes the previous step and records it with the loss scale it ran
    under. The sums stay on the device as tensors: they are taken inside timed steps, and reading a number
    back there would stall the device. ``gradient_norms`` reads them once, after the run.
    """

    def __init__(self):
        self.state = {"local_sq": None, "global_sq": None, "steps": 0, "active": True}
        self.batch_small = 0
        self.measuring = False
        self.pair = "replicas"  # or "accumulation": which two gradients the norms compare (GradNormSample.pair)
        self.accumulation = 1
        self.parameters: list = []  # accumulation mode: the optimizer's parameters, whose .grad is read
        self.micro_sq = None  # accumulation mode: this step's first micro-batch |g|^2, until the optimizer steps
        self.dropped = 0  # accumulation mode: measured steps the optimizer skipped (fp16 overflow)
        # (small |g|^2, big |g|^2, the loss scale each carries) of each measured step
        self.per_step: list[tuple] = []

    def attach(self, model, job, world_size: int, optimizer=None) -> None:
        """Start measuring if this run can: replicas with 2+ DDP processes; accumulation with one process,
        ``job.accumulation_steps`` >= 2 and ``optimizer`` (a wrapper such as Accelerate's keeps it as
        ``.optimizer``) a torch optimizer."""
        if job.kind != "train":
            return
        if world_size > 1 and isinstance(model, DistributedDataParallel):
            self.measuring = True
            self.batch_small = job.per_device_batch * job.accumulation_steps
            model.register_comm_hook(self.state, _noise_allreduce_hook)
            return
        inner = getattr(optimizer, "optimizer", optimizer)
        if world_size == 1 and job.accumulation_steps >= 2 and hasattr(inner, "register_step_pre_hook"):
            self.measuring, self.pair, self.accumulation = True, "accumulation", job.accumulation_steps
            self.batch_small = job.per_device_batch
            self.parameters = [p for group in inner.param_groups for p in group["params"]]
            # The inner optimizer: Accelerate's wrapper calls it only at the accumulation boundary, and a
            # GradScaler calls it only after unscaling, and not at all on an overflow step.
            inner.register_step_pre_hook(self._before_optimizer_step)

    def sample(self, active: bool, loss_scale=1.0) -> None:
        self._close_step()
        self.state["active"] = active
        self.state["loss_scale"] = loss_scale

    def between_micro_batches(self) -> None:
        """Before each micro-batch after the first; the first call of a step reads the first one's gradient."""
        if self.pair != "accumulation" or not self.measuring or not self.state["active"] or self.micro_sq is not None:
            return
        # p.grad = g_0 / s: times s^2 gives |g_0|^2 at the micro-batch (the loss scale is divided out later).
        self.micro_sq = _squared_norm(p.grad for p in self.parameters).mul_(self.accumulation ** 2)

    def _before_optimizer_step(self, optimizer, args, kwargs) -> None:
        if self.micro_sq is None:
            return
        accumulated = _squared_norm(p.grad for p in self.parameters)
        self.per_step.append((self.micro_sq, accumulated, self.state.get("loss_scale", 1.0), 1.0))
        self.micro_sq = None

    def _close_step(self) -> None:
        if self.micro_sq is not None:  # the optimizer never stepped: a GradScaler skipped it
            self.dropped += 1
            self.micro_sq = None
        if self.state["local_sq"] is not None and self.state["global_sq"] is not None:
            scale = self.state.get("loss_scale", 1.0)
            self.per_step.append((self.state["local_sq"], self.state["global_sq"], scale, scale))
        self.state["local_sq"] = self.state["global_sq"] = None

    def gradient_norms(self, device, world_size: int):
        """Each measured step's |g|^2 at the small batch (per replica averaged over ranks, or the first
        micro-batch) and at the big one (all-reduced, or accumulated), the loss scale divided out, non-finite
        steps (fp16 overflow) left out."""
        if not self.measuring:
            return None
        self._close_step()
        if not self.per_step:
            return None
        local, global_, local_scale, global_scale = (
            torch.stack([torch.as_tensor(row[i], dtype=torch.float64, device=device) for row in self.per_step])
            for i in range(4))
        # Gradients of a scaled loss are scaled too: their squared norms by the scale squared.
        stats = torch.stack([local / local_scale.square(), global_ / global_scale.square()])
        if world_size > 1:
            dist.all_reduce(stats)
            stats = stats / world_size
        stats = stats.cpu()
        finite = torch.isfinite(stats).all(dim=0)
        small, big = stats[0][finite].tolist(), stats[1][finite].tolist()
        skipped = int((~finite).sum()) + self.dropped
        if not small:
            return None
        big_batch = self.batch_small * (self.accumulation if self.pair == "accumulation" else world_size)
        return GradNormSample(small_sq=sum(small) / len(small), big_sq=sum(big) / len(big),
                              b_small=self.batch_small, b_big=big_batch, steps=len(small),
                              small_sq_steps=tuple(small), big_sq_steps=tuple(big), skipped=skipped, pair=self.pair)


def _squared_norm(tensors):
    """Sum of |t|^2 over ``tensors`` (None skipped), as one fp32 device tensor: no host sync."""
    norms = [torch.linalg.vector_norm(t, dtype=torch.float32) for t in tensors if t is not None]
    return torch.stack(norms).square().sum() if norms else torch.zeros(())


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
