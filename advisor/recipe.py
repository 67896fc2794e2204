"""Recipe I/O: the TOML file people commit next to their training code.

A recipe is data. Reading or checking one never imports or runs anything it
names. Writes are atomic (temp file + rename in the same directory); an
existing recipe is only replaced with ``force``, and then a backup is kept.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import tomli_w

from .errors import RecipeError

SCHEMA_VERSION = 2  # 2: the per-run measurements moved to a sibling file (schema 1 recipes, inline, still load)

# What a recipe measured rather than decided: written to a sibling file that the recipe names (so the committed
# recipe is its decisions, reasons and inputs, reviewable in a pull request), and merged back on loading, so
# code that reads a recipe sees one document.
MEASUREMENTS = (("ledger",), ("method", "sweep", "candidates_scored"), ("method", "sweep", "comparisons"),
                ("method", "trial", "steps"), ("method", "step_seconds"), ("ceiling", "breakdown"),
                ("workload", "probed"), ("goodput", "step_time"), ("noise", "per_run"), ("noise", "steps"),
                ("noise", "runs"), ("noise", "skipped_steps"), ("noise", "confidence"))
# The LR rules a recipe can name (advisor/method/lr.py decides which): every one but "unchanged" scaled the LR.
SCALED_LR_RULES = ("linear", "sqrt", "linear-sqrt")
LR_RULES = ("unchanged", *SCALED_LR_RULES)

# (table, key) -> allowed types; the minimum other tools rely on.
REQUIRED: dict[tuple[str, str], tuple[type, ...]] = {
    ("batch", "per_device"): (int,),
    ("batch", "world_size"): (int,),
    ("batch", "accumulation_steps"): (int,),
    ("batch", "global"): (int,),
    ("lr", "value"): (int, float),
    ("lr", "base"): (int, float),
    ("lr", "base_global_batch"): (int,),
    ("lr", "rule"): (str,),
    ("warmup", "steps"): (int,),
}


def _key(toml_key: str):
    """A field whose TOML key is not a Python name (``global``)."""
    return field(metadata={"key": toml_key})


@dataclass(frozen=True)
class BatchSettings:
    """[batch]: the plan's batch (the first four are required)."""

    per_device: int
    world_size: int
    accumulation_steps: int
    global_: int = _key("global")
    reason: str | None = None
    validated_global: int | None = None  # what the comparison sweep validated
    extrapolation: float | None = None


@dataclass(frozen=True)
class LRSettings:
    """[lr]: the LR and the rule that scaled it (the first four are required)."""

    value: float
    base: float
    base_global_batch: int
    rule: str
    scale: float | None = None
    cap: float | None = None
    capped: bool | None = None  # lowered below the rule's value (the reason says by what)
    optimizer: str | None = None
    base_source: str | None = None
    reason: str | None = None
    bound_from_global: int | None = None  # the validated batch the LR was bounded past
    bound_noise_low: float | None = None
    seen_failing_at: float | None = None


@dataclass(frozen=True)
class WarmupSettings:
    """[warmup] (``steps`` is required)."""

    steps: int
    epochs: float | None = None
    steps_per_epoch: int | None = None
    base_epochs: float | None = None
    base_source: str | None = None
    run_epochs: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class PrecisionTable:
    mode: str | None = None
    tf32: bool | None = None
    advice: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class NormalizationTable:
    sync_batchnorm: bool | None = None
    sync_batchnorm_on_gpu: bool | None = None
    has_batchnorm: bool | None = None
    advice: str | None = None


@dataclass(frozen=True)
class OptimizerTable:
    """[optimizer]: the optimizer the runs used and its hyper-parameters (every other key)."""

    name: str | None = None
    implementation: str | None = None
    source: str | None = None
    hyperparameters: dict = field(default_factory=dict, metadata={"rest": True})


@dataclass(frozen=True)
class SweepTable:
    """[method.sweep]: the comparison sweep's verdict."""

    pick: int | None = None
    rule: str | None = None
    verdict: str | None = None
    metric: str | None = None
    seeds: int | None = None
    tied: list = field(default_factory=list)
    candidates_scored: list = field(default_factory=list)  # one table a candidate (per_device, status, ...)
    against_yours: dict = field(default_factory=dict)  # the sentence comparing the pick with the user's setting


