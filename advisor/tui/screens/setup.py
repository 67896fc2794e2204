"""Setup: the workload (or the user's own script), adapter, devices and the numbers used today; checked before any
process starts."""

from __future__ import annotations


from rich.markup import escape
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import (Button, Checkbox, Collapsible, Footer, Header, Input, Label, OptionList, Select,
                             Static)
from textual.widgets.option_list import Option

from ...adapters import DEFAULT_ADAPTER
from ...options import PLAN_OPTION_TABLE, PlanOption, plan_option
from ..widgets import StepBar

# Every declared plan option with a label has a field (advisor/options.py). These sit in the form's first part, each
# beside its own status or list; every other one is under "More settings", in the declaration's order.
FORM_OPTIONS = tuple(option for option in PLAN_OPTION_TABLE if option.label)
FIRST_PART = ("workload", "adapter", "nproc", "device_memory", "task", "optimizer", "base_batch", "base_lr",
              "global_batch", "nodes", "gpus_per_node")


class WorkloadChecked(Message):
    def __init__(self, spec: str, workload=None, error: str = "") -> None:
        self.spec, self.workload, self.error = spec, workload, error
        super().__init__()


class EnvironmentLoaded(Message):
    def __init__(self, host, adapters: list[tuple[str, str, str, tuple]], error: str = "") -> None:
        self.host, self.adapters, self.error = host, adapters, error
        super().__init__()


class SetupChecked(Message):
    def __init__(self, options: dict, adapter=None, settings=None, setup=None, error: str = "",
                 script_session=None, cluster_link=None) -> None:
        self.options, self.adapter, self.settings, self.setup, self.error = options, adapter, settings, setup, error
        self.script_session = script_session  # (Session, Door) when the form names a script
        self.cluster_link = cluster_link  # the nodes met (the app on node 0 of a plan across nodes)
        super().__init__()


class ClusterNews(Message):
    """A line from the nodes' meeting (who is awaited, who joined), said while Start waits for them."""

    def __init__(self, text: str) -> None:
        self.text = text
        super().__init__()


def cluster_text(spec, nproc: str) -> str:
    """The Setup's Cluster row: the plan spans the nodes (world size nodes x processes per node) and how they meet."""
    per_node = int(nproc) if nproc.isdigit() and int(nproc) > 0 else None
    world = (f"world size {spec.nnodes} x {per_node} = {spec.nnodes * per_node}" if per_node else
             f"world size {spec.nnodes} x the processes per node")
    source = "from SLURM" if spec.source == "SLURM" else "from the flags"
    ranks = "--node-rank 1" if spec.nnodes == 2 else f"its own --node-rank (1 to {spec.nnodes - 1})"
    return (f"[b]{spec.nnodes} nodes[/b] x Processes (per node): {world}; every probe, trial and sweep run spans "
            f"them. This is node 0: it runs the method and writes the recipe. Start meets the other nodes at "
            f"{escape(spec.endpoint)} (run id {escape(spec.run_id)}, {source}) and waits up to "
            f"{spec.join_timeout_s:.0f} s; on {'it' if spec.nnodes == 2 else 'each'}, run `advisor plan` with the "
            f"same workload and settings and {ranks}.")


# Above the script door's own message in the app: its examples are `advisor plan` lines.
SCRIPT_FIELD_HINT = "In the app, type the part after `--` (SCRIPT ARGS) into the Script field.\n"


def both_or_neither_problem(workload: str, script: str) -> str:
    """Why the form cannot start when it names both a workload and a script, or neither; empty when one."""
    if workload and script:
        return (f"Both a workload ({workload}) and a script are given, and the advisor measures one of them. Clear "
                "the Workload field to measure your script, or clear the Script field to use the workload.")
    if not workload and not script:
        return ("Neither a workload nor a script is given. Type a workload in the Workload field (a built-in name, "
                "package.module:function or file.py:function), or your training script's command line in the Script "
                "field (for example: train.py --batch-size {per_device} --lr {lr}).")
    return ""


def quick_spec_problem(spec: str, builtins: dict) -> str:
    """What is wrong with a workload spec at a glance (no import); empty when it may be fine."""
    from pathlib import Path

    if not spec:
        return "Type a built-in name (list below), package.module:function or path/file.py:function."
    if spec in builtins:
        return ""
    if ":" not in spec:
        return f"{spec!r} is not a built-in; your own workload needs the form module:function or file.py:function."
    location, _, function = spec.rpartition(":")
    if not location or not function:
        return "The form is module:function or path/file.py:function."
    if (location.endswith(".py") or "/" in location) and not Path(location).expanduser().is_file():
        return f"There is no file {location!r} (relative to the directory advisor was started in)."
    return ""


