"""The picture of a diagnosis: the loss curves a log held and where each finding starts (`advisor diagnose --plot`).

One model, two renderers. ``picture_of`` turns a report (its series and findings) into curves and marks; the
terminal drawing (plotext, here and in the app's Diagnose screen) and the file drawing (SVG, also inside a
self-contained HTML page) both draw that model and nothing else. Plain Python: no UI import.
"""

from __future__ import annotations

import bisect
import math
from xml.sax.saxutils import escape

from .curves import finding_start
from .records import Finding, dataclass, field

PLOT_SUFFIXES = (".html", ".svg", ".txt")
# The loss series a log can hold, by what they measure: (stage, cadence the name implies).
LOSS_SERIES = {"train_loss": ("train", None), "train_loss_epoch": ("train", "epoch"), "val_loss": ("val", None),
               "val_loss_epoch": ("val", "epoch"), "test_loss": ("test", None), "test_loss_epoch": ("test", "epoch")}
STAGE_WORDS = {"train": "train", "val": "validation", "test": "test"}
LOG_SCALE_RANGE = 1000.0  # positive values spanning this factor or more are drawn on a log axis (an explosion)
MAX_DRAWN_POINTS = 1200  # per curve in a file: the min and max of each bucket keep every spike visible
CURVE_COLORS = {"train": "#1f77b4", "val": "#ff7f0e", "test": "#2ca02c"}
TERMINAL_COLORS = {"train": "cyan", "val": "magenta", "test": "green"}
TERMINAL_MARKERS = {"train": "braille", "val": "dot", "test": "+"}  # told apart without colour too (a .txt file)
MARK_COLORS = {"error": "#d62728", "warning": "#b8860b"}
TERMINAL_MARK_COLORS = {"error": "red", "warning": 11}  # plotext's "yellow" is 256-colour 12, a blue; 11 is yellow


@dataclass
class Curve:
    label: str  # "train loss (per step)"
    stage: str  # train | val | test
    cadence: str | None  # step | epoch | None (the source did not say)
    xs: list[float]
    ys: list[float]


@dataclass
class Mark:
    number: int  # the finding's number, as the text report counts them
    x: float
    kind: str
    severity: str
    summary: str
    where: str  # "step 120", "epoch 7", "line 88", or "whole curve" when the finding names no start
    whole_curve: bool = False

    @property
    def label(self) -> str:
        return f"{self.number} {self.severity} {self.kind} at {self.where}"


@dataclass
class Picture:
    source: str
    x_axis: str  # step | epoch | log line
    curves: list[Curve] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    log_y: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(c.xs for c in self.curves)


# ------------------------------------------------------------------ the model


def loss_series(series: dict) -> list[tuple[str, str | None, list]]:
    """(stage, cadence, points) for each loss curve in what scan returns. The one place that knows how series are
    keyed: by name today (points say their cadence); keyed (metric, stage, cadence), as dx-rules' diagnose.curves
    gives them ('loss', 'val', 'epoch'), works as it is."""
    curves = []
    for key, points in series.items():
        if isinstance(key, tuple):  # (metric, stage, cadence)
            metric, stage, cadence = key
            if metric != "loss":
                continue
            name = f"{stage}_loss" if f"{stage}_loss" in LOSS_SERIES else "train_loss"
        else:
            name, stage, cadence = key, None, None
        if name not in LOSS_SERIES:
            continue
        stage = stage or LOSS_SERIES[name][0]
        by_cadence: dict = {}
        for point in points:  # per-step and per-epoch points of one name are two curves, never one
            by_cadence.setdefault(cadence or point.cadence or LOSS_SERIES[name][1], []).append(point)
        curves += [(stage, found, group) for found, group in by_cadence.items()]
    return sorted(curves, key=lambda c: (list(STAGE_WORDS).index(c[0]) if c[0] in STAGE_WORDS else 9, str(c[1])))


def _choose_axis(curves: list[tuple[str, str | None, list]]) -> str:
    points = [p for _, _, group in curves for p in group]
    if any(p.step is not None for p in points):
        return "step"
    if any(p.epoch is not None for p in points):
        return "epoch"
    return "log line"


