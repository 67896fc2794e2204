"""Command line: `advisor plan`, `advisor replan`, `advisor history`, `advisor check`, `advisor export`,
`advisor workloads`, `advisor adapters`.

Heavy imports (torch) happen inside the commands that need them, so `--help`
and `check` start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from . import __version__
from .errors import AdvisorError, CancelledError


class StderrProgress:
    """The session's typed events on stderr: a live bar on a terminal, a few plain lines in a log."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr  # read at call time: a default bound at import outlives a redirect
        self.tty = self.stream.isatty()
        self._last_quarter = -1

    def __call__(self, event) -> None:
        from . import events as ev

        if isinstance(event, ev.StepStarted):
            self.line(f"== {event.step}. {event.title.lower()}")
        elif isinstance(event, ev.Note):
            self.line(f"   {event.message}")
        elif isinstance(event, ev.Decision) and (event.step == 3 or event.step == 4 and not event.verdict):
            self.line(f"   -> {event.message}")
        elif isinstance(event, ev.RunStarted):
            accumulated = f" x {event.accumulation} accumulation" if event.accumulation > 1 else ""
            self.line(f"   {event.phase}: {event.world_size} x {event.per_device}{accumulated} for {event.steps} steps"
                      + (f" ({event.precision})" if event.precision != "fp32" else ""))
        elif isinstance(event, ev.ProbeFinished):
            self.line("   " + self._probe_text(event.trial))
        elif isinstance(event, ev.TrialFinished):
            self.line("   " + self._trial_text(event.record))
        elif isinstance(event, ev.TrialProgress):
            self._bar(event)

    @staticmethod
    def _probe_text(t) -> str:
        from .units import format_bytes

        peak = f", peak {format_bytes(t.peak_bytes)}" if t.peak_bytes else ""
        return f"probe {t.batch:>6}: {t.status.upper()}{peak} ({t.seconds:.1f} s)"

    @staticmethod
    def _trial_text(r) -> str:
        from .units import format_bytes

        if r.status != "ok":
            return f"{r.phase} {r.per_device} per device: OOM ({r.precision})"
        val = f", {r.validation_text()}" if r.validation_text() else ""
        loss = r.final_loss if r.final_loss is not None else float("nan")
        accumulated = f" x {r.accumulation} accumulation" if r.accumulation > 1 else ""
        return (f"{r.phase} {r.per_device} per device{accumulated}: {r.samples_per_s:.0f} samples/s, "
                f"peak {format_bytes(r.peak_bytes)}, loss {loss:.4f}{val} ({r.seconds:.1f} s)")

    def _bar(self, p) -> None:
        done, total = p.step, p.steps
        if self.tty:
            width = 30
            filled = int(width * done / total)
            self.stream.write(f"\r   [{'#' * filled}{'.' * (width - filled)}] {done}/{total} loss {p.loss:.4f}")
            if done == total:
                self.stream.write("\r" + " " * 70 + "\r")
            self.stream.flush()
        else:
            quarter = 4 * done // total
            if quarter != self._last_quarter and quarter in (1, 2, 3):
                self.line(f"   step {done}/{total} loss {p.loss:.4f}")
            self._last_quarter = quarter

    def line(self, text: str) -> None:
        self.stream.write(("\r" if self.tty else "") + text + "\n")
        self.stream.flush()


# `advisor plan` finished, but no sweep candidate learned: the recipe holds the base setting, not a validated one.
NOT_VALIDATED = 3

def plan_options_from_args(args) -> dict:
    """The named plan options (advisor.settings) an `advisor plan` command line gives, the adapter's own included."""
    from .settings import PLAN_OPTIONS

    options = {name: getattr(args, name, None) for name in PLAN_OPTIONS}
    options["adapter_options"] = dict(getattr(args, "adapter_options", None) or {})
    return options


def adapter_options_from_argv(adapter, argv: list[str]) -> dict:
    """The adapter's declared options (``AdapterBase.options``) from the flags `advisor plan` left to it
    (``--zero-stage 3``); a flag no option declares is a SetupError naming the ones it has."""
    parser = argparse.ArgumentParser(prog=f"advisor plan --adapter {adapter.name}", add_help=False,
                                     allow_abbrev=False)
    for option in adapter.options:
        extra = {"nargs": "?", "const": "true"} if option.type is bool else {}
        parser.add_argument(option.flag, dest=option.name, **extra)
    given, rest = parser.parse_known_args(argv)
    options = {name: value for name, value in vars(given).items() if value is not None}
    if rest:
        from .errors import SetupError

        unknown = ", ".join(word.split("=")[0] for word in rest if word.startswith("-")) or " ".join(rest)
        own = ", ".join(option.flag for option in adapter.options)
        raise SetupError(f"`advisor plan` has no {unknown}, and the adapter {adapter.name!r} takes "
                         + (f"only {own}" if own else "no options") + " of its own. Check the spelling (`advisor "
                         "plan --help` lists the plan's flags), or choose the adapter that has it (`advisor adapters` "
                         "lists each one's options).")
    return {name: value for name, value in adapter.validate_options(options).items() if name in options}


def settings_from_args(args, host):
    """MethodSettings from `advisor plan` arguments and the detected host (advisor.settings builds them)."""
    from .settings import settings_from_options

    settings = settings_from_options(plan_options_from_args(args), host)
    settings.allow_few_steps = bool(getattr(args, "force", False))  # --force also plans a --global-batch past §8.5
    return settings


def cmd_plan(args) -> int:
    from .adapters import load_adapter
    from .device import detect
    from .recipe import check_output_path
    from .session import Session
    from .setup_checks import validate_setup

    cluster = cluster_from_args(args)
    if cluster is not None and cluster.node_rank != 0:
        return cmd_plan_follower(args, cluster)
    out = Path(args.out) if args.out else None
    if out:
        check_output_path(out, args.force)
    if not args.no_history:
        from .history import history_path

        history_path(args.history, out)  # a bad --history / $ADVISOR_HISTORY is refused before the workload check
    adapter = load_adapter(args.adapter)
    args.adapter_options = adapter_options_from_argv(adapter, args.adapter_argv)
    host = detect(args.device)
    settings = settings_from_args(args, host)
    if cluster is not None:
        on_cluster(settings, cluster, args)
    progress = StderrProgress()
    started = time.monotonic()
    door, link = None, None
    if getattr(args, "script_command", None) is not None:  # `advisor plan [options] -- SCRIPT ARGS`
        from .door import script_session

        session, door = script_session(args.script_command, adapter, settings, host, progress,
                                       on_look=lambda spec: progress.line(f"== a first look at {args.script_command[0]}"))
        setup = session.setup
        known, recorder = None, None  # the history keys on workloads; a script's runs are not recorded yet
    else:
        setup = validate_setup(settings, adapter, host)
        link = _join_cluster(cluster, settings, adapter, host, progress) if cluster else None
        known, recorder = _plan_history(args, settings, setup, out, progress,
                                        link.fingerprint() if link is not None else None)
    listeners = [progress] + ([recorder] if recorder else [])
    if door is None:
        session = Session(adapter, settings, setup, lambda event: [listen(event) for listen in listeners],
                          known=known, cluster=link)
        _check_workload(session, settings, progress)
    if recorder:
        recorder.model_info = lambda: session.runner.model_info
    if link is not None:
        return _plan_on_cluster(args, link, session, out, recorder, progress, started)
    result = session.run_all()
    return _finish_plan(args, result, session, door, adapter, out, recorder, progress, started)


