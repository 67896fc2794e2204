"""The script door: `advisor plan -- SCRIPT ARGS` measures the user's own training script, unchanged.

Every run starts the script under the adapter's own launcher through ``python -m advisor.shim`` (see
advisor/shim.py), which counts the script's optimizer steps and reports in the worker event protocol; the
four steps (ceiling, starting value, trial, sweep) run exactly as for a Workload. On CPU, where the launcher is
torchrun, the shim's ranks fork from the fork server instead (advisor/probe_server.py), as a Workload's do.

How the advisor sets the batch in the script, decided from the script and its arguments without importing it:

- **Placeholders** in ARGS (``{per_device}``, ``{accumulation}``, ``{steps}``, ``{lr}``, ``{warmup}``,
  ``{precision}``): each run fills them in. They win when present, whatever the script is.
- **Hugging Face TrainingArguments**: a script whose source names ``HfArgumentParser`` or ``TrainingArguments``,
  or whose ARGS hold ``--output_dir``, gets the Trainer's own flags (HF_FLAGS), replacing the user's values.
- Neither: refused before anything runs, with a message showing both forms.

This module is torch-free: the engine, the shim and the recipe all use it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from .adapters import Capabilities
from .errors import SetupError
from .script_source import SCRIPT_WORKLOAD_PREFIX

PLACEHOLDERS = ("per_device", "accumulation", "steps", "lr", "warmup", "precision")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_HF_MARKERS = ("HfArgumentParser", "TrainingArguments")
# Trainer flags the advisor sets on every run, replacing the user's (the planned values or the run's scaffolding).
HF_PLAN_FLAGS = ("per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "warmup_steps",
                 "bf16", "fp16")
HF_RUN_FLAGS = ("max_steps", "eval_strategy", "eval_steps", "output_dir", "use_cpu", "report_to", "save_strategy",
                "evaluation_strategy", "logging_steps", "logging_strategy")
_BOOL_WORDS = {"true", "false", "yes", "no", "1", "0", "t", "f", "y", "n"}
_MULTI_VALUE_FLAGS = {"report_to"}  # nargs="+" in TrainingArguments
# TrainingArguments' defaults, for the base LR and batch when the user's ARGS leave them out
HF_DEFAULTS = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "learning_rate": 5e-5,
               "warmup_steps": 0}

BOTH_FORMS = (
    "  Hugging Face Trainer scripts (HfArgumentParser / TrainingArguments) need nothing: the advisor sets "
    "--per_device_train_batch_size, --gradient_accumulation_steps, --max_steps, --learning_rate, --warmup_steps, "
    "--bf16/--fp16 and a scratch --output_dir itself:\n"
    "    advisor plan --device-memory 8GiB -- train.py --model_name_or_path ... --output_dir out\n"
    "  Any other script: write placeholders where your flags take the values, and the advisor fills them in:\n"
    "    advisor plan --device-memory 8GiB --base-lr 0.1 --base-batch 256 -- train.py --batch-size {per_device} "
    "--accumulation {accumulation} --steps {steps} --lr {lr} --warmup {warmup} --precision {precision}\n"
    "  ({per_device} is required; {steps} lets the advisor end each run, else it stops the script after the "
    "requested optimizer steps.)")


@dataclass
class ScriptSpec:
    """The user's script and arguments, and how the advisor sets its batch (``form``: "hf" | "placeholders")."""

    path: str
    args: list[str]
    form: str
    reason: str  # why this form, said as the recipe records it

    def to_dict(self) -> dict:
        return {"path": self.path, "args": list(self.args), "form": self.form, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict) -> "ScriptSpec":
        return cls(data["path"], list(data["args"]), data["form"], data.get("reason", ""))


@dataclass
class RunValues:
    """What one run of the script is told: the job's numbers, in the script's terms."""

    per_device: int
    accumulation: int = 1
    steps: int = 2
    lr: float | None = None  # None: keep the user's (the look run reads the script's own)
    warmup: int | None = None
    precision: str = "fp32"
    evaluate: bool = False
    output_dir: str | None = None  # a scratch folder; None keeps the user's (the launch example)
    on_cpu: bool = True
    scaffolding: bool = True  # max_steps, eval cadence, no saving, no reporting: the run's, not the plan's
    # a memory probe of a Trainer script: the flags that put the longest batch first (group_by_length)
    longest_first: list[str] = field(default_factory=list)


