"""A RichLog whose wrapped lines follow its width.

Textual's RichLog wraps a line once, at the width the log has when it is written: a log written before the
layout settled, or before the terminal was resized, keeps lines cut at its right edge ("under +10  │") or
wrapped at a narrow width on a wide screen. This one keeps what was written and writes it again whenever the
width of its text changes."""

from __future__ import annotations

from typing import NamedTuple

from rich.text import Text
from textual.events import Resize
from textual.widgets import RichLog


class _Entry(NamedTuple):
    content: object
    width: int | None
    expand: bool
    shrink: bool


class ReflowLog(RichLog):
    """A RichLog that re-wraps every line it holds when its width changes."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._entries: list[_Entry] = []
        self._wrapped_width = 0  # the text width the lines were last wrapped at

    def write(self, content, width: int | None = None, expand: bool = False, shrink: bool = True,
              scroll_end: bool | None = None, animate: bool = False):
        if isinstance(content, Text):
            content = content.copy()
        self._entries.append(_Entry(content, width, expand, shrink))
        if self.max_lines is not None and len(self._entries) > self.max_lines:
            del self._entries[:-self.max_lines]  # an entry is at least one line: these are enough
        if not self._size_known:
            return self  # written once the width is known (on_resize)
        self._wrapped_width = self.scrollable_content_region.width
        return super().write(content, width, expand, shrink, scroll_end, animate)

    def clear(self):
        self._entries = []
        return super().clear()

    def on_resize(self, event: Resize) -> None:
        # Does RichLog's part too (its deferred writes are the entries here): it must not write them twice.
        event.prevent_default()
        if not event.size.width:
            return
        self._size_known = True
        width = self.scrollable_content_region.width
        if width != self._wrapped_width:
            self.reflow()

    def reflow(self) -> None:
        """Write every entry again at the current width; the view stays at the end if it was there."""
        # Anchoring (and its release by scrolling up) came in later Textual releases than the ones pyproject allows
        anchored = getattr(self, "is_anchored", False) and not getattr(self, "_anchor_released", False)
        at_end = self.scroll_y >= self.max_scroll_y or anchored
        entries = self._entries
        super().clear()
        self._entries = []
        for entry in entries:
            self.write(entry.content, entry.width, entry.expand, entry.shrink, scroll_end=False)
        self._wrapped_width = self.scrollable_content_region.width
        if at_end:
            self.scroll_end(animate=False, immediate=False, x_axis=False)
