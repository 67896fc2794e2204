"""The adapter protocol and the entry-point registry (group ``batch_advisor.adapters``).

An adapter says what it can do (capabilities) and how to launch N workers of
its flavour; the engine never asks which adapter it is talking to. Names are
listed without importing anything; only the chosen adapter is imported; when
several plugins share a name the last one wins; a plugin that fails to import
prints one warning and the others keep working.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from .errors import AdapterError

ENTRY_POINT_GROUP = "batch_advisor.adapters"


@dataclass(frozen=True)
class Capabilities:
    supports_accumulation: bool = True
    supports_lamb: bool = False
    supports_bf16: bool = True
    supports_fp16: bool = True
    multi_process: bool = True


@runtime_checkable
class Adapter(Protocol):
    name: str
    summary: str
    capabilities: Capabilities

    def command(self, job_path: str, nproc: int) -> list[str]:
        """argv that starts ``nproc`` workers running the job in ``job_path``."""
        ...


def torchrun_command(worker_module: str, job_path: str, nproc: int) -> list[str]:
    """torch's own launcher on one node; --standalone picks a free rendezvous port."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
            f"--nproc-per-node={nproc}", "--max-restarts=0", "-m", worker_module, "--job", job_path]


def available_adapters() -> dict[str, str]:
    """Adapter name -> 'module:attr', without importing any plugin."""
    found: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value  # later entries win
    return found


def load_adapter(name: str) -> Adapter:
    eps = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not eps:
        known = ", ".join(sorted(available_adapters())) or "none (is batch-advisor installed?)"
        raise AdapterError(
            f"Unknown adapter {name!r}. Installed adapters: {known}. Third-party adapters register under the "
            f"entry-point group {ENTRY_POINT_GROUP!r}."
        )
    ep = eps[-1]
    try:
        factory = ep.load()
    except Exception as exc:  # a broken plugin must not take the tool down
        raise AdapterError(
            f"The adapter {name!r} ({ep.value}) failed to import: {type(exc).__name__}: {exc}. "
            "Install its dependencies or choose another adapter with --adapter."
        ) from None
    # A class is instantiated; an instance is used as is; any other callable is a factory function.
    # (A class object passes the Protocol's attribute check too, so test for it first.)
    if isinstance(factory, type) or (callable(factory) and not isinstance(factory, Adapter)):
        adapter = factory()
    else:
        adapter = factory
    if not isinstance(adapter, Adapter):
        raise AdapterError(
            f"The adapter {name!r} ({ep.value}) does not implement the adapter protocol "
            "(name, summary, capabilities, command(job_path, nproc))."
        )
    return adapter


def describe_adapters() -> list[tuple[str, str]]:
    """(name, summary) for every installed adapter; broken ones get a warning on stderr and are skipped."""
    rows = []
    for name in sorted(available_adapters()):
        try:
            rows.append((name, load_adapter(name).summary))
        except AdapterError as exc:
            print(f"warning: {exc}", file=sys.stderr)
    return rows
