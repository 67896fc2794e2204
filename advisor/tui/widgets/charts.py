"""Plots: memory against batch (step 1), curves by batch size (steps 3 and 4), a diagnosed log's curves."""

from __future__ import annotations

from textual_plotext import PlotextPlot

from ...diagnose.plot import Picture, draw_plotext

MIB = 1024 * 1024
COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red", "orange", "white")


class Chart(PlotextPlot):
    """Named series of (x, y) points, redrawn whenever one changes."""

    DEFAULT_CSS = """
    Chart {
        height: 1fr;
        min-height: 10;
    }
    """

    def __init__(self, title: str, xlabel: str, ylabel: str, points: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.title, self.xlabel, self.ylabel, self.points = title, xlabel, ylabel, points
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        self.hlines: list[tuple[float, str]] = []
        self.vlines: list[tuple[float, str]] = []

    def on_mount(self) -> None:
        super().on_mount()
        self.redraw()

    def clear(self) -> None:
        self.series.clear()
        self.hlines.clear()
        self.vlines.clear()
        self.redraw()

    def add_point(self, name: str, x: float, y: float) -> None:
        xs, ys = self.series.setdefault(name, ([], []))
        xs.append(x)
        ys.append(y)
        self.redraw()

    def set_series(self, name: str, xs: list[float], ys: list[float]) -> None:
        self.series[name] = (list(xs), list(ys))
        self.redraw()

    def redraw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        plt.title(self.title)
        plt.xlabel(self.xlabel)
        plt.ylabel(self.ylabel)
        for index, (name, (xs, ys)) in enumerate(self.series.items()):
            if xs:
                self._draw(plt, name, xs, ys, COLORS[index % len(COLORS)])
        for y, color in self.hlines:
            plt.hline(y, color)
        for x, color in self.vlines:
            plt.vline(x, color)
        self.refresh()

    def _draw(self, plt, name, xs, ys, color) -> None:
        if self.points:
            plt.scatter(xs, ys, label=name, color=color, marker="o")
        else:
            plt.plot(xs, ys, label=name, color=color, marker="braille")


class MemoryChart(Chart):
    """Peak memory of each probe against its batch, the fitted line, the budget and the ceiling."""

    def __init__(self, **kwargs) -> None:
        super().__init__("Peak memory vs batch per device", "batch per device", "MiB", **kwargs)

    def show(self, probes, budget_bytes: int | None, result=None) -> None:
        self.series.clear()
        self.hlines.clear()
        self.vlines.clear()
        ok = sorted((t.batch, t.peak_bytes / MIB) for t in probes if t.status == "ok" and t.peak_bytes)
        oom = sorted(t.batch for t in probes if t.status != "ok")
        if ok:
            self.series["fits"] = ([b for b, _ in ok], [m for _, m in ok])
        if oom and budget_bytes:
            self.series["OOM"] = (oom, [budget_bytes / MIB] * len(oom))
        if result is not None and result.fit is not None:
            top = max([t.batch for t in probes] + [result.per_device_max])
            xs = [top * i / 20 for i in range(21)]
            self.series["fit"] = (xs, [result.fit.bytes_at(x) / MIB for x in xs])
        if budget_bytes:
            self.hlines.append((budget_bytes / MIB, "red"))
        if result is not None:
            self.vlines.append((result.per_device_max, "green"))
        self.redraw()

    def _draw(self, plt, name, xs, ys, color) -> None:
        if name == "fit":
            plt.plot(xs, ys, label="fitted line", color="blue", marker="braille")
        elif name == "OOM":
            plt.scatter(xs, ys, label="OOM (at the budget)", color="red", marker="x")
        else:
            plt.scatter(xs, ys, label="probe fits", color="green", marker="o")


class CurvesChart(PlotextPlot):
    """A diagnosed log's loss curves and its findings' marks: the picture `advisor diagnose --plot` draws, from the
    same model (advisor.diagnose.plot), with the chosen finding's mark named."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.picture: Picture | None = None
        self.highlight: int | None = None

    def show(self, picture: Picture | None, highlight: int | None = None) -> None:
        self.picture, self.highlight = picture, highlight
        self.redraw()

    def on_mount(self) -> None:
        super().on_mount()
        self.redraw()

    def redraw(self) -> None:
        if self.picture is None:
            self.plt.clear_figure()
        else:
            draw_plotext(self.plt, self.picture, self.highlight)
        self.refresh()