def detect_form(script_argv: list[str], workdir: str = ".") -> ScriptSpec:
    """How the advisor will set the script's batch, or a SetupError (exit 2) before anything runs."""
    if not script_argv:
        raise SetupError("`advisor plan --` needs a script after the `--`: advisor plan [options] -- SCRIPT "
                         "[ARGS...].\n" + BOTH_FORMS)
    path, args = script_argv[0], list(script_argv[1:])
    source_path = Path(workdir) / path
    _refuse_what_python_cannot_run(path, source_path, workdir)
    _refuse_a_mistyped_placeholder(path, args)
    found = sorted({m.group(1) for arg in args for m in _PLACEHOLDER.finditer(arg)})
    if found:
        if "per_device" not in found:
            raise SetupError(f"The arguments of {path} hold the placeholders {', '.join('{' + f + '}' for f in found)} "
                             "but not {per_device}, so the advisor cannot set the batch it measures. Write "
                             "{per_device} where your script takes its per-device batch size.\n" + BOTH_FORMS)
        return ScriptSpec(path, args, "placeholders", f"placeholders in the arguments: {', '.join(found)}")
    try:
        source = source_path.read_text(errors="replace")
    except OSError as exc:
        raise SetupError(f"The script {path!r} cannot be read ({exc}).") from None
    named = [m for m in _HF_MARKERS if m in source]
    if named:
        return ScriptSpec(path, args, "hf", f"the script names {' and '.join(named)}: Trainer flags set by the advisor")
    if any(a == "--output_dir" or a.startswith("--output_dir=") for a in args):
        return ScriptSpec(path, args, "hf", "--output_dir in the arguments: Trainer flags set by the advisor")
    raise SetupError(f"The advisor cannot tell how to set the batch size of {path}: its source names neither "
                     "HfArgumentParser nor TrainingArguments, and its arguments hold no placeholder. Nothing was "
                     "run. Use one of the two forms:\n" + BOTH_FORMS)


def _refuse_what_python_cannot_run(path: str, source_path: Path, workdir: str) -> None:
    """The script runs as `python SCRIPT` does: a folder, a shell script or a binary file failed only in the first
    look's worker (exit 1 and Python's SyntaxError traceback); said here, before anything runs."""
    if source_path.is_dir():
        scripts = ", ".join(sorted(p.name for p in source_path.glob("*.py"))[:5]) or "none"
        raise SetupError(f"The script {path!r} is a folder (its .py files: {scripts}). Give the training script "
                         "itself after `--`, as you would to `python`. Nothing was run.")
    if not source_path.is_file():
        raise SetupError(f"The script {path!r} does not exist (looked in {Path(workdir).resolve()}). Give the path "
                         "of your training script after `--`.")
    try:
        with open(source_path, "rb") as handle:
            head = handle.read(8192)
    except OSError:
        return  # the form's own read says why
    first = head.split(b"\n", 1)[0]
    if b"\0" in head or (first.startswith(b"#!") and b"python" not in first):
        what = "binary" if b"\0" in head else f"a {first[2:].decode(errors='replace').strip()} script"
        raise SetupError(f"The script {path!r} is not Python source ({what}): the advisor runs it as `python {path}` "
                         "does, under the adapter's launcher. Give the Python training script your command runs, "
                         "with its arguments, after `--`. Nothing was run.")


def _refuse_a_mistyped_placeholder(path: str, args: list[str]) -> None:
    """`{per_devise}` was read as no placeholder at all ('its arguments hold no placeholder')."""
    import difflib

    for arg in args:
        for word in re.findall(r"\{([A-Za-z_-]+)\}", arg):  # a hyphen too: --batch-size {per-device}
            close = difflib.get_close_matches(word, PLACEHOLDERS, n=1, cutoff=0.75)
            if word not in PLACEHOLDERS and close:
                raise SetupError(f"The arguments of {path} hold {{{word}}}, which is no placeholder: did you mean "
                                 f"{{{close[0]}}}? The placeholders are "
                                 f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}. Nothing was run.")


def split_script_line(line: str) -> list[str]:
    """The SCRIPT ARGS of `advisor plan -- SCRIPT ARGS` from one typed line (the app's Script field), split as a
    shell would; a SetupError for unbalanced quotes."""
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise SetupError(f"The script line cannot be split into words ({exc}): close the quote, or quote the "
                         "argument that holds a space, as you would in a shell.") from None


