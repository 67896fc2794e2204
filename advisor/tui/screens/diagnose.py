"""Diagnose: each finding of a training log with its evidence and what to do, tailored by a recipe."""

from __future__ import annotations

from rich.markup import escape
from textual import work
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from ...diagnose.plot import nothing_to_draw
from ..widgets import CurvesChart

SEVERITY_STYLE = {"error": "red", "warning": "yellow"}


class DiagnosisReady(Message):
    def __init__(self, diagnosis=None, error: str = "", recipe_note: str = "", pictures: list | None = None) -> None:
        self.diagnosis, self.error, self.recipe_note = diagnosis, error, recipe_note
        self.pictures = pictures or []  # one a report: the curves and marks `advisor diagnose --plot` draws
        super().__init__()


def format_value(key: str, value) -> str:
    from ...units import format_bytes

    if isinstance(value, dict):
        if "line" in value:
            where = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in value.items())
            return where
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if key.endswith("_bytes") and isinstance(value, (int, float)):
        return format_bytes(value)
    return str(value)


def evidence_text(evidence: dict) -> str:
    lines = []
    quote = evidence.get("quote")
    if quote:
        line = evidence.get("line")
        lines.append(f"[b]line {line}:[/b]" if line else "[b]quoted:[/b]")
        lines.append(f"[reverse] {escape(str(quote))} [/reverse]")
    for key, value in evidence.items():
        if key == "quote" or (key == "line" and quote):
            continue
        lines.append(f"  {key.replace('_', ' ')}: {escape(format_value(key, value))}")
    return "\n".join(lines)


def verdict_text(report, named: bool) -> str:
    """The engine's verdict on a log without a finding: "healthy" only when it says so (every check that applies
    had its evidence), else "nothing conclusive" and what would let the other checks run."""
    where = f" in {escape(report.source)}" if named else ""
    ran = "; ".join(report.checks_ran)
    needed = "\n".join(f"  • {escape(n)}" for n in report.needed)
    if report.verdict == "healthy":
        text = f"[green]No problem found{where}[/green]: the curves look healthy on every check that ran"
        text += f" ({escape(ran)})." if ran else "."
        return text + (f"\n[dim]Not checked, for lack of evidence:\n{needed}[/dim]" if needed else "")
    # the engine's reason without its own "needed: ..." tail, listed below one a line
    why = (report.cannot_judge or "").removeprefix("nothing conclusive").lstrip(": ").split("; needed:")[0]
    text = f"[yellow]Nothing conclusive{where}[/yellow]: too little evidence to judge the curves" + (
        f": {escape(why)}." if why else ".")
    if ran:
        text += f"\nChecks that ran found nothing: {escape(ran)}."
    return text + (f"\n[b]Needed to judge the rest:[/b]\n{needed}" if needed else "")


