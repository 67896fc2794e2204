"""Whole-file readers: the metric files training libraries write, read into the same Points the line readers make.

Each reader turns one file into rows of (name, value) pairs with a step and/or epoch, then into Points named by
meaning (names.classify: stage and measure) with an honest cadence: a file that counts only epochs (Keras, YOLO,
timm) is per-epoch; one that counts only steps is per-step; where a file counts both, a series with at most one
value an epoch is per-epoch (a validation run at each epoch's end, Lightning's ``*_epoch``), else per-step.

Formats: TensorBoard event files (the ``tensorboard`` package's event protos, imported lazily), CSV metrics with a
header (Lightning and Keras CSVLogger, YOLOv5 and Ultralytics ``results.csv`` with padded headers, timm
``summary.csv``), JSON-lines metric files (detectron2 ``metrics.json``, mmengine ``scalars.json`` / ``*.log.json``,
wandb's ``wandb-history.jsonl``) and MLflow metric files (``mlruns/<exp>/<run>/metrics/<key>``).
"""

from __future__ import annotations

import io
import math
import os
import re
import struct

from ..errors import AdvisorError
from .bom import text_bytes
from .names import classify, position_name, words
from .readers import _points_from_pairs, to_float
from .records import Point, dataclass, field

TENSORBOARD_INSTALL = "pip install 'batch-advisor[tensorboard]'"
TFRECORD_HEADER = struct.Struct("<QI")  # a record: length (u64), its masked CRC (u32), the bytes, their CRC (u32)
MAX_TFRECORD_BYTES = 1 << 30  # a length past this is not an event record: the file is damaged there

FORMATS = {
    "tensorboard": "TensorBoard event files (events.out.tfevents.*): SummaryWriter, Lightning's TensorBoardLogger, "
                   "HF Trainer report_to='tensorboard'",
    "csv": "CSV metrics with a header: Lightning and Keras CSVLogger, YOLOv5/Ultralytics results.csv, timm "
           "summary.csv",
    "metrics-jsonl": "JSON-lines metric files: detectron2 metrics.json, mmengine scalars.json and *.log.json, "
                     "wandb-history.jsonl",
    "mlflow": "an MLflow metric file (mlruns/<experiment>/<run>/metrics/<key>: 'timestamp value step' lines)",
    "keras-history": "a Keras History saved as JSON (json.dump(history.history): each metric's list, one value an "
                     "epoch), alone or under a 'history' key",
}
# A Keras History dump: a JSON object with a loss that holds a list ("loss": [2.03, 0.96, ...]), at its top or under
# "history".
KERAS_HISTORY_LOSS = re.compile(rb'"(?:val_)?loss"\s*:\s*\[')


def keras_history_head(head: bytes) -> bool:
    return head.lstrip()[:1] == b"{" and KERAS_HISTORY_LOSS.search(head) is not None
JSONL_NAMES = ("metrics.json", "scalars.json", "wandb-history.jsonl")


@dataclass
class FileRead:
    """What one whole file held: its points, how many records it had, and what the reader noticed."""

    path: str
    format: str
    points: list[Point] = field(default_factory=list)
    records: int = 0
    notes: list[str] = field(default_factory=list)
    problem: str = ""  # why nothing could be read (cut off, empty, damaged): said to the user as it is


# ---------------------------------------------------------------- recognising a file

def is_event_file(name: str) -> bool:
    return "tfevents" in os.path.basename(name)


def whole_file_kind(name: str, head: bytes) -> str | None:
    """The whole-file format of a file, from its name and first bytes, or None (a text log for the line readers)."""
    base = os.path.basename(name)
    if is_event_file(base) or head[12:40].find(b"brain.Event") >= 0:
        return "tensorboard"
    if base in JSONL_NAMES or base.endswith(".log.json"):
        first = head.lstrip()[:1]
        return "metrics-jsonl" if first == b"{" else None
    if base.endswith(".json") and keras_history_head(head):
        return "keras-history"
    if metrics_header(head.split(b"\n", 1)[0].decode("utf-8", errors="replace")) is not None:
        return "csv"
    return None


# A CSV's field separators, in the order tried: a comma; a semicolon where the comma is the decimal mark (Excel and
# pandas exports in much of Europe: "epoch;accuracy;loss", values "0,83"); a tab (to_csv(sep="\t")).
CSV_DELIMITERS = (",", ";", "\t")


