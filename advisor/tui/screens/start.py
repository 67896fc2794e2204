"""Step 2, Starting value: the task table with the workload's row, and the plan that value gives."""

from __future__ import annotations

from rich.markup import escape
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Label, Static

from ..widgets import FittedTable, Numbers

# The task's name wraps to fit half of an 80-column screen; the numbers keep their width. The highlighted
# row's source shows below the table.
TASK_COLUMNS = ("task", "start\n/dev.", "global\nrange")
from .base import StepScreen


class StartScreen(StepScreen):
    STEP = "start"
    TITLE = "Starting value"
    NEXT = "trial"
    RUN_LABEL = "Choose"
    AUTO_RUN = True
    INTRO = ("Step 2. Global batch first: your base global batch (where your LR was validated) over the processes; "
             "without one, the task table's per-device value. Capped by the ceiling. To start elsewhere, type your "
             "own value and press Enter.")

    def compose_body(self):
        with Horizontal():
            with Vertical(classes="column"):
                yield Static("[b]Task table[/b]", classes="caption")
                yield FittedTable(id="tasks", cursor_type="row", header_height=2, label_column=0,
                                  min_label_width=15)
                yield Static("", id="task-source")
                with Horizontal(classes="field"):
                    yield Label("Your starting value", classes="field-label")
                    yield Input(compact=True, id="per-device", type="integer", placeholder="empty: the advisor's")
            with Vertical(classes="column"):
                yield Static("[b]The plan this value gives[/b] (Enter or e on a number explains it)",
                             classes="caption")
                yield Numbers(id="numbers")
                yield Static("", id="warnings", classes="warnings")

    def on_mount(self) -> None:
        self._fill_tasks(None)

    def _fill_tasks(self, task: str | None) -> None:
        """The task table, with ▶ on ``task`` (the workload's)."""
        from ...tasks import TASKS

        rows = []
        for profile in TASKS.values():
            low_high = f"{profile.global_range[0]}-{profile.global_range[1]}" if profile.global_range else "-"
            mark = "▶ " if profile.name == task else "  "
            rows.append((mark + profile.label, str(profile.start_per_device), low_high))
        self.query_one("#tasks", FittedTable).fill(list(TASK_COLUMNS), rows, keys=list(TASKS))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        from ...tasks import TASKS

        if event.data_table.id != "tasks" or event.row_key.value not in TASKS:
            return
        event.stop()
        profile = TASKS[event.row_key.value]
        self.query_one("#task-source", Static).update(f"[dim]{escape(profile.label)}: {escape(profile.source)}[/dim]")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run()

    def clear(self) -> None:
        self.query_one(Numbers).set_rows([])
        self.query_one("#warnings", Static).update("")
        self._mark_task(None)

    def _mark_task(self, task: str | None) -> None:
        from ...tasks import TASKS

        self._fill_tasks(task)
        if task in TASKS:
            self.query_one("#tasks", FittedTable).move_cursor(row=list(TASKS).index(task))

    def make_call(self):
        text = self.query_one("#per-device", Input).value.strip()
        value = int(text) if text else None
        session = self.session
        session.settings.start_per_device = value  # what the walk runs with, and its reproduce command says
        return lambda: session.choose_start(value)

    def show_result(self, choice) -> None:
        session = self.session
        settings = session.settings
        self._mark_task(session.info.task)
        ceiling = session.ceiling_result.per_device_max
        bound = session.cap  # the start, the trial and the sweep stay within it (one owner)
        cap, why = bound.value, bound.below_memory
        plan, target_why = session.preview_plan(choice.per_device)
        self.query_one(Numbers).set_rows([
            ("Starting value per device", str(choice.per_device), choice.reason),
            ("Per-device cap", str(cap), f"The ceiling ({ceiling} per device, step 1)"
             + (f", lowered to {cap}: {why}" if why else "") + ". The trial and the sweep go no higher."),
            ("World size", str(plan.world_size), f"--nproc {settings.nproc} x {settings.nodes} node(s): the "
             "data-parallel processes."),
            ("Target global batch", str(plan.target_global), target_why),
            ("Per-device batch", str(plan.per_device), plan.reason),
            ("Accumulation steps", str(plan.accumulation_steps),
             "ceil(target global / (per-device x world size)): accumulation fills what memory cannot. "
             + plan.reason),
            ("Global batch", str(plan.global_batch),
             f"{plan.per_device} per device x {plan.world_size} x {plan.accumulation_steps} accumulation: what "
             "the optimizer and the learning rate see."),
        ])
        warnings = [f"[b]{w.code}[/b]: {w.message}" for w in plan.warnings]
        for advice in (plan.normalization_advice, plan.precision_advice):
            if advice:
                warnings.append(advice)
        self.query_one("#warnings", Static).update(
            "[b]Warnings[/b]\n" + "\n".join(f"• {w}" for w in warnings) if warnings else "[dim]No warnings.[/dim]")
