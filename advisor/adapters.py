"""The adapter protocol and the entry-point registry (group ``batch_advisor.adapters``).

An adapter says what it can do (capabilities) and how to launch N workers of
its flavour; the engine never asks which adapter it is talking to. Names are
listed without importing anything; only the chosen adapter is imported; when
several plugins share a name the last one wins; a plugin that fails to import
prints one warning and the others keep working.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, fields
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from .errors import AdapterError, SetupError
# The launch vocabulary an adapter's launch_command speaks; importable from here, as plugins always have.
from .launch_line import (LaunchSpec, env_prefix, optimizer_args, shell_line,  # noqa: F401
                          torchrun_launch_line, training_args)
from .recipe import AdapterTable, InputsTable, RecipeDocument

ENTRY_POINT_GROUP = "batch_advisor.adapters"
# The adapter a plan runs when none is named, and the one a recipe that names none was planned with: its one owner.
DEFAULT_ADAPTER = "ddp"


@dataclass(frozen=True)
class Capabilities:
    """What an adapter can do, declared on it (``capabilities``); the engine reads these fields and never asks which
    adapter it is. A field added later has a default, so a plugin written before it keeps working."""

    supports_lamb: bool = False
    supports_bf16: bool = True
    supports_fp16: bool = True
    multi_process: bool = True
    needs_cuda: bool = False
    optimizers: frozenset[str] | None = None  # the optimizers it can run; None: every one the workload names
    # Its worker measures the gradient noise scale on one process from a run with accumulation >= 2
    # (advisor.process_group.GradNoiseMeter): a one-process plan then runs one such run after the trial.
    noise_by_accumulation: bool = False

    def supports(self, precision: str) -> bool:
        """Whether the adapter's workers run ``precision`` (fp32, and auto's choice among what it supports, always)."""
        return {"bf16": self.supports_bf16, "fp16": self.supports_fp16}.get(precision, True)

    @classmethod
    def declared(cls, caps) -> "Capabilities":
        """An adapter's ``capabilities`` as this dataclass. A plugin may declare them in an object of its own (duck-
        typed, or written before a field existed): read here, once, each field it lacks at its default."""
        if isinstance(caps, cls):
            return caps
        given = {f.name: getattr(caps, f.name) for f in fields(cls) if hasattr(caps, f.name)}
        if given.get("optimizers") is not None:
            given["optimizers"] = frozenset(given["optimizers"])
        return cls(**given)


@dataclass(frozen=True)
class AdapterOption:
    """One setting an adapter takes (a DeepSpeed ZeRO stage). From the declaration the engine makes the
    `advisor plan` flag (``--zero-stage``), the app's field, the validation and the recipe's ``[adapter]`` entry."""

    name: str  # a Python identifier; the flag is --name-with-dashes
    type: type = str  # int, float, str or bool
    default: object = None
    help: str = ""
    choices: tuple | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def parse(self, value, adapter: str):
        """``value`` (typed, or text from a flag or a field) as this option's type; SetupError names what is wrong."""
        if value is None or value == "":
            return self.default
        try:
            parsed = self._converted(value)
        except (TypeError, ValueError):
            parsed = _INVALID
        if parsed is _INVALID or (self.choices is not None and parsed not in self.choices):
            raise SetupError(f"{self.flag} (an option of the adapter {adapter!r}) must be {_type_words(self)}, "
                             f"not {value!r}.")
        return parsed

    def _converted(self, value):
        if self.type is bool:
            if isinstance(value, str) and value.lower() in _BOOL_WORDS:
                return _BOOL_WORDS[value.lower()]
            return value if isinstance(value, bool) else _INVALID
        if self.type is int and (isinstance(value, bool) or isinstance(value, float) and not value.is_integer()):
            return _INVALID  # True is not 1, and 2.5 is not 2
        return self.type(value)