def csv_delimiter(first_line: str) -> str:
    """The separator of a CSV whose header is ``first_line``: the first of CSV_DELIMITERS in it (a comma when none)."""
    return next((d for d in CSV_DELIMITERS if d in first_line), ",")


def csv_value(text: str, delimiter: str) -> str:
    """A field as a number reads: under a semicolon or a tab, a decimal comma ("0,83") is a decimal point."""
    if delimiter != "," and text.count(",") == 1 and "." not in text:
        return text.replace(",", ".")
    return text


def metrics_header(first_line: str) -> list[str] | None:
    """The columns of a CSV metrics header (padded names stripped, as YOLOv5 writes them; fields separated by any of
    CSV_DELIMITERS), or None when the line is not one: at least two named columns, one a step or epoch counter and
    one a metric the readers know."""
    delimiter = csv_delimiter(first_line)
    if delimiter not in first_line:
        return None
    columns = [c.strip().strip('"') for c in first_line.strip().split(delimiter)]
    if len(columns) < 2 or any(not c or to_float(c) is not None or len(c) > 80 for c in columns):
        return None
    if not any(position_name(c) for c in columns) or not any(classify(c) for c in columns):
        return None
    return columns


# ---------------------------------------------------------------- rows to points

def _stage_loss_components(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A stage's loss as the sum of its components when a row prints only components (YOLO's box, obj and cls
    losses for train and val): the first component alone would stand in for the loss otherwise."""
    components: dict[str, list[float]] = {}
    whole: set[str] = set()
    for key, raw in pairs:
        found = classify(key)
        if not found or "loss" not in found[0]:
            continue
        if found[1] >= 3:
            value = to_float(str(raw))
            if value is not None:
                components.setdefault(found[0], []).append(value)
        else:
            whole.add(found[0])
    return [(series, repr(math.fsum(values))) for series, values in components.items()
            if len(values) >= 2 and series not in whole]


def row_points(pairs: list[tuple[str, str]], line: int, stage: str | None = None) -> list[Point]:
    """The points of one row of named values (a CSV row, a JSON record, one step of an event file)."""
    summed = _stage_loss_components(pairs)
    points = _points_from_pairs(pairs + summed, line, stage=stage)
    return points


def assign_cadence(points: list[Point], default: str) -> None:
    """Per-step or per-epoch, series by series (see the module's docstring). ``default`` applies to a series whose
    points carry no epoch to count by."""
    by_series: dict[str, list[Point]] = {}
    for point in points:
        by_series.setdefault(point.name, []).append(point)
    for name, series in by_series.items():
        if all(p.cadence for p in series):  # the reader knew (a tag that names its cadence)
            continue
        cadence = default
        if name.endswith("_epoch"):
            cadence = "epoch"
        elif all(p.epoch is not None for p in series) and any(p.step is not None for p in series):
            per_epoch: dict[int, int] = {}
            for p in series:
                bucket = math.floor(p.epoch) if math.isfinite(p.epoch) else -1
                per_epoch[bucket] = per_epoch.get(bucket, 0) + 1
            cadence = "epoch" if max(per_epoch.values()) <= 1 and len(series) >= 2 else "step"
        elif all(p.step is None for p in series) and all(p.epoch is not None for p in series):
            cadence = "epoch"
        for p in series:
            p.cadence = cadence


# ---------------------------------------------------------------- bounded memory

SERIES_KEEP = 4_000  # points kept a series (scan.SERIES_CAP, so the Collected never thins again); a longer series is thinned evenly (the detectors need its shape)
NON_FINITE_KEEP = 50  # nan/inf points are kept whatever the thinning: they are divergence evidence


class SeriesSink:
    """Collects points in bounded memory: a series past SERIES_KEEP points is halved and from then on keeps every
    other point it is given (the stride doubles each time), so a 100 MB event file keeps an even sample."""

    def __init__(self):
        self.series: dict[str, list[Point]] = {}
        self.stride: dict[str, int] = {}
        self.seen: dict[str, int] = {}
        self.non_finite = 0
        self.thinned: dict[str, int] = {}
        self.last: dict[str, Point] = {}
        self.unkept_last: dict[str, tuple] = {}  # a series whose last point was only counted: its fields
        self.unkept_cadence: dict[str, str | None] = {}
        self.outside_sample: set[int] = set()  # ids of the nan/inf points kept outside the sampling stride

    def offer(self, line: int, name: str, value: float, step, epoch, cadence) -> None:
        """add() for a reader of millions of records: a point the sampling would not keep is only counted, and
        made into a Point only if it turns out to be its series' last."""
        seen = self.seen.get(name, 0)
        if seen % self.stride.get(name, 1) == 0 or (not math.isfinite(value) and self.non_finite < NON_FINITE_KEEP):
            self.add(Point(line, name, value, step, epoch, cadence=cadence))
            return
        self.seen[name] = seen + 1
        self.unkept_last[name] = (line, name, value, step, epoch)  # a Point only if it ends the series
        self.unkept_cadence[name] = cadence

    def add(self, point: Point) -> None:
        name = point.name
        seen = self.seen.get(name, 0)
        self.seen[name] = seen + 1
        self.last[name] = point
        self.unkept_last.pop(name, None)
        stride = self.stride.get(name, 1)
        if seen % stride:
            if math.isfinite(point.value) or self.non_finite >= NON_FINITE_KEEP:
                return
            self.non_finite += 1
            self.outside_sample.add(id(point))  # kept as evidence, not as part of the even sample
        series = self.series.setdefault(name, [])
        series.append(point)
        if len(series) > SERIES_KEEP:
            self.series[name] = _halved(series, self.outside_sample)
            self.stride[name] = stride * 2
            self.thinned[name] = stride * 2

    def points(self) -> list[Point]:
        for name, fields in self.unkept_last.items():
            self.last[name] = Point(*fields, cadence=self.unkept_cadence[name])
        self.unkept_last = {}
        for name, last in self.last.items():  # where the run ended is always kept
            if self.series[name][-1] is not last:
                self.series[name].append(last)
        return sorted((p for series in self.series.values() for p in series), key=lambda p: p.line)

    def thinned_note(self) -> str:
        said = ", ".join(f"{name} 1 in {stride} of {self.seen[name]}" for name, stride in self.thinned.items())
        return (f"long series kept as an even sample ({said}); the first {NON_FINITE_KEEP} nan/inf values and "
                "each series' last point were kept")


def _halved(series: list[Point], outside_sample: set[int]) -> list[Point]:
    """Every other sampled point, counted among the sampled ones only: the nan/inf points kept outside the
    sampling stay and do not shift which of the others are kept (the sample stays even)."""
    kept, index = [], 0
    for point in series:
        if id(point) in outside_sample:
            kept.append(point)
            continue
        if index % 2 == 0:
            kept.append(point)
        index += 1
    return kept


# ---------------------------------------------------------------- TensorBoard

def tensorboard_protos():
    """The tensorboard package's Event proto, or a one-paragraph error naming the install."""
    try:
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        raise AdvisorError("Reading TensorBoard event files (events.out.tfevents.*) needs the tensorboard package, "
                           f"which is not installed here. Install it with `{TENSORBOARD_INSTALL}` (or `pip install "
                           "tensorboard`), then run the same command again.") from None
    return event_pb2


def _scalar(value, numpy_tensor) -> float | None:
    """A summary value's scalar: simple_value (torch's SummaryWriter, TF1) or a 0-d tensor (TF2, migrated)."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return value.simple_value
    if kind != "tensor" or value.tensor.tensor_shape.dim:
        return None
    tensor = value.tensor
    for values in (tensor.float_val, tensor.double_val, tensor.int64_val, tensor.int_val):
        if len(values) == 1:
            return float(values[0])
    if tensor.tensor_content:
        array = numpy_tensor(tensor)
        return float(array.reshape(-1)[0]) if array is not None and array.size == 1 else None
    return None


def _numpy_tensor(tensor):
    try:
        from tensorboard.util import tensor_util
    except ImportError:  # pragma: no cover - the proto import above already needs the package
        return None
    try:
        return tensor_util.make_ndarray(tensor)
    except (TypeError, ValueError):
        return None


def iter_tfrecords(data: bytes | memoryview):
    """(offset, record bytes) for each whole record of a TFRecord file; stops at a cut-off last record. The
    length is checked against the bytes left (the CRCs are not recomputed: tensorboard's pure-Python CRC costs
    ~0.7 s a MB without TensorFlow, and a damaged record fails to parse instead)."""
    size, offset = len(data), 0
    unpack = TFRECORD_HEADER.unpack_from
    while offset + 12 <= size:
        length, _ = unpack(data, offset)
        end = offset + 12 + length
        if length > MAX_TFRECORD_BYTES or end + 4 > size:
            return
        yield offset, data[offset + 12:end]
        offset = end + 4


def _summary_rows(data: bytes, event_cls, read: FileRead):
    """(record number, step, [(tag, value)]) for each run of consecutive records at one step, over the records
    ``iter_tfrecords`` frames (the one walk of the framing, the one its test checks against tensorboard's own
    loader); ``read.records`` and whether the last record is cut off are set at the end."""
    step, pairs, first = None, [], 0
    number = bad = framed = 0
    parse = event_cls.FromString
    for offset, record in iter_tfrecords(data):
        number += 1
        framed = offset + 16 + len(record)  # header (8 + 4) and the data's CRC (4) around the record
        try:
            event = parse(record)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError; a damaged record is counted and skipped
            bad += 1
            continue
        values = event.summary.value
        if not values:
            continue
        found = [(v.tag, v.simple_value if v.WhichOneof("value") == "simple_value" else _scalar(v, _numpy_tensor))
                 for v in values]
        if event.step != step and pairs:
            yield first, step, pairs
            pairs = []
        if not pairs:
            first = number
        step = event.step
        pairs += [(tag, value) for tag, value in found if value is not None]
    if pairs:
        yield first, step, pairs
    read.records = number
    if framed != len(data):
        read.notes.append("its last record is cut off (the writer was still writing, or the copy was partial): "
                          "read up to it")
    if bad:
        read.notes.append(f"{bad} damaged record(s) could not be parsed and were skipped")


class TagMeanings:
    """What each tag of an event file measures, worked out once per tag (a 100 MB file repeats a few tags
    millions of times): ('step' | 'epoch' | None, (series, rank) | None)."""

    def __init__(self, stage: str | None = None):
        self.known: dict[str, tuple] = {}
        self.stage = stage

    def __call__(self, tag: str) -> tuple:
        meaning = self.known.get(tag)
        if meaning is None:
            meaning = self.known[tag] = (position_name(tag), classify(tag, self.stage), "epoch" in words(tag))
        return meaning


def _step_points(pairs: list[tuple[str, float]], meanings: TagMeanings) -> list[tuple]:
    """One step's (series, value, epoch, cadence): among several tags for one series (train_loss_step and a
    loss/train), the lowest rank wins, as in the line readers."""
    epoch = None
    best: dict[str, tuple[float, int, bool]] = {}
    for tag, value in pairs:
        position, found, per_epoch = meanings(tag)
        if position == "epoch":
            epoch = value
        elif found is not None and position is None:
            series, rank = found
            if series not in best or rank < best[series][1]:
                best[series] = (value, rank, per_epoch)
    # A tag that says it is per epoch (Keras's epoch_loss, Lightning's *_epoch) is, whatever its step counts.
    return [(series, value, epoch, "epoch" if per_epoch else None) for series, (value, _, per_epoch) in best.items()]


def _drop_run_summary(pairs: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The HF Trainer logs its end-of-training summary (train/train_runtime, train/train_loss: a mean over the run,
    not a point) through the same callback: dropped, as trainer_state_points drops it."""
    if not any(tag.endswith("train_runtime") for tag, _ in pairs):
        return pairs
    return [(tag, value) for tag, value in pairs
            if not (tag.rsplit("/", 1)[-1].startswith("train_") or tag.endswith("total_flos"))]


