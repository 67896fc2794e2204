"""PyTorch FSDP2 (``torch.distributed.fsdp.fully_shard``): parameters, gradients and optimizer state sharded over
the processes, each block all-gathered only while it computes. Launched with torchrun (gloo on CPU, NCCL on CUDA).

Which modules become blocks (each one ``fully_shard``-ed, then the root), in this order:

1. the model declares them: an attribute or method ``fsdp_blocks`` giving the modules (torchtitan shards each
   transformer layer so: ``def fsdp_blocks(self): return list(self.layers)``);
2. a Hugging Face model's ``_no_split_modules`` (the class names transformers never splits across devices);
3. the size policy: bottom-up, every submodule whose parameters not already in a smaller block number at least
   ``--min-block-params`` (default 1,000,000; FSDP1's ``size_based_auto_wrap_policy`` rule).
"""

from __future__ import annotations

from advisor.recipe import RecipeDocument
from advisor.adapters import (ACCELERATE_EXPORT, TORCHRUN_EXPORT, AdapterBase, AdapterOption, BigModelAdvice,
                              Capabilities, NoiseMeasurement, env_prefix, shell_line, torchrun_command, training_args)

# Below ~1M parameters (4 MB in fp32) a block's all-gather costs more in latency than its shard saves.
DEFAULT_MIN_BLOCK_PARAMS = 1_000_000


class FSDPAdapter(AdapterBase):
    name = "fsdp"
    summary = ("PyTorch FSDP2 (fully_shard per block, then the root) via torchrun: parameters, gradients and "
               "optimizer state sharded over the processes")
    # LAMB/LARS need each whole tensor's norm for their trust ratio; FSDP2 hands the optimizer row shards.
    # fp16 needs a sharded-aware GradScaler, which the worker does not run: untested, so not offered.
    capabilities = Capabilities(supports_lamb=False, supports_fp16=False)
    options = (
        AdapterOption("reshard_after_forward", bool, True, "free each block's gathered parameters after its "
                      "forward and all-gather them again in backward (less memory, more communication)"),
        AdapterOption("mixed_precision", str, "autocast", "under a bf16 plan: torch.autocast as the other adapters "
                      "(autocast), or FSDP2's MixedPrecisionPolicy (fsdp: blocks gathered and computed in bf16, "
                      "gradients reduced in fp32)", choices=("autocast", "fsdp")),
        AdapterOption("cpu_offload", bool, False, "FSDP2's CPUOffloadPolicy: sharded parameters, gradients and "
                      "optimizer state in CPU memory, copied to the GPU per block (CUDA only)"),
        AdapterOption("min_block_params", int, DEFAULT_MIN_BLOCK_PARAMS, "the size policy's threshold, for a "
                      "model that declares no fsdp_blocks (and is no Hugging Face model)"),
        AdapterOption("meta_init", bool, False, "build the model on the meta device, shard it, then materialise "
                      "only this rank's shards (reset_parameters per module): no rank ever holds the whole model (the init "
                      "comes from each module's reset_parameters, not the build's own random draws)"),
    )
    worker_module = "advisor_adapters.fsdp_worker"
    exports = (TORCHRUN_EXPORT, ACCELERATE_EXPORT)
    noise = NoiseMeasurement(True, "2+ processes: each rank's local gradient (the reduce-scatter's input) against "
                                   "the reduced one (the squared reduced shards summed over the ranks), read in a "
                                   "custom reduce-scatter on every fully_shard block; one process: not measured "
                                   "(between micro-batches the gradient sits in FSDP's unsharded buffers)")
    big_model = BigModelAdvice("FSDP2", "--meta-init true", "shards parameters, gradients and optimizer state per "
                               "block", offload="FSDP2 --cpu-offload true")

    def version(self) -> str | None:
        from importlib.metadata import version

        return version("torch")

    def command(self, job_path: str, nproc: int) -> list[str]:
        return torchrun_command(self.worker_module, job_path, nproc)

    def probe_processes(self, nproc: int, options: dict) -> int:
        # Each rank holds 1/N of the state: a probe measures what N-process training holds only with N processes.
        return nproc

    def export_block(self, data: dict, target: str) -> tuple[str, list[str]]:
        text, notes = super().export_block(data, target)
        if target == ACCELERATE_EXPORT.name and "use_cpu: true" in text:
            text, notes = _accelerate_on_cpu(data, text, notes, self)
        return text, notes

    def export_accelerate_plugin(self, data: dict) -> tuple[str, list[str]]:
        """Accelerate's FSDP plugin, version 2 (FullyShardedDataParallelPlugin reads these fsdp_config keys through
        `accelerate launch`'s FSDP_* variables), with the options the plan ran."""
        adapter = RecipeDocument.of(data).adapter.options
        classes = adapter.get("block_classes") or []
        if classes:  # the blocks the model declared: Accelerate wraps by class name
            wrap = ["  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP",
                    f"  fsdp_transformer_layer_cls_to_wrap: {','.join(classes)}"]
        else:
            wrap = ["  fsdp_auto_wrap_policy: SIZE_BASED_WRAP",
                    f"  fsdp_min_num_params: {int(adapter.get('min_block_params', DEFAULT_MIN_BLOCK_PARAMS))}"]
        yes = {True: "true", False: "false"}
        return "FSDP", ["fsdp_config:", "  fsdp_version: 2", *wrap,
                        f"  fsdp_reshard_after_forward: {yes[bool(adapter.get('reshard_after_forward', True))]}",
                        f"  fsdp_offload_params: {yes[bool(adapter.get('cpu_offload', False))]}",
                        "  fsdp_state_dict_type: SHARDED_STATE_DICT",
                        "  fsdp_activation_checkpointing: false"]


def _accelerate_on_cpu(data: dict, text: str, notes: list[str], adapter) -> tuple[str, list[str]]:
    """An FSDP config on CPU: `accelerate launch --config_file` starts every process through torchrun (unlike the
    plain CPU configs, which get one), with ACCELERATE_USE_CPU=1 or each process is rank 0 of 1; but Accelerate 1.x
    applies its FSDP plugin only on GPUs and the like, so on CPU it trains plain data parallel (MULTI_CPU)."""
    from advisor.export import ACCELERATE_CONFIG_NAME, recipe_launch_spec

    spec = recipe_launch_spec(data, adapter=adapter)
    line = [*env_prefix({**spec.env, "ACCELERATE_USE_CPU": "1"}), "accelerate", "launch",
            f"--config_file={ACCELERATE_CONFIG_NAME}", spec.script, *training_args(spec)]
    text = "\n".join(f"# Launch: {shell_line(line)}" if row.startswith("# Launch: ") else row
                     for row in text.split("\n"))
    notes = [note for note in notes if not note.startswith("On CPU, `accelerate launch")]
    notes.insert(0, "On CPU, Accelerate 1.x reads this FSDP plugin but applies it only on GPUs: it trains plain data "
                    "parallel (MULTI_CPU) there. To shard on CPU, call fully_shard in the script and use "
                    "`advisor export --to torchrun`.")
    return text, notes
