"""What every step screen shares: the step bar, the Run / Cancel / Next row, the error panel,
and the handling of the step worker's messages."""

from __future__ import annotations

import time

from rich.markup import escape
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Header, Static

from ..messages import SessionEvent, StepDone, StepFailed
from ..widgets import StepBar

# Under this many rows (80x24 is the smallest supported terminal) a step that has run folds its intro away.
SHORT_TERMINAL_ROWS = 30


class StepScreen(Screen):
    STEP = ""
    TITLE = ""
    # Redoing this step resets the later ones and loses a finished plan not saved (asked first); the Recipe
    # screen's redo re-plans from the same runs for a new target, which is what its user asked for.
    REDO_DISCARDS_PLAN = True
    INTRO = ""
    RUN_LABEL = "Run"
    NEXT = ""  # the step after this one
    AUTO_RUN = False  # a step that starts no process runs as soon as the screen opens
    BINDINGS = [
        Binding("r", "run", "Run / redo"),
        Binding("ctrl+r", "run", "Run / redo", show=False),  # as Start on Setup; in a field, where r types, too
        Binding("n", "next", "Next step"),
        Binding("b", "back", "Back"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self) -> None:
        super().__init__(name=self.STEP)
        self._started = 0.0
        self.run_when_shown = False  # Setup's Start: the first step runs as its screen opens

    def compose(self):
        yield Header()
        yield StepBar(self.STEP)
        yield Static(self.INTRO, classes="intro")
        with Vertical(classes="body"):
            yield from self.compose_body()
        yield Static("", classes="error-panel")
        with Horizontal(classes="actions"):
            yield Button(f"{self.RUN_LABEL} (r)", id="run", variant="primary")
            yield Button("Cancel (Esc)", id="cancel", variant="error", classes="hidden")
            yield Static("", id="clock")
            yield Static("", id="status")
            yield Button("Next (n) ▶", id="next", variant="success", disabled=True,
                         classes="" if self.NEXT else "hidden")
        yield Footer()

    def compose_body(self):
        yield from ()

    # -- state --------------------------------------------------------------------------------------------
    @property
    def session(self):
        return self.app.session

    @property
    def running(self) -> bool:
        return self.app.running == self.STEP

    def on_screen_suspend(self) -> None:
        self._under_popup = isinstance(self.app.screen, ModalScreen)

    def on_screen_resume(self) -> None:
        self.query_one(StepBar).update_steps()
        done = self.STEP in self.app.done
        self.query_one("#next", Button).disabled = not done
        if getattr(self, "_under_popup", False):
            # Back from an explanation or a question: focus stays where it was (the next Enter on the numbers
            # explains the next number; it must not press Next).
            self._under_popup = False
        else:
            # Focus a button, not a field, so the single-letter keys work at once.
            self.query_one("#next" if done and self.NEXT else "#run", Button).focus()
        run = self.AUTO_RUN or self.run_when_shown
        self.run_when_shown = False
        if run and self.STEP not in self.app.done and not self.app.running and self.app.reachable(self.STEP):
            self.action_run()

    def reset(self) -> None:
        """An earlier step changed: nothing shown here holds any more."""
        if not self.is_mounted:
            return
        self.query_one("#next", Button).disabled = True
        self.set_status("")
        self.show_error("")
        self.clear()

    def clear(self) -> None:
        """Subclasses empty their tables and charts."""

    def set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def show_error(self, text: str, title: str = "") -> None:
        panel = self.query_one(".error-panel", Static)
        panel.update((f"[b]{escape(title)}[/b]\n" if title else "") + escape(text) if text else "")
        panel.set_class(bool(text), "shown")

    def _set_running(self, running: bool) -> None:
        # A probe says nothing until it ends (tens of seconds on a busy CPU): a clock shows it is alive.
        ticker = getattr(self, "_ticker", None)
        if ticker is not None:
            ticker.stop()
            self._ticker = None
        self.query_one("#clock", Static).update("")
        if running:
            self._ticker = self.set_interval(1, self._tick)
        self.query_one("#cancel", Button).set_class(not running, "hidden")
        self.query_one("#run", Button).disabled = running
        self.refresh_bindings()

    def _tick(self) -> None:
        seconds = int(time.monotonic() - self._started)
        self.query_one("#clock", Static).update(f"{seconds // 60}:{seconds % 60:02d}")

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "cancel":
            return self.running
        if action == "next":  # enabled before the step ran too: pressed then, it says why it cannot go on
            return True if self.NEXT else None
        return True

    # -- actions ------------------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        handlers = {"run": self.action_run, "cancel": self.action_cancel, "next": self.action_next}
        if event.button.id in handlers:
            event.stop()
            handlers[event.button.id]()

    def action_run(self) -> None:
        if self.session is None:
            self.app.notify("Finish the Setup first.", severity="warning")
            return
        if self.running or self.app.running or not self.REDO_DISCARDS_PLAN:
            self._run()  # run_step says what is running; or a redo that keeps every run (the Recipe's re-plan)
            return
        self.app.unless_plan_lost(f"redo the {self.TITLE.lower() or 'step'}", self._run)

    def _run(self) -> None:
        call = self.make_call()
        if call is None:
            return
        if self.app.run_step(self.STEP, call):
            self._started = time.monotonic()
            self.show_error("")
            self.clear()
            self._set_running(True)
            self.query_one("#next", Button).disabled = True
            self.set_status(f"[b]Running…[/b] {self.running_text()}")
            self.query_one(StepBar).update_steps()

    def make_call(self):
        """The session call this step runs (None: do not run, the reason was shown)."""
        raise NotImplementedError

    def running_text(self) -> str:
        return ""

    def action_cancel(self) -> None:
        if self.running:
            self.app.action_cancel_step()
            self.set_status("[b]Cancelling…[/b] stopping every worker process")

    def action_next(self) -> None:
        if self.NEXT and self.STEP in self.app.done:
            self.app.action_goto(self.NEXT)
        elif self.NEXT and not self.running:  # a key that did nothing would look like a hung app
            self.set_status("[b]Run this step first[/b] (r): the next one reads its result.")

    def action_back(self) -> None:
        from ..steps import STEP_NAMES

        index = STEP_NAMES.index(self.STEP)
        if index > 0:
            self.app.action_goto(STEP_NAMES[index - 1])

    # -- the worker's messages ----------------------------------------------------------------------------
    def on_session_event(self, message: SessionEvent) -> None:
        message.stop()
        self.handle_event(message.event)

    def handle_event(self, event) -> None:
        """Subclasses show the events of their step live."""

    def outcome_line(self, result) -> str:
        """The step's number in a few words for the status line (at 80x24 the result panel can be below the
        fold); empty: none."""
        return ""

    def on_step_done(self, message: StepDone) -> None:
        message.stop()
        self.app.step_finished(self.STEP, ok=True)
        self._set_running(False)
        seconds = time.monotonic() - self._started
        outcome = self.outcome_line(message.result)  # the step's number on the status line: never below the fold
        self.set_status(f"[green]Done[/green] in {seconds:.0f} s" + (f": [b]{escape(outcome)}[/b]." if outcome else ".")
                        + (" Next: n or Enter." if self.NEXT else ""))
        self.show_result(message.result)
        # In a short terminal the result matters more than the rule that was read before running it (Help shows it)
        self.query_one(".intro").set_class(self.app.size.height < SHORT_TERMINAL_ROWS, "folded")
        next_button = self.query_one("#next", Button)
        next_button.disabled = not self.NEXT
        self.query_one(StepBar).update_steps()
        if self.NEXT:
            next_button.focus()

    def show_result(self, result) -> None:
        """Subclasses show what the step decided and why."""

    def on_step_failed(self, message: StepFailed) -> None:
        message.stop()
        self.app.step_finished(self.STEP, ok=False)
        self._set_running(False)
        self.query_one(StepBar).update_steps()
        if message.cancelled:
            self.set_status("[yellow]Cancelled.[/yellow] Press r to run it again.")
            self.show_error(message.message, "Cancelled")
        elif message.plan_ended:  # the other nodes have stopped: r would meet the lost link, a later Start refuses it
            self.set_status("[red]Failed.[/red] Quit the app (ctrl+q) and start the plan again on every node.")
            self.show_error(message.message, f"{self.TITLE} failed")
        else:
            self.set_status("[red]Failed.[/red] Fix what the message says, then r to run again.")
            self.show_error(message.message, "Unexpected error (a bug: please report it)" if message.unexpected
                            else f"{self.TITLE} failed")