class _Positions:
    """Where on the x axis a log line falls: its own step (or epoch) when it has one, else the step the run had
    reached by that line (the last point before it that had one)."""

    def __init__(self, series: dict, axis: str):
        self.axis = axis
        anchors = sorted({(p.line, self._own(p)) for points in series.values() for p in points
                          if self._own(p) is not None})
        self.lines = [line for line, _ in anchors]
        self.values = [value for _, value in anchors]
        self.placed = 0  # points drawn at the step their line reached, not at one they printed

    def _own(self, where) -> float | None:
        if self.axis == "log line":
            return float(where["line"] if isinstance(where, dict) else where.line)
        value = where.get(self.axis) if isinstance(where, dict) else getattr(where, self.axis)
        return None if value is None else float(value)

    def at_line(self, line: int) -> float | None:
        if not self.lines:
            return None
        index = bisect.bisect_right(self.lines, line) - 1
        return self.values[max(index, 0)]

    def of(self, where) -> float | None:
        own = self._own(where)
        if own is not None:
            return own
        self.placed += 1
        return self.at_line(where["line"] if isinstance(where, dict) else where.line)


def _curve_label(stage: str, cadence: str | None) -> str:
    per = {"step": " (per step)", "epoch": " (per epoch)"}.get(cadence or "", "")
    return f"{STAGE_WORDS.get(stage, stage)} loss{per}"


def _describe_place(where: dict, axis: str, x: float) -> str:
    for name in ("step", "epoch"):
        if where.get(name) is not None:
            return f"{name} {where[name]:g}"
    if axis == "log line":
        return f"line {where['line']}"
    return f"line {where['line']} ({axis} {x:g})"


def _mark(number: int, finding: Finding, positions: _Positions, curves: list[Curve]) -> Mark | None:
    where = finding_start(finding)
    x = positions.of(where) if where is not None else None
    if x is None or not math.isfinite(x):
        # A judgement on a whole curve (a loss stuck from the start): marked where the curve it names begins.
        stage = LOSS_SERIES.get(finding.evidence.get("series"), ("train",))[0]
        drawn = [c for c in curves if c.xs]
        curve = next((c for c in drawn if c.stage == stage), drawn[0] if drawn else None)
        if curve is None:
            return None
        return Mark(number, curve.xs[0], finding.kind, finding.severity, finding.summary, "whole curve", True)
    return Mark(number, x, finding.kind, finding.severity, finding.summary, _describe_place(where, positions.axis, x))


def picture_of(report) -> Picture:
    """The curves a report read and a mark where each of its findings starts (numbered as the text report
    numbers them)."""
    found = loss_series(report.series or {})
    axis = _choose_axis(found)
    positions = _Positions(report.series or {}, axis)
    picture = Picture(report.source, axis)
    dropped = 0
    for stage, cadence, points in found:
        xs, ys = [], []
        for point in points:
            x = positions.of(point)
            if x is None or not math.isfinite(point.value):
                dropped += 1  # a nan/inf value has no height; the finding about it is marked instead
                continue
            xs.append(x)
            ys.append(point.value)
        picture.curves.append(Curve(_curve_label(stage, cadence), stage, cadence, xs, ys))
    if positions.placed and axis != "log line":
        picture.notes.append(f"{positions.placed} point(s) without a {axis} of their own are drawn at the {axis} "
                             "the log had reached on their line")
    if dropped:
        picture.notes.append(f"{dropped} non-finite value(s) are not drawn")
    values = [y for curve in picture.curves for y in curve.ys]
    picture.log_y = bool(values) and min(values) > 0 and max(values) / min(values) >= LOG_SCALE_RANGE
    for number, finding in enumerate(report.findings, 1):
        mark = _mark(number, finding, positions, picture.curves)
        if mark is not None:
            picture.marks.append(mark)
    return picture


def nothing_to_draw(picture: Picture) -> str:
    """Why a picture is empty, in one sentence the CLI and the app both print."""
    return (f"{picture.source} holds no training or validation loss that advisor could read, so there is no curve "
            "to draw its findings on (the report gives them in words)")


# ------------------------------------------------------------------ terminal (plotext)


