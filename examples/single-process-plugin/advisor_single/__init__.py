"""A minimal batch-advisor adapter: one process, the engine's default plain-PyTorch worker loop.

The launcher side names itself, says what it can do, declares its one option, gives the command
that starts its worker, and declares the rest of the adapter protocol (docs/plugins.md): its launch
line, its export targets and how it renders them, how the noise scale is measured (here: it is not),
and what it advises for a model larger than one device (nothing: it does not shard). Environment
and validation come from AdapterBase's defaults.
"""

import sys

from advisor.adapters import (TORCHRUN_EXPORT, AdapterBase, AdapterOption, Capabilities, ExportTarget, LaunchSpec,
                              NoiseMeasurement, env_prefix, shell_line, training_args)

# One process needs no launcher: `advisor export RECIPE --to python` prints the plain command.
PYTHON_EXPORT = ExportTarget("python", "the plain `python train.py` line with the plan's numbers (one process "
                                       "needs no launcher)")


class SingleProcessAdapter(AdapterBase):
    name = "single"
    summary = "example plugin: one plain PyTorch process (no data parallelism)"
    capabilities = Capabilities(multi_process=False, supports_lamb=False,
                                optimizers=frozenset({"sgd", "adam", "adamw"}))
    # `advisor plan --threads N`, a field in the app, checked against the choices, recorded in the recipe.
    options = (AdapterOption("threads", int, 1, "intra-op CPU threads of the one process (torch.set_num_threads)",
                             choices=(1, 2, 4)),)
    # Its own target first, then a generic one AdapterBase renders (torchrun with one process).
    exports = (PYTHON_EXPORT, TORCHRUN_EXPORT)
    # One process has no replicas to compare, and its worker runs no accumulation run (noise_by_accumulation).
    noise = NoiseMeasurement(False, "one process and no accumulation run: no two gradients at different batch "
                                    "sizes to compare, so the noise scale is stated unknown")
    big_model = None  # it does not shard: the advice for a model larger than one device names the adapters that do

    def command(self, job_path: str, nproc: int) -> list[str]:
        return [sys.executable, "-m", "advisor_single.worker", "--job", job_path]

    def launch_command(self, spec: LaunchSpec) -> list[str]:
        return [*env_prefix(spec.env), "python", spec.script, *training_args(spec)]

    def export_block(self, data: dict, target: str) -> tuple[str, list[str]]:
        if target == PYTHON_EXPORT.name:
            from advisor.export import recipe_launch_spec

            return shell_line(self.launch_command(recipe_launch_spec(data, adapter=self))) + "\n", []
        return super().export_block(data, target)  # the generic ones it declares
