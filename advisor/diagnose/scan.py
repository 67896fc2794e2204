"""Stream a log of any size through the readers in bounded memory.

Blocks are split into lines in C (``bytes.split``). Every line is parsed until
a series holds ``SERIES_CAP`` points; then the series is thinned by half and
only every ``stride``-th ordinary line is parsed from there on. Lines that can
carry a failure, a non-finite value, or a validation metric are found with
``bytes.count``/``find`` (also C) and are always parsed, whatever the stride.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import re

from .readers import (FAILURE_READERS, METRIC_READERS, RANK_PREFIX, LineReader, csv_points, known_formats,
                      trainer_state_points)
from .bom import text_stream
from .files import csv_delimiter, csv_value, whole_file_kind
from .records import TRAIN_LOSS, VAL_LOSS, LogEvent, Point, ReadStats, dataclass, field

_TRACEBACK_LINE = re.compile(r"^(?:-+>|\S+ in [<\w]|File \"|\^+\s*$)")  # IPython "---->", "x.py in fit(", File "
_ELISION = re.compile(r"^[\s>`]*(?:\.{3,}|…+)[\s`]*$")
# Python statements, as a log that prints its own training script shows them (_not_metrics). The first words are
# tested with str.startswith (C) before the pattern runs: most log lines start otherwise.
_CODE_STARTS = ("def ", "class ", "import ", "from ", "return", "for ", "if ", "elif ", "else:", "while ", "with ",
                "try:", "except", "@", "print(", "raise ", "assert ")
_CODE_LINE = re.compile(r"(?:def \w+\(|class \w+[(:]|import [\w.]+|from [\w.]+ import |return\b|for .+ in .+:\s*$"
                        r"|(?:if|elif|while|with) .+:\s*$|else:|try:|except\b.*:\s*$|@[\w.]+|print\(|raise \w"
                        r"|assert )")
_ASSIGNMENT = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*[-+*/]?=(?!=)\s*\S")
CODE_WINDOW = 3  # lines after a statement that still count as code when they are assignments
_RANK_NUMBER = re.compile(r"\[(?:rank|default)(\d+)\]|\[(\d+),\d+\]<std")
ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")
BLOCK_BYTES = 4 << 20
HEAD_BYTES = 256 << 10  # read first, whole: it sets the line length that sizes the sampling stride
MAX_LINE_CHARS = 64 << 10
SERIES_CAP = 4_000
EVENTS_KEPT_PER_KIND = 50
# Lines that sampling never skips, found in the lower-cased block, each word a separate literal search (sre
# finds one literal at GB/s, an alternation of them ten times slower): every exception, every out-of-memory
# message (the words below cover every marker in advisor/oom.py, with or without "Error"), every nan/inf in
# any case (not "info"), every fp16 overflow, every validation or test line.
ERROR_WORD = re.compile(b"rror")
OOM_WORDS = (b"memory", b"alloc", b"primitive")  # tests check that every OOM_MARKERS entry contains one
EVENT_WORDS = (ERROR_WORD, *(re.compile(w) for w in OOM_WORDS), re.compile(b"nan"), re.compile(rb"inf(?!o)"),
               re.compile(b"overflow"))
VALIDATION_WORDS = (re.compile(b"val"), re.compile(b"test"))
MUST_READ = EVENT_WORDS + VALIDATION_WORDS
FREQUENT_SHARE = 8  # a validation word on more than 1 line in 8: those lines are sampled like training lines
CONTEXT_AFTER_ERROR = 40  # a traceback's tail and torchrun's exit-code lines follow the error line
TAIL_BYTES = 64 << 10  # the end of a log (where runs fail) is always read whole
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
    non_finite: dict[str, Point] = field(default_factory=dict)  # series name -> its first nan/inf point
    stats: ReadStats = field(default_factory=ReadStats)
    elisions: list[int] = field(default_factory=list)  # lines that are only "..." (epochs cut out: a gap)

    def add_point(self, point: Point) -> bool:
        """Add a point; True when a series hit the cap (the caller then doubles the stride)."""
        if not math.isfinite(point.value) and point.name not in self.non_finite:
            # Thinning may drop this point later; the first non-finite value of a series must survive.
            self.non_finite[point.name] = point
        series = self.series.setdefault(point.name, [])
        if series and point.redraw:
            # Only progress-bar frames collapse; distinct log lines are distinct points even at one step or epoch.
            last = series[-1]
            if last.redraw and last.step == point.step and last.epoch == point.epoch and (
                    point.step is not None or point.epoch is not None):
                if last.value == point.value or point.value != point.value and last.value != last.value:
                    return False  # a progress bar redrawing the same value
                series[-1] = point  # the same step, refreshed
                return False
        series.append(point)
        if len(series) > SERIES_CAP:
            self.series[point.name] = series[::2]  # only the series that overflowed
            # Validation lines are always read, whatever the stride: thinning them must not coarsen the sample.
            return point.name != VAL_LOSS
        return False

    def add_event(self, event: LogEvent) -> None:
        count = self.event_counts.get(event.kind, 0)
        self.event_counts[event.kind] = count + 1
        if count < EVENTS_KEPT_PER_KIND:
            self.events.append(event)


def _split_rank(frame: str) -> tuple[int | None, str]:
    """(the rank a ``[rankN]:``-style prefix names, or None; the frame without the prefix)."""
    prefix = RANK_PREFIX.match(frame)
    if not prefix:
        return None, frame
    tag = _RANK_NUMBER.search(prefix.group(0))
    return (int(next(g for g in tag.groups() if g is not None)) if tag else None), frame[prefix.end():]


class Scanner:
    def __init__(self, forced_format: str | None = None):
        self.failure_readers = list(FAILURE_READERS)
        if forced_format:
            chosen = [r for r in METRIC_READERS if r.name == forced_format]
            self.metric_readers: list[LineReader] = [r.fresh() for r in chosen]
        else:
            self.metric_readers = [r.fresh() for r in METRIC_READERS]
        self.in_traceback = False
        self.code_until = -1  # the last line of a stretch of source code the log printed (see _not_metrics)
        self.stride = 1
        self.line_bytes = 80.0
        self.line_bytes_known = False
        self.collected = Collected()
        self.metric_rank: int | None = None
        self._template = LineTemplate()

    # -- one line (one \r-frame at a time)
    def parse_line(self, text: str, line_no: int) -> None:
        parsed = False
        for frame in text.split("\r") if "\r" in text else (text,):
            rank, frame = _split_rank(frame)
            if "\x1b" in frame:
                frame = ANSI_ESCAPE.sub("", frame)
            if not frame.strip():
                continue
            parsed = self._read_failure(frame, line_no, rank) or parsed
            if "batch size" in frame or "Accumulation steps" in frame:
                self._context(frame)
            if self._traceback_source(frame) or self._elision(frame, line_no) or self._not_metrics(frame, line_no):
                continue
            records = self._metric_records(frame, line_no)
            if records is not None:
                parsed = True
                self._add_records(records, rank)
        if parsed:
            self.collected.stats.parsed_lines += 1

    def _read_failure(self, frame: str, line_no: int, rank: int | None) -> bool:
        """The first failure reader that reads ``frame`` adds its events (tagged with the rank): True, else False."""
        for reader in self.failure_readers:
            records = reader.read(frame, line_no)
            if records is not None:
                for event in records:
                    if rank is not None:
                        event.details.setdefault("rank", rank)
                    self.collected.add_event(event)
                formats = self.collected.stats.formats
                formats[reader.name] = formats.get(reader.name, 0) + 1
                return True
        return False

    def _add_records(self, records: list, rank: int | None) -> None:
        if rank is not None and records and any(isinstance(r, Point) for r in records):
            # Every rank prints its own loss: one rank's curve is read, the first that printed one.
            if self.metric_rank is None:
                self.metric_rank = rank
            elif rank != self.metric_rank:
                records = [r for r in records if isinstance(r, LogEvent)]
        for record in records:
            if isinstance(record, LogEvent):
                self.collected.add_event(record)
            elif self.collected.add_point(record):
                self.stride *= 2

    def _traceback_source(self, frame: str) -> bool:
        """True for a line inside a Python traceback that is not its final exception line: source lines such as
        `learn.fit_one_cycle(5, lr_max=1e-3)` are code, never metrics. Failure readers have already seen it."""
        if "Traceback (most recent call last)" in frame:
            self.in_traceback = True
            return True
        if not self.in_traceback:
            return False
        if frame[:1] in (" ", "\t") or _TRACEBACK_LINE.match(frame):
            return True
        self.in_traceback = False  # the exception line ends it
        return False

    def _not_metrics(self, frame: str, line_no: int) -> bool:
        """True for text that is not a metric: an argparse Namespace dump, a line of Python source the log printed
        (a run that logs its own script: `val_loss = 0.0` there is an initial value, not a measurement), and the
        assignments around such a line. A statement keyword starts a stretch of code of CODE_WINDOW lines; each
        further statement or assignment in it extends it."""
        if "Namespace(" in frame:
            return True
        stripped = frame.lstrip()
        if stripped.startswith(_CODE_STARTS) and _CODE_LINE.match(stripped):
            self.code_until = line_no + CODE_WINDOW
            return True
        if line_no <= self.code_until and _ASSIGNMENT.match(stripped):
            self.code_until = line_no + CODE_WINDOW
            return True
        return False

    def _elision(self, frame: str, line_no: int) -> bool:
        """A line that is only an ellipsis ("...", "......"): epochs were cut out there; the curve has a gap."""
        if _ELISION.match(frame):
            self.collected.elisions.append(line_no)
            return True
        return False

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
    def parse_block(self, data: bytes, first_line: int, last: bool = False, lo: int = 0, hi: int | None = None
                    ) -> int:
        """Parse the whole lines in ``data[lo:hi]`` (no copy), numbered from ``first_line``.

        Returns the first line number after them.
        """
        hi = len(data) if hi is None else hi
        stats = self.collected.stats
        if self.stride == 1:
            lines = data[lo:hi].split(b"\n")
            stats.lines += len(lines)
            self._learn_line_length(hi - lo, len(lines))
            for index, raw in enumerate(lines):
                if self.stride == 1 or index % self.stride == 0 or must_read(raw):
                    self._parse_raw(raw, first_line + index)
            stats.sampling_stride = self.stride
            return first_line + len(lines)
        # Sampled: parse the lines at every ``byte_stride`` bytes, every line a must-read word is on (with the
        # lines after an error: the rest of a traceback, torchrun's exit codes), and the tail of the log.
        walked = self._template.decisive_lines(data, lo, hi, self.stride, first_line)
        if walked is not None:
            return self._parse_walked(data, lo, hi, first_line, last, *walked)
        wanted = self._word_search(data, lo, hi)  # the log does not repeat a line pattern here
        byte_stride = max(1, int(self.line_bytes * self.stride))
        wanted += [(offset, 0) for offset in range(lo, hi, byte_stride)]
        if last:
            tail = max(lo, hi - TAIL_BYTES)
            wanted.append((tail, data.count(b"\n", tail, hi) + 1))
        wanted.sort()
        line_no, counted_to, parsed_to = first_line, lo, lo - 1
        for position, extra in wanted:
            start = data.rfind(b"\n", lo, position) + 1 or lo
            if start <= parsed_to and extra == 0:
                continue
            line_no += data.count(b"\n", counted_to, start)
            counted_to = start
            current = line_no
            for _ in range(extra + 1):
                if start >= hi:
                    break
                stop = data.find(b"\n", start, hi)
                stop = hi if stop < 0 else stop
                if start > parsed_to:
                    self._parse_raw(data[start:stop], current)
                    parsed_to = start
                start, current = stop + 1, current + 1
        line_no += data.count(b"\n", counted_to, hi) + 1
        stats.lines += line_no - first_line
        stats.sampling_stride = self.stride
        return line_no

    def _parse_walked(self, data: bytes, lo: int, hi: int, first_line: int, last: bool,
                      entries: list[tuple[int, int, int]], lines: int) -> int:
        """Parse the lines a pattern walk picked: (offset, line index in the block, context lines after)."""
        stats = self.collected.stats
        if last:  # the tail, whole: where runs fail
            tail = data.rfind(b"\n", lo, max(lo, hi - TAIL_BYTES)) + 1 or lo
            after = data.count(b"\n", tail, hi)
            entries.append((tail, lines - 1 - after, after))
        entries.sort()
        parsed: set[int] = set()
        for offset, index, extra in entries:
            start, current = offset, index
            for _ in range(extra + 1):
                if start > hi:
                    break
                stop = data.find(b"\n", start, hi)
                stop = hi if stop < 0 else stop
                if start not in parsed:
                    parsed.add(start)
                    self._parse_raw(data[start:stop], first_line + current)
                start, current = stop + 1, current + 1
        stats.lines += lines
        stats.sampling_stride = self.stride
        return first_line + lines

    def _word_search(self, data: bytes, lo: int, hi: int) -> list[tuple[int, int]]:
        """Every must-read line in data[lo:hi], by one literal search a word over the lower-cased block."""
        wanted: list[tuple[int, int]] = []
        lowered = data[lo:hi].lower()  # one copy of the block; offsets are the same as in data
        for pattern in EVENT_WORDS:
            extra = CONTEXT_AFTER_ERROR if pattern is ERROR_WORD else 0
            wanted += [(match.start() + lo, extra) for match in pattern.finditer(lowered)]
        frequent = max(64, (hi - lo) // max(1, int(self.line_bytes)) // FREQUENT_SHARE)
        for pattern in VALIDATION_WORDS:
            hits = [(match.start() + lo, 0) for match in itertools.islice(pattern.finditer(lowered), frequent + 1)]
            if len(hits) > frequent:  # the word is on most lines: the stride samples them evenly
                self.collected.stats.validation_sampled = True
            else:
                wanted += hits
        return wanted

    def _size_stride(self, head: bytes, size_hint: int) -> None:
        """Size the stride from the file's size now rather than thinning a full series many times. The sample is
        2,000-4,000 ordinary lines, unless the lines always read (must-read ones at their rate in the head, and the
        tail) would push a series past SERIES_CAP: then thinning would throw away about half of what was parsed,
        so the stride starts one step coarser and the series ends as long, parsed once."""
        lines = max(1, head.count(b"\n"))
        self.line_bytes, self.line_bytes_known = len(head) / lines, True
        expected = size_hint / self.line_bytes
        self.stride = max(1, 2 ** int(math.log2(max(1.0, expected / (SERIES_CAP / 2)))))
        if self.stride == 1:
            return
        always = _must_read_lines(head) * expected / lines + TAIL_BYTES / self.line_bytes
        if expected / self.stride + always > SERIES_CAP and always < SERIES_CAP / 2:
            self.stride *= 2

    def _learn_line_length(self, size: int, lines: int) -> None:
        if lines and not self.line_bytes_known:
            self.line_bytes = max(1.0, size / lines)
            self.line_bytes_known = True

    def _parse_raw(self, raw: bytes, line_no: int) -> None:
        stats = self.collected.stats
        if not raw:
            return
        if b"\x00" in raw:
            raw = NUL_RUN.sub(b"", raw)  # the text after a block of zeros is still the log's
            if b"\x00" in raw or not raw:
                stats.skipped_binary_lines += 1
                return
        if len(raw) > MAX_LINE_CHARS:
            stats.truncated_lines += 1
            raw = raw[:MAX_LINE_CHARS]
        text = raw.decode("utf-8", errors="replace")
        if text.count("\ufffd") > max(8, len(text) // 4):
            stats.skipped_binary_lines += 1
            return
        self.parse_line(text, line_no)

    def scan_stream(self, stream: io.BufferedIOBase, size_hint: int | None = None) -> None:
        carry = b""  # a line cut by the block boundary
        line_no = 1
        pending: tuple[bytes, int, int] | None = None  # one block of look-ahead, so the last is known as such
        first = True
        # A long log's blocks are read into two buffers used in turn (one is the look-ahead): a fresh 4 MiB object
        # per block would be fresh pages for the kernel to fault in and zero, ~40 ms over 100 MB. A log that ends
        # within its head never allocates them.
        buffers: list[bytearray] | None = None
        reuse = hasattr(stream, "readinto")
        while True:
            if first or not reuse or (buffers is None and len(block) < HEAD_BYTES):
                block = stream.read(HEAD_BYTES if first else BLOCK_BYTES)
            else:
                if buffers is None:
                    buffers = [bytearray(BLOCK_BYTES), bytearray(BLOCK_BYTES)]
                block = buffers[0] if pending is None or pending[0] is not buffers[0] else buffers[1]
                got = stream.readinto(block)
                if got is None:  # a non-blocking stream with nothing yet: read as before
                    reuse = False
                    continue
                if got < len(block):  # the end of the log (or a short read): a copy, the buffers keep their size
                    block = block[:got]
            if not block:
                break
            if first and size_hint and size_hint > 2 * HEAD_BYTES:
                self._size_stride(block, size_hint)
            first = False
            head_end = block.find(b"\n")
            if head_end < 0:  # no line ends in this block
                if len(carry) <= MAX_LINE_CHARS:  # one enormous line: keep its start only, never copy the rest
                    carry = (carry + block)[:MAX_LINE_CHARS + 1]
                continue
            if pending is not None:
                line_no = self.parse_block(pending[0], line_no, lo=pending[1], hi=pending[2])
                pending = None
            if carry:  # finish the cut line on its own; the block itself is never copied
                line_no = self.parse_block(carry + block[:head_end], line_no)
                start = head_end + 1
            else:
                start = 0
            cut = block.rfind(b"\n")
            if cut >= start:
                pending = (block, start, cut)
                carry = block[cut + 1:]
            else:  # the only line end was the one that finished the cut line
                carry = block[start:]
        if pending is not None:
            line_no = self.parse_block(pending[0], line_no, last=not carry, lo=pending[1], hi=pending[2])
        if carry:
            self.parse_block(carry, line_no, last=True)


_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _line_starts(cycle: bytes) -> list[int]:
    """Offsets of the line starts within one repeat of a pattern (which ends with a newline)."""
    starts, offset = [], 0
    for line in cycle.split(b"\n")[:-1]:
        starts.append(offset)
        offset += len(line) + 1
    return starts
TEMPLATE_SAMPLE_BYTES = 64 << 10
TEMPLATE_MAX_CYCLE = 8  # lines in the repeating pattern (a loss line, an lr line, a timer line, ...)
TEMPLATE_ODD_SHARE = 0.05  # more of a block than this off the pattern: search every word instead
# The longest run compared at once. Runs double up to it (1, 2, 4, ... repeats); a longer stretch is several of
# them. Each learned pattern keeps its runs (~2x this): at 1 MiB the runs of the ~10 patterns a 100 MB log learns
# (numbers change width) were ~15 MB of fresh pages, ~4,000 page faults; memcmp of 64 KiB is already ~2 us.
TEMPLATE_MAX_RUN = 64 << 10


class LineTemplate:
    """The log's repeating line patterns, digits ignored: lines that repeat one exactly cannot hold a must-read
    word.

    A training log repeats a few print statements millions of times; only the numbers change. With digits
    mapped to 0 (same length, so offsets stay), runs of a pattern are skipped by comparing whole runs at once
    (memcmp); every line off the patterns is checked word by word. A pattern that itself holds a must-read
    word is never used, so the skip is exact: a skipped line has the pattern's words and no others. When the
    numbers change width (step 9999 -> 10000) a new pattern is learned where the old one stops.
    """

    KEEP = 4  # patterns remembered, most recent first

    def __init__(self):
        self.patterns: list[tuple[bytes, list[bytes]]] = []

    @staticmethod
    def learn(sample: bytes) -> tuple[bytes, list[bytes]] | None:
        """The shortest cycle of lines (1..TEMPLATE_MAX_CYCLE) that 90% of the sample repeats, if any."""
        lines = sample.split(b"\n")[:-1]
        for cycle in range(1, TEMPLATE_MAX_CYCLE + 1):
            checks = len(lines) - cycle
            if checks < 4 * cycle:
                break
            if sum(lines[i] == lines[i + cycle] for i in range(checks)) < 0.9 * checks:
                continue
            start = next((i for i in range(checks) if all(lines[i + j] == lines[i + j + cycle]
                                                         for j in range(cycle))), None)
            if start is None:
                continue
            pattern = b"\n".join(lines[start:start + cycle]) + b"\n"
            if must_read(pattern):
                return None
            return pattern, [pattern * (1 << k) for k in range(22) if len(pattern) << k <= max(len(pattern), TEMPLATE_MAX_RUN)]
        return None

    def _remember(self, learned) -> None:
        self.patterns = [learned] + [p for p in self.patterns if p[0] != learned[0]][:self.KEEP - 1]

    def decisive_lines(self, data: bytes, lo: int, hi: int, stride: int, first_line: int
                       ) -> tuple[list[tuple[int, int, int]], int] | None:
        """The lines of data[lo:hi] to parse, as (offset, line index in the block, context lines after): every
        must-read line and every line whose number is a multiple of ``stride``; and the block's line count.
        None when no pattern fits the block."""
        # The whole buffer when the range is most of it: no slice copy, and offsets stay those of data.
        whole = hi - lo > len(data) // 2
        normalised = data.translate(_DIGITS_TO_ZERO) if whole else data[lo:hi].translate(_DIGITS_TO_ZERO)
        base = 0 if whole else lo
        if not self.patterns:
            learned = self.learn(normalised[lo - base:lo - base + TEMPLATE_SAMPLE_BYTES])
            if learned is None:
                return None
            self._remember(learned)
        return self._walk(data, lo - base, hi - base, base, normalised, stride, first_line)

    @staticmethod
    def _next_aligned(normalised: bytes, cycle: bytes, position: int, end: int) -> int:
        found = normalised.find(cycle, position, end)
        while found > 0 and normalised[found - 1] != 10:  # 10 = "\n": a repeat counts only at a line start
            found = normalised.find(cycle, found + 1, end)
        return found

    def _walk(self, data: bytes, start: int, size: int, base: int, normalised: bytes, stride: int,
              first_line: int) -> tuple[list[tuple[int, int, int]], int] | None:
        """Walk normalised[start:size] (data[base + start:base + size]) along the patterns, counting lines."""
        budget = TEMPLATE_ODD_SHARE * (size - start)
        wanted: list[tuple[int, int, int]] = []
        cycle, runs = self.patterns[0]
        starts = _line_starts(cycle)
        absent: set[bytes] = set()  # patterns that do not occur again in this block
        position, level, index, run_last, reached, resume = start, 0, 0, False, 0, 0
        while position < size:
            if normalised.startswith(runs[level], position, size):
                run_last = True
                count = len(runs[level]) // len(cycle) * len(starts)
                # The sampled lines inside the run: their offsets follow from the pattern's line lengths.
                sample = -(first_line + index) % stride
                while sample < count:
                    repeat, line = divmod(sample, len(starts))
                    wanted.append((base + position + repeat * len(cycle) + starts[line], index + sample, 0))
                    sample += stride
                position += len(runs[level])
                index += count
                reached = max(reached, level)
                level = min(level + 1, len(runs) - 1)
                continue
            if level:
                level -= 1
                continue
            resume = max(0, reached - 2)  # the next run is likely as long as this one: start the doubling near it
            reached = 0
            switched = next((p for p in self.patterns if normalised.startswith(p[0], position, size)), None)
            if switched is not None:
                cycle, runs = switched
                starts = _line_starts(cycle)
                continue
            following = self._pattern_resumes(normalised, cycle, position, size, absent)
            budget -= following - position
            if budget < 0:
                return None
            level = min(resume, len(runs) - 1)
            run_last = False
            index = _read_word_by_word(data, base + position, base + following, following < size, index,
                                       first_line, stride, wanted)
            position = following
        if run_last:
            index += 1  # a run ended the block with its "\n": the empty last line split() would count
        return wanted, index

    def _pattern_resumes(self, normalised: bytes, cycle: bytes, position: int, size: int, absent: set) -> int:
        """Off every pattern at ``position``: where the next aligned repeat of a pattern starts (``size`` when none
        does), learning the pattern of a new stretch; the lines before it are checked word by word. The current
        pattern usually resumes a line or two later: look near first, then further."""
        following = size
        near = min(size, position + TEMPLATE_SAMPLE_BYTES)
        found = self._next_aligned(normalised, cycle, position, near)
        if found >= 0:
            following = found
        else:
            for pattern, _ in self.patterns:
                found = self._next_aligned(normalised, pattern, position, near)
                if found >= 0:
                    following = min(following, found)
        if following == size:
            for pattern, _ in self.patterns:
                if pattern in absent:
                    continue
                found = self._next_aligned(normalised, pattern, near, size)
                if found < 0:
                    absent.add(pattern)  # it does not occur again in this block
                else:
                    following = min(following, found)
        if following - position > TEMPLATE_SAMPLE_BYTES // 4:  # a new stretch: learn its pattern
            begin = normalised.find(b"\n", position, size) + 1 or size
            learned = self.learn(normalised[begin:min(size, begin + TEMPLATE_SAMPLE_BYTES)])
            if learned is not None:
                self._remember(learned)
                found = self._next_aligned(normalised, learned[0], position, size)
                if found >= 0:
                    following = min(following, found)
        return following


def _read_word_by_word(data: bytes, offset: int, end: int, more_follows: bool, index: int, first_line: int,
                       stride: int, wanted: list) -> int:
    """The lines of data[offset:end], off every pattern, into ``wanted``: each one with a must-read word (and the
    context after an error), and every ``stride``-th; returns the line index after them."""
    pieces = data[offset:end].split(b"\n")
    if more_follows:
        pieces.pop()  # the region ends with its last line's "\n": no line after it
    for raw in pieces:
        if raw and must_read(raw):
            extra = CONTEXT_AFTER_ERROR if ERROR_WORD.search(raw.lower()) else 0
            wanted.append((offset, index, extra))
        elif (first_line + index) % stride == 0:
            wanted.append((offset, index, 0))
        offset += len(raw) + 1
        index += 1
    return index


def _must_read_lines(block: bytes) -> int:
    """How many lines of ``block`` hold a must-read word (validation words only when they are not on most lines,
    as in Scanner._word_search)."""
    lowered = block.lower()
    lines = max(1, lowered.count(b"\n"))
    starts: set[int] = set()
    for pattern in MUST_READ:
        found = {lowered.rfind(b"\n", 0, m.start()) for m in pattern.finditer(lowered)}
        if pattern in VALIDATION_WORDS and len(found) > lines // FREQUENT_SHARE:
            continue
        starts |= found
    return len(starts)


def must_read(raw: bytes) -> bool:
    """True for a line that sampling must never skip (see EVENT_WORDS and VALIDATION_WORDS)."""
    lowered = raw.lower()
    return any(p.search(lowered) for p in MUST_READ)


def sniff_file_format(head: bytes, name: str) -> str | None:
    """Whole-file formats: HF trainer_state.json, CSV metrics with a header."""
    stripped = head.lstrip()
    if stripped.startswith(b"{") and b'"log_history"' in head:
        return "trainer-state"
    first = head.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip().lower()
    fields = [f.strip() for f in first.split(csv_delimiter(first))]
    # A metrics header: identifier-like column names, one of them a loss; a step/epoch column, or none (one row per
    # log in order: Keras's history saved with pandas, `pd.DataFrame(history.history).to_csv()`, whose unnamed index
    # column leaves the first name empty).
    named = fields[1:] if fields and fields[0] == "" else fields
    if (len(named) >= 2 and all(re.fullmatch(r"[\w./\-]+", f) for f in named)
            and any("loss" in f for f in named)):
        return "csv"
    return None


def scan_file_format(kind: str, stream: io.BufferedIOBase, collected: Collected) -> None:
    stats = collected.stats
    if kind == "trainer-state":
        import json

        try:
            obj = json.load(io.TextIOWrapper(stream, encoding="utf-8", errors="replace"))
        except ValueError as exc:
            stats.unreadable = json_failure(exc)
            stats.notes.append(f"trainer_state.json is not valid JSON ({exc}); nothing read from it")
            return
        points = trainer_state_points(obj if isinstance(obj, dict) else {})
        history = obj.get("log_history") if isinstance(obj, dict) else None
        stats.lines = len(history) if isinstance(history, list) else 0
        if not isinstance(history, list):
            stats.unreadable = "it is JSON, but its log_history is not the Trainer's list of logged steps"
            return
    else:
        import csv

        text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
        first = text.readline()
        delimiter = csv_delimiter(first)
        reader = csv.reader(itertools.chain([first], text), delimiter=delimiter)
        header = next(reader, [])
        rows = ((number, [csv_value(v, delimiter) for v in row]) for number, row in enumerate(reader, start=2))
        points = csv_points(header, rows)
        stats.lines = reader.line_num
        _history_rows_are_epochs(points)
    stats.parsed_lines = len({p.line for p in points})
    stats.formats[kind] = stats.parsed_lines
    for point in points:
        collected.add_point(point)


def _history_rows_are_epochs(points: list[Point]) -> None:
    """A CSV with no step or epoch column whose every row holds a validation loss is a Keras history dump
    (``pd.DataFrame(history.history).to_csv()``): validation runs once an epoch, so each row is an epoch. Read as
    steps, a 40-epoch run is judged by the per-step rules, which need 50+ points."""
    if not points or any(p.step is not None or p.epoch is not None or p.cadence for p in points):
        return
    rows = {p.line for p in points}
    if {p.line for p in points if p.name == VAL_LOSS} != rows:
        return
    for point in points:
        point.cadence = "epoch"


def json_failure(exc: ValueError) -> str:
    """Why a file that looks like a trainer_state.json did not parse: cut off (it ends inside a string or with a
    bracket still open, as when copied mid-write or pasted in part) or malformed, with where parsing stopped."""
    import json  # here, as in scan_file_format: diagnose's start-up counts

    state = "it looks like JSON, an HF Trainer trainer_state.json, but "
    if not isinstance(exc, json.JSONDecodeError):
        return state + "it does not parse; pass the complete file, or the training log text instead"
    where = f"parsing stopped at line {exc.lineno}, column {exc.colno}: {exc.msg.removesuffix(' starting at').lower()}"
    outside = re.sub(r'"(?:[^"\\]|\\.)*"', "", exc.doc)  # the strings' contents hold no structure
    still_open = outside.count("{") + outside.count("[") - outside.count("}") - outside.count("]")
    if still_open > 0 or outside.count('"') % 2:
        return (state + f"it is cut off before its end ({where}; {max(still_open, 1)} bracket(s) never closed); "
                "pass the complete file (the trainer rewrites it whole at each checkpoint save), or the training "
                "log text instead")
    return state + f"it is malformed ({where}); pass the complete, unedited file, or the training log text instead"


BINARY_NUL_SHARE = 0.1  # a head with this share of NUL bytes ...
BINARY_LINE_SHARE = 0.5  # ... or with more than this share of its lines undecodable is a binary file, not a log


NUL_RUN = re.compile(rb"\0{64,}")  # a block of zeros: where a restarted or truncated writer's file had its old end
TEXT_AROUND_ZEROS = 256  # bytes of text around the zero blocks that make the file a log with a gap, not a binary


def looks_binary(head: bytes) -> bool:
    """True when the first bytes of a file are not text (a core dump, a checkpoint, a sparse or zeroed file). A log
    with stray invalid UTF-8 on some lines is text: lines are judged one by one, as _parse_raw does. A text log with
    a block of zeros in it (a writer restarted on an open file, `nohup` after a truncate) is text: the blocks are
    judged apart from the text around them."""
    if not head:
        return False
    around = NUL_RUN.sub(b"", head)
    if len(around) >= TEXT_AROUND_ZEROS and len(around) < len(head):
        head = around
    if head.count(b"\0") > BINARY_NUL_SHARE * len(head):
        return True
    lines = head.split(b"\n")
    if len(lines) > 1:
        lines.pop()  # the last may be cut mid-character
    bad = 0
    for raw in lines:
        text = raw.decode("utf-8", errors="replace")
        bad += text.count("\ufffd") > max(8, len(text) // 4)
    return bad > BINARY_LINE_SHARE * len(lines)


CARRIAGE_RETURNS = re.compile(rb"\r+")


class CarriageReturnLines(io.RawIOBase):
    """A file whose lines end in carriage returns only ("\r", or "\r\r": Keras's CSVLogger writing through a
    Windows text-mode file, a classic Mac editor) read with "\n" line ends, as every reader expects. Streamed: a
    long file is not held whole."""

    def __init__(self, stream: io.BufferedIOBase) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(len(buffer))
        if not data:
            return 0
        data = CARRIAGE_RETURNS.sub(b"\n", data)  # "\r\r" is one line end, as an editor shows it
        buffer[:len(data)] = data
        return len(data)


def read_source(stream: io.BufferedIOBase, name: str, forced_format: str | None = None) -> Collected:
    """Read one log (file or stdin) into series and events. A file whose head is binary is not read further: it
    ends at once, whatever its size, with one binary 'line' counted (the CLI says it looks binary)."""
    stream = text_stream(stream)
    head = stream.peek(65536)[:65536] if hasattr(stream, "peek") else b""
    if b"\r" in head and b"\n" not in head:
        stream = io.BufferedReader(CarriageReturnLines(stream))
        head = stream.peek(65536)[:65536]
    whole = whole_file_kind(name, head) if forced_format in (None, *WHOLE_FILE_KINDS) else None
    if whole or forced_format in WHOLE_FILE_KINDS:
        return read_whole_source(stream, name, whole or forced_format)
    if looks_binary(head):
        collected = Collected()
        collected.stats.lines = collected.stats.skipped_binary_lines = 1
        collected.stats.notes.append(f"the first {len(head)} bytes are not text: not read further")
        collected.stats.sources.append(name)
        return collected
    kind = forced_format if forced_format in ("trainer-state", "csv") else (
        None if forced_format else sniff_file_format(head, name))
    if kind:
        collected = Collected()
        scan_file_format(kind, stream, collected)
    else:
        scanner = Scanner(forced_format)
        try:
            size = os.fstat(stream.fileno()).st_size if hasattr(stream, "fileno") else None
        except (OSError, io.UnsupportedOperation):
            size = None
        scanner.scan_stream(stream, size)
        collected = scanner.collected
        _last_session(collected)
    collected.stats.sources.append(name)
    finish_collected(collected)
    return collected


SESSION_MIN_EPOCHS = 3  # a last session this many epochs long or longer is judged on its own


def _last_session(collected: Collected) -> None:
    """A text log that holds several training sessions appended (`>>` to one file, a script run again, a log
    handler in append mode): the epoch counter starts again at its first value. Each session is its own run; joined,
    a new session's start reads as the curve jumping back up (jitter, overfitting). The last one, SESSION_MIN_EPOCHS+
    epochs long, is judged, as for a per-epoch CSV (files._last_session); the events of every session stay. A lone
    number read as an epoch before (a config line's 'epochs': 10) counts no session."""
    points = sorted((p for series in collected.series.values() for p in series
                     if p.epoch is not None and math.isfinite(p.epoch) and float(p.epoch).is_integer()),
                    key=lambda p: p.line)  # whole epochs: a fraction (progress within one) counts no session
    if not points:
        return
    restarts, previous, session = [], None, set()  # session: the epochs the current session counted
    for point in points:
        if previous is not None and point.epoch < previous and point.epoch <= min(session) and len(session) >= 2:
            restarts.append(point.line)  # a counter that counted 2+ epochs, back to its first value or below
            session = set()
        session.add(point.epoch)
        previous = point.epoch
    if not restarts:
        return
    start = restarts[-1]
    if len({p.epoch for p in points if p.line >= start}) < SESSION_MIN_EPOCHS:
        return
    for name in list(collected.series):
        kept = [p for p in collected.series[name] if p.line >= start]
        if kept:
            collected.series[name] = kept
        else:
            del collected.series[name]
    collected.non_finite = {k: p for k, p in collected.non_finite.items() if p.line >= start}
    collected.elisions = [line for line in collected.elisions if line >= start]
    collected.stats.notes.append(f"the epoch counter starts again {len(restarts)} time(s) (the log holds "
                                 f"{len(restarts) + 1} training sessions, appended): the last one, from line {start}, "
                                 "is judged")


def finish_collected(collected: Collected) -> None:
    """What every source goes through once read, from one file or from a run folder's files."""
    _bare_numbers(collected)
    _drop_unwritten_losses(collected)
    _losses_from_perplexity(collected)
    separate_series(collected)
    collected.stats.series_lengths = {k: len(v) for k, v in collected.series.items()}


WHOLE_FILE_KINDS = ("tensorboard", "metrics-jsonl", "csv", "keras-history")


def read_whole_source(stream: io.BufferedIOBase, name: str, kind: str) -> Collected:
    """A file in a whole-file format (files.py): an event file, a CSV or JSON-lines metrics file."""
    from .files import read_whole_file

    read = read_whole_file(name, kind, stream.read())
    collected = collected_from_points(read.points, kind, read.records, read.notes)
    collected.stats.unreadable = read.problem and f"{read.problem}"
    collected.stats.sources.append(name)
    finish_collected(collected)
    return collected


def collected_from_points(points: list[Point], kind: str, records: int, notes: list[str]) -> Collected:
    """A Collected holding a whole file's points (read by files.py), as read_source makes for a text log."""
    collected = Collected()
    stats = collected.stats
    stats.lines = records
    stats.parsed_lines = len({p.line for p in points})
    if points:
        stats.formats[kind] = stats.parsed_lines
    stats.notes += notes
    for point in points:
        collected.add_point(point)
    return collected


def epoch_series_name(name: str) -> str:
    """Where a series' per-epoch points go when the same log also prints it per step: the training loss's epoch
    means are ``train_loss_epoch`` (the detectors' per-epoch training curve), any other ``NAME_epoch``."""
    return "train_loss_epoch" if name == TRAIN_LOSS else f"{name}_epoch"


def _is_step_point(point: Point) -> bool:
    return point.cadence == "step" or (point.cadence is None and point.step is not None)


def _rename(collected: Collected, points: list[Point], name: str) -> None:
    for point in points:
        point.name = name
        if not math.isfinite(point.value) and name not in collected.non_finite:
            collected.non_finite[name] = point


def separate_series(collected: Collected) -> None:
    """One curve per metric, stage and cadence. A log that prints a series both per step ("step 40 loss 2.31") and
    per epoch ("Epoch 1: train_loss=2.25 val_loss=...") keeps the epoch means apart from the step curve: merged,
    each epoch mean is an outlier among the step values (jitter that is not there). A test series stays apart from
    validation, and stands in for it only when the log prints no validation series (said in a note)."""
    stats = collected.stats
    for name in list(collected.series):
        points = collected.series[name]
        epochs = [p for p in points if p.cadence == "epoch"]
        if not epochs or not any(_is_step_point(p) for p in points):
            continue
        steps = [p for p in points if p.cadence != "epoch"]
        if name.startswith("val_") and len(epochs) > len(steps):
            # A validation curve is its evaluations: where the per-epoch ones outnumber those logged at a step (a
            # Lightning run's 5 epoch values beside 1 logged at a step), the epochs are the curve the rules judge.
            collected.series[name] = epochs
            _rename(collected, steps, f"{name}_step")
            collected.series[f"{name}_step"] = steps
            stats.notes.append(f"{name}: the {len(steps)} value(s) logged at a step are kept apart from the "
                               f"{len(epochs)} per-epoch one(s) (as {name}_step)")
            continue
        target = epoch_series_name(name)
        collected.series[name] = [p for p in points if p.cadence != "epoch"]
        first_bad = collected.non_finite.get(name)
        if first_bad is not None and first_bad.cadence == "epoch":
            del collected.non_finite[name]
            _rename(collected, collected.series[name], name)
        _rename(collected, epochs, target)
        merged = collected.series.get(target, []) + epochs
        collected.series[target] = sorted(merged, key=lambda p: p.line)
        stats.notes.append(f"{name}: the {len(epochs)} per-epoch value(s) are kept apart from the "
                           f"{len(collected.series[name])} per-step one(s) (as {target})")
    for measure in ("loss", "acc"):
        val, test = f"val_{measure}", f"test_{measure}"
        if test in collected.series and not collected.series.get(val):
            points = collected.series.pop(test)
            first_bad = collected.non_finite.pop(test, None)
            _rename(collected, points, val)
            if first_bad is not None:
                collected.non_finite[val] = first_bad
            collected.series[val] = points
            stats.notes.append(f"the log prints no validation {measure}: its test {measure} is read as validation")


UNWRITTEN_MIN_POINTS = 3


def _drop_unwritten_losses(collected: Collected) -> None:
    """A validation or test loss that is exactly 0, or nan/inf (beside a training loss that never is), at every one
    of its UNWRITTEN_MIN_POINTS+ points, the first included, was not computed (YOLOv9's results.csv writes its
    validation losses as 0 when it skips them, an Ultralytics run without validation losses writes nan): no model
    starts at a loss of 0, and a model whose training loss stays finite has not diverged. It is not read as a curve (said in a note), so the rules that need a validation
    loss fall back on the accuracy or mAP."""
    for name in [n for n in collected.series if n in (VAL_LOSS, "test_loss")]:
        points = collected.series[name]
        if len(points) < UNWRITTEN_MIN_POINTS:
            continue
        if all(p.value == 0 for p in points):
            what = "0"
        elif not any(math.isfinite(p.value) for p in points) and not any(
                name in collected.non_finite for name in (TRAIN_LOSS, "train_loss_epoch")):
            what = "nan or inf"  # beside a finite training loss: one that diverged makes validation nan too
        else:
            continue
        del collected.series[name]
        collected.non_finite.pop(name, None)
        collected.stats.notes.append(f"{name} is {what} at all {len(points)} points (not computed): not read as a "
                                     "curve")


def _losses_from_perplexity(collected: Collected) -> None:
    """A stage that logs its perplexity and no loss: the loss is its natural log (perplexity = exp(cross-entropy)),
    so every loss rule reads it (said in a note); a stage that logs both keeps its loss and the perplexity aside."""
    for stage, loss in (("train", TRAIN_LOSS), ("val", VAL_LOSS), ("test", "test_loss")):
        points = collected.series.get(f"{stage}_ppl")
        if not points or collected.series.get(loss) or (stage == "train" and collected.series.get("train_loss_epoch")):
            continue
        del collected.series[f"{stage}_ppl"]
        for point in points:
            point.name = loss
            point.value = math.log(point.value) if point.value > 0 else (point.value if math.isnan(point.value)
                                                                            else math.nan)
            if not math.isfinite(point.value) and loss not in collected.non_finite:
                collected.non_finite[loss] = point
        collected.non_finite.pop(f"{stage}_ppl", None)
        collected.series[loss] = points
        collected.stats.notes.append(f"the log prints a {stage} perplexity and no {stage} loss: its natural logarithm "
                                     "(the cross-entropy loss it comes from) is read as the loss")


BARE_MIN_POINTS = 4
BARE_SHARE = 0.5


def _counts_up(values: list[float]) -> bool:
    """Whole numbers, strictly increasing: a step (or epoch) counter."""
    return all(v.is_integer() for v in values) and all(b > a for a, b in zip(values, values[1:]))


def _bare_pairs(pairs: list[Point]) -> list[Point]:
    """Lines of two numbers: a loss and its step ("0.52 100", np.savetxt of both), whichever column counts up is the
    step. None of them when neither column does (a table of two metrics, not a loss curve)."""
    firsts, seconds = [p.value for p in pairs], [p.step for p in pairs]
    if all(s is not None and math.isfinite(s) for s in seconds) and _counts_up(seconds):
        return [Point(p.line, "bare_number", p.value, step=p.step) for p in pairs]
    if all(math.isfinite(f) for f in firsts) and _counts_up(firsts):
        return [Point(p.line, "bare_number", p.step, step=p.value) for p in pairs]
    return []


def _bare_numbers(collected: Collected) -> None:
    """Lines that are one number each, or a number and its step: a pasted loss list when they are most of what was
    read and the log names no training loss (said in a note); otherwise stray numbers, dropped."""
    pairs = collected.series.pop("bare_pair", [])
    collected.non_finite.pop("bare_pair", None)
    bare = collected.series.pop("bare_number", [])
    stepped = len(pairs) > len(bare)
    if stepped:
        bare = _bare_pairs(pairs)
    collected.non_finite.pop("bare_number", None)
    stats = collected.stats
    named = any(collected.series.get(k) for k in ("train_loss", "train_loss_epoch"))
    if named or len(bare) < BARE_MIN_POINTS or len(bare) < BARE_SHARE * max(1, stats.parsed_lines):
        if "bare-numbers" in stats.formats:
            del stats.formats["bare-numbers"]
        return
    for point in bare:
        point.name = "train_loss"
        if not math.isfinite(point.value) and "train_loss" not in collected.non_finite:
            collected.non_finite["train_loss"] = point
    collected.series["train_loss"] = bare
    what = "number(s), each with its step," if stepped else "number(s), one a line,"
    stats.notes.append(f"assumed the {len(bare)} bare {what} are a training-loss series (the log names no metric)")



__all__ = ["Collected", "Scanner", "known_formats", "read_source"]