@dataclass(frozen=True)
class MethodTable:
    """[method]: each step's choice and reason."""

    headline: str | None = None  # set: NOT VALIDATED, and why
    start_reason: str | None = None
    trial_choice: object = None
    trial_reason: str | None = None
    sweep_choice: object = None
    sweep_reason: str | None = None
    noise_reason: str | None = None
    step_seconds: dict = field(default_factory=dict)
    sweep: SweepTable = field(default_factory=SweepTable)


@dataclass(frozen=True)
class CeilingTable:
    """[ceiling]: step 1's answer and the memory line its probes fit."""

    per_device_max: int | None = None
    budget_bytes: int | None = None
    headroom: float | None = None
    largest_ok: int | None = None
    smallest_oom: int | None = None
    usable_bytes: float | None = None
    trials: int | None = None
    fixed_bytes: float | None = None
    per_sample_bytes: float | None = None
    outside_allocator_bytes: int | None = None
    measured_by: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class NoiseTable:
    reason: str | None = None


@dataclass(frozen=True)
class GoodputTable:
    per_device: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class WorkloadTable:
    spec: str | None = None
    name: str | None = None
    task: str | None = None
    num_classes: int | None = None
    optimizer: str | None = None
    train_size: int | None = None
    parameters: int | None = None


@dataclass(frozen=True)
class AdapterTable:
    """[adapter]: the adapter's name and its own options (each adapter reads its keys)."""

    name: str | None = None
    options: dict = field(default_factory=dict, metadata={"rest": True})


@dataclass(frozen=True)
class InputsTable:
    """[inputs]: what the plan was asked."""

    adapter: str | None = None
    nproc: int | None = None
    nodes: int | None = None
    device: str | None = None
    device_memory_bytes: int | None = None
    precision: str | None = None
    optimizer: str | None = None


@dataclass(frozen=True)
class LaunchTable:
    example: str | None = None
    note: str | None = None
    env: dict = field(default_factory=dict)  # [launch.env]: NAME = "value" the ceiling was measured with


@dataclass(frozen=True)
class HardwareTable:
    """[provenance.hardware]: where the recipe was measured."""

    device: str | None = None
    gpu: str | None = None
    host: str | None = None
    fingerprint: str | None = None


@dataclass(frozen=True)
class ProvenanceTable:
    created: str | None = None
    torch_version: str | None = None
    hardware: HardwareTable = field(default_factory=HardwareTable)


@dataclass(frozen=True)
class RecipeWarning:
    code: str
    message: str


@dataclass(frozen=True)
class RecipeDocument:
    """A recipe read back as typed tables, for the code that reads recipes (explain, export, replan, history).

    Read once by ``read_document``/``RecipeDocument.of``, which name the table and key of a malformed value.
    ``data`` is the TOML document itself: what a derived recipe (a re-plan) copies, and what the tables do not
    type (each ledger row, the measurements' details)."""

    data: dict
    batch: BatchSettings
    lr: LRSettings
    warmup: WarmupSettings
    precision: PrecisionTable
    normalization: NormalizationTable
    optimizer: OptimizerTable | None  # None: a recipe older than [optimizer]
    method: MethodTable
    ceiling: CeilingTable
    noise: NoiseTable
    goodput: GoodputTable
    workload: WorkloadTable
    adapter: AdapterTable
    inputs: InputsTable
    launch: LaunchTable
    provenance: ProvenanceTable
    warnings: list[RecipeWarning]  # the ones with a message, in the recipe's order
    ledger: list[dict]  # every run's row (ledger_records gives them typed)

    @classmethod
    def of(cls, recipe: "dict | RecipeDocument", path: str = "<recipe>", text: str = "") -> "RecipeDocument":
        """``recipe`` typed (a document already typed is returned as it is); RecipeError names a malformed table
        or value."""
        if isinstance(recipe, RecipeDocument):
            return recipe
        return _read_document(recipe, path, text)

    @staticmethod
    def table_of(cls, data: dict, name: str, path: str = "<recipe>"):
        """One table of ``data`` typed as ``cls``, without reading the rest (a partial document)."""
        return _typed_table(cls, data.get(name), name, path, "")

    def table(self, name: str) -> dict:
        """A copy of the table ``name`` (dotted: ``provenance.hardware``) as written, empty when absent: what a
        derived recipe (a re-plan) starts from."""
        value = self.data
        for key in name.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        return dict(value) if isinstance(value, dict) else {}

    @property
    def validated(self) -> bool:
        """False for a NOT VALIDATED recipe (no candidate learned; the plan is the user's base setting)."""
        return not self.method.headline


