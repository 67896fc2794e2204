"""A DataTable whose cells and header keep up with their columns as new rows widen them."""

from __future__ import annotations

from textual.widgets import DataTable


class GrowingTable(DataTable):
    """DataTable with one fix. Textual (8.2) widens a column on idle after ``add_row``, but its row and cell
    caches are keyed on an update count, not on widths, and nothing bumps that count unless the widget's own
    size changes. A table of fixed size (ours span the screen) then keeps painting whatever it painted before the
    widths changed: labels and values at the old widths, off each other, until the next change of any kind."""

    def _update_dimensions(self, new_rows) -> None:
        super()._update_dimensions(new_rows)
        self._clear_caches()
