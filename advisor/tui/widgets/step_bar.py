"""The row of steps under the header: done, current, reachable or locked; click one to go there."""

from __future__ import annotations

from textual.widgets import Static


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

    def update_steps(self) -> None:
        from ..app import STEPS

        app = self.app
        parts = []
        for number, (name, title) in enumerate(STEPS, 1):
            if name == self.current:
                mark, style = "●", "bold reverse"
            elif name in app.done:
                mark, style = "✓", "green"
            elif app.reachable(name):
                mark, style = "○", ""
            else:
                mark, style = "·", "dim"
            label = f"{number} {mark} {title}"
            parts.append(f"[@click=app.goto('{name}')]" + (f"[{style}]{label}[/]" if style else label) + "[/]")
        self.update("  ›  ".join(parts))
