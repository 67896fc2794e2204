"""batch-advisor: choose the batch size for data-parallel PyTorch training.

The engine is a plain library (no UI imports). Training code reads a recipe with
``advisor.load_recipe(path)``; a user's workload function returns
``advisor.Workload``.
"""

__version__ = "0.1.0"

from .errors import AdvisorError, RecipeError, WorkloadError  # noqa: E402

# Loaded on first use (module __getattr__): `advisor diagnose` imports advisor.diagnose, which runs this file, and
# the recipe reader (tomllib, typing, dataclasses) would cost it ~25 ms of start-up it never uses.
_LAZY = {"Recipe": ("recipe", "Recipe"), "load_recipe": ("recipe", "load_recipe"), "Workload": ("workload", "Workload")}


def report(**metrics: float) -> None:
    """``advisor.report(accuracy=0.91)`` in a training script: a validation metric the script door's sweep ranks
    by (prefixed ``val_`` unless named so). Outside an advisor run it does nothing."""
    from .shim import report as shim_report

    shim_report(**metrics)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = globals()[name] = getattr(importlib.import_module(f".{module}", __name__), attribute)
        return value  # cached: the next access is a plain attribute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["AdvisorError", "Recipe", "RecipeError", "Workload", "WorkloadError", "load_recipe", "report",
           "__version__"]
