"""Read a run folder: find its runs (folders.discover), read each run's files, and pick the source of its curves.

One run often holds the same metrics twice (Lightning's TensorBoard and CSV loggers in one version folder; an HF
output_dir's trainer_state.json and runs/ event files). Its curves come from one source, the one holding the most
points, so no value is counted twice; failure lines (out of memory, crashes) come from every text log of the run.
"""

from __future__ import annotations

import os

from .files import FileRead, read_mlflow_metrics, read_whole_file
from .folders import MAX_ENTRIES, Discovery, LogFile, Run, discover, skipped_summary
from .scan import WHOLE_FILE_KINDS, Collected, collected_from_points, finish_collected, read_source

MAX_FILE_BYTES = 2 << 30  # a whole-file format is read into memory: past this, the file is named and skipped


class _Source:
    """One source of a run's metrics: a Collected, the files it came from, and how many points it holds."""

    def __init__(self, label: str, paths: list[str], collected: Collected):
        self.label, self.paths, self.collected = label, paths, collected
        self.points = sum(len(v) for v in collected.series.values())


def _read_bytes(path: str) -> bytes:
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise OSError(f"{size / 2**30:.1f} GiB, past the {MAX_FILE_BYTES >> 30} GiB this reader loads")
    with open(path, "rb") as handle:
        return handle.read()


def _whole_reads(files: list[LogFile], skipped: list[tuple[str, str]]) -> list[FileRead]:
    reads = []
    for log in files:
        try:
            if log.kind == "mlflow":
                metrics = os.path.join(log.path, "metrics")
                paths = [os.path.join(d, n) for d, _, names in os.walk(metrics) for n in sorted(names)]
                read = read_mlflow_metrics(log.path, paths[:MAX_ENTRIES])
            else:
                read = read_whole_file(log.path, log.kind, _read_bytes(log.path), log.stage)
        except OSError as exc:
            skipped.append((log.path, f"cannot be read ({exc.strerror or exc})"))
            continue
        if read.problem:
            skipped.append((log.path, read.problem))
        else:
            reads.append(read)
    return reads


def _tensorboard_source(reads: list[FileRead]) -> _Source | None:
    """A run's event files (a restart writes a new one) are one source, in file-name (creation time) order."""
    points, offset, notes = [], 0, []
    for read in sorted(reads, key=lambda r: os.path.basename(r.path)):
        for point in read.points:
            point.line += offset
        points += read.points
        offset += read.records
        notes += [f"{os.path.basename(read.path)}: {n}" for n in read.notes]
    if not points:
        return None
    collected = collected_from_points(points, "tensorboard", sum(r.records for r in reads), notes)
    return _Source("TensorBoard event files", [r.path for r in reads], collected)


def read_run(run: Run, skipped: list[tuple[str, str]]) -> tuple[list[_Source], list[_Source]]:
    """(metric sources, text logs) of one run; files that held nothing readable go to ``skipped`` with why."""
    sources: list[_Source] = []
    texts: list[_Source] = []
    whole = [f for f in run.files if f.kind in (*WHOLE_FILE_KINDS, "mlflow")]
    reads = _whole_reads(whole, skipped)
    board = _tensorboard_source([r for r in reads if r.format == "tensorboard"])
    if board:
        sources.append(board)
    for read in reads:
        if read.format != "tensorboard":
            collected = collected_from_points(read.points, read.format, read.records, read.notes)
            sources.append(_Source(read.format, [read.path], collected))
    for log in run.files:
        if log.kind not in ("text", "trainer-state"):
            continue
        try:
            with open(log.path, "rb") as stream:
                collected = read_source(stream, log.path, "trainer-state" if log.kind == "trainer-state" else None)
        except OSError as exc:
            skipped.append((log.path, f"cannot be read ({exc.strerror})"))
            continue
        source = _Source(log.kind, [log.path], collected)
        if collected.stats.unreadable:
            skipped.append((log.path, collected.stats.unreadable))
        elif log.kind == "trainer-state":
            sources.append(source)
        elif source.points or collected.events:
            texts.append(source)
        else:
            skipped.append((log.path, "a text file with no training metric and no failure line"))
    return sources, texts


def merge_run(run: Run, sources: list[_Source], texts: list[_Source], skipped: list[tuple[str, str]]
              ) -> Collected | None:
    """One Collected for the run: the curves of its fullest source, the failures of every text log."""
    candidates = sorted(sources + [t for t in texts if t.points], key=lambda s: -s.points)
    if not candidates and not texts:
        return None
    primary = candidates[0] if candidates else texts[0]
    merged = primary.collected
    stats = merged.stats
    stats.sources = list(primary.paths)
    for other in candidates[1:]:
        why = (f"the same run's metrics are read from {os.path.basename(primary.paths[0])}, which holds as many "
               f"points or more ({primary.points} vs {other.points})")
        if other in texts:
            if other.collected.events:
                why = "its failure lines are read; " + why
        skipped += [(path, why) for path in other.paths]
    for text in texts:
        if text is primary:
            continue
        for event in text.collected.events:
            merged.add_event(event)
        merged.context.update({k: v for k, v in text.collected.context.items() if k not in merged.context})
        if text.collected.events and text.paths[0] not in stats.sources:
            stats.sources.append(text.paths[0])
    finish_collected(merged)
    return merged


def _wandb_note(run: Run, read_anything: bool) -> str | None:
    binary = [f.path for f in run.files if f.kind == "wandb-binary"]
    if not binary:
        return None
    if read_anything:
        return (f"{os.path.basename(binary[0])}: wandb's binary run record, not read (its history is in the files "
                "read)")
    return (f"{os.path.basename(binary[0])} is wandb's binary run record, and this run folder has no text copy of "
            "its history (files/output.log, wandb-history.jsonl): run `wandb sync` on it, or export the history "
            "with wandb's API to a CSV, and pass that file")


def read_folder(path: str) -> tuple[Discovery, list[tuple[Run, Collected | None, str | None]]]:
    """Every run under ``path``: (run, what was read or None, a note on a wandb binary record)."""
    found = discover(path)
    results = []
    for run in found.runs:
        sources, texts = read_run(run, found.skipped)
        merged = merge_run(run, sources, texts, found.skipped)
        results.append((run, merged, _wandb_note(run, merged is not None)))
    return found, results


def no_logs_message(path: str, found: Discovery) -> str:
    """One paragraph: what the folder held instead of logs, and what to pass."""
    said = "; ".join(skipped_summary(found.skipped, path, shown=2)[:4])
    capped = ("; " + "; ".join(found.capped)) if found.capped else ""
    return (f"{path}: no training log found in this folder ({said or 'it is empty'}{capped}). advisor diagnose reads "
            "TensorBoard event files (events.out.tfevents.*), metrics.csv / results.csv / summary.csv, "
            "trainer_state.json, metrics.json / scalars.json, a Keras History saved as JSON, mlruns/ and wandb run folders, and text logs (*.log, "
            "*.txt, *.out). Point it at the folder your training wrote (for example lightning_logs/version_0 or the "
            "Trainer's output_dir), or at the log file itself.")


__all__ = ["no_logs_message", "read_folder", "read_run"]
