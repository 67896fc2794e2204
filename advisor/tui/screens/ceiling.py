"""Step 1, Memory ceiling: each probe as it runs, memory against batch, the result with its headroom."""

from __future__ import annotations

from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Label, Static

from ...units import format_bytes
from ..widgets import GrowingTable, MemoryChart, Numbers
from .base import StepScreen


MIB = 1024 * 1024
# Units sit in the two-line labels, so the values stay short enough for half of an 80-column screen.
PROBE_COLUMNS = ("batch", "purpose", "peak\nMiB", "result", "time\ns")


def probe_cells(trial) -> tuple:
    result = "[green]fits[/green]" if trial.status == "ok" else "[red]OOM[/red]"
    return (str(trial.batch), trial.purpose or "", f"{trial.peak_bytes / MIB:.1f}" if trial.peak_bytes else "-",
            result, f"{trial.seconds:.1f}")


class CeilingScreen(StepScreen):
    STEP = "ceiling"
    TITLE = "Memory ceiling"
    NEXT = "start"
    RUN_LABEL = "Probe"
    INTRO = ("Step 1. Real training steps at growing batches, each in a fresh process under the memory budget: "
             "two small probes fit memory = fixed + per-sample x batch, then real probes find the out-of-memory "
             "edge. The ceiling keeps the headroom free below it. Start on Setup runs it; r probes again.")

    def compose_body(self):
        with Horizontal():
            with Vertical(classes="column"):
                with Horizontal(classes="field"):
                    yield Label("Headroom", classes="field-label")
                    yield Input(compact=True, id="headroom", type="number", placeholder="0.10-0.20")
                yield Static("[dim]Enter applies a new headroom to the probes already run.[/dim]",
                             classes="field-status")
                yield GrowingTable(id="probes", cursor_type="row", header_height=2)
                yield Numbers(id="numbers")
            yield MemoryChart(id="chart", classes="column")

    def on_mount(self) -> None:
        table = self.query_one("#probes", DataTable)
        for label in PROBE_COLUMNS:
            table.add_column(label)  # as wide as the widest value: a number grows its column, never gets cut
        self._probes = []
        self._shown = []  # the rows of the probe table, in order
        self._probed_headroom = None

    def on_input_submitted(self, event) -> None:
        event.stop()
        self.action_run()  # Enter in the headroom field applies it

    def on_screen_resume(self) -> None:
        field = self.query_one("#headroom", Input)
        if self.session is not None and not field.value:
            field.value = f"{self.session.settings.headroom:g}"
        super().on_screen_resume()

    def reset(self) -> None:
        super().reset()
        if self.is_mounted:
            self.query_one("#headroom", Input).value = ""
            self._probed_headroom = None

    def clear(self) -> None:
        self._probes = []
        self._shown = []
        self.query_one("#probes", DataTable).clear()
        self.query_one(Numbers).set_rows([])
        chart = self.query_one(MemoryChart)
        chart.show([], self.session.settings.memory_budget_bytes if self.session else None)

    def make_call(self):
        text = self.query_one("#headroom", Input).value.strip()
        try:
            headroom = float(text) if text else None
        except ValueError:
            self.show_error(f"Headroom must be a fraction such as 0.15, not {text!r}.")
            return None
        session = self.session
        # Only the headroom changed since the last full probe: the probes hold, reuse them.
        reuse = (session.ceiling_result is not None and self._probed_headroom is not None
                 and headroom is not None and headroom != self._probed_headroom)
        self._reuse = reuse
        return lambda: session.ceiling(headroom=headroom, reuse_probes=reuse)

    def running_text(self) -> str:
        return ("re-applying the headroom to the probes already run" if self._reuse
                else "each probe starts a fresh process; Esc cancels")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "probes" or not 0 <= event.cursor_row < len(self._shown):
            return
        event.stop()
        trial = self._shown[event.cursor_row]
        lines = [f"{trial.purpose or 'probe'} probe at batch {trial.batch}: "
                 + ("it fit" if trial.status == "ok" else "out of memory") + f", {trial.seconds:.1f} s in all "
                 "(a fresh process: start-up, model build, two training steps)."]
        if trial.peak_bytes:
            lines.append(f"Peak memory {format_bytes(trial.peak_bytes)}"
                         + (f", measured by {trial.measured_by}." if trial.measured_by else "."))
        for part, size in (trial.breakdown or {}).items():
            lines.append(f"  {part}: {format_bytes(size)}")
        if trial.message:
            lines.append(f"The worker said: {trial.message}")
        self.app.explain(f"Probe at batch {trial.batch}", "\n".join(lines))

    def handle_event(self, event) -> None:
        from ...events import Note, ProbeFinished, ProbeStarted

        if isinstance(event, ProbeStarted):
            purpose = {"fit": "for the memory line", "edge": "looking for the OOM edge",
                       "confirm": "confirming the answer"}.get(event.purpose, event.purpose)
            self.set_status(f"Probing batch {event.batch} ({purpose}) in a fresh process…")
        elif isinstance(event, ProbeFinished):
            self._probes.append(event.trial)
            self._shown.append(event.trial)
            self.query_one("#probes", DataTable).add_row(*probe_cells(event.trial))
            self.query_one(MemoryChart).show(self._probes, self.session.settings.memory_budget_bytes)
        elif isinstance(event, Note):
            self.set_status(event.message)

    def outcome_line(self, result) -> str:
        return f"ceiling {result.per_device_max} per device"

    def show_result(self, result) -> None:
        self._probed_headroom = result.headroom
        table = self.query_one("#probes", DataTable)
        table.clear()
        self._shown = sorted(result.trials, key=lambda t: t.batch)
        for trial in self._shown:
            table.add_row(*probe_cells(trial))
        self.query_one(MemoryChart).show(result.trials, result.budget_bytes, result)
        self.query_one(Numbers).set_rows(ceiling_numbers(result, self.session))