def draw_plotext(plt, picture: Picture, highlight: int | None = None) -> None:
    """Draw ``picture`` on a plotext figure: the plotext module itself (the CLI) or the app's chart widget."""
    plt.clear_figure()
    plt.title(f"{_title_source(picture.source)}: loss" + (" (log scale)" if picture.log_y else ""))
    plt.xlabel(picture.x_axis)
    if picture.log_y:
        plt.yscale("log")
        values = [y for curve in picture.curves for y in curve.ys]
        # plotext would label a log axis with every digit of 1e20; decades read better and keep the plot wide
        decades = _log_ticks(math.log10(min(values)), math.log10(max(values)))
        plt.yticks([10.0 ** d for d in decades], [_tick_text(d, log_y=True) for d in decades])
    for curve in picture.curves:
        if curve.xs:
            plt.plot(curve.xs, curve.ys, label=curve.label, color=TERMINAL_COLORS.get(curve.stage, "white"),
                     marker=TERMINAL_MARKERS.get(curve.stage, "dot"))
    values = [y for curve in picture.curves for y in curve.ys]
    bottom = min(values) if values else 0.0  # the legend sits top left: the numbers go along the bottom
    for mark in picture.marks:
        color = TERMINAL_MARK_COLORS.get(mark.severity, "white")
        plt.vline(mark.x, color)
        label = f"{mark.number} {mark.kind}" if mark.number == highlight else str(mark.number)
        plt.text(label, mark.x, bottom, color="black", background=color)  # a badge, readable on any canvas


TITLE_SOURCE_MAX = 50  # plotext drops a title wider than the plot (80 columns off a terminal): a longer path keeps its end


def _title_source(source: str) -> str:
    """The source as a terminal title can show it: a long path's end from a folder boundary (the run's own folders
    and file name, what tells one run's drawing from the next), after an ellipsis."""
    if len(source) <= TITLE_SOURCE_MAX:
        return source
    tail = source[-(TITLE_SOURCE_MAX - 1):]
    cut = tail.find("/")
    return "…" + (tail[cut:] if 0 <= cut < len(tail) - 1 else tail)


def mark_key(picture: Picture) -> list[str]:
    """The key printed under a drawing: what each numbered mark is."""
    lines = [f"  [{mark.number}] {mark.severity} {mark.kind} at {mark.where}" for mark in picture.marks]
    return lines + [f"  note: {note}" for note in picture.notes]


def render_text(picture: Picture, width: int = 100, height: int = 28, color: bool = False) -> str:
    """The terminal drawing as text, with or without colour codes, followed by the key to its marks."""
    import plotext as plt

    draw_plotext(plt, picture)
    plt.plotsize(width, height)
    plt.theme("clear")  # no canvas colour of its own: the terminal's background, light or dark
    drawing = plt.build()
    if not color:
        drawing = plt.uncolorize(drawing)
    return "\n".join([drawing.rstrip("\n"), *mark_key(picture)]) + "\n"


# ------------------------------------------------------------------ SVG and HTML


SVG_WIDTH, PLOT_HEIGHT = 900, 280
LEFT, RIGHT, TOP = 80, 24, 44
LINE_HEIGHT = 18
LEGEND_WIDTH = 120  # characters a legend line holds at 12 px in the panel's width


def _nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    if not high > low:
        return [low]
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _log_ticks(low: float, high: float) -> list[float]:
    """Whole decades (as exponents) between two log10 values, at most 8 of them."""
    decades = list(range(math.floor(low), math.ceil(high) + 1))
    stride = max(1, math.ceil(len(decades) / 8))
    return [d for d in decades[::stride] if low <= d <= high] or [low]