class DiagnoseScreen(Screen):
    TITLE = "Diagnose"
    BINDINGS = [
        Binding("ctrl+r", "read", "Read the log"),
        Binding("escape", "back", "Back to Setup"),
    ]

    def __init__(self) -> None:
        super().__init__(name="diagnose")
        self.diagnosis = None
        self.findings: list[tuple] = []  # (report, finding, its number in the report)
        self.pictures: dict[int, object] = {}  # id(report) -> its Picture

    def compose(self):
        app = self.app
        yield Header()
        yield Static("Reads training logs and run folders (text logs, CSV and JSON metrics, TensorBoard events, "
                     "Lightning, HF Trainer, YOLO, detectron2, mmengine, wandb) and says what went wrong and what to "
                     "do. A recipe adds the batch and LR the log lacks.",
                     classes="intro")
        with Horizontal(classes="field"):
            yield Label("Logs or folder", classes="field-label")
            yield Input(compact=True, value=" ".join(app.diagnose_logs), id="logs",
                        placeholder="run.log or lightning_logs/version_0 (several: separated by spaces)")
        with Horizontal(classes="field"):
            yield Label("Recipe (optional)", classes="field-label")
            yield Input(compact=True, value=app.diagnose_recipe or "", id="recipe", placeholder="recipes/<workload>.toml")
            yield Button("Read (ctrl+r)", id="read", variant="primary", compact=True)
        yield Static("", id="read-stats", classes="field-status")
        with Horizontal(classes="body"):
            yield OptionList(id="findings", classes="findings")
            with VerticalScroll(id="detail", classes="column"):
                yield CurvesChart(id="curve", classes="hidden")  # first: the finding's words are in the list too
                yield Static("", id="summary")
                yield Static("", id="evidence")
                yield Static("", id="actions")
        yield Static("", classes="error-panel")
        yield Footer()

    def on_mount(self) -> None:
        if self.app.diagnose_logs:
            self.action_read()
        else:
            self.query_one("#logs", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_read()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "read":
            self.action_read()

    def action_back(self) -> None:
        self.app.switch_screen("setup")

    def action_read(self) -> None:
        logs = self.query_one("#logs", Input).value.split()
        if not logs:
            self._error("Type the path of a training log first.")
            return
        self._error("")
        self.query_one("#read-stats", Static).update("[b]Reading…[/b]")
        self.read_logs(logs, self.query_one("#recipe", Input).value.strip() or None)

    @work(thread=True, exclusive=True, group="diagnose", exit_on_error=False)
    def read_logs(self, logs: list[str], recipe: str | None) -> None:
        from ...diagnose import Context, diagnose
        from ...diagnose.plot import picture_of
        from ...errors import AdvisorError
        from ...recipe import check_recipe

        try:
            context = Context.from_recipe(check_recipe(recipe)) if recipe else None
            result = diagnose(logs, None, context)
        except AdvisorError as exc:
            self.post_message(DiagnosisReady(error=str(exc)))
        except Exception as exc:  # a reader bug must not take the app down
            self.post_message(DiagnosisReady(error=f"{type(exc).__name__}: {exc}"))
        else:
            pictures = [picture_of(report) for report in result.reports]
            self.post_message(DiagnosisReady(result, recipe_note=f"tailored by {recipe}" if recipe else "",
                                             pictures=pictures))

    def on_diagnosis_ready(self, message: DiagnosisReady) -> None:
        options = self.query_one("#findings", OptionList)
        options.clear_options()
        self.findings = []
        if message.error:
            self.query_one("#read-stats", Static).update("")
            self._error(message.error)
            self._show(None)
            return
        self.diagnosis = message.diagnosis
        self.pictures = {id(report): picture for report, picture in zip(message.diagnosis.reports, message.pictures)}
        stats_lines = []
        for report in message.diagnosis.reports:
            stats = report.stats
            if not report.readable:
                stats_lines.append(f"[red]{escape(report.source)}: nothing readable[/red] (no metrics, OOM or "
                                   "failure line in a known format)")
                continue
            formats = ", ".join(f"{k} ({v})" for k, v in stats.formats.items()) or "nothing recognised"
            series = ", ".join(f"{k} {v}" for k, v in stats.series_lengths.items()) or "no metric series"
            stats_lines.append(f"{escape(report.source)}: {stats.lines} lines read as {escape(formats)}; "
                               f"{escape(series)} points" + (f"; {escape(message.recipe_note)}"
                                                             if message.recipe_note else ""))
            for number, finding in enumerate(report.findings, 1):
                self.findings.append((report, finding, number))
                style = SEVERITY_STYLE.get(finding.severity, "")
                options.add_option(Option(f"[{style}]{finding.severity}[/{style}] [b]{finding.kind}[/b]\n"
                                          f"{escape(finding.summary)}"))
        self.query_one("#read-stats", Static).update("\n".join(stats_lines))
        options.set_class(not self.findings, "hidden")  # no finding: the verdict gets the whole width
        if self.findings:
            options.highlighted = 0
            options.focus()
            self._show(0)
        else:
            self._show(None)
            readable = [r for r in message.diagnosis.reports if r.readable]
            self.query_one("#summary", Static).update("\n\n".join(
                verdict_text(r, len(message.diagnosis.reports) > 1) for r in readable))
            if readable:  # a healthy run's curves are worth seeing too
                self._plot(readable[0], None)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show(event.option_index)

    def _show(self, index: int | None) -> None:
        summary = self.query_one("#summary", Static)
        evidence = self.query_one("#evidence", Static)
        actions = self.query_one("#actions", Static)
        if index is None or not 0 <= index < len(self.findings):
            for widget in (summary, evidence, actions):
                widget.update("")
            self._plot(None, None)
            return
        report, finding, number = self.findings[index]
        style = SEVERITY_STYLE.get(finding.severity, "")
        summary.update(f"[{style}]{finding.severity}[/{style}] [b]{finding.kind}[/b] in {escape(report.source)}\n"
                       f"{escape(finding.summary)}")
        undrawn = self._plot(report, number)
        evidence.update("[b]Evidence[/b]\n" + evidence_text(finding.evidence)
                        + (f"\n[dim]{escape(undrawn)}.[/dim]" if undrawn else ""))
        actions.update("[b]What to do, in this order[/b]\n" + "\n".join(
            f"  {order}. {escape(action)}" for order, action in enumerate(finding.actions, 1)))

    def _plot(self, report, number: int | None) -> str:
        """Draw the report's curves, each finding marked where it starts and finding ``number`` named; hide the
        chart when there is nothing to draw, and say why ("" when drawn or no report)."""
        chart = self.query_one("#curve", CurvesChart)
        picture = self.pictures.get(id(report)) if report is not None else None
        drawn = picture is not None and not picture.empty
        chart.show(picture if drawn else None, number)
        chart.set_class(not drawn, "hidden")
        return nothing_to_draw(picture) if picture is not None and not drawn else ""

    def _error(self, text: str) -> None:
        panel = self.query_one(".error-panel", Static)
        panel.update(f"[b]Cannot diagnose[/b]\n{escape(text)}" if text else "")
        panel.set_class(bool(text), "shown")