def read_tensorboard(path: str, data: bytes, stage: str | None = None) -> FileRead:
    """``stage``: what the file's folder says it holds, for tags that do not say (Keras: validation/epoch_loss)."""
    event_cls = tensorboard_protos().Event
    read = FileRead(path, "tensorboard")
    if not data:
        read.problem = "it is an empty TensorBoard event file (0 bytes): the writer had not flushed anything yet"
        return read
    meanings = TagMeanings(stage)
    sink = SeriesSink()
    for first, step, pairs in _summary_rows(data, event_cls, read):
        for series, value, epoch, cadence in _step_points(_drop_run_summary(pairs), meanings):
            sink.offer(first, series, value, float(step), epoch, cadence)
    read.points = sink.points()
    if sink.thinned:
        read.notes.append(sink.thinned_note())
    if len(data) >= 12 and read.records == 0:
        read.problem = ("it is not a readable TensorBoard event file (no whole record in its "
                        f"{len(data)} bytes: damaged or not an event file)")
    if not read.points and not read.problem:
        read.problem = (f"its {read.records} event record(s) hold no scalar summaries (graphs, histograms or images "
                        "only)" if read.records else "it holds no whole event record (cut off before the first)")
    assign_cadence(read.points, "step")
    return read


# ---------------------------------------------------------------- CSV