# The types a typed field accepts, by its annotation (an int is a float; a bool is neither), and their names.
_FIELD_TYPES = {"int": ((int,), "an integer"), "float": ((int, float), "a number"), "str": ((str,), "a string"),
                "bool": ((bool,), "true or false"), "list": ((list,), "an array"), "dict": ((dict,), "a table")}


def _typed_table(cls, raw, table: str, path: str, text: str):
    """``cls`` from the TOML table ``raw`` (None: absent, every field at its default). Keys the dataclass does not
    name are left in the document, or gathered into its field marked ``rest`` (an adapter's own options)."""
    extra = next((f.name for f in fields(cls) if f.metadata.get("rest")), None)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        _fail(path, text, f"[{table}] must be a table, not {type(raw).__name__} {raw!r}.", table, None)
    values, known = {}, set()
    for item in fields(cls):
        key = item.metadata.get("key", item.name)
        known.add(key)
        value = raw.get(key)
        if value is None or item.name == extra:  # None: a recipe built in memory, before writing drops it
            continue
        if str(item.type) in _NESTED:  # a table inside the table ([method.sweep], [provenance.hardware])
            values[item.name] = _typed_table(_NESTED[str(item.type)], value, f"{table}.{key}", path, text)
            continue
        wanted, described = _FIELD_TYPES.get(str(item.type).split(" |")[0], (None, ""))
        if wanted and (not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted)):
            _fail(path, text, f"'{table}.{key}' must be {described}, not {type(value).__name__} {value!r}.",
                  table, key)
        values[item.name] = value
    missing = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
               and f.name not in values]
    if missing:
        _fail(path, text, f"the key '{missing[0]}' is missing from [{table}].", table, None)
    if extra:
        values[extra] = {k: v for k, v in raw.items() if k not in known and v is not None}
    return cls(**values)


_NESTED = {"SweepTable": SweepTable, "HardwareTable": HardwareTable}


def _read_document(data: dict, path: str, text: str) -> RecipeDocument:
    def read(cls, table: str):
        return _typed_table(cls, data.get(table), table, path, text)

    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a TOML document of tables, not {type(data).__name__}.", path=path)
    warnings, ledger = data.get("warnings", []), data.get("ledger", [])
    for name, rows in (("warnings", warnings), ("ledger", ledger)):
        if not isinstance(rows, list):
            _fail(path, text, f"[[{name}]] must be an array of tables, not {type(rows).__name__}.", name, None)
    optimizer = data.get("optimizer")
    return RecipeDocument(
        data=data, batch=read(BatchSettings, "batch"), lr=read(LRSettings, "lr"),
        warmup=read(WarmupSettings, "warmup"), precision=read(PrecisionTable, "precision"),
        normalization=read(NormalizationTable, "normalization"),
        optimizer=read(OptimizerTable, "optimizer") if isinstance(optimizer, dict) else None,
        method=read(MethodTable, "method"), ceiling=read(CeilingTable, "ceiling"), noise=read(NoiseTable, "noise"),
        goodput=read(GoodputTable, "goodput"), workload=read(WorkloadTable, "workload"),
        adapter=read(AdapterTable, "adapter"), inputs=read(InputsTable, "inputs"),
        launch=read(LaunchTable, "launch"), provenance=read(ProvenanceTable, "provenance"),
        warnings=[RecipeWarning(str(w.get("code", "warning")), w["message"]) for w in warnings
                  if isinstance(w, dict) and w.get("message")],
        ledger=[row for row in ledger if isinstance(row, dict)])


