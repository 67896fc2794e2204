"""Step 4, Sweep: live loss curves for each batch size, validation in a table, the pick and why."""

from __future__ import annotations

from rich.markup import escape
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable

from ...method.sweep import DEFAULT_POLICY, NO_RUNS, run_score
from ..widgets import Chart, GrowingTable, Numbers, ReflowLog, RunProgress
from .base import StepScreen


# "score" is the number step 4's rule reads for the run (the mean of its last two validation checkpoints), so the
# candidate means in the pick's reason are the means of this column's seeds; the end value is on the Numbers panel.
RUN_COLUMNS = ("per\ndevice", "global\nbatch", "LR", "val\nloss", "score", "train\nseconds", "samples\n/s",
               "result")


class SweepScreen(StepScreen):
    STEP = "sweep"
    TITLE = "Sweep"
    NEXT = "recipe"
    RUN_LABEL = "Run sweep"
    INTRO = ("Step 4. Half, chosen and double (or 8-128 with the subset sweep) each train on the same samples "
             "with the same seeds, the LR scaled to their global batch. The best mean score (a run's last two "
             "validation checkpoints) leads; equals are within the margin of it. Among them the pick starts at "
             f"your setting: down while timing rounds show yours not over {DEFAULT_POLICY.throughput_margin:.0%} "
             "faster, up while they show the bigger over it (3 of 3, 5 of 6...). An end that wins grows the range "
             "once. Press r to run.")

    def compose_body(self):
        # The table spans the screen: its numbers are never cut, even at 80 columns (a half-width column cut
        # samples/s 14347 to 1434); two-line labels keep the columns as narrow as their values.
        # At most half the body (the table scrolls): the pick and its reasons below it stay on screen at 80x24.
        yield GrowingTable(id="runs", cursor_type="row", header_height=2, classes="half-height")
        yield RunProgress(id="progress")
        with Horizontal():
            with Vertical(classes="column"):
                yield ReflowLog(id="notes", wrap=True, markup=True, min_width=20)  # re-wraps on resize
                yield Numbers(id="numbers")
            with Vertical(classes="column"):
                yield Chart("Training loss by batch size (live)", "step", "loss", id="loss")
                yield Chart("Validation by batch size", "training seconds", "val metric", id="val")

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        for label in RUN_COLUMNS:
            table.add_column(label)  # as wide as the widest value: numbers grow their column, never get cut
        # Kept at its last line while the layout settles (a resize after a write left it a line short);
        # scrolling up releases it, as in any log.
        self.query_one("#notes", ReflowLog).anchor()
        self._notes: list[str] = []

    def clear(self) -> None:
        self._notes = []
        self.query_one("#runs", DataTable).clear()
        self.query_one("#notes", ReflowLog).clear()
        self.query_one(Numbers).set_rows([])
        self.query_one("#loss", Chart).clear()
        self.query_one("#val", Chart).clear()
        self.query_one(RunProgress).idle()

    def make_call(self):
        return self.session.sweep

    def running_text(self) -> str:
        return (f"every batch size trains on the samples the trial's choice sees in "
                f"{self.session.settings.sweep_steps} steps; Esc cancels")

    def handle_event(self, event) -> None:
        from ...events import Decision, EvalPoint, Note, RunStarted, TrialFinished, TrialProgress

        if isinstance(event, RunStarted):
            self.query_one(RunProgress).start(event.steps)
            self.set_status(f"[b]Running…[/b] {event.world_size} x {event.per_device} for {event.steps} steps at "
                            f"LR {event.lr:.4g}; Esc cancels")
        elif isinstance(event, TrialProgress):
            self.query_one(RunProgress).update(progress=event.step)
            if event.phase != "timing":  # a timing round's loss is not the candidate's curve
                self.query_one("#loss", Chart).add_point(f"{event.per_device}/device", event.step, event.loss)
        elif isinstance(event, EvalPoint):
            value = event.val_metric if event.val_metric is not None else event.val_loss
            if value is not None:
                self.query_one("#val", Chart).add_point(f"{event.per_device}/device", event.train_seconds, value)
        elif isinstance(event, TrialFinished):
            self.add_run(event.record)
        elif isinstance(event, Decision):
            message = event.message
            for note in self._notes:  # the pick repeats the notes already shown above it
                message = message.replace(note, "").strip()
            self.query_one("#notes", ReflowLog).write(f"→ {escape(message)}")
        elif isinstance(event, Note):
            self._notes.append(event.message)
            self.query_one("#notes", ReflowLog).write(f"[dim]{escape(event.message)}[/dim]")

    def add_run(self, record, candidate_status: str | None = None) -> None:
        """A run's row; its status is the health verdict (advisor.method.health), and once the sweep is decided
        its candidate's (``candidate_status``: "flat" also for an accuracy that stayed near chance)."""
        from ...method.health import FLAT, UNSTABLE, judge

        score = (run_score(record, by_loss=record.val_metric is None)
                 if record.status == "ok" and record.phase != "timing" else None)  # OOM and timing rounds: no score
        seed = f" (seed {record.seed})" if record.seed else ""  # a paired seed
        verdict = judge(record).verdict if record.status == "ok" else None
        if record.status != "ok":
            status = "[red]OOM[/red]"
        elif record.phase == "timing":
            status = "[dim]timing[/dim]"
        elif verdict == UNSTABLE:
            status = f"[red]unstable[/red]{seed}"
        elif verdict == FLAT:
            status = f"[yellow]flat[/yellow]{seed}"
        elif candidate_status == "flat":  # learned something, but its accuracy stayed near chance
            status = f"[yellow]near chance[/yellow]{seed}"
        else:
            status = f"[green]ok[/green]{seed}"
        self.query_one("#runs", DataTable).add_row(
            str(record.per_device), str(record.global_batch), f"{record.lr:.4g}" if record.lr else "-",
            f"{record.val_loss:.4f}" if record.val_loss is not None else "-",
            "-" if score is None else f"{score:.3f}" if record.val_metric is not None else f"{score:.4f}",
            f"{record.train_seconds:.1f}" if record.train_seconds is not None else "-",
            f"{record.samples_per_s:.0f}" if record.samples_per_s else "-",
            status)

    def outcome_line(self, outcome) -> str:
        if outcome.failed:  # the plan falls back to the base setting (the Recipe screen leads with it)
            return "no candidate learned: the plan keeps the base setting"
        return f"pick {outcome.chosen} per device"

    def show_result(self, outcome) -> None:
        table = self.query_one("#runs", DataTable)
        # Again with each candidate's own verdict (near chance is judged over its seeds), and the rows the events
        # did not bring (a stub runner)
        status = {c.per_device: c.status for c in outcome.verdict.candidates} if outcome.verdict else {}
        table.clear()
        for record in outcome.rows:
            self.add_run(record, status.get(record.per_device) if record.phase == "sweep" else None)
        loss = self.query_one("#loss", Chart)
        for record in outcome.rows:
            name = f"{record.per_device}/device"
            if record.losses and name not in loss.series:
                loss.set_series(name, list(range(1, len(record.losses) + 1)), record.losses)
        rows = [("Pick per device", str(outcome.chosen), outcome.reason),  # short: values must fit at 80 columns
                ("Compared", ", ".join(map(str, outcome.candidates)),
                 "Half, chosen and double the trial's choice, within the per-device cap (or the subset 8-128)"
                 + (f"; then {', '.join(map(str, outcome.extended))}, because the smallest or largest swept won."
                    if outcome.extended else "."))]
        against = outcome.verdict.against_yours if outcome.verdict else None
        if against is not None:  # how the advice compares with what the user runs today (the verdict's sentence)
            rows.append(("Against yours", f"{against.yours}/device", against.sentence(outcome.verdict.fmt)))
        rows += self.candidate_rows(outcome)
        rows += self.noise_and_goodput_rows(outcome)
        self.query_one(Numbers).set_rows(rows)

    @staticmethod
    def candidate_rows(outcome) -> list[tuple[str, str, str]]:
        """One row per candidate with the mean score the rule compared (the pick's reason quotes the same), its
        seeds' scores and end values beside it."""
        verdict = outcome.verdict
        if verdict is None or verdict.rule == NO_RUNS:
            return []
        rows = []
        for c in verdict.candidates:
            runs = sorted((r for r in outcome.rows if r.per_device == c.per_device and r.phase == "sweep"),
                          key=lambda r: r.seed or 0)
            if c.status != "ok":
                status = {"oom": "out of memory", "unstable": "unstable"}.get(
                    c.status, "near chance" if "chance" in c.why else "never learned")
                rows.append((f"{c.per_device}/device", status, f"Out of the comparison: it {c.why}."))
                continue
            seeds = ", ".join(f"{verdict.fmt(c.scores[s])}" for s in sorted(c.scores))
            ends = ", ".join(r.validation_text().split()[-1] for r in runs if r.validation_text())
            first = runs[0] if runs else None
            how = (f" {first.steps} steps at LR {first.lr:.4g} (the base LR scaled to global {first.global_batch}, "
                   f"warmup {first.warmup_steps or 0} steps)." if first and first.lr else "")
            rows.append((f"{c.per_device}/device", f"score {verdict.fmt(c.mean)}",
                         f"The mean over seeds {', '.join(map(str, sorted(c.scores)))} of each run's score by "
                         f"{verdict.metric}"
                         + ("" if verdict.metric.startswith("training") else
                            " (the mean of its last two checkpoints, or its end value with fewer)")
                         + f": {seeds}"
                         + (f" (end values {ends})." if ends else ".") + how))
        return rows

    def noise_and_goodput_rows(self, outcome) -> list[tuple[str, str, str]]:
        """The noise scale with its interval, and the goodput-optimal batch beside the sweep's pick."""
        from .recipe import goodput_text, noise_text

        session = self.session
        if session is None:
            return []
        estimate = session.noise_estimate()
        goodput = session.plan_goodput()  # what the recipe will say: the same world size, cap and precision
        return [("Noise scale", noise_text(estimate), estimate.reason),
                ("Goodput batch", goodput_text(goodput), goodput.reason)]
