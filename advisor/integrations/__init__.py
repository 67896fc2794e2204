"""Factories that turn the training code of a framework users already have into an ``advisor.Workload``.

Each integration is an optional extra: importing ``advisor`` (or this package) imports no framework; a
module here imports its framework only when a factory is called, in the process that trains.
"""

from __future__ import annotations

from ..errors import WorkloadError


def require(module: str, extra: str):
    """Import ``module`` or raise one clear WorkloadError naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise WorkloadError(
            f"This workload needs the {module!r} package ({exc}): pip install 'batch-advisor[{extra}]' "
            f"(or pip install {module}) in the environment the advisor runs in.") from None
