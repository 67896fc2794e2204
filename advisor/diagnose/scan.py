"""Stream a log of any size through the readers in bounded memory.

Blocks are split into lines in C (``bytes.split``). Every line is parsed until
a series holds ``SERIES_CAP`` points; then the series is thinned by half and
only every ``stride``-th ordinary line is parsed from there on. Lines that can
carry a failure, a non-finite value, or a validation metric are found with
``bytes.count``/``find`` (also C) and are always parsed, whatever the stride.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import BinaryIO

from .readers import (FAILURE_READERS, METRIC_READERS, RANK_PREFIX, LineReader, csv_points, known_formats,
                      trainer_state_points)
from .records import LogEvent, Point, ReadStats

ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")
BLOCK_BYTES = 4 << 20
MAX_LINE_CHARS = 64 << 10
SERIES_CAP = 20_000
EVENTS_KEPT_PER_KIND = 50
# Substrings of lines that must never be skipped by sampling.
ALWAYS_PARSE = (b"nan", b"inf", b"memory", b"exitcode", b"Killed", b"OVERFLOW", b"rror", b"val", b"Signal",
                b"Test set", b"ALLOC")
_CONTEXT_KEYS = {
    "Instantaneous batch size per device": "per_device",
    "Total train batch size (w. parallel, distributed & accumulation)": "global_batch",
    "Gradient Accumulation steps": "accumulation",
}


@dataclass
class Collected:
    series: dict[str, list[Point]] = field(default_factory=dict)
    events: list[LogEvent] = field(default_factory=list)
    event_counts: dict[str, int] = field(default_factory=dict)
    context: dict = field(default_factory=dict)
    stats: ReadStats = field(default_factory=ReadStats)

    def add_point(self, point: Point) -> bool:
        """Add a point; True when a series hit the cap (the caller then doubles the stride)."""
        series = self.series.setdefault(point.name, [])
        if series:
            last = series[-1]
            if last.step == point.step and last.epoch == point.epoch and (point.step is not None or
                                                                          point.epoch is not None):
                if last.value == point.value or point.value != point.value and last.value != last.value:
                    return False  # a progress bar redrawing the same value
                series[-1] = point  # the same step, refreshed
                return False
        series.append(point)
        if len(series) > SERIES_CAP:
            self.series[point.name] = series[::2]  # only the series that overflowed: val stays whole
            return True
        return False

    def add_event(self, event: LogEvent) -> None:
        count = self.event_counts.get(event.kind, 0)
        self.event_counts[event.kind] = count + 1
        if count < EVENTS_KEPT_PER_KIND:
            self.events.append(event)


class Scanner:
    def __init__(self, forced_format: str | None = None):
        self.failure_readers = list(FAILURE_READERS)
        if forced_format:
            chosen = [r for r in METRIC_READERS if r.name == forced_format]
            self.metric_readers: list[LineReader] = chosen
        else:
            self.metric_readers = list(METRIC_READERS)
        self.stride = 1
        self.collected = Collected()

    # -- one line (one \r-frame at a time)
    def parse_line(self, text: str, line_no: int) -> None:
        stats = self.collected.stats
        parsed = False
        for frame in text.split("\r") if "\r" in text else (text,):
            prefix = RANK_PREFIX.match(frame)
            rank = None
            if prefix:
                digits = "".join(ch for ch in prefix.group(0) if ch.isdigit())
                rank = int(digits) if digits else None
                frame = frame[prefix.end():]
            if "\x1b" in frame:
                frame = ANSI_ESCAPE.sub("", frame)
            if not frame.strip():
                continue
            for reader in self.failure_readers:
                records = reader.read(frame, line_no)
                if records is not None:
                    for event in records:
                        if rank is not None:
                            event.details.setdefault("rank", rank)
                        self.collected.add_event(event)
                    stats.formats[reader.name] = stats.formats.get(reader.name, 0) + 1
                    parsed = True
                    break
            if "batch size" in frame or "Accumulation steps" in frame:
                self._context(frame)
            records = self._metric_records(frame, line_no)
            if records is not None:
                parsed = True
                for record in records:
                    if isinstance(record, LogEvent):
                        self.collected.add_event(record)
                    elif self.collected.add_point(record):
                        self.stride *= 2
        if parsed:
            stats.parsed_lines += 1

    def _metric_records(self, frame: str, line_no: int):
        readers = self.metric_readers
        for index, reader in enumerate(readers):
            records = reader.read(frame, line_no)
            if records is not None:
                if index:  # the last reader that matched is tried first next time
                    readers.insert(0, readers.pop(index))
                stats = self.collected.stats
                stats.formats[reader.name] = stats.formats.get(reader.name, 0) + 1
                return records
        return None

    def _context(self, frame: str) -> None:
        for label, key in _CONTEXT_KEYS.items():
            if label in frame:
                tail = frame.split("=")[-1].strip().replace(",", "")
                if tail.isdigit():
                    self.collected.context[key] = int(tail)

    # -- a block of whole lines
    def parse_block(self, block: bytes, first_line: int) -> None:
        stats = self.collected.stats
        lines = block.split(b"\n")
        count = len(lines)
        stats.lines += count
        flagged: set[int] = set()
        everything = self.stride == 1
        if not everything:
            positions = []
            limit = count // 16 + 8
            for word in ALWAYS_PARSE:
                hits = block.count(word)
                if hits > limit:  # the word is on most lines: parse them all
                    everything = True
                    break
                pos = block.find(word)
                while pos >= 0:
                    positions.append(pos)
                    pos = block.find(word, pos + 1)
            if not everything and positions:
                positions.sort()
                index, last = 0, 0
                for pos in positions:
                    index += block.count(b"\n", last, pos)
                    last = pos
                    flagged.add(index)
        if everything:
            indices = range(count)
        else:
            offset = (-first_line) % self.stride
            indices = sorted(flagged.union(range(offset, count, self.stride)))
        for index in indices:
            raw = lines[index]
            if not raw:
                continue
            if b"\x00" in raw:
                stats.skipped_binary_lines += 1
                continue
            if len(raw) > MAX_LINE_CHARS:
                stats.truncated_lines += 1
                raw = raw[:MAX_LINE_CHARS]
            text = raw.decode("utf-8", errors="replace")
            if text.count("\ufffd") > max(8, len(text) // 4):
                stats.skipped_binary_lines += 1
                continue
            self.parse_line(text, first_line + index)
        stats.sampling_stride = self.stride

    def scan_stream(self, stream: BinaryIO) -> None:
        carry = b""
        line_no = 1
        while True:
            block = stream.read(BLOCK_BYTES)
            if not block:
                break
            data = carry + block if carry else block
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) > 4 * MAX_LINE_CHARS:  # one enormous line: cut it, count it truncated
                    self.parse_block(data[:MAX_LINE_CHARS], line_no)
                    carry = b""
                else:
                    carry = data
                continue
            whole, carry = data[:cut], data[cut + 1:]
            self.parse_block(whole, line_no)
            line_no += whole.count(b"\n") + 1
        if carry:
            self.parse_block(carry, line_no)


def sniff_file_format(head: bytes, name: str) -> str | None:
    """Whole-file formats: HF trainer_state.json, CSV metrics with a header."""
    stripped = head.lstrip()
    if stripped.startswith(b"{") and b'"log_history"' in head:
        return "trainer-state"
    first = head.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip().lower()
    fields = [f.strip() for f in first.split(",")]
    # A metrics header: identifier-like column names, one of them step/epoch, one a loss.
    if (len(fields) >= 2 and all(re.fullmatch(r"[\w./\-]+", f) for f in fields)
            and {"step", "epoch", "global_step"} & set(fields) and any("loss" in f for f in fields)):
        return "csv"
    return None


def scan_file_format(kind: str, stream: BinaryIO, collected: Collected) -> None:
    stats = collected.stats
    if kind == "trainer-state":
        try:
            obj = json.load(io.TextIOWrapper(stream, encoding="utf-8", errors="replace"))
        except ValueError as exc:
            stats.notes.append(f"trainer_state.json is not valid JSON ({exc}); nothing read from it")
            return
        points = trainer_state_points(obj if isinstance(obj, dict) else {})
        stats.lines = len(obj.get("log_history", [])) if isinstance(obj, dict) else 0
    else:
        reader = csv.reader(io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=""))
        header = next(reader, [])
        rows = ((number, row) for number, row in enumerate(reader, start=2))
        points = csv_points(header, rows)
        stats.lines = reader.line_num
    stats.parsed_lines = len({p.line for p in points})
    stats.formats[kind] = stats.parsed_lines
    for point in points:
        collected.add_point(point)


def read_source(stream: BinaryIO, name: str, forced_format: str | None = None) -> Collected:
    """Read one log (file or stdin) into series and events."""
    head = stream.peek(65536)[:65536] if hasattr(stream, "peek") else b""
    kind = forced_format if forced_format in ("trainer-state", "csv") else (
        None if forced_format else sniff_file_format(head, name))
    if kind:
        collected = Collected()
        scan_file_format(kind, stream, collected)
    else:
        scanner = Scanner(forced_format)
        scanner.scan_stream(stream)
        collected = scanner.collected
    collected.stats.sources.append(name)
    collected.stats.series_lengths = {k: len(v) for k, v in collected.series.items()}
    return collected


def finite(points: list[Point]) -> list[Point]:
    return [p for p in points if not (math.isnan(p.value) or math.isinf(p.value))]


__all__ = ["Collected", "Scanner", "known_formats", "read_source", "finite"]