def read_csv(path: str, text: str) -> FileRead:
    import csv

    read = FileRead(path, "csv")
    delimiter = csv_delimiter(text.split("\n", 1)[0])
    rows = ([csv_value(v, delimiter) for v in row] for row in csv.reader(io.StringIO(text, newline=""),
                                                                        delimiter=delimiter))
    header = next(rows, None)
    columns = metrics_header(delimiter.join(header)) if header else None
    if columns is None:
        read.problem = "its first line is not a metrics header (named columns, one of them a step or an epoch)"
        return read
    positions = {position_name(c) for c in columns}
    table = [(number, [(k, v.strip()) for k, v in zip(columns, row) if v.strip() != ""])
             for number, row in enumerate(rows, start=2)]
    if positions & {"step", "epoch"} == {"epoch"}:
        table = _last_session(columns, table, read)
    per_epoch = _epoch_loss_columns(columns, table) if {"step", "epoch"} <= positions else set()
    for number, pairs in table:
        if pairs:
            read.records += 1
            if per_epoch:
                pairs = [(f"{k} epoch" if k in per_epoch else k, v) for k, v in pairs]
            read.points += row_points(pairs, number)
    summed = [s for s in ("train", "val") if _components(columns, s) >= 2 and not _has_whole_loss(columns, s)]
    for stage in summed:
        read.notes.append(f"the {stage} loss is the sum of its {_components(columns, stage)} components (the file "
                          "has no total)")
    assign_cadence(read.points, "epoch" if "step" not in positions else "step")
    if not read.points:
        read.problem = "its header names metrics, and no row holds a value for them"
    return read


