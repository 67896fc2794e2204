"""The Recipe: the plan for the cluster, the LR and warmup with the numbers behind them, the TOML, saving."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Callable

from rich.markup import escape
from rich.syntax import Syntax
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Static

from ..widgets import Numbers
from .base import StepScreen


def recipe_numbers(result) -> list[tuple[str, str, str]]:
    p, lr, warmup = result.plan, result.lr, result.warmup
    rows = [("Validated", "NOT VALIDATED", result.headline)] if result.headline else []
    return rows + [
        ("Per-device batch", str(p.per_device), p.reason),
        ("World size", str(p.world_size), world_size_text(result)),
        ("Accumulation steps", str(p.accumulation_steps),
         "ceil(target global / (per-device x world size)); 1 when the target fits in memory. " + p.reason),
        ("Global batch", str(p.global_batch),
         f"{p.per_device} x {p.world_size} x {p.accumulation_steps}: what the optimizer and the LR see."),
        ("Learning rate", f"{lr.value:.4g}",
         f"{lr.reason}\nRule {lr.rule}: base {lr.base:g} at global {lr.base_global_batch} "
         f"({result.workload.base_source}), scale {lr.scale:.4g} = {lr.global_batch} / {lr.base_global_batch}"
         + (", sqrt for adaptive optimizers" if "sqrt" in lr.rule else "")
         + (f"; capped at {lr.cap:g}" if lr.capped else "") + "."),
        ("LR rule", lr.rule, lr.reason),
        ("Warmup", f"{warmup.steps} steps", f"{warmup.reason}\n{warmup.epochs:g} epoch(s) x "
                                             f"{warmup.steps_per_epoch} steps per epoch."),
        ("Precision", p.precision, result.precision_reason + (f" {p.precision_advice}" if p.precision_advice else "")),
        ("SyncBatchNorm", "yes" if p.sync_batchnorm else "no", p.normalization_advice or
         ("The model has no BatchNorm." if not result.workload.has_batchnorm else "Per-device batches are large "
                                                                                   "enough for BatchNorm.")),
        ("Noise scale", noise_text(result.noise) if result.noise else "unknown", result.noise_reason),
        ("Goodput batch", goodput_text(result.goodput), result.goodput.reason if result.goodput else ""),
    ]


def world_size_text(result) -> str:
    """Where the world size comes from: the nodes the plan ran across, or the target cluster."""
    cluster = result.cluster
    if not cluster:
        return "The data-parallel processes of the target cluster."
    return (f"{cluster['nodes']} nodes x {cluster['processes_per_node']} process(es) per node, measured across them: "
            f"the trial and the sweep ran at this world size, so their timing holds the inter-node all-reduce "
            f"(rendezvous {cluster['rendezvous']}; [provenance.cluster] names each node).")


def noise_text(estimate) -> str:
    """B_simple and its interval, or "unknown"."""
    return f"{estimate.value:.0f} ({estimate.low:.0f}-{estimate.high:.0f})" if estimate.known else "unknown"


def goodput_text(goodput) -> str:
    """The goodput-optimal global batch as per-device x accumulation, or why there is none."""
    if goodput is None or goodput.choice is None:
        return "not computed"
    c = goodput.choice
    return f"{c.global_batch} ({c.per_device} x {c.accumulation} acc.)"


class RecipeScreen(StepScreen):
    STEP = "recipe"
    TITLE = "Recipe"
    REDO_DISCARDS_PLAN = False
    NEXT = ""
    RUN_LABEL = "Re-plan"
    AUTO_RUN = True
    INTRO = ("The plan for your cluster from the steps above, the learning rate scaled to its global batch and "
             "the warmup. Save it (ctrl+s) and commit it next to your training code.")
    # Short descriptions: every key fits the footer at 80 columns ("g Re-plan for another GPU" was cut).
    BINDINGS = [Binding("r", "run", "Re-plan") if b.key == "r" else b for b in StepScreen.BINDINGS] + [
        Binding("ctrl+s", "save", "Save", priority=True), Binding("g", "replan", "Other GPU")]

    def compose_body(self):
        with Horizontal():
            with Vertical(classes="column"):
                with Horizontal(classes="field"):
                    yield Label("Global batch target", classes="field-label")
                    yield Input(compact=True, id="global-batch", type="integer", placeholder="sweep's pick")
                yield Numbers(id="numbers")
                yield Static("", id="warnings", classes="warnings")
            # At 80x24 the preview keeps a few lines (it scrolls), the path its own row (the whole default path
            # shows), and the save message scrolls in the rows left under the button.
            with Vertical(classes="column"):
                with VerticalScroll(id="preview"):
                    yield Static("", id="toml")
                with Horizontal(classes="save-row"):
                    yield Label("Save to", classes="short-label")
                    yield Input(compact=True, id="path")
                with Horizontal(classes="save-row"):
                    yield Button("Save (ctrl+s)", id="save", variant="success", disabled=True, compact=True)
                with VerticalScroll(id="saved-box"):
                    yield Static("", id="saved")

    def on_mount(self) -> None:
        self.result = None
        self.recipe = None

    def on_screen_resume(self) -> None:
        if self.session is not None and not self.query_one("#path", Input).value:
            self.query_one("#path", Input).value = f"recipes/{self._workload_name()}.toml"
        super().on_screen_resume()

    def _workload_name(self) -> str:
        from ...workload import builtin_names

        if self.app.door is not None:
            return Path(self.app.door.spec.path).stem
        spec = self.session.settings.workload
        return spec if spec in builtin_names() else self.session.setup.workload.name

    def reset(self) -> None:
        super().reset()
        if self.is_mounted:
            self.query_one("#path", Input).value = ""

    def clear(self) -> None:
        self.result = self.recipe = None
        self.query_one(Numbers).set_rows([])
        self.query_one("#warnings", Static).update("")
        self.query_one("#toml", Static).update("")
        self.query_one("#saved", Static).update("")
        self.query_one("#save", Button).disabled = True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "path":
            self.action_save()
        else:
            self.action_run()

    def make_call(self):
        from ...report import build_recipe
        from ...settings import option_value

        text = self.query_one("#global-batch", Input).value.strip()
        session, door, adapter = self.session, self.app.door, self.app.adapter
        # finish(None) keeps a target set earlier; clearing the field goes back to the Setup's answer.
        session.settings.global_batch = option_value(self.app.plan_options, "global_batch")
        target = int(text) if text else None

        def plan():
            from ...door import finish_script_result

            result = session.finish(target)
            if door is not None:  # as `advisor plan -- SCRIPT`: [workload] names the script, the user's command
                finish_script_result(result, door, adapter, session.runner.script_seen)
            return result, build_recipe(result, self.headless_command(None))

        return plan

    def headless_command(self, path: str | None, force: bool = False) -> list[str]:
        from ...settings import options_as_run, plan_command

        text = self.query_one("#global-batch", Input).value.strip()
        # The field's target, else the Setup's (make_call puts that back in the settings before each plan)
        options = {**options_as_run(self.app.plan_options, self.session.settings),
                   "global_batch": text or self.app.plan_options.get("global_batch")}
        door, cluster = self.app.door, self.app.cluster
        return plan_command(options, path, force, script=[door.spec.path, *door.spec.args] if door else None,
                            cluster_flags=cluster.flags() if cluster is not None else None)

    def show_result(self, outcome) -> None:
        from ...recipe import dumps_recipe

        self.result, self.recipe = outcome
        result = self.result
        self.query_one(Numbers).set_rows(recipe_numbers(result))
        warnings = [f"[b]{w.code}[/b]: {escape(w.message)}" for w in result.plan.warnings]
        warnings += [f"[b]lr[/b]: {escape(m)}" for m in result.lr.warnings]
        headline = f"[b red]NOT VALIDATED.[/b red] {escape(result.headline)}\n" if result.headline else ""
        self.query_one("#warnings", Static).update(
            headline + ("[b]Warnings[/b]\n" + "\n".join(f"• {w}" for w in warnings) if warnings
                        else "[dim]No warnings.[/dim]"))
        self.query_one("#toml", Static).update(Syntax(dumps_recipe(self.recipe), "toml", theme="ansi_dark",
                                                      word_wrap=True))
        self.query_one("#save", Button).disabled = False
        plan = (f"{result.plan.per_device} x {result.plan.world_size} x {result.plan.accumulation_steps} = global "
                f"{result.plan.global_batch}, LR {result.lr.value:.4g}")
        # The status line is always on screen (the warnings may sit below the fold at 80x24): a plan the sweep did
        # not validate says so there, as the CLI summary's first line does.
        self.set_status(f"[b red]NOT VALIDATED[/b red]: your base setting, {plan}; no sweep candidate learned. "
                        "ctrl+s saves." if result.headline else f"[green]Planned.[/green] {plan}. ctrl+s saves.")
        self.query_one("#save", Button).focus()  # ctrl+s or Enter saves; the keys r, b and ? keep working

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            event.stop()
            self.action_save()
        else:
            super().on_button_pressed(event)

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "save":
            return self.result is not None
        if action == "next":
            return False  # the last step: no "n Next step" in the footer
        return super().check_action(action, parameters)

    def action_replan(self) -> None:
        """Re-plan the plan on screen for another GPU (the engine's `advisor replan`; estimates, labelled)."""
        from .replan import ReplanScreen

        if self.recipe is None:
            self.app.notify("Nothing to re-plan yet: the plan has not been made.", severity="warning")
            return
        self.app.push_screen(ReplanScreen(self.recipe))

    @property
    def unsaved(self) -> bool:
        """A plan is on screen that no save has written (quitting asks first)."""
        result = getattr(self, "result", None)
        return result is not None and getattr(self, "saved_result", None) is not result

    def save_path(self) -> str:
        return self.query_one("#path", Input).value.strip() if self.is_mounted else ""

    def action_save(self) -> None:
        self.save()

    def save(self, then: Callable[[], None] | None = None) -> bool:
        """Save as ctrl+s does, then call ``then`` once the recipe is written (quitting after a save). False when
        it is refused at once (the reason shown); an existing file is replaced only after the user confirms."""
        from .help import ConfirmScreen

        if self.result is None:
            self.app.notify("Nothing to save yet: the plan has not been made.", severity="warning")
            return False
        path = self.save_path()
        if not path:
            self.app.notify("Type a path to save the recipe to.", severity="warning")
            return False
        target = Path(path)
        if target.is_dir():
            self._show_saved(f"[red]{escape(path)} is a directory.[/red] Give a file path such as "
                             f"{escape(str(target / 'recipe.toml'))}.")
            return False
        if target.exists():
            def answered(replace: bool | None) -> None:
                if replace and self._save(path, force=True):
                    if then is not None:
                        then()
                    return
                if not replace:
                    self._show_saved("[yellow]Not saved.[/yellow] Choose another path, or save again to replace.")
                if then is not None:  # quitting after a save that did not happen: stay where the message is
                    self.app.action_goto("recipe")

            self.app.push_screen(ConfirmScreen(f"{path} already exists. Replace it? The old recipe is kept as "
                                               f"{target.name}.bak.", yes="Replace", no="Keep it"), answered)
            return True
        if not self._save(path, force=False):
            return False
        if then is not None:
            then()
        return True

    def _save(self, path: str, force: bool) -> bool:
        from ...errors import AdvisorError
        from ...recipe import save_recipe
        from ...report import build_recipe

        command = self.headless_command(path, force)
        try:
            data = build_recipe(self.result, command)
            saved = save_recipe(data, path, force=force)
        except AdvisorError as exc:
            self._show_saved(f"[red]Not saved:[/red] {escape(str(exc))}")
            return False
        lines = [f"[green]Saved[/green] to {escape(str(saved.path))}."]
        if saved.backup:
            lines.append(f"The previous recipe was kept as {escape(str(saved.backup))}.")
        if saved.fallback_reason:
            lines = [f"[red]Could not write where asked[/red] ({escape(saved.fallback_reason)}); the recipe was saved "
                     f"to {escape(str(saved.path))} instead: move it where you want it."]
        recorded = self._record_history(saved.path)
        if recorded:
            lines.append(recorded)
        # The file exists now: without --force the same command would refuse to replace it
        lines.append("To reproduce it without the app (--force replaces this file, keeping it as .bak):")
        lines.append(f"  [b]{escape(shlex.join(self.headless_command(path, force=True)))}[/b]")
        self._show_saved("\n".join(lines))
        self.saved_path = saved.path
        self.saved_result = self.result
        self.app.recipe_saved = True
        return True

    def _record_history(self, path) -> str:
        """The plan and its runs, appended to the history next to the saved recipe (as `advisor plan --out`)."""
        from ...history import HistoryRecorder, history_path, run_context

        session = self.session
        if self.app.door is not None:
            return "A script's runs are not recorded in the history yet (as with `advisor plan -- SCRIPT`)."
        target = history_path(None, path)
        if getattr(self, "_recorded", None) == (id(self.result), str(target)):
            return f"Runs already recorded in the history {escape(str(target))}."  # saved again: no duplicate rows
        self._recorded = (id(self.result), str(target))
        warnings: list[str] = []
        link = self.app.cluster_link  # a plan across nodes is its own device class, as `advisor plan --nnodes`'s
        context = run_context(session.settings, session.setup, str(path), link.fingerprint() if link else None)
        recorder = HistoryRecorder(target, context, lambda: session.runner.model_info, warn=warnings.append)
        recorder.plan(self.result)
        return escape(warnings[0]) if warnings else f"Runs recorded in the history {escape(str(target))}."

    def _show_saved(self, text: str) -> None:
        self.query_one("#saved", Static).update(text)
