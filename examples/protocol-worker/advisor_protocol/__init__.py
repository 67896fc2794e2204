"""An adapter whose worker is written from docs/plugins.md's protocol section alone (job file, event
lines, exit codes), without advisor.worker.worker_main: the shape a Horovod, Ray or home-made
launcher takes. One process on the CPU; it answers ceiling probes only."""

import sys

from advisor.adapters import Capabilities


class ProtocolAdapter:
    """Only the minimal protocol: the engine supplies AdapterBase's defaults for the rest."""

    name = "protocol"
    summary = "example plugin: a hand-written worker that speaks the event protocol (probes only, CPU)"
    capabilities = Capabilities(multi_process=False, supports_lamb=False, supports_bf16=False, supports_fp16=False,
                                optimizers=frozenset({"sgd", "adam", "adamw"}))

    def command(self, job_path: str, nproc: int) -> list[str]:
        return [sys.executable, "-m", "advisor_protocol.worker", "--job", job_path]
