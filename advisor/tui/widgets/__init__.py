"""Reusable widgets of the app; each keeps its own DEFAULT_CSS."""

from .charts import Chart, CurvesChart, MemoryChart
from .fitted_table import FittedTable
from .growing_table import GrowingTable
from .numbers import Numbers
from .reflow_log import ReflowLog
from .run_progress import RunProgress
from .step_bar import StepBar

__all__ = ["Chart", "CurvesChart", "FittedTable", "GrowingTable", "MemoryChart", "Numbers", "ReflowLog", "RunProgress", "StepBar"]
