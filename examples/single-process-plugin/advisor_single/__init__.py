"""A minimal batch-advisor adapter: one process, the engine's default plain-PyTorch worker loop.

The launcher side names itself, says what it can do, and gives the command that starts its worker;
everything else (environment, options, launch line) comes from AdapterBase's defaults.
"""

import sys

from advisor.adapters import AdapterBase, Capabilities


class SingleProcessAdapter(AdapterBase):
    name = "single"
    summary = "example plugin: one plain PyTorch process (no data parallelism)"
    capabilities = Capabilities(multi_process=False, supports_lamb=False,
                                optimizers=frozenset({"sgd", "adam", "adamw"}))

    def command(self, job_path: str, nproc: int) -> list[str]:
        return [sys.executable, "-m", "advisor_single.worker", "--job", job_path]