_INVALID = object()
_BOOL_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def _type_words(option: AdapterOption) -> str:
    if option.choices is not None:
        words = [str(c) for c in option.choices]
        return "one of " + (", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0])
    return {int: "a whole number", float: "a number", bool: "true or false"}.get(option.type, "a text")


@dataclass(frozen=True)
class ExportTarget:
    """One format `advisor export RECIPE --to NAME` writes for a recipe of the adapter that declares it."""

    name: str  # the word after --to
    summary: str  # what the file or line is, for `advisor adapters`
    hostfile: str | None = None  # its launcher reads a hostfile (then --hostfile applies): why, in a few words


# The formats every adapter's recipes export to unless it declares its own (advisor/export.py renders them).
DEEPSPEED_EXPORT = ExportTarget("deepspeed", "a DeepSpeed JSON config (ds_config.json) with the plan's batch, "
                                "accumulation, optimizer, LR warmup and precision",
                                hostfile="the deepspeed launcher reads it")
ACCELERATE_EXPORT = ExportTarget("accelerate", "an Accelerate config YAML (accelerate launch --config_file), its "
                                 "launch line in the header")
TORCHRUN_EXPORT = ExportTarget("torchrun", "the torchrun command line with the plan's numbers as script arguments")
GENERIC_EXPORTS = (DEEPSPEED_EXPORT, ACCELERATE_EXPORT, TORCHRUN_EXPORT)


@dataclass(frozen=True)
class NoiseMeasurement:
    """How an adapter's workers measure the gradient noise scale (their strategy's ``gradient_norms()``), or why
    they cannot: then every plan through it states the noise scale unknown."""

    measured: bool
    how: str  # which two gradients are compared and where they are read; or why none can be


@dataclass(frozen=True)
class BigModelAdvice:
    """How an adapter fits a model whose state does not fit one device. The advice when even a batch of 1 runs
    out of memory names every installed adapter that declares one (``sharding_advice()``)."""

    label: str  # the flavour's name in prose: "DeepSpeed"
    flags: str  # its options that shard the model state: "--zero-stage 3"
    shards: str  # what that shards, as a verb phrase: "partitions parameters, gradients and optimizer state"
    offload: str | None = None  # its way of moving state to CPU memory, by name: "ZeRO-Offload"


@runtime_checkable
class Adapter(Protocol):
    """The minimum a plugin implements; ``AdapterBase`` supplies the rest (see below)."""

    name: str
    summary: str
    capabilities: Capabilities

    def command(self, job_path: str, nproc: int) -> list[str]:
        """argv that starts ``nproc`` workers running the job in ``job_path``."""
        ...


# On CPU, glibc's sliding mmap threshold fragments the heap, so the largest batch that fits a memory limit
# wanders from run to run; a fixed threshold returns freed activations to the OS at once. The probes run
# with it, so the user's training must too: the recipe's [launch.env], its launch line and every export
# carry it, and Recipe.apply_env() applies it inside the training script.
CPU_ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


class AdapterBase:
    """Defaults for everything beyond the minimal protocol; built-in adapters subclass it.

    An adapter owns how many processes a probe needs, the environment its workers and the user's
    training need, the launch line the recipe carries, its options and the recipe extras they produce.
    """

    name = ""
    summary = ""
    capabilities = Capabilities()
    options: tuple[AdapterOption, ...] = ()  # declared settings: flags, app fields, validation, recipe entries
    # The module whose ``__main__`` runs one worker (``worker_main``). Set, a 1-process ceiling probe forks
    # from a server that imported it once (advisor/probe_server.py) instead of a fresh torchrun launch.
    worker_module: str | None = None
    exports: tuple[ExportTarget, ...] = GENERIC_EXPORTS  # what `advisor export --to` offers for its recipes
    noise = NoiseMeasurement(False, "not declared: its workers report no gradient norms (WorkerStrategy."
                                    "gradient_norms returns None), so the noise scale is stated unknown")
    big_model: BigModelAdvice | None = None  # how it fits a model larger than one device, if it can

    def command(self, job_path: str, nproc: int) -> list[str]:
        raise NotImplementedError

    def unavailable_reason(self) -> str | None:
        """Why this adapter cannot run here (a missing package, no CUDA), or None."""
        return None
    def probe_processes(self, nproc: int, options: dict) -> int:
        """Processes a ceiling probe needs: 1, unless per-device memory depends on the world size."""
        return 1

    def environment(self, device_type: str) -> dict[str, str]:
        """Variables the workers run with and the user's training must run with too."""
        return dict(CPU_ALLOCATOR_ENV) if device_type == "cpu" else {}

    def validate_options(self, options: dict) -> dict:
        """Every declared option, parsed and checked, with its default where not given; an unknown one refused."""
        declared = {option.name: option for option in self.options}
        unknown = sorted(set(options) - set(declared))
        if unknown:
            flags = ", ".join("--" + name.replace("_", "-") for name in unknown)
            takes = f"takes only {', '.join(o.flag for o in self.options)}" if self.options else "takes no options"
            raise SetupError(f"The adapter {self.name!r} {takes}, not {flags}. Remove them, or choose the adapter "
                             "that has them (`advisor adapters` lists the installed ones).")
        return {name: option.parse(options.get(name), self.name) for name, option in declared.items()}

    def plan_options(self, options: dict, optimizer: str, precision: str) -> dict:
        """The options checked against the optimizer and precision the plan runs (before any process starts),
        with any choice they imply filled in; the workers and ``recipe_extras`` get this dict."""
        return self.validate_options(options)

    def recipe_extras(self, options: dict) -> dict:
        """Adapter settings the recipe's [adapter] table records: every declared option's value (a ZeRO stage)."""
        checked = self.validate_options(options)
        return {option.name: checked[option.name] for option in self.options if checked[option.name] is not None}

    def launch_command(self, spec: LaunchSpec) -> list[str]:
        return torchrun_launch_line(spec)

    def script_command(self, module: str, job_path: str, nproc: int) -> list[str]:
        """argv that starts ``nproc`` processes of ``python -m module --job job_path`` the way this adapter's
        users launch their scripts (the script door runs the shim through it)."""
        return torchrun_command(module, job_path, nproc)

    def script_server_module(self, module: str, device_type: str) -> str | None:
        """The module a fork server (advisor/probe_server.py) may run in place of ``script_command``'s launch:
        ``module`` where that launch is torchrun's (the server gives each rank torchrun's environment), None where
        the launcher adds something of its own to the processes (DeepSpeed's ``--local_rank``)."""
        return module

    def script_launcher(self, nproc: int, device_type: str) -> list[str]:
        """The launcher words in front of the user's script in the recipe's launch example."""
        return ["torchrun", "--standalone", "--nnodes=1", f"--nproc-per-node={nproc}"]

    # -- exports: `advisor export RECIPE --to TARGET` for a recipe this adapter planned ------------------------
    def export_block(self, data: dict, target: str) -> tuple[str, list[str]]:
        """(text, notes) of the recipe ``data`` as ``target``, one of ``exports`` (the caller checked); notes say
        what the text cannot carry. The default renders the generic formats, through the hooks below."""
        from . import export_formats

        renderers = {DEEPSPEED_EXPORT.name: export_formats.export_deepspeed,
                     ACCELERATE_EXPORT.name: export_formats.export_accelerate,
                     TORCHRUN_EXPORT.name: export_formats.export_torchrun}
        if target not in renderers:
            from .errors import ExportError

            raise ExportError(f"The adapter {self.name!r} declares the export target {target!r} but does not render "
                              "it (its export_block must).")
        return renderers[target](data, self)

    def export_zero_stage(self, data: dict) -> tuple[int, str | None]:
        """(ZeRO stage, why) of the recipe's DeepSpeed config (the deepspeed target, Accelerate's DeepSpeed
        plugin): 0, plain data parallel, with nothing to say, unless the adapter shards with ZeRO."""
        return 0, None

    def export_accelerate_plugin(self, data: dict) -> tuple[str, list[str]] | None:
        """(distributed_type, YAML lines of its plugin section) of the recipe's Accelerate config, or None for
        plain data parallel (NO, MULTI_CPU or MULTI_GPU by the cluster)."""
        return None

    def export_launch_env(self, device_type: str) -> dict[str, str]:
        """Variables a launch line rendered from a recipe must carry even where its [launch.env] lacks them."""
        return {}


class _WithDefaults(AdapterBase):
    """A minimal third-party adapter, with AdapterBase's defaults for whatever it does not define."""

    def __init__(self, inner):
        self._inner = inner
        self.name, self.summary = inner.name, inner.summary
        self.capabilities = Capabilities.declared(inner.capabilities)

    def __getattribute__(self, attr):
        if not attr.startswith("_") and attr not in ("name", "summary", "capabilities"):
            inner = object.__getattribute__(self, "_inner")
            if hasattr(inner, attr):
                return getattr(inner, attr)
        return object.__getattribute__(self, attr)


def torchrun_command(worker_module: str, job_path: str, nproc: int) -> list[str]:
    """torch's own launcher on one node; --standalone picks a free rendezvous port."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
            f"--nproc-per-node={nproc}", "--max-restarts=0", "-m", worker_module, "--job", job_path]


def recipe_adapter_name(recipe: dict | RecipeDocument) -> str:
    """The adapter a recipe (typed, or its parsed TOML) was planned with: [adapter] name, else [inputs] adapter,
    else the default. Every reader of a recipe asks here."""
    if isinstance(recipe, RecipeDocument):
        adapter, inputs = recipe.adapter, recipe.inputs
    else:  # only these two tables: a partial document names its adapter too
        adapter = RecipeDocument.table_of(AdapterTable, recipe, "adapter")
        inputs = RecipeDocument.table_of(InputsTable, recipe, "inputs")
    return str(adapter.name or inputs.adapter or DEFAULT_ADAPTER)


def available_adapters() -> dict[str, str]:
    """Adapter name -> 'module:attr', without importing any plugin."""
    found: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value  # later entries win
    return found


def load_adapter(name: str) -> Adapter:
    eps = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not eps:
        known = ", ".join(sorted(available_adapters())) or "none (is batch-advisor installed?)"
        raise AdapterError(
            f"Unknown adapter {name!r}. Installed adapters: {known}. Third-party adapters register under the "
            f"entry-point group {ENTRY_POINT_GROUP!r}."
        )
    ep = eps[-1]
    try:
        factory = ep.load()
    except Exception as exc:  # a broken plugin must not take the tool down
        raise AdapterError(
            f"The adapter {name!r} ({ep.value}) failed to import: {type(exc).__name__}: {exc}. "
            "Install its dependencies or choose another adapter with --adapter."
        ) from None
    # A class is instantiated; an instance is used as is; any other callable is a factory function.
    # (A class object passes the Protocol's attribute check too, so test for it first.)
    if isinstance(factory, type) or (callable(factory) and not isinstance(factory, Adapter)):
        adapter = factory()
    else:
        adapter = factory
    if not isinstance(adapter, Adapter):
        raise AdapterError(
            f"The adapter {name!r} ({ep.value}) does not implement the adapter protocol "
            "(name, summary, capabilities, command(job_path, nproc))."
        )
    if not isinstance(adapter, AdapterBase):
        return _WithDefaults(adapter)
    if not isinstance(adapter.capabilities, Capabilities):
        adapter.capabilities = Capabilities.declared(adapter.capabilities)  # on this instance: read typed from here
    return adapter


@dataclass(frozen=True)
class AdapterStatus:
    """One row of `advisor adapters`: whether the adapter can run here, and if not, why."""

    name: str
    target: str  # the entry point's 'module:attr'
    version: str | None
    available: bool
    reason: str | None
    summary: str
    capabilities: dict
    options: list = field(default_factory=list)  # its declared options, as dicts (flag, type, default, help, choices)
    exports: list = field(default_factory=list)  # its export targets, as dicts (name, summary, hostfile)
    noise: dict | None = None  # how its workers measure the gradient noise scale (measured, how)
    big_model: dict | None = None  # how it fits a model larger than one device (label, flags, shards, offload)

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "available": self.available, "reason": self.reason,
                "summary": self.summary, "entry_point": self.target, "capabilities": self.capabilities,
                "options": self.options, "exports": self.exports, "noise": self.noise, "big_model": self.big_model}


def _capabilities_dict(caps: Capabilities) -> dict:
    out = {k: v for k, v in vars(caps).items() if k != "optimizers"}
    out["optimizers"] = sorted(caps.optimizers) if caps.optimizers is not None else None
    return out


def adapter_statuses() -> list[AdapterStatus]:
    """Every installed adapter with its version and availability. A plugin that fails to load is listed as
    unavailable with the reason, and warned about in one line on stderr; the others are unaffected."""
    eps = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        eps[ep.name] = ep  # later entries win, as in load_adapter
    rows = []
    for name in sorted(eps):
        ep = eps[name]
        dist_version = getattr(getattr(ep, "dist", None), "version", None)
        try:
            adapter = load_adapter(name)
        except AdapterError as exc:
            print(f"warning: {exc}", file=sys.stderr)
            rows.append(AdapterStatus(name, ep.value, dist_version, False, str(exc), "", {}))
            continue
        try:
            version = adapter.version() if callable(getattr(adapter, "version", None)) else dist_version
            reason = adapter.unavailable_reason()
            if reason is None and adapter.capabilities.needs_cuda:
                import torch

                if not torch.cuda.is_available():
                    reason = "needs a CUDA GPU and none is visible here"
        except Exception as exc:  # noqa: BLE001 - a plugin's own check must not take the listing down
            print(f"warning: the adapter {name!r} failed its availability check: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            version, reason = dist_version, f"its availability check failed: {type(exc).__name__}: {exc}"
        options = [{"name": o.name, "flag": o.flag, "type": o.type.__name__, "default": o.default, "help": o.help,
                    "choices": list(o.choices) if o.choices is not None else None} for o in adapter.options]
        big_model = adapter.big_model
        rows.append(AdapterStatus(name, ep.value, version, reason is None, reason, adapter.summary,
                                  _capabilities_dict(adapter.capabilities), options,
                                  [asdict(target) for target in adapter.exports], asdict(adapter.noise),
                                  asdict(big_model) if big_model is not None else None))
    return rows


@dataclass(frozen=True)
class ShardingAdvice:
    """What the installed adapters offer for a model whose state does not fit one device, in the words each
    piece of advice needs (the ceiling's "not even a batch of 1 fits", a re-plan's "not one sample fits")."""

    offers: tuple[tuple[str, BigModelAdvice], ...] = ()  # (adapter name, its advice), by name

    def how(self) -> str:
        """'DeepSpeed --adapter deepspeed --zero-stage 3 partitions parameters, gradients and optimizer state'."""
        if not self.offers:
            return "no installed adapter declares how it shards the model state: `advisor adapters`"
        return "; ".join(" ".join(w for w in (a.label, f"--adapter {name}", a.flags, a.shards) if w)
                         for name, a in self.offers)

    def short(self) -> str:
        """'DeepSpeed --zero-stage 3'."""
        if not self.offers:
            return "with an adapter that shards it"
        return ", or ".join(f"{a.label} {a.flags or f'--adapter {name}'}" for name, a in self.offers)

    def flags(self) -> str:
        """'--adapter deepspeed --zero-stage 3'."""
        if not self.offers:
            return "with an adapter that shards it"
        return " or ".join(f"--adapter {name} {a.flags}".rstrip() for name, a in self.offers)

    def offload(self) -> str:
        """' (ZeRO-Offload)', or nothing where no installed adapter names a way to offload."""
        names = [a.offload for _, a in self.offers if a.offload]
        return f" ({', '.join(names)})" if names else ""


def sharding_advice() -> ShardingAdvice:
    """Every installed adapter's BigModelAdvice. Asked only when a model does not fit: it imports each adapter's
    launcher side (no torch); one that fails to import is left out quietly (`advisor adapters` reports it)."""
    offers = []
    for name in sorted(available_adapters()):
        try:
            advice = load_adapter(name).big_model
        except Exception:  # noqa: BLE001 - a broken plugin must not hide the others' advice
            continue
        if advice is not None:
            offers.append((name, advice))
    return ShardingAdvice(tuple(offers))

