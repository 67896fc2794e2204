"""Plain PyTorch DistributedDataParallel: gloo on CPU, NCCL on CUDA."""

from __future__ import annotations

from advisor.adapters import AdapterBase, Capabilities, NoiseMeasurement, torchrun_command


class DDPAdapter(AdapterBase):
    name = "ddp"
    summary = "torch DistributedDataParallel via torchrun (gloo on CPU, NCCL on CUDA)"
    capabilities = Capabilities(supports_lamb=True, noise_by_accumulation=True)
    worker_module = "advisor_adapters.ddp_worker"
    noise = NoiseMeasurement(True, "2+ processes: each replica's gradient against the all-reduced one, read in a DDP "
                                   "communication hook (advisor.process_group.GradNoiseMeter); one process: the first "
                                   "micro-batch's gradient against the accumulated one, in a run with accumulation 2")

    def version(self) -> str | None:
        from importlib.metadata import version

        return version("torch")

    def command(self, job_path: str, nproc: int) -> list[str]:
        return torchrun_command(self.worker_module, job_path, nproc)
