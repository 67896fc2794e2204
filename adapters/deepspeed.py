"""DeepSpeed: deepspeed.initialize with the config the plan produces (ZeRO stage, precision, warmup)."""

from __future__ import annotations

import sys

from advisor.adapters import (AdapterBase, AdapterOption, BigModelAdvice, Capabilities, LaunchSpec, NoiseMeasurement,
                              env_prefix, torchrun_command)
from advisor.errors import ExportError
from advisor.export_formats import layerwise_zero_problem, recipe_numbers
from advisor.recipe import RecipeDocument

from .accelerate import package_version

DEFAULT_ZERO_STAGE = 2  # the adapter's stage unless the optimizer needs whole tensors (choose_zero_stage)


def choose_zero_stage(optimizer: str, asked: int | None) -> tuple[int, str]:
    """(ZeRO stage, why). ``asked``: the user's --zero-stage, or None. A layer-wise optimizer at an explicit
    stage above 0 raises ExportError (plan_options turns it into a set-up error)."""
    from advisor.optimizers import LAYERWISE

    if asked is not None:
        problem = layerwise_zero_problem(optimizer, asked)
        if problem:
            raise ExportError(problem + ".")
        return asked, f"ZeRO stage {asked}, as asked (--zero-stage {asked})."
    if optimizer.lower() in LAYERWISE:
        return 0, (f"ZeRO stage 0 because {optimizer.upper()} needs whole parameter tensors for its per-tensor "
                   "trust ratio; ZeRO 1-3 would hand it flat per-rank partitions (optimizer state and gradients "
                   "are replicated on every device instead of sharded).")
    return DEFAULT_ZERO_STAGE, f"ZeRO stage {DEFAULT_ZERO_STAGE}, the adapter's default (--zero-stage to change)."


def recipe_zero_stage(recipe: dict | RecipeDocument) -> tuple[int, str]:
    """(ZeRO stage, why) a DeepSpeed-adapter recipe ran: its [adapter] zero_stage, checked against its optimizer;
    the reason the plan recorded, else the rule's."""
    doc = RecipeDocument.of(recipe)
    asked = doc.adapter.options.get("zero_stage")
    stage, why = choose_zero_stage(recipe_numbers(doc).optimizer, None if asked is None else int(asked))
    return stage, doc.adapter.options.get("zero_stage_reason") or why


def accelerate_deepspeed_plugin(recipe: dict | RecipeDocument, zero_stage: int) -> tuple[str, list[str]]:
    """Accelerate's DeepSpeed plugin section at ``zero_stage`` (the adapter's ``export_accelerate_plugin``)."""
    return "DEEPSPEED", ["deepspeed_config:", f"  zero_stage: {zero_stage}",
                         f"  gradient_accumulation_steps: {recipe_numbers(recipe).accumulation}",
                         "  offload_optimizer_device: none", "  offload_param_device: none",
                         "  deepspeed_multinode_launcher: standard"]


