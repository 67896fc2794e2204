"""Reusable widgets of the app; each keeps its own DEFAULT_CSS."""

from .charts import Chart, MemoryChart
from .numbers import Numbers
from .step_bar import StepBar

__all__ = ["Chart", "MemoryChart", "Numbers", "StepBar"]