def _check_workload(session, settings, progress) -> None:
    """One training and one evaluation step at batch 2 in a child (a few seconds), before the first probe: a
    workload's own bug is one paragraph now, not a worker's traceback minutes into the plan. The probes' fork server
    starts meanwhile (its imports overlap the check's; the engine only waits); a failed check stops it."""
    from .workload_check import check_in_process

    session.runner.start_server_early()
    progress.line(f"== checking the workload {settings.workload} (one training and one evaluation step at batch 2)")
    try:
        check_in_process(settings.workload)
    except BaseException:
        session.close()
        raise


def cluster_from_args(args):
    """The cluster this plan runs on (--nnodes/--node-rank/--rdzv-endpoint, else SLURM's variables), or None."""
    from .cluster import cluster_spec

    return cluster_spec(getattr(args, "nnodes", None), getattr(args, "node_rank", None),
                        getattr(args, "rdzv_endpoint", None), getattr(args, "rdzv_id", None),
                        getattr(args, "rdzv_timeout", None))


def on_cluster(settings, cluster, args) -> None:
    """Settings of a plan measured on the cluster: the runs span its nodes, and it is the target."""
    from .cluster import measure_on_cluster

    measure_on_cluster(settings, cluster, plan_options_from_args(args),
                       script=getattr(args, "script_command", None) is not None)


def _join_cluster(cluster, settings, adapter, host, progress):
    from .cluster import join, node_facts

    return join(cluster, node_facts(settings, adapter, host), progress.line)


def cmd_plan_follower(args, cluster) -> int:
    """`advisor plan` on a node other than 0: the same checks, then this node's workers for every job node 0 posts;
    exit 0 when node 0's plan ends. Writes nothing (no recipe, no history). A check of its own that fails is told
    to node 0 (which names this node and the problem, and stops every node) before this node exits 2."""
    from .cluster_runner import follow

    progress = StderrProgress()
    try:
        adapter, settings, host = _follower_setup(args, cluster)
    except CancelledError:
        raise
    except AdvisorError as exc:
        from .cluster import report_setup_failure

        report_setup_failure(cluster, str(exc), progress.line)
        raise
    link = _join_cluster(cluster, settings, adapter, host, progress)
    progress.line(f"== node {cluster.node_rank} of {cluster.nnodes}: running this node's workers for every step; "
                  "node 0 runs the method and writes the recipe")
    ended = follow(link, adapter, settings, progress.line)
    if ended.get("ok"):
        progress.line(f"== node {cluster.node_rank}: the plan ended on node 0; this node wrote nothing")
        return 0
    print(f"advisor: node 0's plan ended without a recipe: {ended.get('message')}", file=sys.stderr)
    return 1


def _follower_setup(args, cluster):
    """(adapter, settings, host) of a node other than 0, its own flags checked as node 0 checks its own."""
    from .adapters import load_adapter
    from .device import detect
    from .setup_checks import validate_setup

    adapter = load_adapter(args.adapter)
    args.adapter_options = adapter_options_from_argv(adapter, args.adapter_argv)
    host = detect(args.device)
    settings = settings_from_args(args, host)
    on_cluster(settings, cluster, args)
    validate_setup(settings, adapter, host)
    return adapter, settings, host


def _plan_on_cluster(args, link, session, out, recorder, progress, started) -> int:
    """Node 0: the method on every node; the recipe records the cluster; every node hears how it ended."""
    from .cluster import finish

    try:
        result = session.run_all()  # result.cluster: the session's (Session.finish)
        code = _finish_plan(args, result, session, None, session.adapter, out, recorder, progress, started)
    except BaseException as exc:
        finish(link, False, (str(exc).splitlines() or [type(exc).__name__])[0])
        session.close()
        raise
    finish(link, True)
    return code


def _finish_plan(args, result, session, door, adapter, out, recorder, progress, started) -> int:
    """The recipe, the history row and the summary of a finished plan; the exit code."""
    from .recipe import save_recipe
    from .report import build_recipe, human_summary, json_summary

    if door is not None:
        from .door import finish_script_result

        finish_script_result(result, door, adapter, session.runner.script_seen)
    recipe = build_recipe(result, ["advisor"] + sys.argv[1:])
    saved = save_recipe(recipe, out, force=args.force) if out else None
    if recorder:
        recorder.context.recipe = str(saved.path) if saved else None
        recorder.plan(result)
    if saved and saved.backup:
        progress.line(f"   the previous recipe was kept as {saved.backup}")
    progress.line(f"== done in {time.monotonic() - started:.0f} s")
    where = str(saved.path) if saved else None
    if args.json:
        print(json.dumps(json_summary(result, where), indent=2))
    else:
        print(human_summary(result, where, explain=args.explain, recipe=recipe))
    if saved and saved.fallback_reason:
        print(f"advisor: the recipe could not be written where asked ({saved.fallback_reason}). The finished "
              f"run was saved to {saved.path} instead: move it where you want it.", file=sys.stderr)
        return 1
    if result.headline:  # no sweep candidate learned: the recipe is the base setting, not a validated one
        print(f"advisor: {result.headline}", file=sys.stderr)
        return NOT_VALIDATED
    return 0


def _plan_history(args, settings, setup, out, progress, cluster_fingerprint: str | None = None):
    """The history this plan reads (unless --fresh) and appends to (unless --no-history): next to --out, or
    --history / $ADVISOR_HISTORY. Returns (what it knows of this workload on this device class, the recorder).
    ``cluster_fingerprint``: a plan across nodes is its own device class (its runs timed the inter-node
    all-reduce): it reads and seeds only plans on the same nodes, never a one-host plan's."""
    from .history import HistoryRecorder, Known, history_path, read_history, run_context

    path = None if args.no_history else history_path(args.history, out)
    if path is None:
        return None, None
    context = run_context(settings, setup, str(out) if out else None, cluster_fingerprint)
    known = None
    if not args.fresh:
        read = read_history(path)
        known = Known.select(read.rows, context.workload, context.device, settings.adapter_name)
        if known:
            progress.line(f"   history: {len(known.rows)} earlier row(s) of {context.workload['name']} on this device "
                          f"class in {path}: the ceiling starts at the known edge, the trial at the best known "
                          "value, and the sweep reuses runs at the same settings (--fresh ignores them)")
        known = known or None
    recorder = HistoryRecorder(path, context, lambda: None, warn=lambda message: progress.line(f"   {message}"))
    return known, recorder


