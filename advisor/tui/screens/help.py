"""Modal screens: help (`?`), the explanation of one number, a yes/no confirmation, and the question before
quitting with an unsaved plan."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Markdown, Static

HELP = """\
# batch-advisor

Finds the batch size for data-parallel PyTorch training in four measured steps and writes a
recipe (TOML) you commit next to your training code.

1. **Memory ceiling**: real probes in fresh processes find the largest per-device batch that fits
   the memory budget, with headroom kept free.
2. **Starting value**: global batch first: your base global batch (where your LR was tuned) over the
   processes; without one, the task's per-device value. Capped by the ceiling and the data.
3. **Trial run**: short runs from that value; double while memory stays under 60% of the ceiling's,
   halve on out-of-memory (mixed precision first) or from a run that was unstable; keep doubling only
   while it buys throughput.
4. **Sweep**: half / chosen / double (or 8-128 on a subset), each on the same number of training
   samples with the same 3 seeds (paired). The best mean validation score leads; a candidate is its
   equal only when their mean paired gap is under the margin (a point of accuracy); a bigger gap
   whose paired 95% t-interval holds 0 is inconclusive and gets more paired seeds where they could
   change the pick. Among the equals the pick starts at your setting (else the smallest), steps down
   unless short runs timed side by side show yours over 10% faster, and up while they show the
   bigger one over 10% faster (shown: 6 of 6 rounds over the bar, 8 of 9 or 10 of 12; rounds are
   added up to 12 while it still could be, else the smaller stands). If an end wins and the
   scores point past it, one more batch (at most the cap) is swept.

Then the **Recipe**: the plan for your cluster (per-device x world size x accumulation), the
learning rate scaled to the global batch and the warmup, saved as TOML.

## Keys

| key | does |
| --- | --- |
| `Enter` | press the focused button; on a number: explain it |
| `Tab` / `Shift+Tab` | move between fields |
| `r` / `ctrl+r` | run (or redo) this step; `ctrl+r` works in a field too (Start on Setup) |
| `n` / `b` | next / previous step |
| `1`-`6` | jump to a step (once the steps before it are done; in a field they type) |
| `Esc` | cancel the running step (its processes are stopped) |
| `e` | explain the highlighted number: the rule and the inputs behind it |
| `ctrl+s` | save the recipe (Recipe screen) |
| `ctrl+o` | diagnose a training log (Setup screen) |
| `?` / `F1` | this help (in a field too: `?` never types) |
| `ctrl+q` | quit (a running step is cancelled first; a finished plan not saved yet: save, discard or cancel) |

Redoing a step makes the later ones stale: they must run again. A failed step shows its error
and the workers' last lines; fix the cause and press `r`.

`advisor plan ...` runs the same method without the app; the Recipe screen shows that command
after saving. `advisor diagnose LOG --tui` opens the log diagnosis.
"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, step_rule: str = "") -> None:
        super().__init__()
        self.step_rule = step_rule  # the screen's intro: what its step does (folded away once run at 80x24)

    def compose(self):
        with VerticalScroll(classes="dialog help"):
            if self.step_rule:
                yield Static(self.step_rule, classes="step-rule")
            yield Markdown(HELP)
            yield Button("Close (Esc)", id="close", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss()


class ExplainScreen(ModalScreen):
    """Where a number comes from: the rule and the inputs behind it."""

    BINDINGS = [Binding("escape,enter,e,q", "dismiss", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self):
        with Vertical(classes="dialog explain"):
            yield Static(f"[b]{self.title_text}[/b]", classes="dialog-title")
            with VerticalScroll():
                yield Static(self.text, markup=False)
            yield Button("Close (Esc)", id="close", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss()


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [Binding("escape,n", "answer(False)", "No"), Binding("y", "answer(True)", "Yes")]

    def __init__(self, question: str, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question, self.yes, self.no = question, yes, no

    def compose(self):
        with Vertical(classes="dialog confirm"):
            yield Static(self.question, markup=False)
            with Horizontal(classes="actions"):
                yield Button(f"{self.yes} (y)", id="yes", variant="warning")
                yield Button(f"{self.no} (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class UnsavedPlanScreen(ModalScreen[str]):
    """A finished plan no save has written, about to be lost (quitting, or redoing a step it was made from):
    "save" (then go on), "discard" (go on) or "cancel". ``doing``: what loses it, as a verb phrase ("quit",
    "redo the comparison sweep")."""

    def __init__(self, path: str, doing: str = "quit") -> None:
        super().__init__()
        self.path, self.doing = path, doing

    BINDINGS = [Binding("s", "answer('save')", "Save, then go on"), Binding("d", "answer('discard')", "Discard"),
                Binding("escape,c", "answer('cancel')", "Cancel")]

    def compose(self):
        where = f"to {self.path}" if self.path else "(type a path on the Recipe screen first)"
        with Vertical(classes="dialog confirm"):
            yield Static(f"The plan is finished but not saved: if you {self.doing} now, it is lost with its runs."
                         f"\n\nSave the recipe {where} and {self.doing}, {self.doing} without saving, or go back?",
                         markup=False)
            with Horizontal(classes="actions"):
                yield Button(f"Save and {self.doing} (s)", id="save", variant="success")
                yield Button("Discard (d)", id="discard", variant="error")
                yield Button("Cancel (Esc)", id="cancel", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # Enter on the question loses nothing

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer)