def _strip_flags(args: list[str], names) -> tuple[list[str], list[str]]:
    """``args`` without the given --flags (``--f v``, ``--f=v``, a bare boolean ``--f``); and what was removed."""
    names = set(names)
    kept, removed = [], []
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg[2:].split("=", 1)[0].replace("-", "_") if arg.startswith("--") else None
        if name not in names:
            kept.append(arg)
            i += 1
            continue
        taken = [arg]
        i += 1
        if "=" not in arg:
            if name in ("bf16", "fp16", "use_cpu", "group_by_length"):
                if i < len(args) and args[i].lower() in _BOOL_WORDS:
                    taken.append(args[i])
                    i += 1
            elif name in _MULTI_VALUE_FLAGS:
                while i < len(args) and not args[i].startswith("--"):
                    taken.append(args[i])
                    i += 1
            elif i < len(args):
                taken.append(args[i])
                i += 1
        removed.append(" ".join(taken))
    return kept, removed


def hf_flag_value(args: list[str], name: str):
    """The user's value of a Trainer flag in ``args`` (the last one given), or TrainingArguments' default."""
    value = None
    for i, arg in enumerate(args):
        if arg.startswith("--") and arg[2:].split("=", 1)[0].replace("-", "_") == name:
            value = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else None)
    if value is None:
        return HF_DEFAULTS.get(name)
    try:
        return float(value) if name == "learning_rate" else int(value)
    except ValueError:
        return HF_DEFAULTS.get(name)


def script_arguments(spec: ScriptSpec, run: RunValues) -> tuple[list[str], list[str]]:
    """(the script's arguments for this run, the user's arguments the advisor replaced)."""
    if spec.form == "placeholders":
        values = {"per_device": str(run.per_device), "accumulation": str(run.accumulation), "steps": str(run.steps),
                  "lr": f"{run.lr:.6g}" if run.lr is not None else "{lr}",
                  "warmup": str(run.warmup if run.warmup is not None else 0), "precision": run.precision}
        filled = [_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in spec.args]
        return filled, [a for a in spec.args if _PLACEHOLDER.search(a)]
    managed = ["per_device_train_batch_size", "gradient_accumulation_steps", "bf16", "fp16"]
    if run.lr is not None:
        managed.append("learning_rate")
    if run.warmup is not None:
        managed.append("warmup_steps")
    if run.scaffolding:
        managed += list(HF_RUN_FLAGS)
    if run.longest_first:
        managed += ["group_by_length", "train_sampling_strategy"]
    kept, removed = _strip_flags(spec.args, managed)
    ours = [f"--per_device_train_batch_size={run.per_device}", f"--gradient_accumulation_steps={run.accumulation}"]
    if run.lr is not None:
        ours.append(f"--learning_rate={run.lr:.6g}")
    if run.warmup is not None:
        ours.append(f"--warmup_steps={run.warmup}")
    if run.precision in ("bf16", "fp16"):
        ours.append(f"--{run.precision}")
    if run.scaffolding:
        ours += [f"--max_steps={run.steps}", "--save_strategy=no", "--report_to=none", "--logging_steps=1",
                 "--logging_strategy=steps"]
        ours += ([f"--eval_strategy=steps", f"--eval_steps={run.steps}"] if run.evaluate else ["--eval_strategy=no"])
        if run.output_dir:
            ours.append(f"--output_dir={run.output_dir}")
        if run.on_cpu:
            ours.append("--use_cpu")
    ours += run.longest_first
    return kept + ours, removed


def launch_example(launcher: list[str], spec: ScriptSpec, run: RunValues) -> list[str]:
    """The user's own command with the advised values filled in: their launcher, script and arguments."""
    args, _ = script_arguments(spec, run)
    return [*launcher, spec.path, *args]


def describe_command(argv: list[str]) -> str:
    return shlex.join(argv)


@dataclass
class ScriptWorkload:
    """What the method needs to know about the script's job, from its arguments and one look run.

    It stands where a Workload object stands in the session; the data, model and optimizer stay inside the
    user's script, and the shim reports what it saw of them (``seen``)."""

    name: str
    task: str
    train_length: int
    val_length: int
    optimizer: str
    current_lr: float | None
    current_batch_size: int | None
    current_warmup_steps: int | None = None
    epochs: float | None = None
    num_classes: int | None = None
    momentum: float | None = None
    weight_decay: float | None = None
    betas: tuple | None = None
    eps: float | None = None
    probe_batch = None
    seen: dict = field(default_factory=dict)

    @property
    def val_data(self):
        return range(self.val_length)