def cmd_history(args) -> int:
    from .history import append_row, default_read_path, filter_rows, read_history, render_history, rows_from_recipe
    from .recipe import read_document

    path = default_read_path(args.history)
    if args.import_recipes:
        for recipe in args.import_recipes:
            if recipe.endswith(".measurements.toml"):  # a recipe's sibling (`recipes/*.toml` matches it): read with it
                print(f"advisor: {recipe}: a recipe's measurements file, imported with its recipe", file=sys.stderr)
                continue
            rows = rows_from_recipe(read_document(recipe), recipe)
            existing = {(r.get("imported_from"), r.get("kind"), r.get("time"), r.get("per_device"))
                        for r in read_history(path).rows}
            fresh = [r for r in rows if (r.get("imported_from"), r.get("kind"), r.get("time"), r.get("per_device"))
                     not in existing]
            for row in fresh:
                append_row(path, row)
            print(f"advisor: {recipe}: {len(fresh)} row(s) added to {path}"
                  + (f" ({len(rows) - len(fresh)} already there)" if len(fresh) < len(rows) else ""), file=sys.stderr)
    read = read_history(path)
    if not path.exists():
        raise AdvisorError(f"No history at {path}. " + _histories_here(path)
                           + "`advisor plan --out recipes/NAME.toml` (or `advisor replan --out`) records there, "
                           "`--history PATH` or ADVISOR_HISTORY chooses another file, and `advisor history --import "
                           "RECIPE` adds an existing recipe's runs.")
    if args.json:
        print(json.dumps({"path": str(path), "skipped_lines": read.skipped,
                          "rows": filter_rows(read.rows, args.workload)}, indent=2))
    else:
        print(render_history(read, args.workload))
    return 0


def _histories_here(missing) -> str:
    """The sentence naming the histories in this folder and one level down (a plan writes its history next to its
    recipe, wherever --out put it), for `advisor history` when its file is missing; "" when there is none."""
    from .history import HISTORY_NAME

    here = [Path(HISTORY_NAME), *sorted(Path().glob(f"*/{HISTORY_NAME}"))]
    found = [p for p in here if p.is_file() and p != missing]
    if not found:
        return ""
    names = ", ".join(str(p) for p in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return (f"Found {names} (a plan writes its history next to its recipe): read one with `advisor history --history "
            f"{found[0]}`. ")


def cmd_check(args) -> int:
    from .explain import measurements_missing
    from .recipe import check_recipe
    from .recipe_check import recipe_warnings

    data = check_recipe(args.recipe)
    missing = measurements_missing(data)
    if missing:  # a note, not a warning: the decisions --strict checks are whole without the measurements
        print(f"{args.recipe}: note: {missing}", file=sys.stderr)
    warnings = recipe_warnings(data)
    for warning in warnings:
        print(f"{args.recipe}: warning: {warning}", file=sys.stderr)
    if warnings and args.strict:
        print(f"{args.recipe}: not consistent (--strict): {len(warnings)} warning(s) above.", file=sys.stderr)
        return CHECK_STRICT_FAILED
    b, lr = data["batch"], data["lr"]
    verdict = f"valid, {len(warnings)} warning(s) above" if warnings else "OK"
    print(f"{args.recipe}: {verdict} (schema {data['schema_version']}): {b['per_device']} per device x {b['world_size']} x "
          f"{b['accumulation_steps']} accumulation = global {b['global']}, lr {lr['value']:g} ({lr['rule']}), "
          f"warmup {data['warmup']['steps']} steps")
    return 0


def cmd_explain(args) -> int:
    from .explain import explain_text
    from .recipe import read_document

    print(explain_text(read_document(args.recipe)))
    return 0


def cmd_workloads(args) -> int:
    from .workload import builtin_names

    if args.check:
        from .workload_check import check_workload

        print(check_workload(args.check).text())
        return 0

    print("Built-in workloads (use --workload NAME, or your own 'module:function' / 'file.py:function'):")
    for name, desc in builtin_names().items():
        print(f"  {name:<24} {desc}")
    return 0


def cmd_init(args) -> int:
    from .recipe import check_output_path, write_text_atomically
    from .templates import render

    out = Path(args.out)
    # A folder, a missing folder or a file where a folder should be was a traceback; --force keeps a .bak.
    check_output_path(out, force=args.force, what="a file", example="workload.py", nothing="Nothing was written.")
    write_text_atomically(out, render(args.template, str(out)), replace_existing=args.force)
    print(f"Wrote {out} (template {args.template}). Fill in each TODO, then:\n"
          f"  advisor workloads --check {out}:workload\n"
          f"  advisor plan --workload {out}:workload --nproc 2 --device-memory 8GiB --out recipe.toml")
    return 0


def cmd_adapters(args) -> int:
    from .adapters import adapter_statuses

    rows = adapter_statuses()
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2))
        return 0
    for row in rows:
        state = "available" if row.available else f"unavailable: {row.reason}"
        print(f"  {row.name:<12} {row.version or '-':<10} {state}")
        if row.summary:
            print(f"  {'':<12} {row.summary}")
        for option in row.options:
            print(f"  {'':<12} option {option['flag']} {option['type'].upper()}: {option['help']}")
        if row.exports:
            print(f"  {'':<12} exports: --to {', '.join(target['name'] for target in row.exports)}")
        if row.noise is not None:
            print(f"  {'':<12} noise scale: {'measured' if row.noise['measured'] else 'not measured'}")
        if row.big_model is not None:
            print(f"  {'':<12} a model larger than one device: {row.big_model['label']} {row.big_model['flags']}")
    return 0


def cmd_export(args) -> int:
    from .errors import ExportError
    from .export import deepspeed_hostfile, export_recipe, recipe_export_targets
    from .recipe import check_output_path, read_document, write_text_atomically

    data = read_document(args.recipe)
    text, notes = export_recipe(data, args.to)
    outputs = [("--out", args.out, text)] if args.out else []
    if args.hostfile:
        targets = recipe_export_targets(data)
        if targets[args.to].hostfile is None:
            readers = [f"--to {t.name} ({t.hostfile})" for t in targets.values() if t.hostfile]
            raise ExportError(f"--hostfile goes with {' or '.join(readers)}." if readers else
                              "--hostfile goes with a target whose launcher reads one, and this recipe's adapter "
                              "has none.")
        outputs.append(("--hostfile", args.hostfile, deepspeed_hostfile(data)))
    # Every path is checked before the first is written: a bad --hostfile must not leave a new --out behind.
    for option, path, _ in outputs:
        check_output_path(path, args.force, what="a file", option=option,
                          example="hostfile" if option == "--hostfile" else f"{args.to}-export",
                          nothing="Nothing was written.")
    for note in notes:
        print(f"advisor: note: {note}", file=sys.stderr)
    for _, path, content in outputs:
        write_text_atomically(path, content, replace_existing=args.force)
        print(f"advisor: wrote {path}", file=sys.stderr)
    if not args.out:
        sys.stdout.write(text)
    return 0


