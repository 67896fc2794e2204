"""batch-advisor: choose the batch size for data-parallel PyTorch training.

The engine is a plain library (no UI imports). Training code reads a recipe with
``advisor.load_recipe(path)``; a user's workload function returns
``advisor.Workload``.
"""

__version__ = "0.1.0"

from .errors import AdvisorError, RecipeError, WorkloadError  # noqa: E402
from .recipe import Recipe, load_recipe  # noqa: E402


def report(**metrics: float) -> None:
    """``advisor.report(accuracy=0.91)`` in a training script: a validation metric the script door's sweep ranks
    by (prefixed ``val_`` unless named so). Outside an advisor run it does nothing."""
    from .shim import report as shim_report

    shim_report(**metrics)


def __getattr__(name):
    # Workload pulls in nothing heavy, but keep `import advisor` minimal for recipe readers.
    if name == "Workload":
        from .workload import Workload

        return Workload
    raise AttributeError(name)


__all__ = ["AdvisorError", "Recipe", "RecipeError", "Workload", "WorkloadError", "load_recipe", "report",
           "__version__"]
