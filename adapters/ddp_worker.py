"""Worker side of the DDP adapter: one process per device under torchrun."""

from __future__ import annotations

import datetime

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from advisor.device import worker_device
from advisor.process_group import GradNoiseMeter, ProcessGroupStrategy
from advisor.worker import worker_main


class DDPStrategy(ProcessGroupStrategy):
    def setup(self, job):
        self.device, backend = worker_device(job.device)
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=job.collective_timeout_s))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.noise = GradNoiseMeter()

    def prepare(self, model, optimizer, job):
        model, optimizer = super().prepare(model, optimizer, job)
        ddp = DistributedDataParallel(model, device_ids=None if self.device.type == "cpu" else [self.device])
        self.noise.attach(ddp, job, self.world_size, optimizer)
        return ddp, optimizer

    def sync_context(self, model, sync):
        return model.no_sync() if not sync else super().sync_context(model, sync)

    def eval_model(self, model):
        return model.module  # no gradient sync or buffer broadcast needed to evaluate


if __name__ == "__main__":
    worker_main(DDPStrategy())