def _thin(xs: list[float], ys: list[float]) -> tuple[list[float], list[float]]:
    if len(xs) <= MAX_DRAWN_POINTS:
        return xs, ys
    size = math.ceil(len(xs) / (MAX_DRAWN_POINTS // 2))
    out_x, out_y = [], []
    for start in range(0, len(xs), size):
        chunk = range(start, min(start + size, len(xs)))
        low, high = min(chunk, key=ys.__getitem__), max(chunk, key=ys.__getitem__)
        for index in sorted({low, high}):
            out_x.append(xs[index])
            out_y.append(ys[index])
    return out_x, out_y


class _Frame:
    """Data coordinates to pixels for one picture."""

    def __init__(self, picture: Picture, top: float):
        xs = [x for c in picture.curves for x in c.xs] + [m.x for m in picture.marks]
        ys = [self._y_value(y, picture.log_y) for c in picture.curves for y in c.ys]
        self.log_y = picture.log_y
        self.x0, self.x1 = min(xs), max(xs)
        self.y0, self.y1 = min(ys), max(ys)
        if self.x1 == self.x0:
            self.x0, self.x1 = self.x0 - 1, self.x1 + 1
        pad = (self.y1 - self.y0) * 0.05 or abs(self.y0) * 0.05 or 1.0
        self.y0, self.y1 = self.y0 - pad, self.y1 + pad
        self.top, self.width = top, SVG_WIDTH - LEFT - RIGHT

    @staticmethod
    def _y_value(y: float, log_y: bool) -> float:
        return math.log10(y) if log_y else y

    def px(self, x: float) -> float:
        return LEFT + (x - self.x0) / (self.x1 - self.x0) * self.width

    def py(self, y: float, transformed: bool = False) -> float:
        value = y if transformed else self._y_value(y, self.log_y)
        return self.top + PLOT_HEIGHT - (value - self.y0) / (self.y1 - self.y0) * PLOT_HEIGHT


def _tick_text(value: float, log_y: bool = False) -> str:
    return f"1e{value:g}" if log_y else f"{value:.4g}"


def _axes_svg(picture: Picture, frame: _Frame) -> list[str]:
    top, bottom = frame.top, frame.top + PLOT_HEIGHT
    parts = [f'<rect x="{LEFT}" y="{top}" width="{frame.width}" height="{PLOT_HEIGHT}" fill="none" '
             'stroke="#888"/>']
    for tick in _nice_ticks(frame.x0, frame.x1):
        x = frame.px(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}" stroke="#888"/>'
                     f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">{_tick_text(tick)}</text>')
    y_ticks = _log_ticks(frame.y0, frame.y1) if frame.log_y else _nice_ticks(frame.y0, frame.y1)
    for tick in y_ticks:
        y = frame.py(tick, transformed=True)
        parts.append(f'<line x1="{LEFT - 5}" y1="{y:.1f}" x2="{LEFT + frame.width}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{_tick_text(tick, frame.log_y)}'
                     '</text>')
    parts.append(f'<text x="{LEFT + frame.width / 2}" y="{bottom + 36}" text-anchor="middle">'
                 f'{escape(picture.x_axis)}</text>')
    parts.append(f'<text x="18" y="{top + PLOT_HEIGHT / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 18 {top + PLOT_HEIGHT / 2})">loss{" (log scale)" if frame.log_y else ""}'
                 '</text>')
    return parts


def _curves_svg(picture: Picture, frame: _Frame) -> list[str]:
    parts = []
    for curve in picture.curves:
        if not curve.xs:
            continue
        color = CURVE_COLORS.get(curve.stage, "#555")
        xs, ys = _thin(curve.xs, curve.ys)
        points = " ".join(f"{frame.px(x):.1f},{frame.py(y):.1f}" for x, y in zip(xs, ys))
        dash = ' stroke-dasharray="6 3"' if curve.cadence == "epoch" else ""
        parts.append(f'<polyline class="curve" data-label="{escape(curve.label)}" fill="none" stroke="{color}" '
                     f'stroke-width="1.5"{dash} points="{points}"/>')
        if len(xs) <= 60:  # few points (per epoch): each one visible
            parts += [f'<circle cx="{frame.px(x):.1f}" cy="{frame.py(y):.1f}" r="2.5" fill="{color}"/>'
                      for x, y in zip(xs, ys)]
    return parts


def _marks_svg(picture: Picture, frame: _Frame) -> list[str]:
    parts = []
    for mark in picture.marks:
        x, color = frame.px(mark.x), MARK_COLORS.get(mark.severity, "#555")
        parts.append(f'<g class="mark" data-number="{mark.number}" data-kind="{escape(mark.kind)}" '
                     f'data-x="{mark.x:g}"><line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" '
                     f'y2="{frame.top + PLOT_HEIGHT}" stroke="{color}" stroke-width="1.5" stroke-dasharray="4 3"/>'
                     f'<rect x="{x - 9:.1f}" y="{frame.top - 20}" width="18" height="16" fill="{color}"/>'
                     f'<text x="{x:.1f}" y="{frame.top - 8}" text-anchor="middle" fill="#fff">{mark.number}</text>'
                     '</g>')
    return parts


def _legend_lines(picture: Picture) -> list[tuple[str, str]]:
    """(colour, text) for each line under the plot: the curves, the marks, the notes; long ones wrapped (the
    colour only on a wrapped text's first line)."""
    import textwrap

    entries = [(CURVE_COLORS.get(c.stage, "#555"), f"{c.label}: {len(c.xs)} points") for c in picture.curves if c.xs]
    entries += [(MARK_COLORS.get(m.severity, "#555"), f"[{m.number}] {m.severity} {m.kind} at {m.where}: "
                 f"{m.summary}") for m in picture.marks]
    entries += [("#555", f"note: {note}") for note in picture.notes]
    lines = []
    for color, text in entries:
        for index, part in enumerate(textwrap.wrap(text, LEGEND_WIDTH) or [""]):
            lines.append((color if index == 0 else "", part))
    return lines


def _panel_height(picture: Picture) -> int:
    return TOP + PLOT_HEIGHT + 52 + LINE_HEIGHT * len(_legend_lines(picture))


def _panel_svg(picture: Picture, offset: float) -> list[str]:
    frame = _Frame(picture, offset + TOP)
    parts = [f'<text x="{LEFT}" y="{offset + 16}" font-weight="bold">{escape(picture.source)}</text>']
    parts += _axes_svg(picture, frame) + _curves_svg(picture, frame) + _marks_svg(picture, frame)
    y = frame.top + PLOT_HEIGHT + 56
    for color, text in _legend_lines(picture):
        if color:
            parts.append(f'<rect x="{LEFT}" y="{y - 10}" width="12" height="4" fill="{color}"/>')
        parts.append(f'<text x="{LEFT + 18}" y="{y}">{escape(text)}</text>')
        y += LINE_HEIGHT
    return parts


def render_svg(pictures: list[Picture]) -> str:
    """One SVG document: each picture a panel, one under the other."""
    drawn = [p for p in pictures if not p.empty]
    height = sum(_panel_height(p) for p in drawn)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{height}" '
             f'viewBox="0 0 {SVG_WIDTH} {height}" font-family="sans-serif" font-size="12">',
             f'<title>advisor diagnose: the loss curves of {escape(", ".join(p.source for p in drawn))}, each '
             'finding marked where it starts</title>',
             f'<rect width="{SVG_WIDTH}" height="{height}" fill="#fff"/>']
    offset = 0
    for picture in drawn:
        parts += _panel_svg(picture, offset)
        offset += _panel_height(picture)
    return "\n".join(parts + ["</svg>"]) + "\n"


def render_html(pictures: list[Picture]) -> str:
    """A page that stands alone (inline SVG, no script, nothing fetched): attach it to an issue as it is."""
    sources = ", ".join(p.source for p in pictures)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>advisor diagnose: {escape(sources)}</title>\n"
            "<style>body{font-family:sans-serif;margin:1.5em;color:#222}</style>\n</head>\n<body>\n"
            f"<h1>advisor diagnose: {escape(sources)}</h1>\n"
            + render_svg(pictures) + "</body>\n</html>\n")


def render_file(pictures: list[Picture], suffix: str) -> str:
    """The text of a --plot file, by its suffix (one of PLOT_SUFFIXES)."""
    if suffix == ".txt":
        return "\n".join(render_text(p) for p in pictures if not p.empty)
    return render_html(pictures) if suffix == ".html" else render_svg(pictures)


__all__ = ["Curve", "Mark", "Picture", "PLOT_SUFFIXES", "draw_plotext", "loss_series", "mark_key",
           "nothing_to_draw", "picture_of", "render_file", "render_html", "render_svg", "render_text"]