def _last_session(columns: list[str], table: list[tuple[int, list[tuple[str, str]]]], read: FileRead
                  ) -> list[tuple[int, list[tuple[str, str]]]]:
    """The rows of the last training session of a per-epoch file whose epoch counter starts again (a Keras CSVLogger
    with append=True, run twice: epochs 0-49, then 0-49 again). Each session is its own run: joined, the second's
    start reads as a jump of the first's curve. A resumed run whose counter goes on (initial_epoch) is one session."""
    epoch_column = next(c for c in columns if position_name(c) == "epoch")
    restarts, previous = [], None
    for index, (_, pairs) in enumerate(table):
        epoch = to_float(dict(pairs).get(epoch_column, ""))
        if epoch is None:
            continue
        if previous is not None and epoch < previous:
            restarts.append(index)
        previous = epoch
    if not restarts:
        return table
    first_line = table[restarts[-1]][0]
    read.notes.append(f"the epoch counter starts again {len(restarts)} time(s) (the file holds {len(restarts) + 1} "
                      f"training sessions, appended): the last one, from line {first_line}, is judged")
    return table[restarts[-1]:]


def _epoch_loss_columns(columns: list[str], table: list[tuple[int, list[tuple[str, str]]]]) -> set[str]:
    """Training-loss columns with at most one value an epoch (2+ values) in a file whose other training-loss column
    has several an epoch: Lightning's epoch-level columns under any name ('train_loss_0', dataloader 0, written on the
    epoch's last row where the step column is empty). Read as the per-epoch training loss, never as points of the
    per-step curve."""
    losses = [c for c in columns if (found := classify(c)) and found[0] == "train_loss"]
    if len(losses) < 2:
        return set()
    epoch_column = next(c for c in columns if position_name(c) == "epoch")
    counts: dict[str, dict[str, int]] = {c: {} for c in losses}
    for _, pairs in table:
        row = dict(pairs)
        epoch = row.get(epoch_column)
        for column in losses:
            if column in row and epoch is not None:
                counts[column][epoch] = counts[column].get(epoch, 0) + 1
    once = {c for c, per in counts.items() if sum(per.values()) >= 2 and max(per.values()) <= 1}
    stepwise = any(per and max(per.values()) > 1 for per in counts.values())
    return once if stepwise else set()


