"""A table that never cuts a value: its label column takes the width the value columns leave and wraps its
text over more lines, so at 80 columns a label grows taller while every number still shows whole."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

from .growing_table import GrowingTable

SCROLLBAR_RESERVE = 2  # a long table grows a vertical scrollbar; its cells must still fit beside it


def plain_width(cell) -> int:
    """The widest line of a cell as shown (markup removed)."""
    text = cell if isinstance(cell, Text) else Text.from_markup(str(cell))
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


class FittedTable(GrowingTable):
    """``fill(columns, rows)`` instead of add_column/add_row: the column at ``label_column`` shrinks and wraps
    to fit the table's width (never below ``min_label_width``); every other column is as wide as its widest
    value. A resize refits."""

    def __init__(self, *, label_column: int = 0, min_label_width: int = 12, **kwargs) -> None:
        super().__init__(**kwargs)
        self.label_column, self.min_label_width = label_column, min_label_width
        self._columns: list[str] = []
        self._rows: list[tuple] = []
        self._keys: list[str | None] = []
        self._fitted_width = 0

    def fill(self, columns: list[str], rows: list[tuple], keys: list[str | None] | None = None) -> None:
        self._columns, self._rows = list(columns), [tuple(row) for row in rows]
        self._keys = list(keys) if keys is not None else [None] * len(self._rows)
        self._refill()

    def label_width(self) -> int | None:
        """The label column's width, or None (its natural width) when everything fits or before layout."""
        width = self.size.width
        if not width or not self._columns:
            return None
        pad = 2 * self.cell_padding
        widths = [max([plain_width(label), *(plain_width(row[i]) for row in self._rows)])
                  for i, label in enumerate(self._columns)]
        others = sum(w + pad for i, w in enumerate(widths) if i != self.label_column)
        room = width - others - pad - SCROLLBAR_RESERVE
        natural = widths[self.label_column]
        return None if natural <= room else max(self.min_label_width, room)

    def _refill(self) -> None:
        row = self.cursor_row
        self._fitted_width = self.size.width
        label_width = self.label_width()
        self.clear(columns=True)
        for index, label in enumerate(self._columns):
            self.add_column(label, width=label_width if index == self.label_column else None)
        for cells, key in zip(self._rows, self._keys):
            self.add_row(*cells, key=key, height=None)  # auto height: a wrapped label takes more lines
        if self._rows:
            self.move_cursor(row=min(row, len(self._rows) - 1))

    def on_resize(self, event) -> None:
        if self._columns and event.size.width != self._fitted_width:
            self._refill()
