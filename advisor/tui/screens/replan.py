"""Re-plan the recipe on screen for another GPU: the engine's `advisor replan` table, estimates labelled."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static


class ReplanScreen(ModalScreen):
    """Type a card (a100-80gb, v100-32gb, ...) or a memory size and the processes: the table comes from
    ``advisor.replan`` on the recipe shown (nothing runs; `advisor replan --confirm` on that card measures)."""

    BINDINGS = [Binding("escape", "dismiss", "Close")]

    def __init__(self, recipe: dict, label: str = "the plan on screen") -> None:
        super().__init__()
        self.recipe, self.label = recipe, label

    def compose(self):
        with Vertical(classes="dialog explain"):
            yield Static("[b]Re-plan for another GPU[/b]", classes="dialog-title")
            with Horizontal(classes="field"):
                yield Label("GPU or memory", classes="field-label")
                yield Input(compact=True, id="replan-gpu", placeholder="a100-80gb, v100-32gb, h100-80gb or 48GiB")
            with Horizontal(classes="field"):
                yield Label("Processes", classes="field-label")
                yield Input(compact=True, id="replan-nproc", type="integer", placeholder="the recipe's")
            with VerticalScroll():
                yield Static("Enter re-plans. Every number marked 'estimate' comes from the recipe's fitted memory "
                             "line, not from a probe on that card.", id="replan-table", markup=False)
            yield Button("Close (Esc)", id="close", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#replan-gpu", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#replan-table", Static).update(self.table())

    def table(self) -> str:
        from ...errors import AdvisorError
        from ...gpus import lookup_gpu
        from ...recipe import RecipeDocument
        from ...replan import ReplanTarget, render_table, replan
        from ...units import parse_size

        text = self.query_one("#replan-gpu", Input).value.strip()
        nproc_text = self.query_one("#replan-nproc", Input).value.strip()
        if not text:
            return "Type a GPU name from the table (e.g. a100-80gb) or a memory size per device (e.g. 48GiB)."
        try:
            nproc = int(nproc_text) if nproc_text else None
            if text[0].isdigit():
                device = "cpu" if RecipeDocument.of(self.recipe).inputs.device == "cpu" else "cuda"
                target = ReplanTarget(parse_size(text), "--device-memory", None, device, nproc)
            else:
                gpu = lookup_gpu(text)
                target = ReplanTarget(gpu.memory_bytes, "the GPU table (nominal)", gpu, "cuda", nproc)
            return render_table(replan(self.recipe, self.label, target))
        except (AdvisorError, ValueError) as exc:
            return str(exc)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss()