@dataclass(frozen=True)
class Recipe:
    """The numbers training code needs, plus the whole document in ``data``."""

    path: str
    batch: BatchSettings
    lr: LRSettings
    warmup: WarmupSettings
    precision: str
    sync_batchnorm: bool
    data: dict
    launch_env: dict

    def apply_env(self) -> list[str]:
        """Set [launch.env] for this process and its children; returns what could not take effect here.

        Variables a process reads only at start-up are also applied where the running process allows it:
        glibc's mmap threshold through ``mallopt``. The others need the launch line's ``env`` prefix.
        """
        return apply_launch_env(self.launch_env)


def _line_of(text: str, table: str | None, key: str | None) -> int | None:
    """1-based line of ``key`` inside ``[table]`` (or of the table header), for error messages."""
    lines = text.splitlines()
    in_table = table is None
    header_line = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("["):
            name = stripped.strip("[]").strip()
            in_table = name == table
            if in_table:
                header_line = number
            continue
        if in_table and key and re.match(rf"^{re.escape(key)}\s*=", stripped):
            return number
    return header_line


def _fail(path: str, text: str, message: str, table: str | None = None, key: str | None = None):
    line = _line_of(text, table, key)
    where = f"{path}" + (f", line {line}" if line else "")
    dotted = ".".join(p for p in (table, key) if p)
    raise RecipeError(f"{where}: {message} Fix the value of '{dotted}' (or regenerate the recipe with `advisor plan`)."
                      if dotted else f"{where}: {message}", path=path, line=line, key=dotted or None)


def validate(data: dict, path: str = "<recipe>", text: str = "") -> None:
    """Raise RecipeError naming the first bad key and its line."""
    _check_schema_version(data, path, text)
    _check_required(data, path, text)
    _check_values(data, path, text)
    _check_launch(data, path, text)


def _check_schema_version(data: dict, path: str, text: str) -> None:
    version = data.get("schema_version")
    if version is None:
        _fail(path, text, "the recipe has no 'schema_version'; it may not be a batch-advisor recipe.", None,
              "schema_version")
    if not isinstance(version, int) or version < 1:
        _fail(path, text, f"'schema_version' must be a positive integer, not {version!r}.", None, "schema_version")
    if version > SCHEMA_VERSION:
        _fail(path, text, f"schema_version {version} is newer than this advisor understands ({SCHEMA_VERSION}); "
                          "upgrade batch-advisor.", None, "schema_version")


def _check_required(data: dict, path: str, text: str) -> None:
    for (table, key), types in REQUIRED.items():
        section = data.get(table)
        if not isinstance(section, dict):
            _fail(path, text, f"the table [{table}] is missing.", table, None)
        if key not in section:
            _fail(path, text, f"the key '{key}' is missing from [{table}].", table, None)
        value = section[key]
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = " or ".join(t.__name__ for t in types)
            _fail(path, text, f"'{table}.{key}' must be {wanted}, not {type(value).__name__} {value!r}.", table, key)


def _check_values(data: dict, path: str, text: str) -> None:
    """The required values agree: sizes at least 1, the global batch their product, a positive LR, a known rule."""
    batch, lr, warmup = data["batch"], data["lr"], data["warmup"]
    for key in ("per_device", "world_size", "accumulation_steps", "global"):
        if batch[key] < 1:
            _fail(path, text, f"'batch.{key}' must be at least 1, not {batch[key]}.", "batch", key)
    product = batch["per_device"] * batch["world_size"] * batch["accumulation_steps"]
    if product != batch["global"]:
        _fail(path, text, f"'batch.global' is {batch['global']} but per_device x world_size x accumulation_steps = "
                          f"{batch['per_device']} x {batch['world_size']} x {batch['accumulation_steps']} = {product}.",
              "batch", "global")
    for key in ("value", "base"):
        if not 0 < lr[key] < math.inf:  # TOML's `inf` passed as positive, and an export wrote "lr": Infinity
            _fail(path, text, f"'lr.{key}' must be positive and finite, not {lr[key]}.", "lr", key)
    if lr["base_global_batch"] < 1:
        _fail(path, text, "'lr.base_global_batch' must be at least 1.", "lr", "base_global_batch")
    if lr["rule"] not in LR_RULES:
        _fail(path, text, f"'lr.rule' must be one of {', '.join(LR_RULES)}, not {lr['rule']!r}.", "lr", "rule")
    if warmup["steps"] < 0:
        _fail(path, text, "'warmup.steps' must not be negative.", "warmup", "steps")


