"""Reusable widgets of the app; each keeps its own DEFAULT_CSS."""

from .charts import Chart, MemoryChart
from .fitted_table import FittedTable
from .numbers import Numbers
from .step_bar import StepBar

__all__ = ["Chart", "FittedTable", "MemoryChart", "Numbers", "StepBar"]