def _components(columns: list[str], stage: str) -> int:
    return sum(1 for c in columns if (found := classify(c)) and found[1] >= 3 and found[0].startswith(stage)
               and "loss" in found[0])


def _has_whole_loss(columns: list[str], stage: str) -> bool:
    return any((found := classify(c)) and found[1] < 3 and found[0].startswith(stage) and "loss" in found[0]
               for c in columns)


# ---------------------------------------------------------------- JSON lines

MODE_STAGES = {"train": "train", "val": "val", "eval": "val", "test": "test"}


def _record_pairs(obj: dict) -> list[tuple[str, str]]:
    return [(k, repr(float(v))) for k, v in obj.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def read_metrics_jsonl(path: str, text: str) -> FileRead:
    """detectron2 metrics.json, mmengine scalars.json / *.log.json (mmcv: a "mode" key says train or val), wandb's
    wandb-history.jsonl. mmengine writes a validation record's "step" as the epoch it closes, so such records (no
    training key: no lr, no loss) are per-epoch, kept apart from the per-iteration training records."""
    import json

    read = FileRead(path, "metrics-jsonl")
    bad = 0
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(obj, dict):
            continue
        read.records += 1
        read.points += _record_points(obj, number)
    if bad:
        read.notes.append(f"{bad} line(s) are not JSON (cut off or another format): skipped")
    if not read.points:
        read.problem = (f"none of its {read.records} JSON record(s) holds a training metric" if read.records
                        else "it holds no JSON record")
    for point in read.points:
        if point.cadence is None:
            point.cadence = "step" if point.step is not None else ("epoch" if point.epoch is not None else None)
    read.points = _last_step_session(read)
    return read


SESSION_MIN_STEP_RECORDS = 10  # a last session of this many logged steps or more is judged on its own
SESSION_BACK_TO_START = 0.5  # a step back into the first half of the session so far starts a new one (a resume from a
# late checkpoint steps back less, and is the same run)


def _last_step_session(read: FileRead) -> list[Point]:
    """The points of the last training session of a per-step file whose step counter starts again (detectron2
    appends each run to metrics.json: iterations 19..999, then 19..999 again). Each session is its own run: joined,
    each restart reads as the loss swinging back up (periodic, jitter). A restart: the step falls back into the
    first half of the session so far (a new run may log its first step a few iterations off the last one's) while
    the epoch (where one is written) does not advance (mmcv's per-epoch `iter` counts again from the start of each
    epoch: one run). The last session is judged when it holds SESSION_MIN_STEP_RECORDS logged steps or more; a
    shorter one leaves the file whole."""
    rows: dict[int, tuple[float, float | None]] = {}
    for point in read.points:
        if point.step is not None and point.cadence == "step" and math.isfinite(point.step):
            rows.setdefault(point.line, (point.step, point.epoch))
    restarts, previous, first = [], None, None
    for line in sorted(rows):
        step, epoch = rows[line]
        back = previous is not None and step < previous[0]
        if back and step <= first + SESSION_BACK_TO_START * (previous[0] - first) and (
                epoch is None or previous[1] is None or epoch <= previous[1]):
            restarts.append(line)
            first = None
        first = step if first is None else min(first, step)
        previous = (step, epoch)
    if not restarts or sum(line >= restarts[-1] for line in rows) < SESSION_MIN_STEP_RECORDS:
        return read.points
    start = restarts[-1]
    read.notes.append(f"the step counter starts again {len(restarts)} time(s) (the file holds {len(restarts) + 1} "
                      f"training sessions, appended): the last one, from line {start}, is judged")
    return [p for p in read.points if p.line >= start]


def _record_points(obj: dict, number: int) -> list[Point]:
    pairs = _record_pairs(obj)
    mode = obj.get("mode") if isinstance(obj.get("mode"), str) else None
    stage = MODE_STAGES.get(mode) if mode else None
    training = any(words(k)[-1:] in (["lr"], ["loss"]) or (classify(k) or ("",))[0] == "train_loss" for k, _ in pairs)
    if stage is None and not training and "step" in obj and "iter" not in obj and "iteration" not in obj:
        # mmengine's validation record: {"accuracy/top1": ..., "step": EPOCH}
        stage = "val"
        pairs = [(k, v) for k, v in pairs if k != "step"] + [("epoch", repr(float(obj["step"])))]
    if stage == "val" and mode:
        pairs = [(k, v) for k, v in pairs if k not in ("iter",)]  # mmcv's val record repeats the last train iter
    points = row_points(pairs, number, stage=stage)
    if stage in ("val", "test"):
        for point in points:
            point.cadence = "epoch" if point.epoch is not None and point.step is None else "step"
    return points


# ---------------------------------------------------------------- MLflow

def read_mlflow_metrics(run_dir: str, files: list[str]) -> FileRead:
    """An MLflow run's metric files (one a key; 'timestamp value step' lines), as rows by step."""
    read = FileRead(os.path.join(run_dir, "metrics"), "mlflow")
    by_step: dict[float, list[tuple[str, str]]] = {}
    metrics_dir = os.path.join(run_dir, "metrics")
    for path in files:
        key = os.path.relpath(path, metrics_dir).replace(os.sep, "/")
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) >= 2 and to_float(parts[1]) is not None:
                    step = to_float(parts[2]) if len(parts) >= 3 else None
                    by_step.setdefault(step if step is not None else -1.0, []).append((key, parts[1]))
                    read.records += 1
    for number, step in enumerate(sorted(by_step), start=1):
        read.points += row_points(by_step[step] + ([("step", repr(step))] if step >= 0 else []), number)
    assign_cadence(read.points, "step")
    if not read.points:
        read.problem = "its metric files hold no value of a training metric"
    return read


