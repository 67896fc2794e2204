"""The ledger across runs (DOMAIN 7): one JSON line per plan, replan, trial and sweep run, next to the recipes.

``recipes/.history.jsonl`` by default (next to ``--out``), or a path the user sets (``--history``,
``ADVISOR_HISTORY``). Appends are one ``write`` of one whole line on an ``O_APPEND`` descriptor under an
exclusive lock, then fsync; a line torn by a crash is skipped when reading, and the next append starts on a
fresh line, so a crash never corrupts the rows before it or after it.

What the history knows about a workload on a device class seeds the next plan (``Known``): the ceiling
search starts at the known edge (``seeded_ceiling``: one or two confirming probes instead of a search), the
trial starts at the best known value, and the sweep reuses points measured at the same settings.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .adapters import recipe_adapter_name
from .method.ceiling import CeilingResult, MemoryFit, ProbeTrial
from .ledger import REUSED_NOTE, TrialRecord
from .recipe import RecipeDocument
from .units import format_bytes

HISTORY_NAME = ".history.jsonl"
HISTORY_ENV = "ADVISOR_HISTORY"
ROW_VERSION = 1
# What a reused sweep row must share with the one it stands for: the run would be the same run.
SAME_SETTINGS = ("per_device", "world_size", "accumulation", "steps", "precision", "lr", "warmup_steps", "seed")


def history_path(given: str | None = None, recipe_out: str | os.PathLike | None = None) -> Path | None:
    """Where this run's history goes: --history, else $ADVISOR_HISTORY, else next to the recipe written. A path
    that cannot hold a history file is refused here, before any work (AdvisorError naming where it came from)."""
    chosen = given or os.environ.get(HISTORY_ENV)
    if chosen:
        _check_history_file(Path(chosen), "--history" if given else f"${HISTORY_ENV}")
        return Path(chosen)
    if recipe_out:
        return Path(recipe_out).parent / HISTORY_NAME
    return None


def _check_history_file(path: Path, source: str) -> None:
    from .errors import AdvisorError

    if path.is_dir():
        raise AdvisorError(f"{source} names {path}, a directory; the history is one file. Give it a file path such as "
                           f"{path / HISTORY_NAME}. Nothing was run.")
    parent = path.parent
    if not parent.is_dir():
        raise AdvisorError(f"{source} names {path}, whose folder {parent} does not exist. Create it first (mkdir -p "
                           f"{parent}) or give another path. Nothing was run.")
    if _holds_other_text(path):
        # `--history train.log` (a typo) read as "no runs recorded", and a plan would have appended its rows to it.
        raise AdvisorError(f"{source} names {path}, which is not an advisor history: its first lines are not history "
                           "rows (one JSON object per line, each with a \"kind\"), and a plan would append to it. "
                           f"Give the history file a plan wrote ({HISTORY_NAME} next to its recipe) or a new path. "
                           "Nothing was run.")


def _holds_other_text(path: Path, lines: int = 20) -> bool:
    """The file's first ``lines`` non-empty lines (of its first MiB) hold no history row: some other file. A torn
    last line (a write cut short) leaves the rows before it, so a real history never reads so."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(2**20)
    except OSError:
        return False  # missing (a new history) or unreadable: the write says so where it happens
    seen = [line.strip() for line in head.splitlines() if line.strip()][:lines]
    return bool(seen) and not any(_is_row(_json_or_none(line)) for line in seen)


