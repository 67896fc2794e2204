"""A minimal batch-advisor adapter: one process, the engine's default plain-PyTorch worker loop.

The launcher side names itself, says what it can do, declares its one option and gives the command
that starts its worker; everything else (environment, validation, launch line) comes from
AdapterBase's defaults.
"""

import sys

from advisor.adapters import AdapterBase, AdapterOption, Capabilities


class SingleProcessAdapter(AdapterBase):
    name = "single"
    summary = "example plugin: one plain PyTorch process (no data parallelism)"
    capabilities = Capabilities(multi_process=False, supports_lamb=False,
                                optimizers=frozenset({"sgd", "adam", "adamw"}))
    # `advisor plan --threads N`, a field in the app, checked against the choices, recorded in the recipe.
    options = (AdapterOption("threads", int, 1, "intra-op CPU threads of the one process (torch.set_num_threads)",
                             choices=(1, 2, 4)),)

    def command(self, job_path: str, nproc: int) -> list[str]:
        return [sys.executable, "-m", "advisor_single.worker", "--job", job_path]