def replan_target_from_args(args):
    """The device and cluster `advisor replan` plans for: --gpu from the table and/or --device-memory."""
    from .errors import SetupError
    from .gpus import lookup_gpu
    from .replan import ReplanTarget
    from .units import parse_size

    if not args.gpu and not args.device_memory:
        raise SetupError("Say what to re-plan for: --gpu NAME (a card from the table, e.g. --gpu a100-80gb) or "
                         "--device-memory SIZE (memory per device, e.g. --device-memory 80GiB), or both.")
    gpu = None
    if args.gpu:
        try:
            gpu = lookup_gpu(args.gpu)
        except SetupError:
            if not args.device_memory:
                raise  # an unknown card needs its memory
    memory = parse_size(args.device_memory) if args.device_memory else gpu.memory_bytes
    source = "--device-memory" if args.device_memory else "the GPU table (nominal)"
    device_type = args.device or ("cuda" if args.gpu else None)
    if device_type is None:
        from .recipe import read_document

        device = read_document(args.recipe).inputs.device
        device_type = "cpu" if device is None or str(device) == "cpu" else "cuda"
    if device_type == "cpu" and args.gpu:
        raise SetupError("--device cpu contradicts --gpu; leave one out.")
    nodes = 1 if args.nodes is None else args.nodes  # `--nodes 0` is refused, not read as one node
    return ReplanTarget(memory, source, gpu, device_type, args.nproc, nodes, args.precision,
                        args.global_batch, args.headroom, allow_few_steps=bool(getattr(args, "force", False)))


def _record_replan(args, doc, result, saved) -> None:
    """One history row for the re-plan, next to the new recipe (or --history / $ADVISOR_HISTORY)."""
    from .adapters import recipe_adapter_name
    from .history import RunContext, append_row, history_path, replan_row

    path = history_path(args.history, saved.path if saved else None)
    if path is None:
        return
    target = result.target
    context = RunContext({k: getattr(doc.workload, k) for k in ("name", "spec", "parameters", "train_size", "task")},
                         {"type": target.device_type, "name": target.gpu.name if target.gpu else target.device_type,
                          "memory_bytes": target.memory_bytes},
                         recipe_adapter_name(doc), recipe=str(saved.path) if saved else None)
    try:
        append_row(path, replan_row(context, result))
    except OSError as exc:
        print(f"advisor: could not append to the history {path} ({exc.strerror or exc}).", file=sys.stderr)


def cmd_replan(args) -> int:
    from .recipe import check_output_path, read_document, save_recipe
    from .replan import confirm, device_present, render_table, replan, replanned_recipe, with_confirmation

    out = Path(args.out) if args.out else None
    if out:
        if out.resolve() == Path(args.recipe).resolve():
            raise AdvisorError(f"--out {out} is the recipe being re-planned; write the re-plan to a new file "
                               "(the source keeps what was measured).")
        check_output_path(out, args.force)
    data = read_document(args.recipe)
    target = replan_target_from_args(args)
    result = replan(data, args.recipe, target)
    if args.confirm and args.no_confirm:
        raise AdvisorError("--confirm and --no-confirm contradict each other; give one.")
    run_confirm = args.confirm
    if not args.no_confirm:
        from .device import detect

        host = detect("cpu" if target.device_type == "cpu" else None)
        if args.confirm and target.device_type == "cuda" and host.type != "cuda":
            raise AdvisorError("--confirm runs a real probe on the new card, and this host has no GPU. Run the "
                               "same command on a host with the card, or leave --confirm out for the estimate.")
        run_confirm = run_confirm or device_present(target, host)
    if run_confirm:  # it runs here, so the checks `advisor plan` makes of this host apply
        from .errors import SetupError
        from .setup_checks import host_problems

        problems, _ = host_problems(result.nproc, target.memory_bytes, host)
        if problems:
            raise SetupError("The re-plan would be confirmed by real runs on this host, and this host cannot run "
                             f"them: {'; '.join(problems)}. Leave out --confirm (or pass --no-confirm) for the "
                             "estimate only.")
        progress = StderrProgress()
        progress.line(f"== confirming the estimate on this host: one probe at {result.per_device_max} per device "
                      f"under {args.device_memory or args.gpu}, then a short trial")
        outcome = confirm(result, os.getcwd(), trial_steps=args.trial_steps, on_event=progress)
        result = with_confirmation(data, args.recipe, target, result, outcome)
    document = replanned_recipe(result, ["advisor"] + sys.argv[1:])
    saved = save_recipe(document, out, force=args.force) if out else None
    _record_replan(args, data, result, saved)
    if args.json:
        print(json.dumps({"rows": [vars(r) for r in result.rows], "notes": result.notes,
                          "per_device_max": result.per_device_max, "estimated": not result.confirmation,
                          "confirmation": {k: v for k, v in (result.confirmation or {}).items() if k != "rows"}
                          or None, "per_device_batch": result.plan.per_device, "accumulation_steps":
                          result.plan.accumulation_steps, "global_batch": result.plan.global_batch,
                          "world_size": result.world_size, "lr": result.lr.value, "warmup_steps": result.warmup.steps,
                          "precision": result.precision, "recipe": str(saved.path) if saved else None}, indent=2))
    else:
        print(render_table(result))
        if saved:
            print(f"Re-planned recipe written to {saved.path}" + (f" (the previous one kept as {saved.backup})"
                                                                  if saved.backup else ""))
    if saved and saved.fallback_reason:
        print(f"advisor: the recipe could not be written where asked ({saved.fallback_reason}); saved to "
              f"{saved.path} instead.", file=sys.stderr)
        return 1
    return 0


