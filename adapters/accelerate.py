"""Hugging Face Accelerate: the user's ``Accelerator`` loop, launched with torchrun (one process per device)."""

from __future__ import annotations

import sys

from advisor.adapters import (AdapterBase, Capabilities, LaunchSpec, NoiseMeasurement, env_prefix, torchrun_command,
                              torchrun_launch_line, training_args)


def package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


class AccelerateAdapter(AdapterBase):
    name = "accelerate"
    summary = "Hugging Face Accelerate: Accelerator.prepare, accelerator.accumulate/backward, its mixed precision"
    capabilities = Capabilities(supports_lamb=True, noise_by_accumulation=True)
    package = "accelerate"
    worker_module = "advisor_adapters.accelerate_worker"
    noise = NoiseMeasurement(True, "2+ processes: each replica's gradient against the all-reduced one, read in a "
                                   "communication hook on the DDP model Accelerator.prepare returns "
                                   "(advisor.process_group.GradNoiseMeter); one process: the first micro-batch's "
                                   "gradient against the accumulated one, in a run with accumulation 2")

    def version(self) -> str | None:
        return package_version(self.package)

    def unavailable_reason(self) -> str | None:
        if self.version() is None:
            return "the accelerate package is not installed (pip install 'batch-advisor[accelerate]')"
        return None

    def command(self, job_path: str, nproc: int) -> list[str]:
        return torchrun_command(self.worker_module, job_path, nproc)

    def probe_processes(self, nproc: int, options: dict) -> int:
        # Accelerate wraps the model in DDP (whose all-reduce buckets hold the gradients' size again) only when
        # training is distributed: on CUDA a 1-process Accelerator is MULTI_GPU with num_processes 1, so
        # `use_distributed` is False and prepare_model leaves the model bare. A probe measures what N-process
        # training holds only with N processes.
        return nproc

    def environment(self, device_type: str) -> dict[str, str]:
        env = super().environment(device_type)
        if device_type == "cpu":
            # Without it, Accelerate under torchrun on CPU makes every process rank 0 of 1 (no data parallelism).
            env["ACCELERATE_USE_CPU"] = "1"
        return env

    def export_launch_env(self, device_type: str) -> dict[str, str]:
        # A recipe whose [launch.env] predates it still needs it: under torchrun on CPU every process is rank 0 of 1.
        return {"ACCELERATE_USE_CPU": "1"} if device_type == "cpu" else {}

    def launch_command(self, spec: LaunchSpec) -> list[str]:
        if spec.env.get("ACCELERATE_USE_CPU"):
            # `accelerate launch --cpu --num_processes N` starts one process without MPI: torchrun starts N.
            return torchrun_launch_line(spec)
        where = [f"--num_processes={spec.nproc_per_node * spec.nodes}", f"--num_machines={spec.nodes}"]
        if spec.nodes > 1:
            where += ["--machine_rank=$MACHINE_RANK", "--main_process_ip=$MASTER_ADDR", "--main_process_port=29500"]
        if spec.precision != "fp32":
            where.append(f"--mixed_precision={spec.precision}")
        return [*env_prefix(spec.env), "accelerate", "launch", *where, spec.script, *training_args(spec)]

    def script_command(self, module: str, job_path: str, nproc: int) -> list[str]:
        if _job_device(job_path) == "cpu":
            # `accelerate launch` starts one process on CPU whatever --num_processes says: torchrun starts N.
            return torchrun_command(module, job_path, nproc)
        where = [f"--num_processes={nproc}", "--num_machines=1"] + (["--multi_gpu"] if nproc > 1 else [])
        return [sys.executable, "-m", "accelerate.commands.launch", *where, "--module", module, "--job", job_path]

    def script_server_module(self, module: str, device_type: str) -> str | None:
        return module if device_type == "cpu" else None  # torchrun's launch on CPU (script_command), not accelerate's

    def script_launcher(self, nproc: int, device_type: str) -> list[str]:
        if device_type == "cpu":  # the launch env carries ACCELERATE_USE_CPU=1
            return super().script_launcher(nproc, device_type)
        return ["accelerate", "launch", f"--num_processes={nproc}", "--num_machines=1"] + (
            ["--multi_gpu"] if nproc > 1 else [])


def _job_device(job_path: str) -> str:
    import json
    from pathlib import Path

    return str(json.loads(Path(job_path).read_text()).get("device", "cpu")).split(":")[0]
