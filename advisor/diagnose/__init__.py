"""`advisor diagnose`: read training logs, find what went wrong, say what to do (DOMAIN section 5)."""

from __future__ import annotations

import gc
import io
import os
import sys

from ..errors import AdvisorError
from .detectors import Context, run_detectors, survived_oom_note
from .readers import FORMAT_ALIASES, known_formats
from .records import Finding, ReadStats, asdict, dataclass, field
from .scan import read_source
from .shortlog import assess

# `--fail-on`: which findings make `advisor diagnose` exit 1 (CI gating). "warning", the default, is any finding.
FAIL_ON = {"error": ("error",), "warning": ("error", "warning"), "never": ()}


def exit_code_for(findings: list[Finding], fail_on: str = "warning") -> int:
    """1 when a finding at or above the ``fail_on`` severity holds, else 0 (unreadable input is 2, decided
    before this)."""
    return 1 if any(f.severity in FAIL_ON[fail_on] for f in findings) else 0


KINDS = ("oom", "crash", "oscillation-jitter", "oscillation-periodic", "overfitting", "slow-convergence", "diverged",
         "not-learning")


@dataclass
class SourceReport:
    source: str
    stats: ReadStats
    findings: list[Finding] = field(default_factory=list)
    cannot_judge: str | None = None  # why nothing conclusive can be said (what evidence is missing); never "healthy"
    series: dict[str, list] = field(default_factory=dict, repr=False)  # the curves read (Points), for plotting
    checks_ran: list[str] = field(default_factory=list)  # the checks the log held enough evidence for
    needed: list[str] = field(default_factory=list)  # what would let the other checks run

    @property
    def verdict(self) -> str:
        """Three verdicts: "findings"; "healthy" (no finding, and enough evidence for every check that applies);
        "nothing-conclusive" (no finding, but too little evidence to call the run healthy)."""
        if self.findings:
            return "findings"
        return "nothing-conclusive" if self.cannot_judge else "healthy"

    @property
    def readable(self) -> bool:
        return bool(self.stats.series_lengths) or bool(self.findings) or bool(self.stats.formats)


@dataclass
class Diagnosis:
    reports: list[SourceReport]

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.reports for f in r.findings]

    def to_dict(self) -> dict:
        return {
            "findings": [{"source": r.source, **f.to_dict()} for r in self.reports for f in r.findings],
            "read": [{"source": r.source, "verdict": r.verdict, "cannot_judge": r.cannot_judge,
                      "checks_ran": r.checks_ran, "needed": r.needed, **asdict(r.stats)} for r in self.reports],
        }


def _open(path: str) -> io.BufferedIOBase:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise AdvisorError(f"{path}: no such log file. Check the path (use '-' to read standard input).") from None
    except OSError as exc:
        raise AdvisorError(f"{path}: cannot read the log ({exc.strerror}).") from None


def diagnose_source(path: str, forced_format: str | None = None, context: Context | None = None) -> SourceReport:
    # The cyclic GC would walk the thousands of points read, again and again, and find nothing to free (records hold
    # no cycles): off while one log is read and judged, ~15 ms on a 100 MB log.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _diagnose_source(path, forced_format, context)
    finally:
        if collecting:
            gc.enable()


def _diagnose_source(path: str, forced_format: str | None, context: Context | None) -> SourceReport:
    forced_format = FORMAT_ALIASES.get(forced_format, forced_format)
    if forced_format and forced_format not in known_formats():
        raise AdvisorError(f"Unknown format {forced_format!r}. Known formats: {', '.join(known_formats())}.")
    stream = _open(path)
    try:
        collected = read_source(stream, "<stdin>" if path == "-" else path, forced_format)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    return judge(collected, context, path)


def _training_curve(series: dict) -> dict:
    """The series the detectors judge: a per-step training loss with fewer points than the per-epoch one (a step
    loss logged every 50 steps of a 5-step epoch) is not the training curve; the per-epoch means are."""
    step, epoch = series.get("train_loss") or [], series.get("train_loss_epoch") or []
    if step and len(step) < len(epoch):
        return {name: points for name, points in series.items() if name != "train_loss"}
    return series