def _check_launch(data: dict, path: str, text: str) -> None:
    launch = data.get("launch", {})
    if not isinstance(launch, dict):
        _fail(path, text, "[launch] must be a table.", "launch", None)
    env = launch.get("env", {})
    if not isinstance(env, dict):
        _fail(path, text, "[launch.env] must be a table of NAME = \"value\" strings.", "launch", "env")
    for name, value in env.items():
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            _fail(path, text, f"[launch.env] entry {name!r} must be a variable name set to a string, not "
                              f"{type(value).__name__} {value!r}.", "launch.env", name)


def read_recipe_data(path: str | os.PathLike) -> tuple[dict, str]:
    path = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise RecipeError(f"{path}: no such recipe file. Create one with `advisor plan --out {path}`.", path=path) from None
    except IsADirectoryError:
        raise RecipeError(_folder_given_as_recipe(Path(path)), path=path) from None
    except OSError as exc:
        raise RecipeError(f"{path}: cannot read the recipe ({exc.strerror}).", path=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RecipeError(f"{path}: not a text file (invalid UTF-8); a recipe is TOML text.", path=path) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        line = int(match.group(1)) if match else None
        raise RecipeError(f"{path}: not valid TOML: {exc}. Fix the syntax there (or regenerate the recipe).",
                          path=path, line=line) from None
    _merge_measurements(data, Path(path))
    return data, text


def _folder_given_as_recipe(folder: Path) -> str:
    recipes = sorted(p for p in folder.glob("*.toml") if not p.name.endswith(".measurements.toml"))
    example = recipes[0] if recipes else folder / "recipe.toml"
    return (f"{folder} is a folder; give the recipe file in it, such as {example}"
            + (f" ({len(recipes)} recipes there)." if len(recipes) > 1 else "."))


def measurements_path(recipe_path: str | os.PathLike) -> Path:
    """The sibling file that holds a recipe's measurements: ``NAME.measurements.toml`` beside ``NAME.toml``."""
    target = Path(recipe_path)
    return target.with_name(f"{target.stem}.measurements.toml")


def split_measurements(data: dict) -> tuple[dict, dict]:
    """(the recipe without its measurements, the measurements in the same nesting)."""
    import copy

    main, measured = copy.deepcopy(data), {}
    for keys in MEASUREMENTS:
        holder = main
        for key in keys[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and keys[-1] in holder:
            value = holder.pop(keys[-1])
            out = measured
            for key in keys[:-1]:
                out = out.setdefault(key, {})
            out[keys[-1]] = value
    return main, measured


def _merge_measurements(data: dict, path: Path) -> None:
    """Put the sibling file's measurements back (where the recipe does not hold them inline). A missing or
    changed sibling loses only measurements: the decisions load, and [measurements] says why they are absent."""
    import hashlib

    pointer = data.get("measurements")
    if not isinstance(pointer, dict) or not isinstance(pointer.get("file"), str):
        return
    sibling = path.parent / pointer["file"]
    try:
        raw = sibling.read_bytes()
    except OSError:
        pointer["missing"] = f"{sibling} could not be read: the per-run measurements are not loaded"
        return
    if pointer.get("sha256") and hashlib.sha256(raw).hexdigest() != pointer["sha256"]:
        # A recipe replaced with --force is kept as NAME.toml.bak, and the sibling it was written with as
        # NAME.measurements.toml.bak: the backup reads its own measurements, not its successor's.
        kept = sibling.with_name(sibling.name + ".bak")
        try:
            raw = kept.read_bytes()
        except OSError:
            raw = b""
        if hashlib.sha256(raw).hexdigest() != pointer["sha256"]:
            pointer["missing"] = (f"{sibling} is not the file this recipe was written with: its measurements were "
                                  "ignored")
            return
    try:
        measured = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        pointer["missing"] = f"{sibling} is not valid TOML: its measurements were ignored"
        return
    for keys in MEASUREMENTS:
        value, holder = measured, data
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        for key in keys[:-1]:
            holder = holder.setdefault(key, {})
        holder.setdefault(keys[-1], value)


def check_recipe(path: str | os.PathLike) -> dict:
    """Parse and validate; return the document."""
    data, text = read_recipe_data(path)
    validate(data, str(path), text)
    return data


def read_document(path: str | os.PathLike) -> RecipeDocument:
    """Parse, validate and type: the recipe as the code that reads recipes wants it (RecipeError, naming the key
    and its line, for a malformed one)."""
    data, text = read_recipe_data(path)
    validate(data, str(path), text)
    return RecipeDocument.of(data, str(path), text)


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number


def apply_launch_env(env: dict) -> list[str]:
    """Export ``env`` (a variable the user set already wins) and apply what glibc reads at start-up."""
    missed = []
    for name, value in env.items():
        os.environ.setdefault(name, value)
        if name == "MALLOC_MMAP_THRESHOLD_" and os.environ[name] == value:
            try:
                import ctypes

                libc = ctypes.CDLL("libc.so.6")
                if libc.mallopt(_M_MMAP_THRESHOLD, int(value)) != 1:
                    missed.append(name)
            except (OSError, AttributeError, ValueError):
                missed.append(name)  # not glibc: the variable means nothing here, or must be set at launch
    return missed


def load_recipe(path: str | os.PathLike, apply_env: bool = False) -> Recipe:
    """The numbers for training code, in one call: ``load_recipe('recipe.toml').batch.per_device``.

    Reading changes nothing in the calling process. The ceiling was measured with the recipe's [launch.env]
    and holds only with it: the launch line's ``env`` prefix sets it, and ``recipe.apply_env()`` sets it
    from inside the script (explicitly, because it changes this process's environment and allocator;
    ``apply_env=True`` does the same in one call).
    """
    document = read_document(path)
    recipe = Recipe(
        path=str(path),
        batch=document.batch,
        lr=replace(document.lr, value=float(document.lr.value), base=float(document.lr.base)),
        warmup=document.warmup,
        precision=document.precision.mode or "fp32",
        sync_batchnorm=bool(document.normalization.sync_batchnorm),
        data=document.data,
        launch_env=dict(document.launch.env),
    )
    if apply_env:
        recipe.apply_env()
    return recipe


def _clean(value: Any) -> Any:
    """TOML has no null: drop None values recursively."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value if v is not None]
    return value


# tomli_w writes every array one item a line; a short array of numbers or strings reads better on one.
_SHORT_ARRAY = re.compile(r"= \[\n((?:    [^\n\[\]{}]+,\n)+)\]")


def _one_line_arrays(text: str, width: int = 100) -> str:
    def join(match: re.Match) -> str:
        items = [line.strip().rstrip(",") for line in match.group(1).splitlines()]
        one = "= [" + ", ".join(items) + "]"
        return one if len(one) <= width and not any(item.startswith('"""') for item in items) else match.group(0)

    return _SHORT_ARRAY.sub(join, text)


def dumps_recipe(data: dict) -> str:
    validate(data)
    return _one_line_arrays(tomli_w.dumps(_clean(data)))


def _new_file_mode() -> int:
    """What open() gives a new file: 0666 less the umask (mkstemp's 0600 would hide a recipe meant to be shared)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _file_mode(target: Path) -> int:
    """The mode a recipe gets: the replaced file's (a committed example keeps its mode), else a new file's."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        return _new_file_mode()


def write_recipe(data: dict, path: str | os.PathLike, force: bool = False) -> Path | None:
    """Write atomically: the decisions to ``path``, the measurements (MEASUREMENTS) to its sibling
    (measurements_path), which the recipe names with its digest. Returns the backup path when an existing recipe
    was replaced."""
    import hashlib

    target = Path(path)
    main, measured = split_measurements(data)
    main.pop("measurements", None)  # a loaded recipe's pointer names its own file, not this one's
    measured_text = tomli_w.dumps(_clean(measured)) if measured else ""
    if measured:
        sibling = measurements_path(target)
        main["measurements"] = {
            "file": sibling.name, "sha256": hashlib.sha256(measured_text.encode("utf-8")).hexdigest(),
            "holds": "every run's row (the ledger), the sweep's per-seed scores and comparisons, the trial's steps, "
                     "the probes' memory breakdown: load_recipe, advisor explain and advisor history --import read "
                     "it with this recipe"}
    text = dumps_recipe(main)
    if target.exists() and not force:
        raise RecipeError(f"{target}: a recipe already exists there and was left untouched. Pass --force to replace "
                          "it (the old one is kept as a .bak file) or choose another --out path.", path=str(target))
    if measured:  # first: a recipe never names a sibling that is not there (its digest catches an older one)
        _write_atomically(measurements_path(target), measured_text, replace_existing=True)
    return _write_atomically(target, text, replace_existing=force)


def _write_atomically(target: Path, text: str, replace_existing: bool) -> Path | None:
    """``text`` to ``target`` through a temporary file and a rename; an existing file is replaced only when
    ``replace_existing`` (kept as ``.bak``; the backup's path is returned)."""
    if target.exists() and not replace_existing:
        raise RecipeError(f"{target}: a file exists there and was left untouched.", path=str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    backup = None
    try:
        os.fchmod(fd, _file_mode(target))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            backup = target.with_name(target.name + ".bak")
            shutil.copy2(target, backup)
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # fails if someone created the file meanwhile: never clobber
            except FileExistsError:
                raise RecipeError(f"{target}: a file appeared there while writing; it was left untouched.",
                                  path=str(target)) from None
            except OSError:  # a filesystem without hard links
                os.replace(tmp, target)
            else:
                os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return backup


def check_output_path(path: str | os.PathLike, force: bool = False, what: str = "a recipe", option: str = "--out",
                      example: str = "recipe.toml", nothing: str = "Nothing was run.") -> None:
    """Before any work: ``what`` can be written at ``path`` (given by ``option``) and would not clobber a file
    without ``force``. ``nothing`` says what the refusal spared (no probe ran, no file was written)."""
    target = Path(path)
    if target.is_dir():
        raise RecipeError(f"{target} is a directory. Give {option} a file path such as {target / example}. "
                          f"{nothing}", path=str(target))
    if target.exists() and not force:
        raise RecipeError(f"{target}: {what} already exists there. Pass --force to replace it (the old one is "
                          f"kept as a .bak file) or choose another {option} path. {nothing}", path=str(target))
    parent = target.parent
    existing = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if existing is not None and existing.is_dir() and existing != parent:
        # Never create folders on the way: a typo in one (`/recipess/x.toml`) would silently make a new tree.
        missing = parent.relative_to(existing) if parent.is_absolute() == existing.is_absolute() else parent
        raise RecipeError(f"{target}: the folder {parent} does not exist ({missing} is missing under "
                          f"{existing.resolve()}). Create it first (mkdir -p {parent}) if that is where it "
                          f"belongs, or correct the {option} path. {nothing}", path=str(target))
    if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise RecipeError(f"{target}: cannot write there ({existing or parent} is not a writable directory). "
                          f"Choose another {option} path. {nothing}", path=str(target))
    if target.exists() and not os.access(target, os.W_OK):
        raise RecipeError(f"{target}: the existing file is not writable. Choose another {option} path. {nothing}",
                          path=str(target))


def write_text_atomically(path: str | os.PathLike, text: str, replace_existing: bool) -> Path | None:
    """Any file the CLI writes (an export, a hostfile): whole or not at all; a replaced file is kept as .bak."""
    return _write_atomically(Path(path), text, replace_existing)


@dataclass(frozen=True)
class SaveOutcome:
    path: Path  # where the recipe is now
    backup: Path | None  # the replaced recipe, kept
    fallback_reason: str | None  # set when the recipe could not go where asked and was saved elsewhere


def save_recipe(data: dict, path: str | os.PathLike, force: bool = False) -> SaveOutcome:
    """Write the recipe; if that fails after a finished run, keep the measurements in a fallback file."""
    try:
        return SaveOutcome(Path(path), write_recipe(data, path, force), None)
    except (OSError, RecipeError) as exc:
        reason = str(exc) if isinstance(exc, RecipeError) else f"{path}: {exc.strerror or exc}"
    text = dumps_recipe(data)
    target = Path(path)
    for folder in (target.parent, Path(tempfile.gettempdir())):
        try:
            fd, fallback = tempfile.mkstemp(prefix=f"{target.stem}-", suffix=".toml", dir=folder)
        except OSError:
            continue
        os.fchmod(fd, _new_file_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        return SaveOutcome(Path(fallback), None, reason)
    raise RecipeError(f"{reason} No fallback location was writable either; the run's results are lost.")
