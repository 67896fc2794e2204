"""A table of numbers that explain themselves: the highlighted row's rule and inputs show below it,
and Enter (or e) opens the whole explanation."""

from __future__ import annotations

from rich.markup import escape
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from .fitted_table import FittedTable


class ExplainedTable(FittedTable):
    """A table whose rows carry a reason: hovering a row shows it as a tooltip; its labels wrap, its values
    never get cut."""

    reasons: list[str] = []

    def watch_hover_coordinate(self, old, value) -> None:
        super().watch_hover_coordinate(old, value)
        row = value.row
        self.tooltip = self.reasons[row] if 0 <= row < len(self.reasons) and self.reasons[row] else None


class Numbers(Vertical):
    DEFAULT_CSS = """
    Numbers {
        height: auto;
    }
    Numbers > DataTable {
        height: auto;
        max-height: 14;
    }
    Numbers > .why {
        height: auto;
        max-height: 4;
        padding: 0 1;
        color: $text-muted;
    }
    """
    BINDINGS = [Binding("e", "explain", "Explain number")]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._rows: list[tuple[str, str, str]] = []

    def compose(self):
        yield ExplainedTable(cursor_type="row", show_header=False, zebra_stripes=True)
        yield Static("", classes="why")

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    def set_rows(self, rows: list[tuple[str, str, str]]) -> None:
        """``rows``: (what, value, why: the rule and the inputs that produced the value)."""
        self._rows = list(rows)
        table = self.table
        table.reasons = [why for _, _, why in self._rows]
        table.fill(["quantity", "value"], [(label, value) for label, value, _ in self._rows],
                   keys=[str(index) for index in range(len(self._rows))])
        self._show_why(0)

    def _show_why(self, index: int) -> None:
        why = self.query_one(".why", Static)
        if 0 <= index < len(self._rows):
            label, _, text = self._rows[index]
            first = text.split("\n")[0]
            why.update(f"[b]{escape(label)}[/b]: {escape(first)} [dim](e: the whole rule)[/dim]" if first else "")
        else:
            why.update("")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_why(event.cursor_row)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self._explain(event.cursor_row)

    def action_explain(self) -> None:
        self._explain(self.table.cursor_row)

    def _explain(self, index: int) -> None:
        if 0 <= index < len(self._rows):
            label, value, text = self._rows[index]
            self.app.explain(f"{label}: {value}", text or "No further explanation.")