def optimizer_family(class_name: str) -> str:
    """The LR rules' optimizer family for the class the script stepped (AdamW -> adamw, SGD -> sgd)."""
    lowered = class_name.rsplit(".", 1)[-1].lower()
    for family in ("adamw", "adam", "sgd", "adagrad", "rmsprop", "lamb", "lars"):
        if lowered.startswith(family) or lowered.endswith(family):
            return family
    return "adamw" if "adam" in lowered else "sgd"


def guess_task(seen: dict) -> tuple[str, str]:
    """The task-table row from the batch the shim saw, and why; --task replaces it."""
    shapes = seen.get("batch_shapes") or {}
    keys = " ".join(shapes)
    if "input_ids" in keys:
        return "nlp-classification", "the batches hold input_ids (token sequences)"
    if any(len(s) == 4 for s in shapes.values()):
        return "image-classification", "the batches hold 4-D tensors (images)"
    # Not a text task by default: "Global batch 8 is below the usual 32-256 for NLP classification" was said of a
    # waveform classifier. The "regression / other" row gives no usual range to measure the plan against.
    return "regression", "nothing in the batches named the task (the 'regression / other' row; --task names it)"


# ---------------------------------------------------------------------------------------------- the engine side

SHIM_MODULE = "advisor.shim"


class ScriptAdapter:
    """The chosen adapter, launching the shim (and through it the user's script) instead of its own worker.

    Everything else (capabilities, options, environment, recipe extras) is the adapter's own; the engine
    never asks which one it is. The adapter's ``script_command`` says how its launcher starts a module."""

    def __init__(self, inner):
        self._inner = inner
        self.name, self.summary = inner.name, inner.summary
        # On CPU (the only place jobs fork: advisor/runner.py) the fork server runs the shim in place of the
        # launcher where the adapter's launcher is torchrun, whose environment the server gives each rank.
        self.worker_module = inner.script_server_module(SHIM_MODULE, "cpu")
        # The user's script runs its own loop: no noise meter sits between its micro-batches.
        self.capabilities = replace(Capabilities.declared(inner.capabilities), noise_by_accumulation=False)

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def command(self, job_path: str, nproc: int) -> list[str]:
        return self._inner.script_command(SHIM_MODULE, job_path, nproc)


@dataclass
class Door:
    """One script behind `advisor plan --`: its spec, what the look run saw, the workload the session uses."""

    spec: ScriptSpec
    workload: ScriptWorkload
    seen: dict
    base_notes: list[str] = field(default_factory=list)

    def workload_section(self, result, runs_seen: list[dict]) -> dict:
        """The recipe's [workload] additions: the script, its arguments and what was replaced, what the shim saw."""
        plan = result.plan
        run = RunValues(plan.per_device, plan.accumulation_steps, plan_steps(result), result.lr.value,
                        result.warmup.steps, plan.precision, scaffolding=False)
        _, replaced = script_arguments(self.spec, run)
        return {"script": self.spec.path, "script_args": list(self.spec.args), "script_form": self.spec.form,
                "script_form_reason": self.spec.reason, "replaced_args": replaced,
                "seen": _toml_safe(self.seen_summary(result, runs_seen))}

    def seen_summary(self, result, runs_seen: list[dict]) -> dict:
        """What the shim saw over every run: batch structure, the longest batch the probes fed against the
        longest sample in the data, precision, optimizer class."""
        look = self.seen
        probes = [r for r in runs_seen if r.get("kind") == "probe" and r.get("longest_elements_per_sample")]
        longest_probe = max(probes, key=lambda r: r["longest_elements_per_sample"], default=None)
        summary = {"batch_structure": look.get("batch_shapes"), "optimizer": look.get("optimizer"),
                   "optimizer_hyperparameters": look.get("hyperparameters"), "precision": result.plan.precision,
                   "has_batchnorm": look.get("has_batchnorm"), "train_size": look.get("train_size"),
                   "task_reason": self.workload.seen.get("task_reason")}
        if longest_probe:
            summary["longest_probed"] = {"elements_per_sample": longest_probe["longest_elements_per_sample"],
                                         "at_batch": longest_probe["batch"],
                                         "shapes": longest_probe.get("longest_batch_shapes")}
        data = look.get("data_longest")
        if data:
            summary["longest_in_data"] = {"elements_per_sample": data["longest"], "median": data["median"],
                                          "measured": data["measured"], "of": data["of"]}
        return summary

    def longest_warning(self, runs_seen: list[dict]) -> str | None:
        """A warning when the probes fed shorter batches than the data's longest sample."""
        data = self.seen.get("data_longest")
        probed = [r["longest_elements_per_sample"] for r in runs_seen
                  if r.get("kind") == "probe" and r.get("longest_elements_per_sample")]
        if not data or not probed or max(probed) >= data["longest"]:
            return None
        how = ("even with --group_by_length (the longest batch first)" if self.spec.form == "hf" else
               "(the probes feed the script's own batches, a few steps each)")
        return (f"The ceiling probes' longest batch held {max(probed)} elements per sample, but the longest training "
                f"sample holds {data['longest']} (median {data['median']}) {how}: a step of the real run that meets "
                "it needs more memory than any probe measured. Cap the length in the script (a max-length flag), "
                "sort or bucket the data so a probe sees the longest batch, or keep more headroom (--headroom).")

    def launch_example(self, result, launcher: list[str]) -> list[str]:
        plan = result.plan
        run = RunValues(plan.per_device, plan.accumulation_steps, plan_steps(result), result.lr.value,
                        result.warmup.steps, plan.precision, scaffolding=False)
        return launch_example(launcher, self.spec, run)