# The form's labels for the `advisor plan` flags the engine's messages name: the app shows its own words.
FIELD_LABELS = {option.flag: option.label for option in FORM_OPTIONS}


def field_words(flag) -> str:
    """An option named in a set-up problem (advisor.setup_checks.Flag), in the form's words: its field's label
    ('pass --base-lr' is 'fill in "LR used today"'); an option the form has no field for keeps its flag."""
    from ...setup_checks import cli_words

    label = FIELD_LABELS.get(flag.name)
    if label is None:
        return cli_words(flag)
    name = f'"{label}"'
    if flag.verb == "pass":
        return f"fill in {name}"
    return f"{flag.verb} {name}" if flag.verb else name


def _history_summary(name: str, train_size: int) -> str | None:
    """What the history (recipes/.history.jsonl, or $ADVISOR_HISTORY) knows about this workload; never fails."""
    from ...history import default_read_path, read_history, summary_for

    try:
        return summary_for(read_history(default_read_path()), name, train_size)
    except OSError:
        return None


def row(label: str, *widgets, id: str | None = None) -> Horizontal:
    return Horizontal(Label(label, classes="field-label"), *widgets, classes="field", id=id)


def option_field(option: PlanOption, value: str = "", **select) -> Horizontal:
    """The form's row for a declared option: a checkbox for a switch, a list for choices (or ``select``'s own
    options), else a text field typed as the option is."""
    if option.type is bool:
        return row("", Checkbox(option.label, id=option.field_id))
    if select or option.choices is not None:
        if not select:
            labels = option.choice_labels or option.choices
            select = {"options": list(zip(labels, option.choices)), "value": option.default, "allow_blank": False}
        return row(option.label, Select(compact=True, id=option.field_id, **select))
    kind = {int: "integer", float: "number"}.get(option.type, "text")
    return row(option.label, Input(compact=True, value=value, id=option.field_id, type=kind,
                                   placeholder=option.placeholder))


def field_value(option: PlanOption, prefill) -> str:
    """A text field's first value: what the command line pre-filled, else the default where the field shows it."""
    given = getattr(prefill, option.name, None)
    return str(given) if given else (str(option.default) if option.shows_default else "")