def judge(collected, context: Context | None, path: str) -> SourceReport:
    """Run the detectors on what one source (a log, or a run folder's files) held."""
    ctx = Context(**vars(context)) if context else Context()
    ctx.merge_log(collected.context)
    ctx.elisions = list(collected.elisions)
    stats = collected.stats
    if stats.skipped_binary_lines:
        stats.notes.append(f"skipped {stats.skipped_binary_lines} binary or undecodable line(s)")
    if stats.truncated_lines:
        stats.notes.append(f"cut {stats.truncated_lines} line(s) longer than 64 KiB")
    if stats.sampling_stride > 1:
        stats.notes.append(f"a long log: ordinary lines were sampled 1 in {stats.sampling_stride}; every line with "
                           "a failure, a non-finite value or an fp16 overflow was read"
                           + (" (validation lines too frequent to read all were sampled the same way)"
                              if stats.validation_sampled else ", and every validation line"))
    judged = _training_curve(collected.series)
    findings = run_detectors(judged, collected.events, collected.event_counts, ctx, collected.non_finite)
    survived = survived_oom_note(collected.events, findings)
    if survived:
        stats.notes.append(survived)
    reason, ran, needed = assess(judged, findings)
    if collected.elisions:
        stats.notes.append(f"{len(collected.elisions)} elided stretch(es) ('...'): read as gaps in the curves")
    if not findings and collected.series:
        stats.notes.append("checks run: " + "; ".join(ran))
        if reason is None and needed:
            stats.notes.append("not checked: " + "; ".join(needed))
    return SourceReport(stats.sources[0] if stats.sources else path, stats, findings,
                        None if findings else reason, collected.series, ran, needed)


def diagnose_folder(path: str, context: Context | None = None) -> list[SourceReport]:
    """One report a run found under ``path`` (folders.discover), each naming the files it read; the files skipped,
    and why, are said in the first report's notes. No log at all: a one-paragraph error."""
    from .folders import skipped_summary
    from .runfolder import no_logs_message, read_folder

    collecting = gc.isenabled()
    gc.disable()
    try:
        found, runs = read_folder(path)
    finally:
        if collecting:
            gc.enable()
    reports = []
    for run, collected, wandb_note in runs:
        if collected is None:
            if wandb_note:
                found.skipped.append((run.folder, wandb_note))
            continue
        report = judge(collected, context, run.folder)
        report.source = run.folder
        report.stats.notes[:0] = ["read: " + ", ".join(os.path.relpath(s, path) for s in collected.stats.sources)]
        if wandb_note:
            report.stats.notes.append(wandb_note)
        reports.append(report)
    if not reports:
        raise AdvisorError(no_logs_message(path, found))
    for report, skipped in zip(reports, _skipped_by_run(found.skipped, [r.source for r in reports])):
        report.stats.skipped = [f"{os.path.relpath(p, path)}: {why}" for p, why in skipped]
        report.stats.notes += skipped_summary(skipped, path)
    reports[0].stats.notes += ["not walked: " + line for line in found.capped]
    return reports


def _skipped_by_run(skipped: list[tuple[str, str]], folders: list[str]) -> list[list[tuple[str, str]]]:
    """Each skipped file goes to the run whose folder holds it (the deepest); the rest to the first run."""
    by_run: list[list[tuple[str, str]]] = [[] for _ in folders]
    for item in skipped:
        holders = [i for i, folder in enumerate(folders) if item[0].startswith(folder.rstrip(os.sep) + os.sep)]
        by_run[max(holders, key=lambda i: len(folders[i])) if holders else 0].append(item)
    return by_run


def diagnose(paths: list[str], forced_format: str | None = None, context: Context | None = None) -> Diagnosis:
    reports: list[SourceReport] = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            reports += diagnose_folder(path, context)
        else:
            reports.append(diagnose_source(path, forced_format, context))
    return Diagnosis(reports)


__all__ = ["Context", "Diagnosis", "FAIL_ON", "Finding", "KINDS", "exit_code_for", "diagnose", "diagnose_source", "known_formats"]
