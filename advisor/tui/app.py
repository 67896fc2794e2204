"""The app: one factory for the CLI and the tests; the session, the step workers and the navigation.

The engine does the work (``advisor.session.Session``); this module only runs its steps in a
worker thread, turns its typed events into messages for the screen of the running step, and keeps
which steps are done (an earlier step redone makes the later ones stale).
"""

from __future__ import annotations

import traceback
from typing import Any, Callable

from textual import events, work
from textual.app import App
from textual.binding import Binding

from ..errors import AdvisorError, CancelledError
from .messages import SessionEvent, StepDone, StepFailed
from .steps import HELP_KEYS, STEP_NAMES, STEP_TITLES, STEPS, Prefill

# (adapter, settings, emit) -> an object with the JobRunner surface; tests hand in a stub.
RunnerFactory = Callable[[Any, Any, Callable[[Any], None]], Any]


class AdvisorApp(App):
    CSS_PATH = "advisor.tcss"
    TITLE = "batch-advisor"
    # `?` is help in a field too (on_event); the digits type in a field (a workload name, a batch), elsewhere
    # they jump to a step.
    BINDINGS = [
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        *(Binding(str(number), f"goto('{name}')", f"Go to {title}", show=False)
          for number, (name, title) in enumerate(STEPS, 1)),
    ]

    def __init__(self, prefill: Prefill | None = None, runner_factory: RunnerFactory | None = None,
                 host=None, diagnose_logs: list[str] | None = None, diagnose_recipe: str | None = None,
                 start: str = "setup", cluster=None) -> None:
        super().__init__()
        # advisor.cluster.ClusterSpec: this app is node 0 of a plan across nodes (`advisor --nnodes N --node-rank 0
        # ...`); the Setup's Start meets the other nodes (cluster_link), and every step runs on all of them.
        self.cluster = cluster
        self.cluster_link = None
        self.recipe_saved = False  # the other nodes hear, as the app closes, whether the plan ended with a recipe
        self.prefill = prefill or Prefill()
        self.runner_factory = runner_factory
        self.host = host  # HostDevices; detected in a worker when not given
        self.diagnose_logs = diagnose_logs or []
        self.diagnose_recipe = diagnose_recipe
        self.start_screen = start
        self.session = None
        self.door = None  # advisor.door.Door when the session measures the user's script
        self.adapter = None
        self.settings = None
        self.plan_options: dict = {}  # the Setup form's named plan options (advisor.settings)
        self.done: set[str] = set()
        self.running: str | None = None
        self._event_target = None

    def on_mount(self) -> None:
        from .screens import SCREENS_BY_NAME

        for name, screen_class in SCREENS_BY_NAME.items():
            self.install_screen(screen_class(), name)
        self.push_screen(self.start_screen)

    # -- navigation ---------------------------------------------------------------------------------------
    def reachable(self, name: str) -> bool:
        if name not in STEP_NAMES:
            return True
        return all(previous in self.done for previous in STEP_NAMES[:STEP_NAMES.index(name)])

    def first_missing(self, name: str) -> str:
        return next(p for p in STEP_NAMES[:STEP_NAMES.index(name)] if p not in self.done)

    def action_goto(self, name: str) -> None:
        if not self.reachable(name):
            missing = self.first_missing(name)
            self.notify(f"{STEP_TITLES[name]} needs {STEP_TITLES[missing]} first.", severity="warning")
            return
        target = self.get_screen(name)
        if self.screen is not target:
            self.switch_screen(target)

    async def on_event(self, event) -> None:
        # Textual hands a focused Input every printable key, priority bindings included: `?` typed into the
        # Workload field (replacing its selected text) instead of opening help. No field here needs a `?`.
        if (isinstance(event, events.Key) and not event.is_forwarded and event.key in HELP_KEYS
                and self.focused is not None and self.focused.check_consume_key(event.key, event.character)):
            event.stop()
            self.action_help()
            return
        await super().on_event(event)

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()  # `?` again closes it
        else:
            self.push_screen(HelpScreen(getattr(self.screen, "INTRO", "")))  # the step's rule, folded in a short terminal

    def explain(self, title: str, text: str) -> None:
        from .screens.help import ExplainScreen

        self.push_screen(ExplainScreen(title, text))

    # -- the session --------------------------------------------------------------------------------------
    def begin_session(self, adapter, settings, setup, options: dict, script_session=None, cluster_link=None) -> None:
        """A new Setup: a new session; every step after Setup starts over. ``script_session``: (Session, Door)
        from advisor.door.script_session, built by the Setup's check (its look run is real work). ``cluster_link``:
        the nodes the Setup's check met (a plan across nodes: the session's runner runs every job on all of them)."""
        from ..session import Session

        if self.session is not None:
            self.session.close()  # the old setup's warm workers are of no use to the new one
        self.adapter, self.settings, self.plan_options = adapter, settings, options
        self._event_target = None  # the set-up notes were shown on the Setup screen already
        if script_session is not None:
            self.session, self.door = script_session
        else:
            runner = self.runner_factory(adapter, settings, self._relay_engine_event) if self.runner_factory else None
            self.cluster_link = cluster_link or self.cluster_link
            self.session = Session(adapter, settings, setup, self._relay_engine_event, runner=runner,
                                   cluster=self.cluster_link)
            self.door = None
        self.forget_from("ceiling")
        self.done.add("setup")

    def forget_from(self, step: str) -> None:
        """``step`` and every later one are no longer done; their screens go back to empty."""
        for name in STEP_NAMES[STEP_NAMES.index(step):]:
            self.done.discard(name)
            screen = self.get_screen(name)
            if hasattr(screen, "reset") and name != "setup":
                screen.reset()

    def relay_for_new_session(self) -> Callable[[Any], None]:
        """The event relay for a session built before begin_session (the script door's, in the Setup's worker):
        quiet until begin_session, since its set-up notes are shown on the Setup screen."""
        self._event_target = None
        return self._relay_engine_event

    def _relay_engine_event(self, event) -> None:
        # Called from the worker thread; post_message is thread-safe.
        target = self._event_target
        if target is not None:
            target.post_message(SessionEvent(event))

    def run_step(self, step: str, call: Callable[[], Any]) -> bool:
        """Run one session call in the step worker; its screen gets StepDone or StepFailed."""
        if self.running:
            self.notify(f"{STEP_TITLES.get(self.running, self.running)} is still running (Esc cancels it).",
                        severity="warning")
            return False
        if step in STEP_NAMES:
            self.done.discard(step)  # redoing a step makes every later one stale
            for name in STEP_NAMES[STEP_NAMES.index(step) + 1:]:
                self.done.discard(name)
                self.get_screen(name).reset()
        self.running = step
        target = self.get_screen(step)
        self._event_target = target
        self._step_worker(step, call, target)
        return True

    def step_finished(self, step: str, ok: bool) -> None:
        if self.running == step:
            self.running = None
        if ok:
            self.done.add(step)

    @work(thread=True, exclusive=True, exit_on_error=False, group="step")
    def _step_worker(self, step: str, call: Callable[[], Any], target) -> None:
        from ..cluster import NodeLost

        try:
            result = call()
        except NodeLost as exc:  # a failure (a node went down), not the user's cancel
            target.post_message(StepFailed(step, str(exc), plan_ended=True))
        except CancelledError as exc:
            target.post_message(StepFailed(step, str(exc), cancelled=True))
        except AdvisorError as exc:
            target.post_message(StepFailed(step, str(exc)))
        except Exception as exc:  # a bug must not take the app down: show it where the step is
            where = "".join(traceback.format_exception(exc)[-4:])
            target.post_message(StepFailed(step, f"{type(exc).__name__}: {exc}\n\n{where}", unexpected=True))
        else:
            target.post_message(StepDone(step, result))

    def action_cancel_step(self) -> None:
        if self.running and self.session is not None:
            self.session.cancel()  # the step's screen says "Cancelling…" until its worker reports back

    def cancel_running(self) -> None:
        if self.session is not None and self.running:
            self.session.cancel()

    async def action_quit(self) -> None:
        """ctrl+q and the command palette's Quit: a finished plan not saved yet is asked about first."""
        self.unless_plan_lost("quit", self.quit_now)

    def unless_plan_lost(self, doing: str, go_on: Callable[[], None]) -> None:
        """Call ``go_on`` (which loses the finished plan: quitting, redoing a step, a new Start) at once when there
        is no plan or it was saved; else ask first (UnsavedPlanScreen): save and go on, go on without, or
        cancel. ``doing``: what ``go_on`` does, in the question's words."""
        from .screens.help import UnsavedPlanScreen

        if isinstance(self.screen, UnsavedPlanScreen):
            return  # the question is on screen already
        recipe = self.get_screen("recipe")
        if "recipe" not in self.done or not recipe.unsaved:
            go_on()
            return

        def answered(answer: str | None) -> None:
            if answer == "discard":
                go_on()
            elif answer == "save" and not recipe.save(then=go_on):  # not saved (its message says why)
                self.action_goto("recipe")  # stay, on the Recipe screen

        self.push_screen(UnsavedPlanScreen(recipe.save_path(), doing), answered)

    def quit_now(self) -> None:
        self.cancel_running()
        self.exit()

    def on_unmount(self) -> None:
        self.cancel_running()
        if self.session is not None:
            self.session.close()
        if self.cluster_link is not None:  # the other nodes stop their workers and exit (0 when a recipe was saved)
            from ..cluster import finish

            finish(self.cluster_link, self.recipe_saved, "" if self.recipe_saved else
                   "the app on node 0 was closed before a recipe was saved")


def create_app(prefill: Prefill | None = None, runner_factory: RunnerFactory | None = None, host=None,
               diagnose_logs: list[str] | None = None, diagnose_recipe: str | None = None,
               cluster=None) -> AdvisorApp:
    """The app as `advisor`, `advisor tui` and `advisor diagnose --tui` open it (and the tests drive it);
    ``cluster`` (advisor.cluster.ClusterSpec of node 0): the plan runs across the nodes."""
    start = "diagnose" if diagnose_logs else "setup"
    return AdvisorApp(prefill, runner_factory, host, diagnose_logs, diagnose_recipe, start, cluster)
