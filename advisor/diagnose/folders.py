"""Find the logs under a run folder, and which files belong to which run.

A run is a folder holding log files itself (TensorBoard's own idea of a run: a folder with event files), with the
layouts the libraries write folded in: a Lightning ``version_N`` folder (event files and/or ``metrics.csv``), an HF
``output_dir`` (``trainer_state.json`` at the top or in the latest ``checkpoint-N``, and a single ``runs/<name>``
TensorBoard folder), an MLflow run (``mlruns/<exp>/<run>/metrics/``), a wandb run (``files/output.log``,
``wandb-history.jsonl``; the binary ``.wandb`` is named, not read). The walk is bounded (entries, depth), never
follows a folder link twice (a link loop ends), and every file not read is named with why.
"""

from __future__ import annotations

import os
import re

from .files import JSONL_NAMES, is_event_file, keras_history_head
from .names import SPLITS
from .records import dataclass, field

MAX_ENTRIES = 5_000  # directory entries looked at: a folder of 10,000 files is capped, in well under a second
MAX_DEPTH = 8
MAX_RUNS = 20
TEXT_LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".jsonl")
NOT_LOG_TEXT = {"requirements.txt", "license.txt", "readme.txt", "cmakelists.txt"}
SKIP_FOLDERS = {".git", "__pycache__", "node_modules", ".ipynb_checkpoints", ".venv", "site-packages", ".hg"}
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


@dataclass
class LogFile:
    path: str
    kind: str  # tensorboard | csv | metrics-jsonl | keras-history | trainer-state | text | mlflow | wandb-binary
    stage: str | None = None  # what its folder says it holds (Keras's TensorBoard callback: train/, validation/)


@dataclass
class Run:
    folder: str
    files: list[LogFile] = field(default_factory=list)


@dataclass
class Discovery:
    root: str
    runs: list[Run] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    capped: list[str] = field(default_factory=list)  # what the walk's bounds left unread


def file_kind(name: str) -> str | None:
    """The kind of log a file name says it is, or None (not a log)."""
    lowered = name.lower()
    if is_event_file(name):
        return "tensorboard"
    if lowered == "trainer_state.json":
        return "trainer-state"
    if lowered in JSONL_NAMES or lowered.endswith(".log.json"):
        return "metrics-jsonl"
    if lowered.endswith(".csv"):
        return "csv"
    if lowered.endswith(".wandb"):
        return "wandb-binary"
    if lowered.endswith(TEXT_LOG_SUFFIXES) and lowered not in NOT_LOG_TEXT:
        return "text"
    return None


# JSON files a run folder holds that are no history, whatever lists they carry: wandb's summary and metadata (its
# output.log is the run's log), a model's config.
NOT_HISTORY_JSON = {"wandb-summary.json", "wandb-metadata.json", "config.json"}


def _json_history_kind(path: str) -> str | None:
    """"keras-history" for a .json file that holds a Keras History dump (read from its first 4 KiB: only JSON files
    whose name says nothing are opened), else None."""
    name = os.path.basename(path).lower()
    if not name.endswith(".json") or name in NOT_HISTORY_JSON:
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    return "keras-history" if keras_history_head(head) else None


