"""Step 3, Trial run: live step time, each run's memory against the ceiling, the double/halve decisions."""

from __future__ import annotations

from rich.markup import escape
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from ...method.speed import FASTER_BY
from ...units import format_bytes
from ..widgets import Chart, GrowingTable, Numbers, ReflowLog, RunProgress
from .base import StepScreen

MIB = 1024 * 1024
TRIAL_COLUMNS = ("per\ndevice", "global\nbatch", "precision", "peak", "of\nceiling", "step\ntime", "samples\n/s",
                 "result")


class TrialScreen(StepScreen):
    STEP = "trial"
    TITLE = "Trial run"
    NEXT = "sweep"
    RUN_LABEL = "Run trial"
    INTRO = ("Step 3. Short runs from the starting value: double while peak memory stays under 60% of the "
             "ceiling's, halve on out-of-memory (mixed precision first when the precision is auto), and keep "
             f"doubling only while it is more than {FASTER_BY:.0%} faster in samples/s in every round timed side "
             "by side. Press r to run.")

    def compose_body(self):
        # The runs table spans the screen, as the Sweep's does: in half of an 80-column screen its eight
        # columns cut values; two-line labels keep each column as narrow as its values.
        yield GrowingTable(id="runs", cursor_type="row", header_height=2)
        yield RunProgress(id="progress")
        with Horizontal():
            with Vertical(classes="column"):
                yield Static("[b]Decisions[/b]", classes="caption")
                yield ReflowLog(id="decisions", wrap=True, markup=True, min_width=20)  # re-wraps on resize
                yield Numbers(id="numbers")
            with Vertical(classes="column"):
                yield Chart("Step time (live)", "step", "seconds", id="step-time")
                yield Chart("Peak memory by batch", "batch; red: ceiling's peak, yellow: its 60%", "MiB",
                            points=True, id="memory")

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        for label in TRIAL_COLUMNS:
            table.add_column(label)  # as wide as the widest value: a number grows its column, never gets cut
        # Kept at its last line while the layout settles (a resize after a write left it a line short);
        # scrolling up releases it, as in any log.
        self.query_one("#decisions", ReflowLog).anchor()

    def clear(self) -> None:
        self.query_one("#runs", DataTable).clear()
        self.query_one("#decisions", ReflowLog).clear()
        self.query_one(Numbers).set_rows([])
        self.query_one("#step-time", Chart).clear()
        memory = self.query_one("#memory", Chart)
        memory.clear()
        self.query_one(RunProgress).idle()
        peak = self._ceiling_peak()
        if peak:
            memory.hlines += [(peak / MIB, "red"), (0.6 * peak / MIB, "yellow")]
            memory.redraw()

    def _ceiling_peak(self):
        session = self.session
        if session is None or session.ceiling_result is None:
            return None
        return session.ceiling_result.estimated_peak_bytes

    def make_call(self):
        session = self.session
        return session.trial

    def running_text(self) -> str:
        start = self.session.start.per_device if self.session.start else "?"
        return f"{self.session.settings.trial_steps} steps from {start} per device; Esc cancels"

    def handle_event(self, event) -> None:
        from ...events import Decision, Note, RunStarted, TrialFinished, TrialProgress

        if isinstance(event, RunStarted):
            self.query_one(RunProgress).start(event.steps)
            self.set_status(f"[b]Running…[/b] {event.world_size} x {event.per_device} for {event.steps} steps "
                            f"({event.precision}); Esc cancels")
        elif isinstance(event, TrialProgress):
            self.query_one(RunProgress).update(progress=event.step)
            label = f"{event.per_device}/device" + (" (noise run)" if event.phase == "noise" else "")
            self.query_one("#step-time", Chart).add_point(label, event.step, event.seconds)
        elif isinstance(event, TrialFinished):
            self.add_run(event.record)
        elif isinstance(event, Decision):
            self.query_one("#decisions", ReflowLog).write(f"→ {escape(event.message)}")
        elif isinstance(event, Note):
            self.query_one("#decisions", ReflowLog).write(f"[dim]{escape(event.message)}[/dim]")

    def add_run(self, record) -> None:
        peak = self._ceiling_peak()
        share = f"{record.peak_bytes / peak:.0%}" if peak and record.peak_bytes else "-"
        ok = record.status == "ok"
        self.query_one("#runs", DataTable).add_row(
            str(record.per_device), str(record.global_batch), record.precision,
            format_bytes(record.peak_bytes) if record.peak_bytes else "-", share,
            f"{record.step_seconds * 1000:.0f} ms" if record.step_seconds else "-",
            f"{record.samples_per_s:.0f}" if record.samples_per_s else "-",
            ("[green]ok[/green]" if ok else "[red]OOM[/red]")
            + ({"noise": " noise", "timing": " timing"}.get(record.phase, "")))  # short: the row must fit at 80 columns
        if ok and record.peak_bytes and record.phase == "trial":  # the chart is the trial's memory against batch
            self.query_one("#memory", Chart).add_point(record.precision, record.per_device, record.peak_bytes / MIB)

    def outcome_line(self, outcome) -> str:
        return f"the trial chose {outcome.chosen} per device"

    def show_result(self, outcome) -> None:
        table = self.query_one("#runs", DataTable)
        runs = outcome.rows + ([outcome.noise_run] if outcome.noise_run else [])
        if table.row_count != len(runs):  # rows the events did not bring (a stub runner)
            table.clear()
            for record in runs:
                self.add_run(record)
        log = self.query_one("#decisions", ReflowLog)
        if not log.lines:
            for decision in outcome.decisions:
                log.write(f"→ {escape(decision)}")
        rows = [("Trial's choice per device", str(outcome.chosen), outcome.reason),
                ("Precision", outcome.precision,
                 "What the trial ran: with --precision auto, bf16 from the start on a GPU with bf16 Tensor Cores; "
                 "elsewhere fp32, unless a trial ran out of memory in fp32 and fit in mixed precision (mixed "
                 "precision comes before shrinking the batch).")]
        best = {r.per_device: r for r in outcome.rows if r.status == "ok"}
        for batch in sorted(best):
            r = best[batch]
            rows.append((f"Throughput at {batch}/device", f"{r.samples_per_s:.0f} samples/s",
                         f"global batch {r.global_batch} / (median step time {r.step_seconds:.4f} s + wait for "
                         f"data {r.data_seconds or 0:.4f} s) over {r.steps} steps (the slowest process's wait "
                         "counts)."))
        noise = outcome.noise_run
        if noise is not None:
            rows.append(("Noise run", f"{noise.per_device} x {noise.accumulation} accum.",
                         f"One device: a short run with accumulation {noise.accumulation} at {noise.per_device} per "
                         "device measures the noise scale (micro-batch vs accumulated gradient); the row marked "
                         "'noise' in the table, not a trial candidate."))
        self.query_one(Numbers).set_rows(rows)
