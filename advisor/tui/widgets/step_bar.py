"""The row of steps under the header: done, current, reachable or locked; click one to go there."""

from __future__ import annotations

from textual.widgets import Static

# Shorter titles for a narrow terminal: at 80 columns the full row is ~100 cells and hid steps 5 and 6.
SHORT_TITLES = {"ceiling": "Ceiling", "start": "Start value", "trial": "Trial"}
# (separator, short titles), widest first: the first form that fits the bar is drawn.
FORMS = (("  ›  ", False), (" › ", False), (" › ", True), ("›", True))


class StepBar(Static):
    DEFAULT_CSS = """
    StepBar {
        height: 1;
        padding: 0 1;
        background: $boost;
    }
    """

    def __init__(self, current: str, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.current = current

    def on_mount(self) -> None:
        self.update_steps()

    def on_resize(self) -> None:
        self.update_steps()

    def labels(self, short: bool) -> list[tuple[str, str, str]]:
        """(step name, label, style) for each step, in order."""
        from ..steps import STEPS

        app = self.app
        labels = []
        for number, (name, title) in enumerate(STEPS, 1):
            if name == self.current:
                mark, style = "●", "bold reverse"
            elif name in app.done:
                mark, style = "✓", "green"
            elif app.reachable(name):
                mark, style = "○", ""
            else:
                mark, style = "·", "dim"
            labels.append((name, f"{number} {mark} {SHORT_TITLES.get(name, title) if short else title}", style))
        return labels

    def update_steps(self) -> None:
        width = self.content_size.width or 10_000  # not laid out yet: the widest form; a resize redraws it
        for separator, short in FORMS:
            labels = self.labels(short)
            if sum(len(label) for _, label, _ in labels) + len(separator) * (len(labels) - 1) <= width:
                break
        parts = [f"[@click=app.goto('{name}')]" + (f"[{style}]{label}[/]" if style else label) + "[/]"
                 for name, label, style in labels]
        self.update(separator.join(parts))