class _Walk:
    def __init__(self, root: str):
        self.found = Discovery(root)
        self.entries = 0
        self.visited: set[tuple[int, int]] = set()
        self.by_folder: dict[str, list[LogFile]] = {}
        self.checkpoints: dict[str, list[tuple[int, str]]] = {}  # output_dir -> (N, checkpoint-N/trainer_state)
        self.other: dict[str, list[str]] = {}  # why -> paths, for the summary of skipped files

    def skip(self, path: str, why: str) -> None:
        self.other.setdefault(why, []).append(path)

    def walk(self, folder: str, depth: int) -> None:
        try:
            info = os.stat(folder)
        except OSError as exc:
            self.skip(folder, f"cannot be opened ({exc.strerror})")
            return
        if (info.st_dev, info.st_ino) in self.visited:
            self.skip(folder, "a link back to a folder already walked (a link loop): not walked again")
            return
        self.visited.add((info.st_dev, info.st_ino))
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            self.skip(folder, f"cannot be listed ({exc.strerror})")
            return
        if self._special_folder(folder, entries):
            return
        subfolders = []
        for entry in entries:
            self.entries += 1
            if self.entries > MAX_ENTRIES:
                self.found.capped.append(f"the walk stopped after {MAX_ENTRIES} entries (in {folder}); point "
                                         "advisor diagnose at the run's own folder")
                return
            self._entry(folder, entry, depth, subfolders)
        for path in subfolders:
            if self.entries > MAX_ENTRIES:
                return
            self.walk(path, depth + 1)

    def _entry(self, folder: str, entry: os.DirEntry, depth: int, subfolders: list[str]) -> None:
        try:
            is_dir = entry.is_dir()  # follows links: a link loop is caught by the visited set
        except OSError:
            is_dir = False
        if is_dir:
            if entry.name in SKIP_FOLDERS:
                return
            if depth + 1 > MAX_DEPTH:
                self.found.capped.append(f"{entry.path}: deeper than {MAX_DEPTH} folders below the one given; "
                                         "not walked")
                return
            subfolders.append(entry.path)
            return
        try:
            regular = entry.is_file()
        except OSError:
            regular = False
        if not regular:
            self.skip(entry.path, "not a regular file (a broken link, a pipe or a device)")
            return
        kind = file_kind(entry.name) or _json_history_kind(entry.path)
        if kind is None:
            self.skip(entry.path, "not a log file")
            return
        match = _CHECKPOINT.match(os.path.basename(folder))
        if match and kind == "trainer-state":
            self.checkpoints.setdefault(os.path.dirname(folder), []).append((int(match.group(1)), entry.path))
            return
        if match:
            self.skip(entry.path, "inside a checkpoint folder (the training's own logs are read, not its copies)")
            return
        self.by_folder.setdefault(folder, []).append(LogFile(entry.path, kind))

    def _special_folder(self, folder: str, entries: list[os.DirEntry]) -> bool:
        """An MLflow run folder (meta.yaml and metrics/): its metric files are one source, read together."""
        names = {e.name for e in entries}
        if "meta.yaml" in names and "metrics" in names and os.path.isdir(os.path.join(folder, "metrics")):
            self.by_folder.setdefault(folder, []).append(LogFile(folder, "mlflow"))
            self.entries += len(entries)
            return True
        return False

    def runs(self) -> list[Run]:
        for output_dir, saved in self.checkpoints.items():
            saved.sort()
            latest = saved[-1][1]
            for _, older in saved[:-1]:
                self.skip(older, f"an older checkpoint's trainer_state.json ({os.path.relpath(latest, output_dir)} "
                                 "holds everything it does and more)")
            if not any(f.kind == "trainer-state" for f in self.by_folder.get(output_dir, [])):
                self.by_folder.setdefault(output_dir, []).append(LogFile(latest, "trainer-state"))
            else:
                self.skip(latest, "a checkpoint's copy of the output folder's own trainer_state.json")
        self._fold_layouts()
        return [Run(folder, files) for folder, files in sorted(self.by_folder.items())]

    def _fold_layouts(self) -> None:
        """An HF output_dir's single runs/<name> TensorBoard folder and a wandb run's files/ folder belong to the
        run of the folder above them."""
        for folder in list(self.by_folder):
            parent = os.path.dirname(folder)
            grandparent = os.path.dirname(parent)
            split = SPLITS.get(os.path.basename(folder).lower())
            if split and all(f.kind == "tensorboard" for f in self.by_folder[folder]):
                # Keras's TensorBoard callback (and many SummaryWriter scripts) write logs/train and logs/validation:
                # one run, the folder naming each file's stage.
                for log in self.by_folder.pop(folder):
                    log.stage = split
                    self.by_folder.setdefault(parent, []).append(log)
            elif os.path.basename(parent) == "runs" and grandparent in self.by_folder and any(
                    f.kind == "trainer-state" for f in self.by_folder[grandparent]):
                siblings = [f for f in self.by_folder if os.path.dirname(f) == parent]
                if len(siblings) == 1:
                    self.by_folder[grandparent] += self.by_folder.pop(folder)
            elif os.path.basename(folder) == "logs" and parent in self.by_folder and any(
                    f.kind == "trainer-state" for f in self.by_folder[parent]) and all(
                    f.kind == "tensorboard" for f in self.by_folder[folder]):
                self.by_folder[parent] += self.by_folder.pop(folder)  # TrainingArguments(logging_dir="logs")
            elif self._wandb_debug_logs(folder):
                for log in self.by_folder.pop(folder):
                    self.skip(log.path, "wandb's own log (the training's output is the run's files/output.log)")
            elif os.path.basename(folder) == "files" and parent in self.by_folder:
                self.by_folder[parent] += self.by_folder.pop(folder)
            elif os.path.basename(folder) == "files" and os.path.basename(parent).startswith(("run-", "offline-run-")):
                self.by_folder[parent] = self.by_folder.pop(folder)


    def _wandb_debug_logs(self, folder: str) -> bool:
        """A wandb run's logs/ folder beside its files/: debug.log and debug-internal.log are the wandb client's own
        records (its config, its sync), not the training's."""
        names = [os.path.basename(f.path) for f in self.by_folder[folder]]
        return (os.path.basename(folder) == "logs" and os.path.isdir(os.path.join(os.path.dirname(folder), "files"))
                and all(re.fullmatch(r"debug(-internal|-core)?\.log", name) for name in names))


def discover(root: str) -> Discovery:
    walk = _Walk(root)
    walk.walk(root, 0)
    found = walk.found
    found.runs = walk.runs()
    if len(found.runs) > MAX_RUNS:
        for run in found.runs[MAX_RUNS:]:
            found.skipped.append((run.folder, f"a run past the first {MAX_RUNS}: not judged"))
        found.capped.append(f"{len(found.runs)} runs found; the first {MAX_RUNS} are judged")
        found.runs = found.runs[:MAX_RUNS]
    for why, paths in walk.other.items():
        found.skipped += [(path, why) for path in paths]
    return found


def skipped_summary(skipped: list[tuple[str, str]], root: str, shown: int = 3) -> list[str]:
    """One line a reason: how many files, and the first few of them."""
    by_reason: dict[str, list[str]] = {}
    for path, why in skipped:
        by_reason.setdefault(why, []).append(os.path.relpath(path, root) if root else path)
    lines = []
    for why, paths in by_reason.items():
        more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
        lines.append(f"{len(paths)} skipped, {why}: {', '.join(paths[:shown])}{more}")
    return lines


__all__ = ["Discovery", "LogFile", "MAX_ENTRIES", "Run", "discover", "file_kind", "skipped_summary"]