def plan_steps(result) -> int:
    """The planned run's optimizer steps for a {steps} placeholder: its epochs (--epochs; else one) at the
    planned global batch."""
    from .batches import steps_per_epoch

    epochs = result.workload.run_epochs or 1
    return max(1, int(epochs * steps_per_epoch(result.workload.train_size, result.plan.global_batch)))


def _toml_safe(value):
    """Nested dicts and lists without None (TOML has no null)."""
    if isinstance(value, dict):
        return {str(k): _toml_safe(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_toml_safe(v) for v in value if v is not None]
    return value


def look(adapter, settings, spec: ScriptSpec, cancel=None) -> dict:
    """One short run of the script on one process at a small batch, with the user's own LR: what it trains
    (data length, optimizer and its LR, batch structure). Raises TrialError with the script's own failure."""
    from .job import TrialJob
    from .launch import run_job

    job = TrialJob(kind="look", workload=f"{SCRIPT_WORKLOAD_PREFIX}{spec.path}", per_device_batch=2, steps=1,
                   lr=settings.base_lr or 0.01,
                   device=settings.device, collective_timeout_s=settings.collective_timeout_s,
                   workdir=settings.workdir, extra={"script": spec.to_dict()})
    env = adapter.environment("cuda" if settings.device.startswith("cuda") else "cpu")
    outcome = run_job(ScriptAdapter(adapter).command, job, 1, settings.trial_timeout_s, settings.idle_timeout_s,
                      None, f"first look at {spec.path}", env=env, cancel=cancel)
    found = outcome.first("look")
    if found is None:
        from .errors import TrialError

        raise TrialError(f"The first look at {spec.path} ended without a report. Its output:\n"
                         + "\n".join(outcome.output_tail[-10:]))
    model = outcome.first("model") or {}
    optimizer = outcome.first("optimizer") or {}
    return {**found, "parameters": model.get("parameters"), "optimizer_name": optimizer.get("name"),
            "hyperparameters": optimizer.get("hyperparameters") or {}}


def open_door(script_argv: list[str], adapter, settings, cancel=None, on_look=None) -> Door:
    """Check the script (refused before anything runs when the advisor cannot set its batch), then look at it
    once (``cancel``: a CancelToken that stops the look and its process; ``on_look(spec)``: called as the look
    starts, after every check passed); returns the Door whose workload the session plans for."""
    spec = detect_form(script_argv, settings.workdir)
    if on_look is not None:
        on_look(spec)
    seen = look(adapter, settings, spec, cancel=cancel)
    notes = []
    if spec.form == "hf":
        per_device = hf_flag_value(spec.args, "per_device_train_batch_size")
        accumulation = hf_flag_value(spec.args, "gradient_accumulation_steps")
        base_lr = settings.base_lr or hf_flag_value(spec.args, "learning_rate")
        base_batch = settings.base_batch or per_device * settings.nproc * accumulation
        warmup = hf_flag_value(spec.args, "warmup_steps")
        notes.append(f"base LR {base_lr:g} at global batch {base_batch} (the script's --learning_rate and "
                     f"--per_device_train_batch_size x {settings.nproc} process(es) x "
                     "--gradient_accumulation_steps, or TrainingArguments' defaults)")
    else:  # {lr} filled in by the advisor: only --base-lr knows the user's; else the script's own
        lr_placeholder = any("{lr}" in a for a in spec.args)
        base_lr = settings.base_lr or (None if lr_placeholder else seen.get("lr"))
        base_batch, warmup = settings.base_batch, None
    optimizer_class = seen.get("optimizer") or ""
    task, why = guess_task(seen)
    if settings.task is None:
        notes.append(f"task {task}: {why} (pass --task to set it)")
    workload = ScriptWorkload(name=Path(spec.path).name, task=task, train_length=seen.get("train_size") or 0,
                              val_length=seen.get("val_size") or 0, optimizer=optimizer_family(optimizer_class),
                              current_lr=base_lr, current_batch_size=base_batch, current_warmup_steps=warmup,
                              seen={**seen, "task_reason": why})
    if not workload.train_length:
        raise SetupError(f"The first look at {spec.path} saw no DataLoader with a length, so the advisor cannot "
                         "cap batches by the data or count epochs. Feed training through a torch DataLoader over a "
                         "sized dataset.")
    return Door(spec, workload, seen, notes)


def script_session(script_argv: list[str], adapter, settings, host, on_event=None, known=None, cancel=None,
                   on_look=None):
    """(a Session over the user's script, its Door): the look run done, the setup checked (SetupError, exit 2).
    ``cancel`` (a CancelToken) stops the look run: the app's Esc while it runs. ``on_look(spec)``: called as the
    look starts, once the flags and the script passed their checks (a refusal announces no look)."""
    from .batches import ProbeSelection
    from .session import Session
    from .setup_checks import SetupRefused, settings_problems, validate_setup

    wrapped = ScriptAdapter(adapter)
    refused, _ = settings_problems(settings, wrapped, host)
    if refused:  # `--trial-steps 1` was refused only after the first look had run the script ("Nothing was run.")
        raise SetupRefused(refused)
    door = open_door(script_argv, adapter, settings, cancel, on_look)  # refuses a script it cannot set before anything runs
    settings.workload = f"{SCRIPT_WORKLOAD_PREFIX}{door.spec.path}"
    setup = validate_setup(settings, wrapped, host, workload=door.workload)
    setup.notes.extend(door.base_notes)
    if settings.sweep_seeds > 1:
        # The engine cannot set a script's seed: its "seeds" would be the same run (a script that seeds itself) or
        # unpaired ones (one that does not). One run per candidate; only the practical margin ties.
        setup.notes.append(f"The script chooses its own seed, so the sweep cannot pair seeds: it runs one seed per "
                           f"candidate (not {settings.sweep_seeds}), and only the practical margin can tie two.")
        settings.sweep_seeds = 1
    session = Session(wrapped, settings, setup, on_event, known=known)
    session.runner.job_extra = {"script": door.spec.to_dict()}
    session.runner.probe_selection = ProbeSelection(
        "script", [], "the script's own batches, in its own order and collation (a probe of a few steps sees "
                      "typical batches: see [workload].seen for the longest it met)")
    return session, door


def finish_script_result(result, door: Door, adapter, runs_seen: list[dict]) -> None:
    """The recipe's [workload] and [launch].example for the script: the user's own command, advised values in."""
    from .adapters import env_prefix

    s = result.settings
    nproc = s.nproc if s.target_world_size is None else max(1, -(-result.plan.world_size // s.nodes))
    launcher = adapter.script_launcher(nproc, "cuda" if s.device.startswith("cuda") else "cpu")
    result.workload_notes.update(door.workload_section(result, runs_seen))
    warning = door.longest_warning(runs_seen)
    if warning:
        from .method.plan import Warning_

        result.plan.warnings.append(Warning_("longest-batch", warning))
    result.launch_command = [*env_prefix(result.launch_env), *door.launch_example(result, launcher)]