def _format_evidence(evidence: dict) -> list[str]:
    lines = []
    for key, value in evidence.items():
        if key == "quote":
            lines.append(f"      > {value}")
        elif isinstance(value, dict):
            lines.append(f"      {key}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
        else:
            lines.append(f"      {key}: {value}")
    return lines


def _unreadable_reason(stats) -> str:
    if stats.unreadable:  # the reader knows why (a trainer_state.json cut off or malformed)
        return stats.unreadable
    if stats.skipped_binary_lines and stats.skipped_binary_lines >= stats.lines - 1:
        return "it looks binary, not a text log"
    if stats.lines <= 1 and not stats.parsed_lines and not stats.skipped_binary_lines:
        return "it is empty"
    return f"none of its {stats.lines} lines is in a known format"


def _nothing_readable(unreadable, formats) -> str:
    why = "; ".join(f"{r.source}: {_unreadable_reason(r.stats)}" for r in unreadable)
    if all(r.stats.unreadable for r in unreadable):  # each reason names its own fix: the formats would mislead
        return f"advisor: nothing readable ({why})."
    return (f"advisor: nothing readable ({why}). A log needs training metrics, an out-of-memory error or a failure "
            f"line in a known format: {', '.join(formats)}. Force one with --format if the auto-detection missed "
            "yours.")


class _PlotTarget(argparse.Action):
    """`--plot` alone draws in the terminal; `--plot FILE` must name a picture file. Checked while parsing, so
    `advisor diagnose --plot run.log` (the log taken for the picture) is explained rather than "logs required"."""

    def __call__(self, parser, namespace, value, option_string=None):
        from .diagnose.plot import PLOT_SUFFIXES

        if value and os.path.splitext(value)[1].lower() not in PLOT_SUFFIXES:
            kinds = f"{', '.join(PLOT_SUFFIXES[:-1])} or {PLOT_SUFFIXES[-1]}"
            if os.path.exists(value) or value == "-":  # a log, taken as the picture's file
                fix = f"To draw {value}'s curves in the terminal, put --plot after the logs: `advisor diagnose " \
                      f"{value} --plot`; to write a file, give it one of these endings."
            else:
                fix = f"Give a path with one of these endings (for example {os.path.splitext(value)[0]}.html)."
            raise AdvisorError(f"--plot {value}: a picture file ends in {kinds} (a page with the drawing inside, the "
                               f"drawing alone, or the terminal drawing as plain text). {fix} Nothing was read.")
        setattr(namespace, self.dest, value)


FAIL_ON_CHOICES = ("error", "warning", "never")  # the order --help lists; advisor.diagnose.FAIL_ON owns the rule


def _add_diagnose_output_flags(diag: argparse.ArgumentParser) -> None:
    diag.add_argument("--plot", nargs="?", const="", metavar="FILE", action=_PlotTarget,
                      help="draw the loss curves read, each finding marked where it starts: in the terminal, or "
                           "into FILE (.html: a page to attach to an issue; .svg; .txt: the drawing without colour)")
    diag.add_argument("--force", action="store_true", help="replace an existing --plot FILE (the old one is kept as "
                                                           ".bak)")
    diag.add_argument("--fail-on", choices=tuple(FAIL_ON_CHOICES), default="warning",
                      help="which findings exit 1, for CI: 'warning' (default: any finding), 'error' (only "
                           "error-level ones), 'never' (always 0); unreadable input exits 2 whatever this says")



def _check_plot_request(args) -> None:
    """Before anything is read: the picture can go where asked."""
    if args.plot is None:
        return
    if args.watch:
        raise AdvisorError("--plot draws a finished read; --watch follows a log as it grows. Run `advisor diagnose "
                           "LOG --plot` once the run has stopped (or on its log so far).")
    if args.plot == "" and args.json:
        raise AdvisorError("--plot without a FILE draws in the terminal, and --json keeps standard output for the "
                           "JSON. Give --plot a file (--plot curves.html) to have both.")
    if args.plot:
        from .recipe import check_output_path

        check_output_path(args.plot, args.force, what="a file", option="--plot", example="curves.html",
                          nothing="Nothing was read.")


def _draw_plot(args, result) -> int | None:
    """Draw the pictures asked for with --plot (None when none was); 2 when no log held a curve to draw (then
    nothing is written)."""
    if args.plot is None:
        return None
    from .diagnose.plot import nothing_to_draw, picture_of, render_file, render_text

    pictures = [picture_of(report) for report in result.reports if report.readable]
    drawable = [picture for picture in pictures if not picture.empty]
    empty = "; ".join(nothing_to_draw(picture) for picture in pictures if picture.empty)
    if not drawable:
        print(f"advisor: no picture: {empty}." + (f" Nothing was written to {args.plot}." if args.plot else ""),
              file=sys.stderr)
        return 2
    if empty:
        print(f"advisor: drawn without {empty}.", file=sys.stderr)
    if not args.plot:
        import shutil

        columns, rows = shutil.get_terminal_size((100, 30))
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        for picture in drawable:
            print(render_text(picture, min(columns, 140), max(16, min(rows - 6, 30)), color))
        return None
    from .recipe import write_text_atomically

    backup = write_text_atomically(args.plot, render_file(drawable, os.path.splitext(args.plot)[1].lower()),
                                   replace_existing=args.force)
    print(f"advisor: picture written to {args.plot}" + (f" (the previous one kept as {backup})" if backup else ""),
          file=sys.stderr)
    return None


def cmd_diagnose(args) -> int:
    from .diagnose import Context, diagnose, exit_code_for, known_formats

    _check_plot_request(args)
    context = None
    if args.recipe:
        from .recipe import check_recipe

        context = Context.from_recipe(check_recipe(args.recipe))
    if args.classes is not None:
        if args.classes < 2:
            print(f"advisor: --classes {args.classes} is not a class count; give the number of classes of the task "
                  "(2 or more), e.g. --classes 10 for CIFAR-10.", file=sys.stderr)
            return 2
        context = context or Context()
        context.classes = args.classes
    if args.watch:
        from .diagnose.watch import watch

        if len(args.logs) != 1 or args.logs[0] == "-":
            print("advisor: --watch follows one log file (not standard input); pass exactly one path.",
                  file=sys.stderr)
            return 2
        return watch(args.logs[0], args.format, context, interval=args.interval, seconds=args.watch_seconds,
                     as_json=args.json, fail_on=args.fail_on)
    result = diagnose(args.logs, args.format, context)
    unreadable = [r for r in result.reports if not r.readable]
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        _print_reports(result.reports)
    if len(unreadable) == len(result.reports):
        print(_nothing_readable(unreadable, known_formats()), file=sys.stderr)
        return 2
    for report in unreadable:  # the others were judged: name each one left out, so none is dropped in silence
        print(f"advisor: {report.source} was not read ({_unreadable_reason(report.stats)}); the findings above are "
              "from the others.", file=sys.stderr)
    return _draw_plot(args, result) or exit_code_for(result.findings, args.fail_on)


def _print_reports(reports) -> None:
    """Each readable report as text: what was read, the verdict, every finding with its evidence and actions."""
    for report in reports:
        if not report.readable:
            continue  # explained on stderr by the caller
        stats = report.stats
        formats = ", ".join(f"{k} ({v})" for k, v in stats.formats.items()) or "nothing recognised"
        series = (", ".join(f"{k} {v} point{'' if v == 1 else 's'}" for k, v in stats.series_lengths.items())
                  or "no metric series")
        print(f"{report.source}: {stats.lines} lines; read as {formats}; {series}.")
        for note in stats.notes:
            print(f"  note: {note}")
        if report.verdict == "nothing-conclusive":  # the engine's verdict, said as it is (issue 26)
            why = report.cannot_judge.removeprefix("nothing conclusive").lstrip(": ")
            print(f"  Nothing conclusive, too few points to judge the curves: {why}.")
        elif report.verdict == "healthy":
            print("  No problem found: the curves look healthy on every check above.")
        for number, finding in enumerate(report.findings, 1):
            secondary = f" (secondary to {finding.secondary_to})" if finding.secondary_to else ""
            print(f"\n  [{finding.severity}] {finding.kind}{secondary} (confidence: {finding.confidence}): "
                  f"{finding.summary}")
            print("    Evidence:")
            print("\n".join(_format_evidence(finding.evidence)))
            print("    What to do, in this order:")
            for index, action in enumerate(finding.actions, 1):
                print(f"      {index}. {action}")
        print()


def cmd_tui(args) -> int:
    # The cluster flags (or SLURM's variables) are checked before anything else, a terminal included: a node
    # other than 0, or a wrong flag, is told so wherever it runs (srun starts the app on every node).
    cluster = cluster_from_args(args) if getattr(args, "command", None) != "diagnose" else None
    if cluster is not None:
        _refuse_the_app_off_node_0(cluster, args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Without a terminal the app cannot draw or read keys; never hang a script or a pipe.
        if getattr(args, "command", None) is None:
            build_parser().print_help()
            print("\nadvisor: the app needs a terminal (stdin and stdout are not one here), so this is the help; "
                  "the subcommands above run headless.", file=sys.stderr)
            return 0
        raise AdvisorError("The app needs a terminal, and stdin or stdout is not one here (a pipe, a file, or a "
                           "CI job). Run it in a terminal, or use the headless commands: `advisor plan`, "
                           "`advisor diagnose LOG`.")
    from .tui.app import Prefill, create_app

    if getattr(args, "command", None) == "diagnose":
        app = create_app(diagnose_logs=args.logs, diagnose_recipe=args.recipe)
    else:
        import shlex

        script = getattr(args, "script_command", None)  # `advisor -- train.py ARGS`: the Script field, filled in
        app = create_app(Prefill.from_args(args, shlex.join(script) if script else None), cluster=cluster)
    if cluster is not None:  # torch loads now, quiet: its store's C++ log lines would draw over the app
        with _torch_cpp_log_quiet_here(True):
            import_torch_keeping_ctrl_c()
    app.run()
    return app.return_code or 0


def _refuse_the_app_off_node_0(cluster, args) -> None:
    """The app runs the method, so it runs on node 0 only; on another node, the command to run there instead."""
    import shlex

    from .cluster import SCRIPT_ON_ONE_HOST
    from .errors import SetupError
    from .options import PLAN_OPTION_TABLE
    from .settings import plan_command

    if getattr(args, "script_command", None) is not None:
        raise SetupError(SCRIPT_ON_ONE_HOST)
    if cluster.node_rank == 0:
        return
    given = {option.name: getattr(args, option.name, None) for option in PLAN_OPTION_TABLE if option.prefill}
    here = shlex.join(plan_command(given, cluster_flags=cluster.flags()))
    raise SetupError(f"The app runs on node 0 only (it runs the method, shows the live steps and writes the recipe), "
                     f"and this is node {cluster.node_rank} of {cluster.nnodes}"
                     + (" (from SLURM's variables)" if cluster.source == "SLURM" else "") + f". Run `{here}` here "
                     "instead, with the same settings as the app's Setup on node 0 (it runs this node's workers "
                     "for every step and writes nothing), and open the app on node 0 with --node-rank 0.")


def _add_tui_flags(parser: argparse.ArgumentParser) -> None:
    from .options import add_cluster_arguments, add_prefill_arguments

    add_prefill_arguments(parser)
    add_cluster_arguments(parser)  # the app on node 0 of a plan across nodes


def build_parser() -> argparse.ArgumentParser:
    from .options import add_cluster_arguments, add_plan_arguments

    parser = argparse.ArgumentParser(
        prog="advisor", description="Choose the batch size for data-parallel PyTorch training.")
    parser.add_argument("--version", action="version", version=f"batch-advisor {__version__}")
    _add_tui_flags(parser)  # bare `advisor` opens the app
    sub = parser.add_subparsers(dest="command")
    _add_tui_flags(sub.add_parser("tui", help="open the app (what bare `advisor` does); `advisor [tui] [options] -- "
                                              "SCRIPT [ARGS...]` opens it with your script in the Setup",
                                  usage="advisor tui [options] [-- SCRIPT [ARGS...]]"))

    plan = sub.add_parser("plan", help="run the four-step method for real and write a recipe",
                          usage="advisor plan [options] [-- SCRIPT [ARGS...]]",
                          epilog="-- SCRIPT ARGS: measure your own training script instead of a workload: a Hugging "
                                 "Face Trainer script as it is, any other with placeholders in ARGS ({per_device}, "
                                 "{accumulation}, {steps}, {lr}, {warmup}, {precision}); see docs/your-training.md, "
                                 "\"Point it at your script\". Each adapter declares its own options, given as flags after "
                                 "these (for example --zero-stage 3 with --adapter deepspeed); `advisor adapters` "
                                 "lists them.")
    add_plan_arguments(plan)  # every declared option (advisor/options.py)
    add_cluster_arguments(plan)  # the cluster flags (advisor/options.py), the app's too
    plan.add_argument("--out", help="recipe path to write (never overwritten without --force)")
    plan.add_argument("--force", action="store_true", help="replace an existing recipe, keeping a .bak backup; and plan a "
                      "--global-batch that leaves under 10 optimizer steps per epoch")
    plan.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    plan.add_argument("--explain", action="store_true", help="after the summary, every reason and warning in full "
                                                             "(the same text `advisor explain RECIPE` prints)")
    plan.add_argument("--history", help="the history file to read and append to (default: .history.jsonl next to "
                                        "--out, or $ADVISOR_HISTORY)")
    plan.add_argument("--fresh", action="store_true", help="ignore the history: search the ceiling, start the trial "
                                                          "and run every sweep point anew (still recorded)")
    plan.add_argument("--no-history", action="store_true", help="neither read nor append to the history")
    plan.set_defaults(func=cmd_plan)

    hist = sub.add_parser("history", help="the ledger across runs: every plan, replan, trial and sweep, as a table")
    hist.add_argument("--workload", help="only this workload (name or spec)")
    hist.add_argument("--json", action="store_true", help="the rows as JSON")
    hist.add_argument("--history", help="the history file (default: $ADVISOR_HISTORY, else recipes/.history.jsonl)")
    hist.add_argument("--import", dest="import_recipes", nargs="+", metavar="RECIPE",
                      help="first add these recipes' own ledgers (runs already imported are skipped)")
    hist.set_defaults(func=cmd_history)

    explain = sub.add_parser("explain", help="every reason and warning a recipe holds, step by step (no torch)")
    explain.add_argument("recipe")
    explain.set_defaults(func=cmd_explain)

    check = sub.add_parser("check", help="validate a recipe and redo its LR and warmup from its own rule (exit 0 "
                                         "valid, warnings included; 2 invalid; 4 with --strict and a warning)")
    check.add_argument("recipe")
    check.add_argument("--strict", action="store_true",
                       help="a warning (an LR or warmup that its rule does not give: a hand edit) fails: exit 4")
    check.set_defaults(func=cmd_check)

    diag = sub.add_parser("diagnose", help="read training logs; find OOM, oscillation, slow validation loss, "
                                          "divergence; exit 0 none, 1 findings (see --fail-on), 2 unreadable")
    diag.add_argument("logs", nargs="+", help="log files or run folders ('-' reads standard input): text logs, "
                                              "TensorBoard event files, metrics.csv / results.csv, "
                                              "trainer_state.json, metrics.json, a Keras history.json, mlruns/, wandb/; a folder is "
                                              "searched for its runs, each judged")
    diag.add_argument("--json", action="store_true", help="one JSON object: findings and what was read")
    diag.add_argument("--recipe", help="a recipe that adds the batch/LR context the log lacks")
    diag.add_argument("--format", help="force one reader (see the list in the error for unreadable logs)")
    diag.add_argument("--watch", action="store_true", help="follow a growing log; report each finding when it "
                                                           "appears (Ctrl-C stops)")
    diag.add_argument("--interval", type=float, default=2.0, help="seconds between reads with --watch (default 2)")
    diag.add_argument("--watch-seconds", type=float, help="stop watching after this many seconds")
    diag.add_argument("--tui", action="store_true", help="show the findings in the app")
    diag.add_argument("--classes", type=int, help="number of classes K of the task: a loss stuck at ln(K) is "
                                                  "'not learning' (otherwise K comes from the log's accuracy)")
    _add_diagnose_output_flags(diag)
    diag.set_defaults(func=cmd_diagnose)

    init = sub.add_parser("init", help="write a commented workload file to fill in (your own model)")
    init.add_argument("--template", choices=("plain", "transformers", "timm", "lightning"), default="plain",
                      help="plain PyTorch (runs as written), a transformers model, a timm model, or a Lightning "
                           "module (default: plain)")
    init.add_argument("--out", default="workload.py", help="the file to write (default: workload.py)")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(func=cmd_init)
    workloads = sub.add_parser("workloads", help="list the built-in workloads, or --check your own")
    workloads.add_argument("--check", metavar="SPEC",
                           help="build the workload once, run one training and one evaluation step at batch 2 in "
                                "this process, and report what was found (exit 0) or what is wrong (exit 2)")
    workloads.set_defaults(func=cmd_workloads)
    adapters = sub.add_parser("adapters", help="list the installed adapters: version, available or why not")
    adapters.add_argument("--json", action="store_true", help="a JSON list of objects (name, version, available, "
                                                              "reason, summary, capabilities)")
    adapters.set_defaults(func=cmd_adapters)

    rp = sub.add_parser("replan", help="re-plan a recipe for another GPU or cluster from its memory fit "
                                       "(estimates, labelled; confirmed by a real probe where the device is here)")
    rp.add_argument("recipe")
    rp.add_argument("--gpu", help="the new card, from the table (a100-80gb, h100-80gb, v100-32gb, rtx-4090, t4, ...)")
    rp.add_argument("--device-memory", help="memory per device of the new card (required for a card the table "
                                            "does not know; overrides the table's size)")
    rp.add_argument("--device", choices=("cpu", "cuda"), help="the new device type (default: cuda with --gpu, "
                                                              "else the recipe's)")
    rp.add_argument("--nproc", type=int, help="processes per node on the new cluster (default: the recipe's)")
    rp.add_argument("--nodes", type=int, help="nodes of the new cluster (default 1)")
    rp.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto",
                    help="auto (default): the card's policy (bf16 on compute capability >= 8.0); a fixed one must "
                         "match the precision the recipe's fit was measured in")
    rp.add_argument("--global-batch", type=int, help="a new global target (default: the recipe's)")
    rp.add_argument("--headroom", type=float, help="memory kept free (default: the recipe's)")
    rp.add_argument("--confirm", action="store_true", help="run the confirming probe and trial (the default when "
                                                           "the new device is on this host)")
    rp.add_argument("--no-confirm", action="store_true", help="never run anything; estimates only")
    rp.add_argument("--trial-steps", type=int, default=20, help="steps of the confirming trial (default 20)")
    rp.add_argument("--out", help="write the re-planned recipe here (never over an existing one without --force)")
    rp.add_argument("--force", action="store_true", help="replace an existing --out, keeping a .bak backup; and plan a "
                    "--global-batch that leaves under 10 optimizer steps per epoch")
    rp.add_argument("--json", action="store_true", help="one JSON object on stdout")
    rp.add_argument("--history", help="append the re-plan to this history file (default: next to --out)")
    rp.set_defaults(func=cmd_replan)

    export = sub.add_parser("export", help="a recipe as the configuration another launcher reads (a DeepSpeed JSON "
                                           "config, an Accelerate config YAML, a torchrun command line, ...)")
    export.add_argument("recipe")
    export.add_argument("--to", required=True, metavar="TARGET",
                        help="one of the export targets of the recipe's adapter (`advisor adapters` lists each "
                             "adapter's)")
    export.add_argument("--out", help="write here instead of stdout")
    export.add_argument("--hostfile", help="with a target whose launcher reads a hostfile: also write a hostfile "
                                           "template for the cluster")
    export.add_argument("--force", action="store_true", help="replace existing --out/--hostfile files")
    export.set_defaults(func=cmd_export)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._subparsers._group_actions for name in action.choices}