class DeepSpeedAdapter(AdapterBase):
    name = "deepspeed"
    summary = ("Microsoft DeepSpeed: deepspeed.initialize with the plan's config, ZeRO 0-3 (--zero-stage, default 2; "
               "0 with LAMB/LARS)")
    capabilities = Capabilities(supports_lamb=True)
    # No default here: without a stage asked for, plan_options picks one for the optimizer (2, or 0 with LAMB/LARS).
    options = (AdapterOption("zero_stage", int, None, f"DeepSpeed ZeRO stage (default {DEFAULT_ZERO_STAGE}; "
                             "0 with LAMB/LARS, which need whole tensors)", choices=(0, 1, 2, 3)),)
    package = "deepspeed"
    worker_module = "advisor_adapters.deepspeed_worker"
    noise = NoiseMeasurement(False, "not measured: engine.backward reduces the gradients itself (ZeRO 1-2 reduce, "
                                    "ZeRO 3 reduce-scatter them, in its own buckets) and nothing reads a replica's "
                                    "gradient before that, so the noise scale is stated unknown")
    big_model = BigModelAdvice("DeepSpeed", "--zero-stage 3", "partitions parameters, gradients and optimizer state",
                               offload="ZeRO-Offload")

    def version(self) -> str | None:
        return package_version(self.package)

    def unavailable_reason(self) -> str | None:
        if self.version() is None:
            return "the deepspeed package is not installed (pip install 'batch-advisor[deepspeed]')"
        from advisor.extensions import stale_build_locks, stale_lock_message

        stale = stale_build_locks()
        return stale_lock_message(stale) if stale else None

    def command(self, job_path: str, nproc: int) -> list[str]:
        return torchrun_command(self.worker_module, job_path, nproc)

    def validate_options(self, options: dict) -> dict:
        # zero_stage_reason is not a user option: plan_options writes it, and its output comes back here.
        reason = options.get("zero_stage_reason")
        checked = super().validate_options({k: v for k, v in options.items() if k != "zero_stage_reason"})
        checked["zero_stage"] = DEFAULT_ZERO_STAGE if checked["zero_stage"] is None else checked["zero_stage"]
        return {**checked, "zero_stage_reason": reason} if reason else checked

    def plan_options(self, options: dict, optimizer: str, precision: str) -> dict:
        """The ZeRO stage for this optimizer: LAMB/LARS need whole tensors, so stage 0 unless asked otherwise,
        and an explicit stage 1-3 with them is refused. At stage 0 DeepSpeed 0.19 keeps one fp32 master tensor
        per parameter in every precision (FP16_UnfusedOptimizer for fp16 and bf16; pinned in tests), so the
        precision does not change the answer."""
        from advisor.errors import SetupError

        asked = AdapterBase.validate_options(self, {k: v for k, v in options.items() if k != "zero_stage_reason"})
        try:  # None: no stage asked for, so the optimizer's
            stage, reason = choose_zero_stage(optimizer, asked["zero_stage"])
        except ExportError as exc:
            raise SetupError(f"--zero-stage {asked['zero_stage']} with --optimizer {optimizer}: {exc}") from None
        return {"zero_stage": stage, "zero_stage_reason": reason}

    def probe_processes(self, nproc: int, options: dict) -> int:
        # ZeRO >= 1 shards optimizer state (2: gradients too, 3: parameters) over the processes, so
        # per-device memory depends on how many there are: probe with the plan's processes.
        return nproc if self.validate_options(options)["zero_stage"] >= 1 else 1

    def environment(self, device_type: str) -> dict[str, str]:
        env = super().environment(device_type)
        if device_type == "cpu":
            env["OMP_NUM_THREADS"] = "1"  # the deepspeed launcher leaves it unset: ~20x slower CPU steps
        return env

    def recipe_extras(self, options: dict) -> dict:
        options = self.validate_options(options)
        stage = options["zero_stage"]
        extras = {"zero_stage": stage, "version": self.version(), "config": "advisor export RECIPE --to deepspeed"}
        if options.get("zero_stage_reason"):
            extras["zero_stage_reason"] = options["zero_stage_reason"]
        if stage >= 1:
            sharded = "parameters, gradients and optimizer state" if stage == 3 else (
                "gradients and optimizer state" if stage == 2 else "optimizer state")
            extras["probe_world_size"] = (
                "the ceiling probes ran with every process of this host (--nproc; the number is [ceiling] "
                f"probe_world_size): ZeRO stage {stage} shards {sharded} over the processes, so per-device memory "
                "depends on their number. A smaller world needs more memory per device than the ceiling measured "
                "(plan again with that --nproc before running on fewer devices); a bigger target cluster needs less")
        return extras

    def launch_command(self, spec: LaunchSpec) -> list[str]:
        where = [f"--num_gpus={spec.nproc_per_node}"]
        if spec.nodes > 1:
            where = [f"--num_nodes={spec.nodes}", *where, "--hostfile=hostfile",
                     "--master_addr=$MASTER_ADDR", "--master_port=29500"]
        return [*env_prefix(spec.env), "deepspeed", *where, spec.script, "--deepspeed",
                "--deepspeed_config=ds_config.json"]

    def script_command(self, module: str, job_path: str, nproc: int) -> list[str]:
        import socket

        with socket.socket() as sock:  # the deepspeed launcher's default port may be taken by another run
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return [sys.executable, "-m", "deepspeed.launcher.runner", f"--num_gpus={nproc}", f"--master_port={port}",
                "--module", module, "--job", job_path]

    def script_server_module(self, module: str, device_type: str) -> str | None:
        return None  # DeepSpeed's launcher hands every process --local_rank, which a forked rank would miss

    def script_launcher(self, nproc: int, device_type: str) -> list[str]:
        return ["deepspeed", f"--num_gpus={nproc}"]

    def export_zero_stage(self, data: dict) -> tuple[int, str | None]:
        return recipe_zero_stage(data)  # the stage the plan ran, checked against its optimizer

    def export_accelerate_plugin(self, data: dict) -> tuple[str, list[str]] | None:
        return accelerate_deepspeed_plugin(data, recipe_zero_stage(data)[0])
