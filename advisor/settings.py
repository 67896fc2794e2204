"""Plan settings from named options: the one constructor every front end uses (the CLI, the app).

An option is named as its `advisor plan` flag, underscored (``device_memory``, ``gpus_per_node``), and declared once
in ``advisor/options.py`` (its type, default, help and app field); a value left out or None takes its default.
``adapter_options`` holds the chosen adapter's declared options (``AdapterBase.options``) by name.
"""

from __future__ import annotations

import os

from .errors import AdvisorError, SetupError
from .method import MethodSettings
from .options import PLAN_OPTION, PLAN_OPTION_TABLE


# Every named option `settings_from_options` reads, in the order `plan_command` writes them, and their defaults: read
# from the one declaration (advisor/options.py).
PLAN_OPTIONS = tuple(PLAN_OPTION)
PLAN_DEFAULTS = {option.name: option.default for option in PLAN_OPTION_TABLE if option.default is not None}


def option_value(options: dict, name: str):
    """The named option as given, or its default; text (from a form field) is read as the option's type."""
    value = options.get(name)
    if value is None or value == "":
        return PLAN_DEFAULTS.get(name)
    option = PLAN_OPTION.get(name)
    if option is None or not isinstance(value, str):
        return value
    try:
        return option.parse_text(value)
    except ValueError:
        from .setup_checks import refuse_value

        raise refuse_value(option.flag, f"must be {option.type_words()}, not {value!r}") from None


def settings_from_options(options: dict, host, workdir: str | None = None) -> MethodSettings:
    """MethodSettings from named options and the detected host; a SetupError names what is wrong and its fix."""
    from .units import parse_size

    unknown = sorted(set(options) - set(PLAN_OPTIONS) - {"adapter_options"})
    if unknown:
        raise SetupError(f"Unknown plan option(s) {', '.join(unknown)}; the options are {', '.join(PLAN_OPTIONS)}.")
    value = lambda name: option_value(options, name)  # noqa: E731
    nproc = value("nproc")
    memories = None
    if value("device_memory"):
        budget = parse_size(value("device_memory"))
    elif host.type == "cuda":
        # Plan for the smallest card so one identical per-device batch fits every one of them.
        memories = host.memories[: nproc or len(host.memories)]
        smallest = min(range(len(memories)), key=memories.__getitem__)
        budget = memories[smallest]
        if smallest != 0:
            raise AdvisorError(f"GPU {smallest} has the least memory; probes run on GPU 0. Reorder the GPUs with "
                               f"CUDA_VISIBLE_DEVICES so the smallest comes first, or pass --device-memory.")
    else:
        raise AdvisorError("No GPU here, so there is no device memory to measure against. Pass --device-memory "
                           "SIZE (for example --device-memory 1GiB) to plan for a device of that size; each "
                           "process then gets a real memory limit of that size.")
    nproc = nproc if nproc is not None else (host.count if host.type == "cuda" else 2)
    nodes, target_world_size = target_cluster(value("nodes"), value("gpus_per_node"), value("world_size"))
    base_warmup = None
    if value("base_warmup") is not None:
        from .method.lr import parse_warmup

        try:
            base_warmup = parse_warmup(str(value("base_warmup")))
        except ValueError as exc:
            raise SetupError(f"{exc}. Nothing was run.") from None
    as_given = {option.setting: value(option.name) for option in PLAN_OPTION_TABLE if option.setting}
    return MethodSettings(
        **as_given, nproc=nproc, device=host.type, memory_budget_bytes=budget, workdir=workdir or os.getcwd(),
        device_memories=memories, nodes=nodes, target_world_size=target_world_size,
        adapter_options=dict(options.get("adapter_options") or {}), base_warmup=base_warmup)


def target_cluster(nodes: int | None, per_node: int | None, world: int | None) -> tuple[int, int | None]:
    """(nodes, target world size or None) from --nodes/--gpus-per-node/--world-size.

    Probes run on this host with --nproc processes; the plan, LR, warmup and exports are for the target.
    """
    for name, given in (("nodes", nodes), ("gpus_per_node", per_node), ("world_size", world)):
        if given is not None and given < 1:
            from .setup_checks import refuse_value

            raise refuse_value(PLAN_OPTION[name].flag, f"must be at least 1, not {given}")
    nodes = nodes or 1
    if per_node is not None and world is not None and world != nodes * per_node:
        raise SetupError(f"--world-size {world} contradicts --nodes {nodes} x --gpus-per-node {per_node} = "
                         f"{nodes * per_node}; give one or the other.")
    target = world if world is not None else (nodes * per_node if per_node is not None else None)
    if target is not None and target % nodes:
        raise SetupError(f"--world-size {target} does not split evenly over --nodes {nodes}: launchers start the "
                         "same number of processes on every node.")
    return nodes, target


# The options a step screen of the app changes after the Setup (the Ceiling's headroom, the Starting value's own
# value, the Recipe's global target), by the MethodSettings attribute that holds what the session ran with.
CHANGED_BY_STEPS = {"headroom": "headroom", "start": "start_per_device", "global_batch": "global_batch"}


def options_as_run(options: dict, settings: MethodSettings) -> dict:
    """``options`` (the Setup's) with what the steps changed since read back from the session's ``settings``, so
    the command that reproduces a walk in the app, and the recipe's provenance, say what the walk ran with."""
    return {**options, **{name: getattr(settings, attr) for name, attr in CHANGED_BY_STEPS.items()}}


def plan_command(options: dict, out: str | None = None, force: bool = False,
                 script: list[str] | None = None, cluster_flags: list[str] | None = None) -> list[str]:
    """The `advisor plan` command that says what ``options`` say (defaults left out): the headless twin of a walk
    in the app, which the recipe records. ``script``: SCRIPT ARGS, measured through the script door
    (`advisor plan ... -- SCRIPT ARGS`) instead of a workload. ``cluster_flags``: node 0's (ClusterSpec.flags)
    of a plan across nodes."""
    argv = ["advisor", "plan"]
    for name in PLAN_OPTIONS:
        if name == "workload" and script:
            continue  # the script is the workload
        value = option_value(options, name)
        if value is None or (value == PLAN_DEFAULTS.get(name) and name not in ("workload", "adapter")):
            continue
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else ([] if value is False else [flag, f"{value:g}" if isinstance(value, float)
                                                                         else str(value)])
    for name, value in sorted((options.get("adapter_options") or {}).items()):
        if value is not None and value != "":
            argv += ["--" + name.replace("_", "-"), str(value)]
    argv += cluster_flags or []
    if out:
        argv += ["--out", out] + (["--force"] if force else [])
    if script:
        argv += ["--", *script]  # last: everything after `--` belongs to the script
    return argv