_ARGPARSE_SAYS = [  # argparse's message -> ours (the option, what it takes, the value given)
    (re.compile(r"argument (\S+?)(?:/\S+)?: invalid int value: (.*)"), "{0} takes a whole number, not {1}"),
    (re.compile(r"argument (\S+?)(?:/\S+)?: invalid float value: (.*)"), "{0} takes a number, not {1}"),
    (re.compile(r"argument (\S+?)(?:/\S+)?: invalid choice: (\S+) \(choose from (.*)\)"),
     "{0} is one of {2}, not {1}"),
    (re.compile(r"argument (\S+?)(?:/\S+)?: expected one argument"), "{0} needs a value after it"),
    (re.compile(r"the following arguments are required: (.*)"), "{0} is missing"),
]


def _argparse_errors_as_paragraphs(parser: argparse.ArgumentParser) -> None:
    """`advisor plan --nproc abc` printed the whole usage (12 lines) and 'advisor plan: error: argument --nproc:
    invalid int value'. Each parser's error is one paragraph instead: the command, the option, what it takes and
    where the options are listed (exit 2). The option declarations are untouched."""
    from .errors import SetupError

    def error_of(prog: str):
        def error(message: str):
            said = next((template.format(*match.groups()) for pattern, template in _ARGPARSE_SAYS
                         if (match := pattern.fullmatch(message))), message)
            raise SetupError(f"`{prog}`: {said}. `{prog} --help` lists what it takes. Nothing was run.")
        return error

    parser.error = error_of(parser.prog)
    for action in parser._subparsers._group_actions:
        for name, sub in action.choices.items():
            sub.error = error_of(f"advisor {name}")


