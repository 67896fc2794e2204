"""Worker side of the DDP adapter: one process per device under torchrun."""

from __future__ import annotations

import contextlib
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from advisor.worker import WorkerStrategy, worker_main


class DDPStrategy(WorkerStrategy):
    def setup(self, job):
        self.device = "cuda" if job.device == "cuda" else "cpu"
        backend = "nccl" if self.device == "cuda" else "gloo"
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        if self.device == "cuda":
            torch.cuda.set_device(local_rank)
            self.device = f"cuda:{local_rank}"
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=job.collective_timeout_s))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self._noise = {"local_sq": 0.0, "global_sq": 0.0, "steps": 0, "active": True}
        self._measure_noise = False

    @property
    def device_type(self):
        return self.device.split(":")[0]

    def wrap(self, model, optimizer, job):
        ddp = DistributedDataParallel(model, device_ids=None if self.device_type == "cpu" else [self.device])
        if self.world_size > 1 and job.kind == "train":
            self._measure_noise = True
            self._batch_small = job.per_device_batch * job.accumulation_steps
            ddp.register_comm_hook(self._noise, _noise_allreduce_hook)
        return ddp, optimizer

    def sync_context(self, model, sync):
        return model.no_sync() if not sync else contextlib.nullcontext()

    def all_reduce_sum(self, tensor):
        dist.all_reduce(tensor)
        return tensor

    def measured_module(self, model):
        return model

    def sample_noise(self, active):
        self._noise["active"] = active

    def noise_stats(self):
        """Gradient noise scale from local (batch b) vs all-reduced (batch b x N) gradients (McCandlish et al. 2018)."""
        if not self._measure_noise or not self._noise["steps"]:
            return None
        stats = torch.tensor([self._noise["local_sq"], self._noise["global_sq"], self._noise["steps"]],
                             dtype=torch.float64)
        dist.all_reduce(stats)
        steps = stats[2] / self.world_size
        g_small_sq = float(stats[0] / self.world_size / steps)
        g_big_sq = float(stats[1] / self.world_size / steps)
        b_small, b_big = self._batch_small, self._batch_small * self.world_size
        true_sq = (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small)
        trace = (g_small_sq - g_big_sq) / (1 / b_small - 1 / b_big)
        return {"g_small_sq": g_small_sq, "g_big_sq": g_big_sq, "b_small": b_small, "b_big": b_big,
                "g_true_sq": true_sq, "trace_sigma": trace,
                "b_simple": trace / true_sq if true_sq > 0 else None, "steps": int(steps)}

    def shutdown(self):
        if dist.is_initialized():
            dist.destroy_process_group()


def _noise_allreduce_hook(state, bucket):
    """Average gradients like DDP's default hook, recording |g|^2 before and after the all-reduce."""
    buffer = bucket.buffer()
    active = state["active"]
    if active:
        state["local_sq"] += float(buffer.double().pow(2).sum())
    buffer.div_(dist.get_world_size())
    future = dist.all_reduce(buffer, async_op=True).get_future()

    def done(fut):
        averaged = fut.value()[0]
        if active:
            state["global_sq"] += float(averaged.double().pow(2).sum())
            if bucket.is_last():
                state["steps"] += 1
        return averaged

    return future.then(done)


if __name__ == "__main__":
    worker_main(DDPStrategy())
