"""Worker side of the Accelerate adapter: the loop a user's Accelerate training runs.

``Accelerator.prepare`` wraps model and optimizer; ``accelerator.accumulate`` decides when gradients
sync and the prepared optimizer steps; ``accelerator.backward`` divides the loss by the accumulation
count itself, so this strategy never divides it again. Mixed precision is Accelerate's own (autocast
around the prepared model's forward).
"""

from __future__ import annotations

import contextlib
import datetime
import os

from advisor.process_group import GradNoiseMeter, ProcessGroupStrategy
from advisor.worker import run_micro_batches, worker_main

MIXED_PRECISION = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}


class AccelerateStrategy(ProcessGroupStrategy):
    def setup(self, job):
        from accelerate import Accelerator
        from accelerate.utils import InitProcessGroupKwargs

        cpu = not job.device.startswith("cuda")
        if cpu:
            os.environ.setdefault("ACCELERATE_USE_CPU", "1")  # else each process is rank 0 of 1 under torchrun
        self.accelerator = Accelerator(
            cpu=cpu, mixed_precision=MIXED_PRECISION[job.precision],
            gradient_accumulation_steps=job.accumulation_steps,
            kwargs_handlers=[InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=job.collective_timeout_s))])
        self.device = self.accelerator.device
        self.rank, self.world_size = self.accelerator.process_index, self.accelerator.num_processes
        self.noise = GradNoiseMeter()

    def prepare(self, model, optimizer, job):
        model, optimizer = self.accelerator.prepare(model, optimizer)
        self.noise.attach(model, job, self.world_size, optimizer)
        return model, optimizer

    def loss_scale(self):
        scaler = getattr(self.accelerator, "scaler", None)
        return scaler.get_scale() if scaler is not None else 1.0

    def precision_context(self, job):
        # The prepared model's forward already runs under Accelerate's autocast; evaluation does too.
        return contextlib.nullcontext()

    def train_cycle(self, model, optimizer, next_batch, workload, job, between_micro):
        def micro_step(batch, last: bool):
            with self.accelerator.accumulate(model):  # decides when gradients sync
                loss = workload.batch_loss(model, batch)
                self.accelerator.backward(loss)  # divides by gradient_accumulation_steps itself
                optimizer.step()  # a no-op until the accumulation boundary
                optimizer.zero_grad(set_to_none=True)
            return loss

        return run_micro_batches(job, next_batch, between_micro, self.device, micro_step)

    def eval_model(self, model):
        return self.accelerator.unwrap_model(model, keep_fp32_wrapper=True)

    def memory_view(self, model, optimizer):
        return self.accelerator.unwrap_model(model), optimizer.optimizer


if __name__ == "__main__":
    worker_main(AccelerateStrategy())