def _refuse_what_the_command_does_not_take(parser: argparse.ArgumentParser, command: str | None, rest) -> None:
    """`advisor workloads foo` or `advisor adapters --check x`: argparse printed the bare `advisor` usage and
    'unrecognized arguments', naming neither the command nor what it takes. One paragraph, exit 2."""
    import difflib

    from .errors import SetupError

    where = f"advisor {command}" if command else "advisor"
    sub = next((action.choices[command] for action in parser._subparsers._group_actions
                if command in action.choices), parser)
    flags = sorted({flag for action in sub._actions for flag in action.option_strings if flag.startswith("--")})
    words = [word.split("=")[0] if word.startswith("--") else word for word in rest]
    close = [match for word in words if word.startswith("-")
             for match in difflib.get_close_matches(word, flags, n=1, cutoff=0.7)]
    hint = f"Did you mean {close[0]}? " if close else ""
    raise SetupError(f"`{where}` does not take {' '.join(repr(w) for w in words)}. {hint}"
                     f"`{where} --help` lists what it takes"
                     + (f" ({', '.join(flags)})." if flags and len(flags) <= 8 else ".") + " Nothing was run.")


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # inside the try: a reader that left shows here, not as an error at interpreter exit
        return code
    except AdvisorError as exc:
        print(f"advisor: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # Ctrl-C at any point, building the parser too: a line, never a traceback
        print("advisor: interrupted; nothing was written.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `advisor history | head`: the reader left; exit quietly, as `cat` would
        return _closed_pipe()


CHECK_STRICT_FAILED = 4  # `advisor check --strict`: valid, but its LR or warmup is not what its rule gives
CLOSED_PIPE = 141  # what a process killed by SIGPIPE reports to the shell (128 + 13)


def _closed_pipe() -> int:
    """stdout's reader has gone: point stdout at /dev/null so the interpreter's exit flush cannot raise again (the
    remedy the Python docs give for SIGPIPE), and say nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return CLOSED_PIPE


@contextlib.contextmanager
def _torch_cpp_log_quiet_here(quiet: bool):
    """While torch loads in this process: c10's log level FATAL, so a node that cannot reach node 0's rendezvous
    store (or loses it) says so in our one paragraph, without torch's `[E... socket.cpp] ... frame #0 ...` error
    lines first. c10 reads TORCH_CPP_LOG_LEVEL once, when torch loads (checked with torch 2.13: ERROR still
    prints those, FATAL does not), so the variable is put back afterwards: the workers this process starts keep
    the user's level and their own C++ errors. A level the user set is kept."""
    if not quiet or "TORCH_CPP_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["TORCH_CPP_LOG_LEVEL"] = "FATAL"
    try:
        yield
    finally:
        os.environ.pop("TORCH_CPP_LOG_LEVEL", None)


def import_torch_keeping_ctrl_c() -> None:
    """Import torch so that a Ctrl-C during the import is not lost. Measured with torch 2.13: a SIGINT about half
    a second into `import torch` lands in numpy's import, which torch's C init (`from torch._C import *`) runs
    and whose error it drops, the KeyboardInterrupt too; the plan then ran on as if no key was pressed. Main
    thread only (signal handlers live there)."""
    pressed = []

    def note(signum, frame):
        pressed.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, note)
    try:
        import torch  # noqa: F401
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def _refuse_unknown_command(argv: list[str], commands) -> None:
    """A mistyped subcommand (`advisor plna`) names the one meant; argparse alone lists every choice."""
    import difflib

    word = argv[0] if argv else None
    if word is None or word.startswith("-") or word in commands:
        return
    close = difflib.get_close_matches(word, list(commands), n=1, cutoff=0.6)
    hint = f"Did you mean `advisor {close[0]}`? " if close else ""
    raise AdvisorError(f"{word!r} is not an advisor command. {hint}The commands: {', '.join(sorted(commands))} "
                       "(`advisor --help` says what each does; `advisor` alone opens the app).")


_SIGNED_VALUE = re.compile(r"^-[0-9.]")


def _values_that_start_with_a_dash(argv: list[str]) -> list[str]:
    """`--device-memory -1GiB` as `--device-memory=-1GiB`: argparse takes a word that starts with '-' for a flag
    unless it is a plain negative number, and answers 'expected one argument'; joined, the option's own check
    names the value and the fix."""
    joined: list[str] = []
    for word in argv:
        if joined and joined[-1].startswith("--") and "=" not in joined[-1] and _SIGNED_VALUE.match(word):
            joined[-1] = f"{joined[-1]}={word}"
        else:
            joined.append(word)
    return joined


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    _argparse_errors_as_paragraphs(parser)
    argv = sys.argv[1:] if argv is None else list(argv)
    script_command = None
    if "--" in argv:  # `advisor plan [options] -- SCRIPT [ARGS...]` (the script door); `advisor [tui] -- ...` too
        split = argv.index("--")
        command = next((word for word in argv[:split] if not word.startswith("-")), None)
        if command in ("plan", "tui") or command not in _subcommands(parser):  # no subcommand: the app
            argv, script_command = argv[:split], argv[split + 1:]
    _refuse_unknown_command(argv, _subcommands(parser))
    args, rest = parser.parse_known_args(_values_that_start_with_a_dash(argv))
    if getattr(args, "command", None) == "plan":
        args.adapter_argv = rest  # the chosen adapter's own options: cmd_plan reads them once it is loaded
    elif rest:
        _refuse_what_the_command_does_not_take(parser, getattr(args, "command", None), rest)
    if script_command is not None:
        args.script_command = script_command
    if not getattr(args, "func", None) or getattr(args, "tui", False):
        return cmd_tui(args)  # bare `advisor`, `advisor tui`, `advisor diagnose --tui`
    if getattr(args, "command", None) in ("plan", "replan"):  # minutes of runs: a Ctrl-C must stop them
        with _torch_cpp_log_quiet_here(bool(getattr(args, "nnodes", None) or os.environ.get("SLURM_NNODES"))):
            import_torch_keeping_ctrl_c()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