# ---------------------------------------------------------------- Keras History JSON

def _history_table(obj) -> dict[str, list] | None:
    """The metric lists of a History dump: the object itself, or its "history" (a report that also holds a config
    and test results); None when neither maps names to lists."""
    for table in (obj, obj.get("history") if isinstance(obj, dict) else None):
        if isinstance(table, dict):
            lists = {k: v for k, v in table.items() if isinstance(v, list)}
            if lists and any("loss" in k for k in lists):
                return lists
    return None


def read_keras_history(path: str, text: str) -> FileRead:
    """json.dump(history.history): metric name -> one value per epoch (Keras's History callback)."""
    import json

    read = FileRead(path, "keras-history")
    try:
        table = _history_table(json.loads(text))
    except ValueError as exc:
        read.problem = f"it starts as a Keras History saved as JSON but does not parse ({exc})"
        return read
    if table is None:
        read.problem = "it is JSON, but no metric in it holds a list of values per epoch"
        return read
    for epoch in range(max(len(v) for v in table.values())):
        pairs = [(k, repr(v[epoch])) for k, v in table.items()
                 if epoch < len(v) and isinstance(v[epoch], (int, float)) and not isinstance(v[epoch], bool)]
        read.points += row_points(pairs + [("epoch", str(epoch))], epoch + 1)
        read.records += 1
    for point in read.points:
        point.cadence = "epoch"
    if not read.points:
        read.problem = "its lists hold no value of a training metric"
    return read


# ---------------------------------------------------------------- one file

def read_whole_file(path: str, kind: str, data: bytes, stage: str | None = None) -> FileRead:
    if kind == "tensorboard":
        return read_tensorboard(path, data, stage)
    text = text_bytes(data).decode("utf-8", errors="replace")
    if kind == "csv":
        return read_csv(path, text)
    if kind == "metrics-jsonl":
        return read_metrics_jsonl(path, text)
    if kind == "keras-history":
        return read_keras_history(path, text)
    raise ValueError(f"not a whole-file format: {kind}")


__all__ = ["FORMATS", "FileRead", "TENSORBOARD_INSTALL", "assign_cadence", "csv_delimiter", "csv_value",
           "is_event_file", "iter_tfrecords", "keras_history_head",
           "metrics_header", "read_whole_file", "read_mlflow_metrics", "row_points", "whole_file_kind"]