def _json_or_none(raw: bytes):
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def default_read_path(given: str | None = None) -> Path:
    """Where `advisor history` reads: --history, $ADVISOR_HISTORY, else recipes/.history.jsonl here."""
    return history_path(given) or Path("recipes") / HISTORY_NAME


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def append_row(path: str | os.PathLike, row: dict) -> None:
    """Append one row as one line, atomically with respect to other writers and to a crash."""
    import fcntl

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(row, separators=(",", ":"), default=str) + "\n").encode("utf-8")
    fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)  # read: the last byte
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # the last line was torn by a crash: never glue this row onto it
        written = 0
        while written < len(line):
            written += os.write(fd, line[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class HistoryRead:
    rows: list[dict]
    skipped: int  # lines that were not a whole row (a write torn by a crash), left out
    path: Path


def read_history(path: str | os.PathLike) -> HistoryRead:
    target = Path(path)
    rows, skipped = [], 0
    if not target.exists():
        return HistoryRead([], 0, target)
    with open(target, "rb") as handle:
        for raw in handle:
            text = raw.strip()
            if not text:
                continue
            try:
                row = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError):
                skipped += 1
                continue
            if _is_row(row):
                rows.append(row)
            else:
                skipped += 1
    return HistoryRead(rows, skipped, target)


def _is_row(row) -> bool:
    return isinstance(row, dict) and "kind" in row


def _table(row: dict, name: str) -> dict:
    """A row's ``workload`` or ``device``: what RunContext.base wrote, or empty where a row (hand-written, or cut
    down) lacks it. Rows stay as read: `advisor history --json` prints them."""
    value = row.get(name)
    return value if isinstance(value, dict) else {}


# -- rows -------------------------------------------------------------------------------------------------------

@dataclass
class RunContext:
    """What every row of one plan shares: the workload, the host and device, the adapter."""

    workload: dict  # name, spec, parameters, train_size, task
    device: dict  # type, name (GPU model or "cpu"), memory_bytes
    adapter: str
    host: str = field(default_factory=platform.node)
    recipe: str | None = None

    def base(self, kind: str) -> dict:
        return {"v": ROW_VERSION, "time": _now(), "kind": kind, "workload": dict(self.workload), "host": self.host,
                "device": dict(self.device), "adapter": self.adapter, "recipe": self.recipe}


def workload_key(workload: dict) -> tuple:
    """Same workload: the same model (name and parameter count) on the same data size."""
    return (workload.get("name"), workload.get("parameters"), workload.get("train_size"))


def device_class(device: dict) -> tuple:
    """Same device class: the same kind of device with the same memory per device, on the same host (its
    fingerprint): a history measured on another machine (a committed one, read in a fresh clone) never seeds this
    one's plan, whose own search then runs in full."""
    return (device.get("type"), device.get("name"), device.get("memory_bytes"), device.get("host_fingerprint"))


def host_fingerprint(host=None) -> str:
    """A short, stable digest of what makes this machine's measurements this machine's: its name, CPU model and
    cores, RAM and, on a GPU host, the GPUs as detected (no CUDA call: ``host`` is advisor.device.detect()'s)."""
    import hashlib

    cpu_model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu_model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    parts = [platform.node(), platform.machine(), cpu_model or platform.processor(), str(os.cpu_count())]
    if host is not None:
        parts += [str(getattr(host, "physical_memory", "")), ",".join(getattr(host, "names", []) or [])]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def run_row(context: RunContext, record: TrialRecord, reused_from: str | None = None) -> dict:
    """A trial or sweep run (DOMAIN 7's columns), from the ledger record the runner wrote."""
    row = context.base(record.phase)
    row.update(per_device=record.per_device, world_size=record.world_size, accumulation=record.accumulation,
               global_batch=record.global_batch, status=record.status, lr=record.lr, warmup_steps=record.warmup_steps,
               precision=record.precision, steps=record.steps, seed=record.seed, peak_bytes=record.peak_bytes,
               # throughput: the rules' samples/s (the data wait counted); data_seconds so a reused run reads the same
               step_seconds=record.step_seconds, data_seconds=record.data_seconds, throughput=record.samples_per_s,
               train_seconds=record.train_seconds,
               final_loss=record.final_loss, val_loss=record.val_loss, val_metric=record.val_metric,
               evals=record.evals or None)
    if reused_from:
        row["reused_from"] = reused_from
        row["note"] = f"not re-run: measured at the same settings on {reused_from} (history)"
    return {k: v for k, v in row.items() if v is not None}


def ceiling_summary(ceiling: CeilingResult, precision: str) -> dict:
    out = {"per_device_max": ceiling.per_device_max, "largest_ok": ceiling.largest_ok,
           "smallest_oom": ceiling.smallest_oom, "budget_bytes": ceiling.budget_bytes, "headroom": ceiling.headroom,
           "usable_bytes": round(ceiling.usable_bytes), "probes": len(ceiling.trials), "precision": precision,
           "capped_by": ceiling.capped_by or None}
    if ceiling.fit is not None:
        out.update(fixed_bytes=round(ceiling.fit.fixed_bytes), per_sample_bytes=round(ceiling.fit.per_sample_bytes))
    return {k: v for k, v in out.items() if v is not None}


def plan_row(context: RunContext, result) -> dict:
    """One plan (a session.MethodResult): the chosen batch with the ceiling it stood on."""
    plan, lr, warmup = result.plan, result.lr, result.warmup
    row = context.base("plan")
    chosen = next((r for r in result.ledger if r.phase == "sweep" and r.per_device == result.sweep_choice
                   and r.status == "ok"), None)
    # The ceiling's own precision: its edge probe's (a plan that re-probed in mixed precision keeps that ceiling).
    at_edge = [t for t in result.ledger if t.phase == "ceiling" and t.status == "ok"
               and t.per_device == result.ceiling.largest_ok]
    ceiling_precision = at_edge[-1] if at_edge else None
    row.update(per_device=plan.per_device, world_size=plan.world_size, accumulation=plan.accumulation_steps,
               global_batch=plan.global_batch, lr=lr.value, warmup_steps=warmup.steps, precision=plan.precision,
               status="ok", sweep_choice=result.sweep_choice, trial_choice=result.trial_choice,
               validated=not result.headline, **sweep_length(result.ledger),
               ceiling=ceiling_summary(result.ceiling, ceiling_precision.precision if ceiling_precision
                                       else plan.precision))
    if getattr(result, "cluster", None):  # a plan measured across nodes: which nodes, each one's device and memory
        row["cluster"] = result.cluster
    if chosen is not None:
        row.update(peak_bytes=chosen.peak_bytes, step_seconds=chosen.step_seconds, data_seconds=chosen.data_seconds,
                   throughput=chosen.samples_per_s,
                   train_seconds=chosen.train_seconds, val_metric=chosen.val_metric, val_loss=chosen.val_loss)
    return {k: v for k, v in row.items() if v is not None}


def sweep_length(ledger) -> dict:
    """How long a plan's sweep ran: its runs and their wall seconds (ledger records or recipe ledger rows)."""
    runs = [r for r in ledger if (r.get("phase") if isinstance(r, dict) else r.phase) == "sweep"]
    seconds = sum((r.get("seconds") if isinstance(r, dict) else r.seconds) or 0.0 for r in runs)
    return {"sweep_runs": len(runs), "sweep_seconds": seconds}


def replan_row(context: RunContext, result) -> dict:
    """One re-plan (a replan.ReplanResult): estimates, marked as such, and what a confirming run measured."""
    row = context.base("replan")
    confirmation = result.confirmation or {}
    row.update(per_device=result.plan.per_device, world_size=result.world_size,
               accumulation=result.plan.accumulation_steps, global_batch=result.plan.global_batch,
               lr=result.lr.value, warmup_steps=result.warmup.steps, precision=result.precision, status="estimate"
               if not confirmation else "confirmed", ceiling={"per_device_max": result.per_device_max,
                                                               "estimated": True,
                                                               "budget_bytes": result.target.memory_bytes},
               source_recipe=result.source.path, peak_bytes=confirmation.get("trial_peak_bytes"),
               step_seconds=confirmation.get("trial_step_seconds"), throughput=confirmation.get("trial_throughput"))
    return {k: v for k, v in row.items() if v is not None}


def rows_from_recipe(recipe: dict | RecipeDocument, path: str) -> list[dict]:
    """A recipe's own ledger as history rows (its trial and sweep runs, then the plan), for `advisor history
    --import`: recipes written before the history existed join it, each row marked with where it came from."""
    doc = RecipeDocument.of(recipe, path)
    workload, hardware, inputs = doc.workload, doc.provenance.hardware, doc.inputs
    device_type = str(inputs.device or hardware.device or "cpu")
    context = RunContext({k: getattr(workload, k) for k in ("name", "spec", "parameters", "train_size", "task")},
                         {"type": "cuda" if device_type.startswith("cuda") else "cpu",
                          "name": hardware.gpu or "cpu",
                          "memory_bytes": doc.ceiling.budget_bytes or inputs.device_memory_bytes,
                          "host_fingerprint": hardware.fingerprint},
                         recipe_adapter_name(doc),
                         host=str(hardware.host or ""), recipe=path)
    created = doc.provenance.created
    rows = []
    for entry in doc.ledger:
        if entry.get("phase") not in ("trial", "sweep"):
            continue
        record = TrialRecord(**{k: v for k, v in entry.items()
                                if k in TrialRecord.__dataclass_fields__ and k != "losses"})
        row = run_row(context, record)
        row["time"], row["imported_from"] = created, path
        rows.append(row)
    rows.append(_imported_plan_row(doc, context, path, rows))
    return rows


def _imported_plan_row(doc: RecipeDocument, context: RunContext, path: str, runs: list[dict]) -> dict:
    """The plan row of an imported recipe: its batch on the ceiling it stood on, with the chosen run's numbers."""
    batch, ceiling = doc.batch, doc.ceiling
    row = context.base("plan")
    chosen = [r for r in runs if r["kind"] == "sweep" and r["per_device"] == doc.method.sweep_choice]
    probes = [e for e in doc.ledger if e.get("phase") == "ceiling"]
    row.update(time=doc.provenance.created, imported_from=path, per_device=batch.per_device,
               world_size=batch.world_size, accumulation=batch.accumulation_steps, global_batch=batch.global_,
               lr=doc.lr.value, warmup_steps=doc.warmup.steps, precision=doc.precision.mode, status="ok",
               sweep_choice=doc.method.sweep_choice,
               validated=not any(w.code == "no-candidate-learned" for w in doc.warnings),
               **sweep_length(doc.ledger),
               ceiling={k: v for k, v in {
                   "per_device_max": ceiling.per_device_max, "largest_ok": ceiling.largest_ok,
                   "smallest_oom": ceiling.smallest_oom, "budget_bytes": ceiling.budget_bytes,
                   "headroom": ceiling.headroom, "usable_bytes": ceiling.usable_bytes,
                   "fixed_bytes": ceiling.fixed_bytes, "per_sample_bytes": ceiling.per_sample_bytes,
                   "probes": ceiling.trials or len(probes),
                   "precision": probes[-1].get("precision") if probes else None}.items() if v is not None})
    if chosen:
        for key in ("peak_bytes", "step_seconds", "throughput", "train_seconds", "val_metric", "val_loss"):
            if key in chosen[0]:
                row[key] = chosen[0][key]
    return {k: v for k, v in row.items() if v is not None}


# -- the table ----------------------------------------------------------------------------------------------------

def _fmt(value, kind: str = "") -> str:
    if value is None:
        return "-"
    if kind == "bytes":
        return format_bytes(value)
    if kind == "seconds":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


COLUMNS = (("time", "when", ""), ("kind", "kind", ""), ("workload", "workload", ""), ("device", "device", ""),
           ("adapter", "adapter", ""), ("precision", "prec", ""), ("per_device", "per-dev", ""),
           ("accumulation", "acc", ""), ("global_batch", "global", ""), ("lr", "lr", ""),
           ("peak_bytes", "peak", "bytes"), ("step_seconds", "step", "seconds"), ("throughput", "samples/s", ""),
           ("train_seconds", "train time", "seconds"), ("val_metric", "val metric", ""), ("sweep_runs", "sweep", ""))


def filter_rows(rows: list[dict], workload: str | None = None) -> list[dict]:
    if not workload:
        return rows
    return [r for r in rows if workload in (_table(r, "workload").get("name"), _table(r, "workload").get("spec"))]


def render_history(read: HistoryRead, workload: str | None = None) -> str:
    rows = filter_rows(read.rows, workload)
    if not rows:
        where = f" for the workload {workload!r}" if workload else ""
        return (f"{read.path}: no runs recorded{where}. `advisor plan --out recipes/NAME.toml` and `advisor replan` "
                f"append here; `advisor history --import RECIPE` adds a recipe's own ledger.")
    table = [[title for _, title, _ in COLUMNS]]
    for row in rows:
        cells = []
        for key, _, kind in COLUMNS:
            value = row.get(key)
            if key == "time":
                value = (value or "")[:16].replace("T", " ")
            elif key == "workload":
                value = value.get("name") if isinstance(value, dict) else value
            elif key == "device":
                device = value or {}
                value = f"{device.get('name') or device.get('type')} {format_bytes(device.get('memory_bytes'))}"
            elif key == "throughput" and value is not None:
                value = f"{value:.0f}"
            elif key == "val_metric" and value is not None:
                value = f"{value:.3f}"
            elif key == "sweep_runs" and value is not None:  # a plan's: how long its step 4 ran
                value = f"{value} runs, {_fmt(row.get('sweep_seconds'), 'seconds')}"
            elif key == "kind" and row.get("validated") is False:
                value = f"{value} (NOT VALIDATED)"
            elif key == "kind" and row.get("reused_from"):
                value = f"{value} (reused)"
            elif key == "kind" and row.get("status") not in (None, "ok"):
                value = f"{value} ({row['status']})"
            cells.append(_fmt(value, kind))
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.rjust(widths[i]) if i >= 6 else cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip()
             for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    footer = f"{len(rows)} run(s) from {read.path}"
    if read.skipped:
        footer += f"; {read.skipped} torn line(s) left out (a write cut short by a crash)"
    return "\n".join(lines + ["", footer])


# -- what the history knows, and how the next plan starts from it ------------------------------------------------

@dataclass
class Known:
    """History rows of one workload on one device class (and adapter), newest last."""

    rows: list[dict]

    @classmethod
    def select(cls, rows: list[dict], workload: dict, device: dict, adapter: str) -> "Known":
        key, dev = workload_key(workload), device_class(device)
        # The parameter count is only known once a worker built the model; None matches any until then.
        chosen = [r for r in rows if r.get("adapter") == adapter and device_class(_table(r, "device")) == dev
                  and workload_key(_table(r, "workload"))[0::2] == key[0::2]
                  and (key[1] is None or _table(r, "workload").get("parameters") in (None, key[1]))]
        return cls(chosen)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def ceiling_seed(self, precision: str, budget_bytes: int) -> dict | None:
        """The newest plan's ceiling measured in ``precision`` under the same budget, with its fit."""
        for row in reversed(self.rows):
            c = row.get("ceiling") or {}
            if row.get("kind") == "plan" and c.get("precision") == precision and c.get("budget_bytes") == budget_bytes \
                    and c.get("per_sample_bytes") and c.get("largest_ok"):
                return {**c, "parameters": _table(row, "workload").get("parameters"), "time": row.get("time")}
        return None

    def best_start(self, nproc: int) -> tuple[int, str] | None:
        """The best known per-device value for ``nproc`` processes: the latest plan's pick, at its global batch
        (the sweep's rule chose it over paired seeds; one run's best validation is one seed's luck). A plan whose
        sweep validated nothing is not a best value."""
        plans = [r for r in self.rows if r.get("kind") == "plan" and r.get("status") == "ok"
                 and r.get("validated", True) and r.get("global_batch")]
        if not plans:
            return None
        best = plans[-1]
        per_device = max(1, best["global_batch"] // (nproc * best.get("accumulation", 1)))
        return per_device, (f"the best known value from the history: the plan of {best.get('time', '')[:10]} "
                            f"picked global batch {best['global_batch']} ({best['per_device']} per device x "
                            f"{best['world_size']} x {best.get('accumulation', 1)} accumulation), so {per_device} "
                            f"per device on {nproc} process(es)")

    def measured_run(self, phase: str, settings: dict) -> dict | None:
        """The newest run of ``phase`` measured at exactly ``settings`` (SAME_SETTINGS), to reuse."""
        for row in reversed(self.rows):
            if row.get("kind") != phase or row.get("status") != "ok" or row.get("reused_from"):
                continue
            if all(_same(row.get(k), settings.get(k)) for k in SAME_SETTINGS):
                return row
        return None


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def record_from_row(row: dict) -> TrialRecord:
    """A history row back as a ledger record, marked as reused (its measurements are the earlier run's)."""
    fields = {k: row[k] for k in TrialRecord.__dataclass_fields__ if k in row and k not in ("phase", "note")}
    fields.setdefault("seconds", 0.0)
    record = TrialRecord(phase=row["kind"], **{k: v for k, v in fields.items() if k != "seconds"},
                         seconds=0.0)
    record.note = f"{REUSED_NOTE} ({row.get('time', '')}): measured at the same settings, not re-run"
    return record


def seeded_ceiling(probe: Callable[[int, str], ProbeTrial], seed: dict, budget_bytes: int, headroom: float,
                   max_batch: int, parameters: Callable[[], int | None] = lambda: None
                   ) -> tuple[CeilingResult | None, str]:
    """Step 1 from the known edge: confirm the known ceiling still fits and the known first OOM still runs out,
    instead of searching. Returns (the ceiling, "") or (None, why the search is needed after all); the
    probes already run are kept by the caller's ``probe`` cache, so a fallback search reuses them."""
    fit = MemoryFit(float(seed["fixed_bytes"]), float(seed["per_sample_bytes"]))
    largest_ok = min(int(seed["largest_ok"]), max_batch)
    smallest_oom = seed.get("smallest_oom")
    if smallest_oom is not None and smallest_oom > max_batch:
        smallest_oom = None
    usable = budget_bytes if smallest_oom is None else min(budget_bytes, fit.bytes_at(largest_ok))
    ceiling = max(1, min(largest_ok, fit.batch_with_headroom(usable, headroom)))
    when = (seed.get("time") or "")[:10]
    trials: list[ProbeTrial] = []
    first = probe(ceiling, "confirm known ceiling")
    trials.append(first)
    known_parameters = seed.get("parameters")
    if known_parameters and parameters() not in (None, known_parameters):
        return None, (f"the model has {parameters()} parameters, not the {known_parameters} of the history's run: "
                      "searching")
    if first.status != "ok":
        return None, f"the known ceiling {ceiling} ({when}) ran out of memory now: searching"
    if smallest_oom is not None:
        edge = probe(int(smallest_oom), "confirm known edge")
        trials.append(edge)
        if edge.status == "ok":
            return None, f"the known first OOM at {smallest_oom} ({when}) fits now: the edge moved, searching"
        edge_text = (f"Known edge from the history ({when}): {seed['largest_ok']} ran, {smallest_oom} ran out of "
                     f"memory; confirmed now: {ceiling} fits and {smallest_oom} still runs out. ")
    elif largest_ok < max_batch:
        return None, f"the history stopped at a cap of {largest_ok}, and the cap is {max_batch} now: searching"
    else:
        edge_text = (f"Known from the history ({when}): no OOM up to the cap of {max_batch}; confirmed now: "
                     f"{ceiling} fits. ")
    by_memory = fit.batch_with_headroom(usable, headroom)
    # Say what set the number: the cap when it binds (the headroom then played no part), else the headroom.
    binds = (f"The cap of {max_batch} binds: memory with {headroom:.0%} headroom would allow {by_memory}, so the "
             f"ceiling is {ceiling}" if ceiling >= max_batch and by_memory > max_batch else
             f"Keeping {headroom:.0%} headroom below {usable / 2**20:.0f} MiB gives {ceiling}")
    reason = (f"Fit (from the history): {fit.fixed_bytes / 2**20:.1f} MiB fixed + "
              f"{fit.per_sample_bytes / 2**20:.3f} MiB per sample. " + edge_text + binds
              + f" ({len(trials)} confirming probe(s) instead of a search; --fresh searches anew).")
    return CeilingResult(ceiling, budget_bytes, headroom, fit, largest_ok, smallest_oom, usable, trials, reason,
                         capped_by="" if smallest_oom is not None else "the known cap"), ""


def run_context(settings, setup, recipe: str | None = None, device_class: str | None = None) -> RunContext:
    """The shared part of a plan's rows, from its settings and checked set-up (parameters come from the first
    worker, ``RunContext.workload['parameters']`` is filled in by the recorder). ``device_class``: a plan across
    nodes is its own (``ClusterLink.fingerprint``: its runs timed the inter-node all-reduce), else this host's."""
    workload = setup.workload
    host = setup.host
    name = host.names[0] if host.type == "cuda" and host.names else host.type
    return RunContext({"name": workload.name, "spec": settings.workload, "parameters": None,
                       "train_size": workload.train_length, "task": workload.task},
                      {"type": settings.device, "name": name, "memory_bytes": settings.memory_budget_bytes,
                       "host_fingerprint": device_class or host_fingerprint(host)},
                      settings.adapter_name, recipe=recipe)


class HistoryRecorder:
    """An event listener that appends every finished trial and sweep run as it ends (a cancelled or crashed
    plan keeps what it measured), then ``plan()`` appends the plan row. A failure to write warns, never stops
    the plan: the recipe still holds the ledger."""

    def __init__(self, path: str | os.PathLike, context: RunContext, model_info: Callable[[], dict | None],
                 warn: Callable[[str], None] = lambda message: None):
        self.path, self.context, self.model_info, self.warn = Path(path), context, model_info, warn
        self.failed = False
        self._recorded: set[int] = set()  # ledger records already appended (by identity: the runner's own)

    def _fill(self) -> None:
        info = self.model_info() or {}
        if self.context.workload.get("parameters") is None and info.get("parameters") is not None:
            self.context.workload["parameters"] = info["parameters"]

    def append(self, row: dict) -> None:
        if self.failed:
            return
        try:
            append_row(self.path, row)
        except OSError as exc:
            self.failed = True
            self.warn(f"could not append to the history {self.path} ({exc.strerror or exc}); the recipe keeps its "
                      "own ledger")

    def __call__(self, event) -> None:
        from .events import TrialFinished

        if isinstance(event, TrialFinished):
            self.record(event.record)

    def record(self, record: TrialRecord) -> None:
        if id(record) in self._recorded or record.phase not in ("trial", "sweep"):
            return
        self._recorded.add(id(record))
        self._fill()
        reused = record.note.startswith(REUSED_NOTE) if record.note else False
        self.append(run_row(self.context, record, reused_from=record.note.split("(", 1)[1].split(")")[0]
                            if reused else None))

    def plan(self, result) -> None:
        """The plan row, after any run of its ledger not yet recorded (a runner that sends no events)."""
        for record in result.ledger:
            self.record(record)
        self._fill()
        self.append(plan_row(self.context, result))


def summary_for(read: HistoryRead, name: str, train_size: int | None = None) -> str | None:
    """What the history knows about a workload, in one paragraph (the app's Setup shows it), or None."""
    rows = [r for r in read.rows if _table(r, "workload").get("name") == name
            and (train_size is None or _table(r, "workload").get("train_size") in (None, train_size))]
    if not rows:
        return None
    parts = [f"{len(rows)} run(s) of {name} in {read.path}"]
    plans = [r for r in rows if r.get("kind") == "plan" and r.get("ceiling")]
    if plans:
        latest = plans[-1]
        c, device = latest["ceiling"], _table(latest, "device")
        label = "latest plan" + (" (NOT VALIDATED)" if latest.get("validated") is False else "")
        parts.append(f"{label}: {latest['per_device']} x {latest['world_size']} x {latest.get('accumulation', 1)} "
                     f"= global {latest['global_batch']}, ceiling {c.get('per_device_max')} per device under "
                     f"{format_bytes(c.get('budget_bytes'))} ({device.get('name') or device.get('type')}, "
                     f"{c.get('precision', latest.get('precision'))})")
    sweeps = [r for r in rows if r.get("kind") == "sweep" and r.get("val_metric") is not None]
    if sweeps:
        best = max(sweeps, key=lambda r: r["val_metric"])
        parts.append(f"best single sweep run (one seed; not the advice): global {best['global_batch']} ({best['per_device']} per device), validation "
                     f"{best['val_metric']:.3f}" + (f", {best['throughput']:.0f} samples/s" if best.get("throughput")
                                                    else ""))
    return "; ".join(parts) + (". `advisor plan` on the same device class starts from it (--fresh ignores it); "
                               "`advisor history` shows every run.")