def ceiling_numbers(result, session) -> list[tuple[str, str, str]]:
    rows = [("Ceiling per device", str(result.per_device_max), result.reason),
            ("Memory budget", format_bytes(result.budget_bytes),
             "The memory per device the plan is for: --device-memory, or the smallest GPU's own. On CPU each "
             "probe process gets a real memory limit of this size.")]
    if result.smallest_oom is None and result.capped_by:
        # No probe met the memory edge: the cap set the ceiling, and neither the edge nor the headroom played a part.
        rows += [("Set by", "the cap, not memory",
                  f"No probe ran out of memory up to {result.largest_ok}: the cap ({result.capped_by}) bounds the "
                  "ceiling, so the memory that really fits was never reached and the headroom played no part."),
                 ("Memory that really fits", "not reached",
                  "The out-of-memory edge lies somewhere above the largest probe: no probe got there."),
                 ("Headroom", f"{result.headroom:.0%} (no part)",
                  "Kept free below the out-of-memory edge when memory sets the ceiling; here the cap did.")]
    else:
        rows += [("Memory that really fits", format_bytes(result.usable_bytes),
                  "The budget, or less where the out-of-memory edge says so: on CPU allocator overhead counts "
                  "against the limit but not in tensor bytes, so the real edge sits below the budget."),
                 ("Headroom", f"{result.headroom:.0%}",
                  f"Kept free below the memory that really fits ({format_bytes(result.usable_bytes)} x "
                  f"{1 - result.headroom:.2f} = {format_bytes(result.usable_bytes * (1 - result.headroom))}). The "
                  "method keeps 10-20% for framework overhead and fragmentation.")]
    if result.fit is not None:
        rows += [("Fixed memory", format_bytes(result.fit.fixed_bytes),
                  "The intercept of the line memory(b) = fixed + per-sample x b fitted to the measured peaks: "
                  "parameters, gradients, optimizer state. An estimate; the ceiling itself was confirmed by a "
                  "real probe."),
                 ("Memory per sample", format_bytes(result.fit.per_sample_bytes),
                  "The slope of the fitted line: activations grow about linearly with the batch.")]
        if result.estimated_peak_bytes is not None:
            rows.append(("Estimated peak at the ceiling", format_bytes(result.estimated_peak_bytes),
                         f"fixed + per-sample x {result.per_device_max} from the fitted line."))
    rows.append(("Largest batch that ran", str(result.largest_ok),
                 "The largest batch a real probe trained under the budget."))
    rows.append(("Smallest batch out of memory", str(result.smallest_oom) if result.smallest_oom else "none",
                 "The smallest batch a real probe ran out of memory at." if result.smallest_oom else
                 f"No probe ran out of memory; the search stopped at {result.capped_by or 'its upper limit'}."))
    cap = session.per_device_cap if session is not None else result.per_device_max
    if cap < result.per_device_max:
        rows.append(("Per-device cap for later steps", str(cap),
                     f"Later steps never pass {cap}: {session.cap_reason}."))
    measured = next((t.measured_by for t in result.trials if t.measured_by), "")
    if measured:
        rows.append(("Peak measured by", measured, "How the worker read each probe's peak memory."))
    return rows