class SetupScreen(Screen):
    TITLE = "Setup"
    BINDINGS = [
        Binding("ctrl+r", "start", "Check and start"),
        Binding("n", "next", "Next step", show=False),
        Binding("ctrl+o", "diagnose", "Diagnose a log"),
        Binding("escape", "cancel_look", "Cancel the look"),
    ]

    def __init__(self) -> None:
        super().__init__(name="setup")
        self.workload = None  # the WorkloadSummary of the spec in the field, when its check passed
        self.host = None
        self.adapter_reasons: dict[str, str] = {}
        self.adapter_options: dict[str, tuple] = {}  # adapter name -> its declared AdapterOptions
        self._options_shown_for = None  # the adapter whose option fields the form shows
        self.options_mounted_for = None  # ... once those fields (a Select's own parts too) are mounted
        self._checked_spec = ""  # the spec whose check passed
        self._checking_spec = ""  # the spec whose check runs now
        self._workload_error = ""  # why the spec in the field cannot be used (its check failed), shown at Start
        self._failed_spec = ""  # the spec whose check failed: Start shows why; Enter in the field checks it again
        self._start_waiting = False  # Start was pressed during the check: it goes on when the check passes
        self._started_task = None
        self._look_cancel = None  # the CancelToken of the script's first look while Start checks a script
        self._script_checked = ""  # the script line whose form the Script status shows

    def compose(self):
        from ..steps import Prefill
        from ...tasks import TASKS
        from ...method.lr import KNOWN_OPTIMIZERS
        from ...settings import PLAN_DEFAULTS
        from ...workload import builtin_names

        prefill: Prefill = self.app.prefill
        self.builtins = builtin_names()
        yield Header()
        yield StepBar("setup")
        yield Static("Tell the advisor what to train and on what. Nothing runs until you press Start; "
                     "everything is checked first.", classes="intro")
        with VerticalScroll(id="form"):
            workload = prefill.workload or ("" if prefill.script else PLAN_DEFAULTS["workload"])
            yield option_field(plan_option("workload"), workload)
            yield Static("", id="workload-status", classes="field-status")
            yield OptionList(*(Option(f"[b]{name}[/b]  {desc}", id=name) for name, desc in self.builtins.items()),
                             id="builtins")
            yield row("Script", Input(compact=True, value=prefill.script or "", id="script",
                                      placeholder="or your own: train.py --batch-size {per_device} --lr {lr} "
                                                  "(clear Workload)"))
            yield Static("", id="script-status", classes="field-status")
            yield option_field(plan_option("adapter"), options=[], allow_blank=True, prompt="finding adapters…")
            yield Static("", id="adapter-status", classes="field-status")
            yield Vertical(id="adapter-options")  # one field per option the chosen adapter declares
            yield row("Devices", Static("detecting…", id="devices"))
            if self.app.cluster is not None:
                yield row("Cluster", Static(cluster_text(self.app.cluster, str(prefill.nproc or "")), id="cluster"))
            yield option_field(plan_option("nproc"), field_value(plan_option("nproc"), prefill))
            yield option_field(plan_option("device_memory"), field_value(plan_option("device_memory"), prefill))
            own = [("the workload's own", "")]
            yield option_field(plan_option("task"), options=own + [(p.label, p.name) for p in TASKS.values()],
                               value="", allow_blank=False)
            yield option_field(plan_option("optimizer"), options=own + [(o, o) for o in sorted(KNOWN_OPTIMIZERS)],
                               value="", allow_blank=False)
            for name in ("base_batch", "base_lr", "global_batch"):
                yield option_field(plan_option(name))
            yield Static("", id="global-status", classes="field-status")
            for name in ("nodes", "gpus_per_node"):
                yield option_field(plan_option(name))
            with Collapsible(title="More settings (headroom, steps, precision)", id="more"):
                for option in FORM_OPTIONS:
                    if option.name not in FIRST_PART:
                        yield option_field(option, field_value(option, prefill))
        yield Static("", classes="error-panel")
        with Horizontal(classes="actions"):
            yield Button("Start ▶ (ctrl+r)", id="start", variant="primary")
            yield Static("", id="status")
            yield Button("Diagnose a log (ctrl+o)", id="diagnose")
        yield Footer()

    def on_mount(self) -> None:
        self.load_environment()
        field = self.query_one("#workload", Input)
        field.focus()
        self._highlight_builtin(field.value.strip())
        self._check_spec(field.value.strip())  # the pre-filled value is accepted as it is
        script = self.query_one("#script", Input)
        if script.value.strip():
            script.focus()
            self._check_script(script.value.strip())

    def on_screen_resume(self) -> None:
        self.query_one(StepBar).update_steps()

    # -- environment --------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="environment", exit_on_error=False)
    def load_environment(self) -> None:
        from ...adapters import available_adapters, load_adapter
        from ...device import detect
        from ...errors import AdvisorError

        adapters = []
        for name in sorted(available_adapters()):
            try:
                adapter = load_adapter(name)
                # load_adapter gives every adapter AdapterBase's defaults (unavailable_reason, options)
                adapters.append((name, adapter.summary, adapter.unavailable_reason() or "", tuple(adapter.options)))
            except AdvisorError as exc:
                adapters.append((name, "", str(exc), ()))
        try:
            host = self.app.host or detect()
            error = ""
        except AdvisorError as exc:
            host, error = None, str(exc)
        self.post_message(EnvironmentLoaded(host, adapters, error))

    def on_environment_loaded(self, message: EnvironmentLoaded) -> None:
        from ...units import format_bytes

        self.host = message.host
        self.adapter_reasons = {name: reason for name, _, reason, _ in message.adapters}
        self.adapter_options = {name: options for name, _, _, options in message.adapters}
        select = self.query_one("#adapter", Select)
        select.set_options([(f"{name}: {summary}" if summary else name, name)
                            for name, summary, _, _ in message.adapters])
        wanted = self.app.prefill.adapter or DEFAULT_ADAPTER
        names = [name for name, _, _, _ in message.adapters]
        if wanted in names:
            select.value = wanted
        elif names:
            select.value = names[0]
        if self.app.prefill.adapter and self.app.prefill.adapter not in names:
            self.query_one("#adapter-status", Static).update(
                f"[red]No adapter named {self.app.prefill.adapter!r} is installed[/red] (installed: "
                f"{', '.join(names) or 'none'}).")
        devices = self.query_one("#devices", Static)
        host = message.host
        if host is None:
            devices.update(f"[red]{escape(message.error)}[/red]")
        elif host.type == "cpu":
            devices.update(f"No GPU here: {host.cpu_count} CPU core(s). Processes run on CPU, each with a real "
                           "memory limit of the size you give below.")
            memory = self.query_one("#device-memory", Input)
            memory.placeholder = "required on CPU: the device memory to plan for, e.g. 1GiB"
        else:
            devices.update(host.describe() + ("" if host.bf16 else "; no bf16"))
            self.query_one("#device-memory", Input).placeholder = (
                f"default: the smallest GPU's own ({format_bytes(min(host.memories))})")
            self.query_one("#nproc", Input).placeholder = f"default: every GPU ({host.count})"
        self._show_adapter_status()

    @on(Select.Changed, "#adapter")
    def _show_adapter_status(self, event=None) -> None:
        name = self.query_one("#adapter", Select).value
        if not isinstance(name, str):
            return
        reason = self.adapter_reasons.get(name, "")
        unavailable = [f"{n}: {r}" for n, r in self.adapter_reasons.items() if r and n != name]
        text = f"[red]{name} cannot run here: {escape(reason)}[/red]" if reason else ""
        if unavailable:
            text += ("\n" if text else "") + "[dim]Unavailable: " + escape("; ".join(unavailable)) + "[/dim]"
        self.query_one("#adapter-status", Static).update(text)
        if name != self._options_shown_for:  # its Select posts Changed more than once: keep what was typed
            self._options_shown_for = name
            self.call_later(self._show_adapter_options, name)

    async def _show_adapter_options(self, name: str) -> None:
        """One field per option the chosen adapter declares (a DeepSpeed ZeRO stage), empty for its default."""
        box = self.query_one("#adapter-options", Vertical)
        self.options_mounted_for = None
        await box.remove_children()  # gone before the next adapter's fields mount (two may share an option name)
        fields = []
        for option in self.adapter_options.get(name, ()):
            field_id = f"adapter-option-{option.name}"
            default = "" if option.default is None else f" {option.default}"
            if option.choices is not None:
                widget = Select(compact=True, options=[(f"default{default}", "")] + [(str(c), str(c))
                                                                                    for c in option.choices],
                                id=field_id, value="", allow_blank=False)
            else:
                widget = Input(compact=True, id=field_id, placeholder=f"default{default}: {option.help}")
            fields.append(row(option.name.replace("_", " ").capitalize(), widget))
            if option.help:
                fields.append(Static(f"[dim]{escape(option.help)}[/dim]", classes="field-status"))
        await box.mount_all(fields)
        self.options_mounted_for = name

    @on(Input.Changed, "#nproc")
    def _nproc_changed(self, event: Input.Changed) -> None:
        if self.app.cluster is not None:
            self.query_one("#cluster", Static).update(cluster_text(self.app.cluster, event.value.strip()))

    def on_cluster_news(self, message: ClusterNews) -> None:
        self.query_one("#status", Static).update(f"[b]Meeting the nodes…[/b] {escape(message.text.strip())} "
                                                 "(Esc cancels)")

    # -- the workload, checked once per accepted value ----------------------------------------------------
    @on(Input.Changed, "#workload")
    def _workload_changed(self, event: Input.Changed) -> None:
        # Only the no-import look while typing: the check itself imports and runs the user's code.
        spec = event.value.strip()
        problem = self._workload_problem(spec)
        self._highlight_builtin(spec)
        if spec and spec in (self._checked_spec, self._checking_spec):
            return  # the value checked, or being checked, already (the field posts its first value too)
        self._cancel_workload_check()
        self.workload, self._checked_spec, self._workload_error, self._failed_spec = None, "", problem, ""
        status = self.query_one("#workload-status", Static)
        status.update(f"[red]{escape(problem)}[/red]" if problem else
                      "[dim]Enter (or leaving the field) checks it.[/dim]")

    @on(Input.Blurred, "#workload")
    def _workload_left(self, event: Input.Blurred) -> None:
        self._check_spec(event.value.strip())

    def _check_spec(self, spec: str) -> None:
        """Check ``spec`` unless it was checked (or is being checked) already."""
        if spec and spec in (self._checked_spec, self._checking_spec):
            return
        status = self.query_one("#workload-status", Static)
        problem = self._workload_problem(spec)
        self._cancel_workload_check()
        self.workload, self._checked_spec, self._workload_error = None, "", problem
        self._failed_spec = spec if problem else ""
        if not spec and not problem:
            status.update("[dim]Empty: the script below is measured.[/dim]")
            return
        if problem:
            status.update(f"[red]{escape(problem)}[/red]")
            return
        status.update("[dim]checking… one training and one evaluation step in a separate process (the first "
                      "imports torch: a few seconds)[/dim]")
        self._checking_spec = spec
        self.resolve_spec(spec)

    def _workload_problem(self, spec: str) -> str:
        """quick_spec_problem, except that an empty workload is fine while the Script field holds a script."""
        if not spec and self.query_one("#script", Input).value.strip():
            return ""
        return quick_spec_problem(spec, self.builtins)

    # -- the script: its form read from its arguments and source, nothing run before Start ----------------
    @on(Input.Changed, "#script")
    def _script_changed(self, event: Input.Changed) -> None:
        text = event.value.strip()
        if text and text == self._script_checked:
            return  # its status is shown already (the field posts its first value too)
        self._script_checked = ""
        self.query_one("#script-status", Static).update(
            "[dim]Enter (or leaving the field) checks how the advisor sets its batch; Start runs it once for a "
            "first look.[/dim]" if text else "")
        workload = self.query_one("#workload", Input).value.strip()
        if not workload:  # an empty workload is fine with a script, and asked for without one
            problem = self._workload_problem("")
            self.query_one("#workload-status", Static).update(
                f"[red]{escape(problem)}[/red]" if problem else "[dim]Empty: the script below is measured.[/dim]")

    @on(Input.Blurred, "#script")
    def _script_left(self, event: Input.Blurred) -> None:
        self._check_script(event.value.strip())

    def _check_script(self, text: str) -> bool:
        """Show how the advisor will set the script's batch (advisor.door.detect_form: its arguments and its
        source, nothing imported or run), or why it cannot; True when it can."""
        import os

        from ...door import detect_form, split_script_line
        from ...errors import SetupError

        status = self.query_one("#script-status", Static)
        self._script_checked = text
        if not text:
            status.update("")
            return False
        try:
            spec = detect_form(split_script_line(text), os.getcwd())
        except SetupError as exc:
            first = str(exc).split("\n")[0]  # the whole message, with both forms, comes at Start
            status.update(f"[red]{escape(first)}[/red]")
            return False
        status.update(f"[green]✓[/green] {escape(spec.path)}: {escape(spec.reason)}. Start runs it once on one "
                      "process for a first look (Esc cancels).")
        return True

    def _cancel_workload_check(self) -> None:
        self._checking_spec = ""
        self._start_waiting = False
        self.workers.cancel_group(self, "workload")  # its worker kills the check's process

    @work(thread=True, exclusive=True, group="workload", exit_on_error=False)
    def resolve_spec(self, spec: str) -> None:
        from textual.worker import get_current_worker

        from ...errors import AdvisorError, CancelledError
        from ...workload_check import check_in_process

        worker = get_current_worker()
        try:
            # The same check as `advisor workloads --check`: one training and one evaluation step at batch 2,
            # so a broken workload file is named here, not by a worker minutes into a plan. In a child process:
            # a workload that tokenises or downloads can be stopped.
            summary = check_in_process(spec, cancelled=lambda: worker.is_cancelled)
        except CancelledError:
            return
        except AdvisorError as exc:
            self.post_message(WorkloadChecked(spec, error=str(exc)))
        else:
            self.post_message(WorkloadChecked(spec, summary))

    def on_workload_checked(self, message: WorkloadChecked) -> None:
        if message.spec != self.query_one("#workload", Input).value.strip():
            return  # an answer for what was typed before
        self._checking_spec = ""
        waiting, self._start_waiting = self._start_waiting, False
        status = self.query_one("#workload-status", Static)
        if message.error:
            self.workload, self._workload_error, self._failed_spec = None, message.error, message.spec
            status.update(f"[red]{escape(message.error)}[/red]")
            if waiting:
                self.action_start()  # says why it cannot start: the check's own message
            return
        w = self.workload = message.workload
        self._checked_spec = message.spec
        classes = f", {w.num_classes} classes" if w.num_classes else ""
        lr = f", LR {w.current_lr:g}" if w.current_lr else ", no LR given (fill in the LR used today)"
        batch = f" at batch {w.current_batch_size}" if w.current_batch_size else ""
        known = _history_summary(w.name, w.train_length)
        status.update(f"[green]✓[/green] {w.name}: {w.task}{classes}, {w.optimizer}{lr}{batch}; "
                      f"{w.train_length} training / {w.val_length} validation samples"
                      + (f"\n[b]History:[/b] {escape(known)}" if known else ""))
        self._fill_from_workload()
        if waiting:
            self.action_start()

    def _fill_from_workload(self) -> None:
        from ...tasks import TASKS

        w = self.workload
        if w is None:
            return
        task_select = self.query_one("#task", Select)
        optimizer_select = self.query_one("#optimizer", Select)
        task_value, optimizer_value = task_select.value, optimizer_select.value
        task_select.set_options([(f"the workload's own: {w.task}", "")] + [(p.label, p.name) for p in TASKS.values()])
        optimizer_select.set_options([(f"the workload's own: {w.optimizer}", "")] +
                                     [(o, o) for o in self._optimizers()])
        # Setting the same value again does not redraw the label; pass through another one.
        for select, value, other in ((task_select, task_value, "regression"), (optimizer_select, optimizer_value, "sgd")):
            select.value = other if value != other else ""
            select.value = value
        self.query_one("#base-batch", Input).placeholder = (
            f"the workload's: {w.current_batch_size}" if w.current_batch_size
            else "required with an LR: the global batch it was tuned for")
        self.query_one("#base-lr", Input).placeholder = (
            f"the workload's: {w.current_lr:g}" if w.current_lr else "required: the LR you train with today")
        self._show_task_range()

    @staticmethod
    def _optimizers() -> list[str]:
        from ...method.lr import KNOWN_OPTIMIZERS

        return sorted(KNOWN_OPTIMIZERS)

    @on(Select.Changed, "#task")
    def _show_task_range(self, event=None) -> None:
        from ...tasks import TASKS

        task = self.query_one("#task", Select).value or (self.workload.task if self.workload else None)
        profile = TASKS.get(task) if isinstance(task, str) else None
        status = self.query_one("#global-status", Static)
        field = self.query_one("#global-batch", Input)
        if profile is None:
            status.update("")
            return
        if profile.global_range:
            low, high = profile.global_range
            field.placeholder = f"empty: the sweep decides (task table: {low}-{high})"
            status.update(f"[dim]The task table says global {low}-{high} for {profile.label} ({profile.source}). "
                          "Leave it empty to plan for the batch the sweep picks; type a number to insist on one "
                          "(accumulation fills the gap).[/dim]")
        else:
            field.placeholder = "empty: the sweep decides"
            status.update(f"[dim]{profile.source}[/dim]")

    def _highlight_builtin(self, spec: str) -> None:
        """The list's cursor sits on the workload in the field, so Enter on it keeps what is there."""
        names = list(self.builtins)
        if spec in names:
            self.query_one("#builtins", OptionList).highlighted = names.index(spec)

    @on(OptionList.OptionSelected, "#builtins")
    def _builtin_picked(self, event: OptionList.OptionSelected) -> None:
        field = self.query_one("#workload", Input)
        before = field.value.strip()
        field.value = event.option.id
        self.app.notify(f"Workload: {event.option.id}" + (f" (was {before})." if before and before != event.option.id
                                                           else " (unchanged)."), timeout=4)
        self._check_spec(event.option.id)
        field.focus()

    # -- start --------------------------------------------------------------------------------------------
    def plan_options(self) -> dict:
        """The named plan options (advisor.settings) the form says; the engine reads the text and the defaults."""
        options = {option.name: self._field_option(option) for option in FORM_OPTIONS}
        # SCRIPT ARGS as typed; check_setup takes it out before the named options reach the engine
        options["script"] = self.query_one("#script", Input).value.strip() or None
        for name, own in (("optimizer", self.workload.optimizer if self.workload else None),
                          ("task", self.workload.task if self.workload else None)):
            if options[name] == own:
                options[name] = None  # the workload's own is no override
        options["adapter_options"] = {}
        for option in self.adapter_options.get(options["adapter"], ()):
            shown = self.query(f"#adapter-option-{option.name}")  # none yet, right after the adapter changed
            value = shown.first().value if shown else None
            if isinstance(value, str) and value.strip():
                options["adapter_options"][option.name] = value.strip()
        return options

    def _field_option(self, option: PlanOption):
        """A declared option as its field says it: text (None when empty), a switch, or the chosen value."""
        widget = self.query_one(f"#{option.field_id}")
        if isinstance(widget, Input):
            return widget.value.strip() or None
        if isinstance(widget, Checkbox):
            return widget.value
        return widget.value if isinstance(widget.value, str) and widget.value else None

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()
        elif event.button.id == "diagnose":
            self.action_diagnose()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        spec = self.query_one("#workload", Input).value.strip()
        if event.input.id == "workload" and spec and spec != self._checked_spec:
            self._check_spec(spec)  # Enter accepts the typed workload; the next Enter starts
            return
        if event.input.id == "script" and not self._check_script(event.value.strip()):
            return  # its status says why; Start would say the same at length
        self.action_start()

    def action_start(self) -> None:
        if self.app.running:
            self.app.notify("A step is still running; cancel it first (Esc on its screen).", severity="warning")
            return
        options = self.plan_options()
        problem = both_or_neither_problem(options["workload"] or "", options["script"] or "")
        if problem:
            self._refuse(problem, "#script" if options["script"] or not options["workload"] else "#workload")
            return
        if options["workload"] and not self._workload_ready(options["workload"]):
            return
        memory = self.query_one("#device-memory", Input)
        if self.host is not None and self.host.type == "cpu" and not memory.value.strip():
            self._refuse("No GPU here, so the advisor needs the memory per device to plan for: fill in Memory per "
                         "device (for example 1GiB). Each process then gets a real memory limit of that size.",
                         "#device-memory")
            return
        task = self.query_one("#task", Select).value or None
        if self.app.session is not None and options == self.app.plan_options and task == self._started_task:
            self.app.action_goto("ceiling")  # nothing changed: keep the steps already run
            return
        self.query_one("#start", Button).disabled = True
        self.query_one("#status", Static).update(
            "[b]Checking…[/b] a first look at the script: one short run on one process (Esc cancels)"
            if options["script"] else "[b]Checking…[/b] importing the workload")
        self._show_error("")
        if options["script"] or (self.app.cluster is not None and self.app.cluster_link is None):
            from ...launch import CancelToken

            self._look_cancel = CancelToken()  # Esc stops the script's first look, or the wait for the nodes
            self._script_relay = self.app.relay_for_new_session()  # no step runs (checked above)
            self.refresh_bindings()
        self.check_setup(options)

    def _workload_ready(self, spec: str) -> bool:
        """Start goes on only with a workload whose check passed: a failed check's message is shown at once (a plan
        would fail the same way after a probe and its retry); during the check, Start waits for it."""
        if spec not in (self._checked_spec, self._checking_spec, self._failed_spec):
            self._check_spec(spec)  # typed, never accepted (no Enter, never left): checked now
        if spec == self._checking_spec:
            self._start_waiting = True
            self._show_error("")
            self.query_one("#status", Static).update(
                "[b]Waiting for the workload check…[/b] Start goes on when it passes (an edit cancels).")
            return False
        if self.workload is None or spec != self._checked_spec:
            self._refuse(f"The workload check failed: {self._workload_error or 'see the Workload field.'}\n"
                         "Fix the workload (or pick a built-in); Enter in the Workload field checks it again. "
                         "Nothing was run.", "#workload")
            return False
        return True

    def _refuse(self, text: str, field: str) -> None:
        """Start said no: why in the error panel, the status says so (not "Waiting…"), the field to fix focused."""
        self._show_error(text)
        self.query_one("#status", Static).update("[red]Not started.[/red] Fix what the message says.")
        self.query_one(field, Input).focus()

    def on_unmount(self) -> None:
        if self._look_cancel is not None:
            self._look_cancel.cancel()  # the app quits during the look: its process goes too

    def action_cancel_look(self) -> None:
        """Esc while Start looks at the script: its process is stopped, nothing is kept."""
        if self._look_cancel is not None:
            self._look_cancel.cancel()
            self.query_one("#status", Static).update("[b]Cancelling…[/b]")

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "cancel_look":
            return self._look_cancel is not None
        return super().check_action(action, parameters)

    @work(thread=True, exclusive=True, group="setup", exit_on_error=False)
    def check_setup(self, options: dict) -> None:
        from ...adapters import load_adapter
        from ...device import detect
        from ...errors import AdvisorError
        from ...settings import option_value, settings_from_options
        from ...setup_checks import SetupRefused, refusal_text, said, setup_problems
        from ...units import parse_size

        first: list = []  # an unreadable memory size must not hide the other problems: checked on its own
        if options.get("device_memory"):
            try:
                parse_size(options["device_memory"])
            except AdvisorError as exc:
                first = [said("device-memory-unreadable", f"Memory per device: {exc}")]
                options = {**options, "device_memory": "1MiB"}  # a size no budget rule objects to; said above
        script = options.get("script")
        named = {name: value for name, value in options.items() if name != "script"}
        try:
            host = self.host or self.app.host or detect()
            adapter = load_adapter(option_value(named, "adapter"))
            settings = settings_from_options(named, host)
            if self.app.cluster is not None:  # as `advisor plan --nnodes`: the runs span the nodes, the target
                from ...cluster import measure_on_cluster

                measure_on_cluster(settings, self.app.cluster, named, script=bool(script),
                                   words=lambda flag: f'"{FIELD_LABELS.get(flag, flag)}"')
            if script:
                found = ({"error": refusal_text(first, field_words)} if first
                         else self._script_session(script, adapter, settings, host))
                self.post_message(SetupChecked(options, **found))
                return
            setup, problems = setup_problems(settings, adapter, host)
        except SetupRefused as exc:  # the checklist's problems, typed: named by the form's fields
            self.post_message(SetupChecked(options, error=refusal_text(first + exc.problems, field_words)))
        except AdvisorError as exc:  # worded elsewhere (an option's value, the adapter): said as it is
            said_too = [said("setup", str(exc).removesuffix(" Nothing was run."))]
            self.post_message(SetupChecked(options, error=refusal_text(first + said_too, field_words) if first
                                           else str(exc)))
        except Exception as exc:  # a bug or a workload past the engine's checks: shown, never fatal
            self.post_message(SetupChecked(options, error=f"{type(exc).__name__}: {exc}"))
        else:
            if first or problems:
                self.post_message(SetupChecked(options, error=refusal_text(first + problems, field_words)))
            else:
                self.post_message(SetupChecked(options, adapter, settings, setup,
                                               **self._meet_the_nodes(settings, adapter, host)))

    def _meet_the_nodes(self, settings, adapter, host) -> dict:
        """On node 0 of a plan across nodes: SetupChecked's ``cluster_link`` (the first Start meets the other
        nodes, as `advisor plan` does; a later one keeps them, when what they met with is unchanged), or its
        ``error``. Nothing on one host."""
        from ...cluster import join, node_facts
        from ...errors import AdvisorError, CancelledError

        spec, link = self.app.cluster, self.app.cluster_link
        if spec is None:
            return {}
        try:
            facts = node_facts(settings, adapter, host)
            if link is None:
                return {"cluster_link": join(spec, facts, lambda text: self.post_message(ClusterNews(text)),
                                             self._look_cancel)}
            gone = link.lost_nodes() or ([0] if link.store_error else [])
            if gone:
                return {"error": f"The plan across the nodes has ended: {', '.join(map(link.describe, gone))} "
                                 "stopped answering. Quit the app (ctrl+q) and start the plan again on every node."}
            link.refit_node_0(facts)
            return {"cluster_link": link}
        except CancelledError:
            return {"error": "Start stopped waiting for the other nodes (Esc); the nodes that had joined were told "
                             "and stopped. Start `advisor plan ... --node-rank R` on them again, then Start here."}
        except AdvisorError as exc:
            return {"error": str(exc)}

    def _script_session(self, script: str, adapter, settings, host) -> dict:
        """SetupChecked's fields for a script: the script door's session (its first look run here, in the check's
        worker, stopped by Esc), or the door's own message (the one `advisor plan -- SCRIPT` gives)."""
        from ...door import detect_form, script_session, split_script_line
        from ...errors import AdvisorError, CancelledError, TrialError

        try:
            argv = split_script_line(script)
            detect_form(argv, settings.workdir)  # script_session checks it again; its refusal is the door's own
        except AdvisorError as exc:  # the door refused the script before anything ran: `advisor plan -- ` words
            return {"error": SCRIPT_FIELD_HINT + str(exc)}
        try:
            found = script_session(argv, adapter, settings, host, self._script_relay, cancel=self._look_cancel)
        except CancelledError:
            return {"error": "The first look at the script was cancelled; its process was stopped and nothing was "
                             "kept. Press Start to look again."}
        except TrialError as exc:  # the script's own run failed: its message, with its last lines
            return {"error": str(exc)}
        # any other AdvisorError (a setup problem found after the look) is shown in the form's words by the caller
        session, _ = found
        return {"adapter": adapter, "settings": settings, "setup": session.setup, "script_session": found}

    def on_setup_checked(self, message: SetupChecked) -> None:
        self.query_one("#start", Button).disabled = False
        self._look_cancel = None
        self.refresh_bindings()
        if message.error:
            self.query_one("#status", Static).update("[red]Not started.[/red] Fix what the message says.")
            self._show_error(message.error)
            return
        task = self.query_one("#task", Select).value
        notes = "; ".join(message.setup.notes)
        self.query_one("#status", Static).update("[green]Ready.[/green]" + (f" {escape(notes)}" if notes else ""))
        self._started_task = task or None

        def begin() -> None:
            self.app.begin_session(message.adapter, message.settings, message.setup, message.options,
                                   message.script_session, message.cluster_link)
            self.query_one(StepBar).update_steps()
            self.app.get_screen("ceiling").run_when_shown = True  # Start starts: the first step's probes run at once
            self.app.action_goto("ceiling")

        self.app.unless_plan_lost("start a new plan", begin)

    def _show_error(self, text: str) -> None:
        panel = self.query_one(".error-panel", Static)
        # The panel's title says it: the CLI's "Cannot start the plan: " lead would read "Cannot start" twice.
        panel.update(f"[b]Cannot start[/b]\n{escape(text.removeprefix('Cannot start the plan: '))}" if text else "")
        panel.set_class(bool(text), "shown")

    def action_next(self) -> None:
        self.app.action_goto("ceiling")

    def action_diagnose(self) -> None:
        self.app.switch_screen("diagnose")
