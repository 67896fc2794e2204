"""Line readers for training logs, one per format, plus whole-file readers (JSON state, CSV metrics).

A line reader's ``read(text, line_no)`` returns None when the line is not its
format, else the records it holds (possibly none). The scanner keeps them in an
ordered list and tries the last one that matched first (toolong's pattern).
Failure readers (OOM, torchrun) always run: failures look the same in any log.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import lru_cache

from ..oom import OOM_MARKERS, is_oom_message
from .names import LOSS_WORDS, POSITION_NAMES, SPLITS, classify, position_name, words
from .records import TRAIN_LOSS, VAL_LOSS, LogEvent, Point

NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?))"
SIZE = r"[\d.]+\s*(?:[KMGT]?i?B|bytes)"
# "[rank3]: ", "[default0]:", horovod/mpirun "[1,0]<stdout>:", a launcher's "[80746] [rank0]:" before them
RANK_PREFIX = re.compile(r"^\s*(?:\[\d+\]\s*)?(?:(?:\[(?:rank|default)\d+\]|\[\d+,\d+\]<std(?:out|err)>):\s*)+")

class _lazy:
    """A pattern compiled on first use: the failure readers' long patterns run only on lines a substring test
    picked, and compiling them all costs every diagnose a few ms of start-up."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, *args):
        self._args = args
        self._compiled = None

    def __getattr__(self, name):
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


def to_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class LineReader:
    name = "base"
    description = ""

    def read(self, text: str, line: int) -> list | None:  # pragma: no cover - interface
        raise NotImplementedError

    def fresh(self) -> "LineReader":
        """The reader to use for a new log: itself, or a new instance for readers that keep state."""
        return self


# ---------------------------------------------------------------- failures

def parse_size(text: str | None) -> int | None:
    if not text:
        return None
    m = re.match(r"([\d.]+)\s*([KMGT]?)(i?)B", text.strip())
    if not m:
        bare = re.match(r"([\d.]+)\s*bytes", text.strip())
        return int(float(bare.group(1))) if bare else None
    base = 1024 if m.group(3) or m.group(2) else 1000
    return int(float(m.group(1)) * base ** " KMGT".index(m.group(2) or " "))


class OOMReader(LineReader):
    name = "pytorch-oom"
    description = "PyTorch out-of-memory errors, CUDA (every generation) and CPU"
    LEGACY = _lazy(
        rf"CUDA out of memory\. Tried to allocate (?P<tried>{SIZE}) \(GPU (?P<gpu>\d+); (?P<total>{SIZE}) total "
        rf"capacity; (?P<allocated>{SIZE}) already allocated; (?P<free>{SIZE}) free;"
        rf"(?: (?P<limit>{SIZE}) allowed;)? (?P<reserved>{SIZE}) (?:reserved in total by PyTorch|cached)\)?")
    MODERN = _lazy(
        rf"(?:CUDA|HIP|XPU|MPS)? ?out of memory\. Tried to allocate (?P<tried>{SIZE})\. GPU (?P<gpu>\d+) has a total "
        rf"capaci?ty of (?P<total>{SIZE}) of which (?P<free>{SIZE}) is free\.(?:.*?this process has "
        rf"(?P<in_use>{SIZE}) memory in use\.)?(?:.*?(?P<allocated>{SIZE}) is allocated by PyTorch,"
        rf" and (?P<reserved_unallocated>{SIZE}) is reserved by PyTorch but unallocated)?")
    CPU = _lazy(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate "
                     r"(?P<tried_bytes>\d+) bytes")
    OTHER = _lazy(r"CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|torch\.(?:cuda\.)?OutOfMemoryError"
                       r"|CUDA out of memory|RuntimeError: \[enforce fail at alloc_cpu\.cpp")
    # TensorFlow: "ResourceExhaustedError: OOM when allocating tensor with shape[...] ... on /device:GPU:0"
    TENSORFLOW = _lazy(r"OOM when allocating tensor|ResourceExhaustedError")
    GPU_NUMBER = _lazy(r"\(GPU (\d+);|GPU (\d+) has a total|device:GPU:(\d+)|/gpu:(\d+)|cuda:(\d+)", re.I)
    RECOVERING = _lazy(r"attempting to recover from OOM|OOM: Ran out of memory", re.I)
    # After an OOM the run may go on: fairseq skips the batch; HF Trainer's auto_find_batch_size retries smaller.
    SKIPPED = re.compile(r"^\s*Skipping batch|skipping batch", re.I)
    BATCH_LOWERED = re.compile(r"Currently training with a batch size of:?\s*(?P<batch>\d+)")
    # XLA (PyTorch/XLA, JAX, TF on TPU): "RESOURCE_EXHAUSTED: Attempting to reserve 6.48G at the bottom of memory.
    # That was not possible." / "Error allocating device buffer: Attempting to allocate 129.50M".
    XLA = _lazy(r"RESOURCE_EXHAUSTED.*(?:Attempting to (?:reserve|allocate)|allocating device buffer)"
                     r"(?:\s+(?P<tried>[\d.]+\s*[KMGT])i?B?\b)?", re.I)

    def read(self, text, line):
        lowered = text.lower()  # the same test as is_oom_message, as plain substring checks: this runs on every line
        # Every marker holds one of these words (tests check it): three substring tests turn most lines away.
        if not ("memory" in lowered or "alloc" in lowered or "primitive" in lowered) or not any(
                marker in lowered for marker in OOM_MARKERS):
            if "RESOURCE_EXHAUSTED" in text:
                m = self.XLA.search(text)
                if m:
                    details = {"device": "tpu" if "tpu" in lowered or "hbm" in lowered else "xla", "framework": "xla"}
                    if m.group("tried"):
                        size = parse_size(m.group("tried").replace(" ", "") + "iB")
                        if size:
                            details["tried_bytes"] = size
                    return [LogEvent(line, "oom", text.strip()[:400], details)]
            if "OOM" in text and (self.TENSORFLOW.search(text) or self.RECOVERING.search(text)):
                details = {"device": "gpu"} if "OOM when" in text or "Resource" in text else {"device": "cuda"}
                if self.TENSORFLOW.search(text):
                    details["framework"] = "tensorflow"
                    details["device"] = "cpu" if "/cpu:" in lowered and "gpu" not in lowered else "gpu"
                return [LogEvent(line, "oom", text.strip()[:400], self._device(text, details))]
            if "atch" in text:
                if self.SKIPPED.search(text):
                    return [LogEvent(line, "oom-skip", text.strip()[:300], {})]
                m = self.BATCH_LOWERED.search(text)
                if m:
                    return [LogEvent(line, "batch-lowered", text.strip()[:300], {"batch": int(m.group("batch"))})]
            return None
        if "failed to allocate" in lowered and "CUDA_ERROR_OUT_OF_MEMORY" in text:
            # TensorFlow's CUDA driver wrapper, at info level: the allocator asked for a chunk, was refused and
            # retries smaller; no tensor failed. An OOM only when the run ends there (detect_oom).
            return [LogEvent(line, "oom-retry", text.strip()[:400], self._device(text, {"device": "gpu",
                                                                                  "framework": "tensorflow"}))]
        return self._read_oom(text, line, lowered)

    def _device(self, text: str, details: dict) -> dict:
        """Name the device where the line does: GPU number, Apple MPS, ROCm/HIP."""
        m = self.GPU_NUMBER.search(text)
        if m and "gpu" not in details:
            details["gpu"] = next(g for g in m.groups() if g is not None)
        if "MPS backend out of memory" in text or "MPS out of memory" in text:
            details["device"] = "mps"
        elif "HIP out of memory" in text or "PYTORCH_HIP_ALLOC_CONF" in text:
            details["framework"] = "rocm"
        return details

    def _read_oom(self, text, line, lowered):
        for pattern, where in ((self.LEGACY, "cuda"), (self.MODERN, "cuda"), (self.CPU, "cpu")):
            m = pattern.search(text)
            if m:
                details = {k: v for k, v in m.groupdict().items() if v}
                parsed = {f"{k}_bytes": parse_size(v) for k, v in details.items() if not k.endswith("bytes")
                          and k != "gpu"}
                details.update({k: v for k, v in parsed.items() if v is not None})
                if "tried_bytes" in details:
                    details["tried_bytes"] = int(details["tried_bytes"])
                details["device"] = where
                return [LogEvent(line, "oom", text.strip()[:400], self._device(text, details))]
        m = self.OTHER.search(text)
        if m:
            details = {"device": "cpu" if "cpu" in m.group(0) else "cuda"}
            return [LogEvent(line, "oom", text.strip()[:400], self._device(text, details))]
        if is_oom_message(text):  # the project's one OOM classifier: every marker, any case, with or without Error
            device = "cpu" if ("cpu" in lowered or "primitive" in lowered) else "gpu"
            return [LogEvent(line, "oom", text.strip()[:400], self._device(text, {"device": device}))]
        return None


# Crashes that are not out-of-memory errors, by class: the first thing to do differs for each.
CRASH_CLASSES = (
    ("collective-timeout", _lazy(
        # A log viewer may cut the line mid-word ("Watchdog caught collective operati"): the prefix is enough.
        r"Watchdog caught collective|collective operation timeout|Timed out waiting \d+ ?ms"
        r"|NCCL (?:communicator was aborted|timeout)|ProcessGroupNCCL.*[Tt]imeout|Socket Timeout"
        r"|DistBackendError.*(?:[Tt]imed? ?out|[Tt]imeout)|wait timeout after \d+ ?ms", re.I)),
    ("illegal-memory-access", _lazy(
        r"illegal memory access|cudaErrorIllegalAddress|misaligned address|an illegal instruction was encountered",
        re.I)),
    ("shape-mismatch", _lazy(
        r"size mismatch|shapes cannot be multiplied|must match the size of tensor|Expected input batch_size"
        r"|mat1 and mat2|is invalid for input of size|The size of tensor a|Sizes of tensors must match", re.I)),
)
_RANK_IN_TEXT = _lazy(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
_EXCEPTION = _lazy(r"^(?:[\w.]+\.)?(?P<name>\w*(?:Error|Exception)):(?: |$)")


def crash_class(text: str) -> str | None:
    for name, pattern in CRASH_CLASSES:
        if pattern.search(text):
            return name
    return None


class TorchrunReader(LineReader):
    name = "torchrun"
    description = ("failures that are not OOM: torchrun exit codes and signals, NCCL/gloo collective timeouts, "
                   "illegal memory access, shape mismatches, Python exceptions")
    FAILED = _lazy(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<rank>\d+) \(pid: (?P<pid>\d+)\)")
    EXITCODE = _lazy(r"^\s*exitcode\s*:\s*(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")
    SIGNAL = _lazy(r"Signal (?P<sig>\d+) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)")
    # "Killed" alone (a shell's notice), bash job control "line 6:  3305 Killed   cmd ...", the kernel's line
    KILLED = _lazy(r"^(?:.*: )?Killed\s*$|\b\d+\s+Killed\s{2,}\S|Out of memory: Killed process (?P<pid>\d+)")
    # A native crash as the shell, glog (Caffe, TF) or the C runtime prints it: "Segmentation fault (core dumped)",
    # "Aborted (core dumped)", "*** SIGSEGV (@0x0) received by PID 7 ...", "Bus error", "Floating point exception".
    # The rarer names only as the shell prints them: alone on the line, or bash's "line 1: 4242 Aborted   cmd".
    NATIVE = _lazy(r"(?P<segv>Segmentation fault)|\*\*\* (?P<sig>SIG[A-Z]+) \(@|(?:^|\d\s+)(?P<what>Bus error"
                   r"|Floating point exception|Illegal instruction|Aborted)(?: \(core dumped\))?(?:\s*$|\s{2,})"
                   r"|\bcore dumped\b")
    # A process's non-zero exit status: "Process finished with exit code 139", "Command exited with non-zero status
    # 1", "returned non-zero exit status 1", "exited with code 2", "exit status 134".
    EXIT_STATUS = _lazy(r"\b(?:exit(?:ed)?|returned|finished)(?: with)?(?: non-zero)?(?: exit)? (?:status|code)"
                        r"[ :=]*(?P<code>-?\d+)", re.I)
    NATIVE_SIGNALS = {"Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS", "Floating point exception": "SIGFPE",
                      "Illegal instruction": "SIGILL", "Aborted": "SIGABRT"}
    EXIT_SIGNALS = {137: "SIGKILL", 139: "SIGSEGV", 134: "SIGABRT", 135: "SIGBUS", 136: "SIGFPE", 132: "SIGILL"}
    WORDS = ("exitcode", "Signal", "Killed", "Error", "Exception", "imeout", "imed out", "llegal", "isaligned",
             "Watchdog",
             "ismatch", "must match", "multiplied", "invalid for input", "fault", "dumped", "xit", "SIG", "Bus error",
             "Aborted", "status")

    def read(self, text, line):
        for word in self.WORDS:  # a plain loop: a generator in any() costs twice as much, on every line read
            if word in text:
                break
        else:
            return None
        kind = crash_class(text)
        if kind:
            details = {"class": kind}
            rank = _RANK_IN_TEXT.search(text)  # NCCL: "[Rank 3] Watchdog caught ..."
            if rank:
                details["rank"] = int(rank.group(1))
            return [LogEvent(line, "crash", text.strip()[:300], details)]
        m = self.FAILED.search(text) or self.EXITCODE.search(text)
        if m:
            code = int(m.group("code"))
            details = {"exitcode": code, "pid": int(m.group("pid"))}
            if "rank" in m.groupdict() and m.group("rank"):
                details["local_rank"] = int(m.group("rank"))
            if code == -9:
                return [LogEvent(line, "killed", text.strip()[:300], {**details, "signal": "SIGKILL"})]
            if code < 0:
                return [LogEvent(line, "signal", text.strip()[:300], details)]
            return [LogEvent(line, "crash", text.strip()[:300], details)] if code != 0 else []
        m = self.SIGNAL.search(text)
        if m:
            kind = "killed" if m.group("sig") == "9" else "signal"
            return [LogEvent(line, kind, text.strip()[:300], {"signal": m.group("name"), "pid": int(m.group("pid"))})]
        m = self.KILLED.search(text)
        if m:
            return [LogEvent(line, "killed", text.strip()[:300], {"signal": "SIGKILL", "oom_killer": True})]
        native = self._native_crash(text, line)
        if native is not None:
            return native
        m = _EXCEPTION.search(text.strip().strip("*`_ "))  # a pasted line may carry markdown emphasis
        if "ChildFailedError" in text or m:
            details = {"class": "exception", "exception": m.group("name")} if m else {"class": "exception"}
            return [LogEvent(line, "crash", text.strip()[:300], details)]
        return self._exit_status(text, line)


    def _native_crash(self, text: str, line: int) -> list[LogEvent] | None:
        """A native crash line as a crash event; None for any other line."""
        quote = text.strip()[:300]
        m = self.NATIVE.search(text)
        if m:
            signal = m.group("sig") or self.NATIVE_SIGNALS.get(m.group("segv") or m.group("what") or "", "SIGSEGV")
            if signal == "SIGKILL":
                return [LogEvent(line, "killed", quote, {"signal": signal})]
            return [LogEvent(line, "signal", quote, {"class": "native-crash", "signal": signal})]
        return None

    def _exit_status(self, text: str, line: int) -> list[LogEvent] | None:
        """A non-zero exit status as a crash event (a status above 128 as its signal); None for any other line."""
        quote = text.strip()[:300]
        m = self.EXIT_STATUS.search(text)
        if m:
            code = int(m.group("code"))
            if code == 0:
                return []
            signal = self.EXIT_SIGNALS.get(code)
            if signal == "SIGKILL":
                return [LogEvent(line, "killed", quote, {"exitcode": code, "signal": signal})]
            details = {"class": "native-crash" if signal else "exit-status", "exitcode": code}
            if signal:
                details["signal"] = signal
            return [LogEvent(line, "signal" if signal else "crash", quote, details)]
        return None


# ---------------------------------------------------------------- metric formats

def _best_points(candidates: Iterable[tuple[str, float, int]], line: int, step=None, epoch=None,
                 redraw: bool = False, cadence: str | None = None) -> list[Point]:
    """One point a series a line: among several names for the same series, the lowest rank wins."""
    best: dict[str, tuple[float, int]] = {}
    for series, value, rank in candidates:
        if series not in best or rank < best[series][1]:
            best[series] = (value, rank)
        elif rank == best[series][1] and not math.isfinite(value) and math.isfinite(best[series][0]):
            # Equally ranked names (components, with no whole loss printed): the first stands in, but a non-finite
            # one makes what they add up to non-finite, and a nan where a loss is logged is divergence evidence.
            best[series] = (value, rank)
    return [Point(line, series, value, step, epoch, redraw, cadence) for series, (value, _) in best.items()]


def _points_from_pairs(pairs: Iterable[tuple[str, str]], line: int, step=None, epoch=None, stage=None,
                       redraw: bool = False) -> list[Point]:
    candidates = []
    for key, raw in pairs:
        value = to_float(str(raw).strip().strip("'\""))
        if value is None:
            continue
        kind = position_name(key)
        if kind == "step":
            step = value
        elif kind == "epoch":
            epoch = value
        else:
            found = classify(key, stage)
            if found:
                candidates.append((found[0], value, found[1]))
    return _best_points(candidates, line, step, epoch, redraw)


class HFDictReader(LineReader):
    name = "hf-trainer"
    description = "HF Transformers Trainer dict lines: {'loss': ..., 'grad_norm': ..., 'epoch': ...} (epoch only: line order)"
    # transformers >= 5 prints the values as strings: {'loss': '9.277', ...}
    PAIR = re.compile(rf"'(?P<key>[\w/.\-]+)':\s*'?(?P<value>{NUMBER})'?")

    def read(self, text, line):
        start = text.find("{'")
        if start < 0 or "}" not in text[start:]:
            return None
        pairs = self.PAIR.findall(text[start:])
        if not pairs:
            return None
        keys = {k for k, _ in pairs}
        if "train_runtime" in keys:  # the end-of-training summary: its train_loss is an average, not a point
            return []
        # The Trainer prints no step and rounds the epoch: points are ordered by line, never merged by epoch.
        return _points_from_pairs(pairs, line)


class DeepSpeedReader(LineReader):
    name = "deepspeed"
    description = "DeepSpeed step/lr lines and timers (SamplesPerSec, MemAllocated)"
    STEP = re.compile(rf"\[Rank (?P<rank>\d+)\] step=(?P<step>\d+), skipped=(?P<skipped>\d+), lr=\[(?P<lr>{NUMBER})")
    TIMER = re.compile(rf"SamplesPerSec=(?P<sps>{NUMBER})|MemAllocated=(?P<mem>[\d.]+\s*[KMGT]?B)")

    def read(self, text, line):
        m = self.STEP.search(text)
        if m:
            step = float(m.group("step"))
            return [Point(line, "lr", float(m.group("lr")), step), Point(line, "skipped", float(m.group("skipped")),
                                                                           step)]
        if self.TIMER.search(text):
            return []
        return None


class OverflowReader(LineReader):
    """fp16 overflow and loss-scale lines: events, read on every line whatever metric reader matched last."""

    name = "fp16-overflow"
    description = "fp16 overflow / loss-scale messages (DeepSpeed OVERFLOW!, apex, fairseq), scale at its minimum"
    # DeepSpeed: "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, reducing to 32";
    # apex: "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0";
    # fairseq: "NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 64.0"
    OVERFLOW = _lazy(r"OVERFLOW!|[Gg]radient overflow|overflow detected", re.I)
    ATTEMPTED = _lazy(r"[Aa]ttempted loss scale:\s*(?P<attempted>\d+(?:\.\d+)?(?:e[+-]?\d+)?)")
    REDUCED = _lazy(r"(?:reducing to|reducing loss scale to|setting loss scale to:?)\s*"
                         r"(?P<reduced>\d+(?:\.\d+)?(?:e[+-]?\d+)?)")

    DEEPSPEED_REDUCING = re.compile(r"Reducing dynamic loss scale from \S+ to (?P<reduced>\d+(?:\.\d+)?)")

    @staticmethod
    def _framework(text: str) -> str | None:
        """Who wrote the overflow message: their loss-scale floors differ (detectors.LOSS_SCALE_FLOORS)."""
        if "setting loss scale to" in text or "fairseq" in text:
            return "fairseq"
        if "Attempted loss scale" in text and ("[Rank" in text or "Overflow detected" in text or "reducing to" in text):
            return "deepspeed"
        if "loss scaler" in text:  # apex amp: "Gradient overflow.  Skipping step, loss scaler 0 reducing ..."
            return "apex"
        return None

    def read(self, text, line):
        if "verflow" in text or "VERFLOW" in text:
            if self.OVERFLOW.search(text):
                details = {"framework": self._framework(text)}
                for pattern in (self.ATTEMPTED, self.REDUCED):
                    found = pattern.search(text)
                    if found:
                        details.update({k: float(v) for k, v in found.groupdict().items()})
                return [LogEvent(line, "overflow", text.strip()[:300], details)]
        # DeepSpeed's fused optimizer: "Reducing dynamic loss scale" (the substring test first: this runs on every line)
        m = self.DEEPSPEED_REDUCING.search(text) if "Reducing dynamic loss scale" in text else None
        if m:
            return [LogEvent(line, "overflow", text.strip()[:300],
                             {"framework": "deepspeed", "reduced": float(m.group("reduced"))})]
        if "loss scale already at minimum" in text:
            return [LogEvent(line, "loss-scale-floor", text.strip()[:300], {})]
        return None


_KV = re.compile(rf"(?P<key>[A-Za-z_][\w/.\-]*)\s*[=:]\s*(?P<value>{NUMBER})(?![\w.])")


class LightningBarReader(LineReader):
    name = "lightning"
    description = "PyTorch Lightning tqdm and rich progress bars (TTY or not), train_loss_step / val_loss"
    EPOCH = re.compile(r"^\s*(?:Epoch|Validation|Training)\s+(?P<epoch>\d+)(?:/\d+)?\b")
    STEP = re.compile(r"(?P<step>\d+)/(?P<total>\d+)")
    BAR = ("%|", "it/s", "s/it", "v_num", "━")

    def read(self, text, line):
        m = self.EPOCH.search(text)
        if not m or not any(mark in text for mark in self.BAR):
            return None
        epoch = float(m.group("epoch"))
        rest = text[m.end():]
        step_match = self.STEP.search(rest)
        step = float(step_match.group("step")) if step_match else None
        pairs = [(k, v) for k, v in _KV.findall(rest) if k != "v_num"]
        # Bars redraw the same values frame after frame: these points collapse when step and value repeat.
        points = _points_from_pairs(pairs, line, epoch=epoch, redraw=True)
        for p in points:
            # Step-level values move with the bar: order them by a fractional epoch. Epoch-level values
            # (val_loss, *_epoch) are redrawn on every frame: keep the whole epoch so repeats collapse.
            if p.name == TRAIN_LOSS and step is not None and float(step_match.group("total")) > 0:
                p.step = None
                p.epoch = epoch + step / float(step_match.group("total"))
        return points


# Prefixes a line may carry before its message: quote markers, timestamps, log levels, rank tags, logger names.
_PREFIX = re.compile(r"""^(?:[\s|:\-]*(?:
      >+
    | \[?\d{4}[-/]\d{2}[-/]\d{2}[ T_]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?
    | \[?\d{2}/\d{2}(?:/\d{2,4})?\s+\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?
    | \[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?
    | [IWEF]\d{4}\s+\d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+\S+\]
    | \[(?:rank|default)?\d+\]:?
    | \[\d+,\d+\]<std(?:out|err)>:
    | DLL\b
    | \[?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|NOTICE)\]?(?::[\w.]*:)?
    | [\w.]+(?=\s+-\s+(?:INFO|WARNING|WARN|ERROR|DEBUG)\b)
    | \[?[\w/.]+\.py:\d+(?::[\w<>]+)?\]?
    | [\w.<>]+:[\w<>]+:\d+(?=\s+-\s)
    ))+[\s|:\-]*""", re.X)
_STAGE = re.compile(r"(?:epoch\s*\(\s*)?(?P<stage>train(?:ing|_inner)?|val(?:id(?:ation)?|i)?|eval(?:uation)?"
                    r"|test(?:ing)?|dev)\b", re.I)
_DLL_STEP = re.compile(r"\(\s*(?P<a>\d+)\s*(?:,\s*(?P<b>\d+)\s*)?(?:,\s*(?P<c>\d+)\s*)?,?\s*\)")
# A number ends at anything but a word character or a further ".digit" (a version "1.2.3" is not one); a sentence's
# final period may follow it ("Loss is 1.2645824.").
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?!\w|\.\w)|[-+]?(?i:nan|inf(?:inity)?)(?![A-Za-z])"
_PAIR = re.compile(rf"(?<![\w./@\-])(?P<name>[A-Za-z][\w./@\-]*(?: [A-Za-z][\w./@\-]*){{0,3}}?)\s*(?:[:=]\s*|\s+)[\[(]?\s*"
                   rf"(?P<value>{_NUM})(?:\s*/\s*(?P<total>\d+)(?![\w.]))?")
_ZERO_BASED_EPOCH = re.compile(r"^Epoch:\s*\[\d+\]")
_POSITION = re.compile(r"(?<![\w./])(?P<pos>\d+)\s*/\s*(?P<total>\d+)(?![\w./])")


# loguru-style bracketed keys: "[Epoch] 3 [Loss] nan" reads as "Epoch: 3 Loss: nan" (a key in brackets followed by
# a number; "Epoch [3/20]" and "[INFO]" are not).
_BRACKET_KEY = re.compile(r"\[([A-Za-z][\w ./-]{0,40})\]\s*:?\s*(?=[-+]?(?:\d|\.\d|nan\b|inf))", re.I)


# A bracketed group of loss fields after a label: "[Losses: x 0.1, y 0.2, conf 0.75, cls 0.3, total 0.9]"
# (PyTorch-YOLOv3), "[Train Losses: box 0.1, total 0.5]". The label must name a loss (a loss word among its words,
# checked in _loss_groups); the pairs inside are read by _PAIR as on any line, their names qualified by the label.
_LOSS_GROUP = re.compile(r"\[(?P<label>[A-Za-z][\w ./-]{0,40}?)\s*:\s*(?P<items>[^\[\]]*)\]")


def _loss_groups(text: str) -> tuple[tuple[int, int, int, int], ...]:
    """(label start, label end, items start, items end) of each loss group in ``text``. Letters decide (a digit
    never makes or breaks a loss word), so this holds for every line of one shape."""
    groups = []
    for m in _LOSS_GROUP.finditer(text):
        if any(w in LOSS_WORDS or w.endswith("loss") for w in words(m.group("label"))):
            groups.append(m.span("label") + m.span("items"))
    return tuple(groups)


def _bracket_key_colon(m: re.Match) -> str:
    """_BRACKET_KEY's replacement, r"\1: ", as a function: a string template costs a Python-level call each line."""
    return m.group(1) + ": "


@lru_cache(maxsize=4096)  # a log prints a handful of names a line, millions of times
def _name_meaning(name: str, stage: str | None) -> tuple[str | None, tuple[str, int] | None]:
    """A printed name as the text reader takes it: ('step' | 'epoch', None) for a counter, ('position', None) for a
    name that counts only within an epoch ("Batch 323/1313", read as a step when it gives its total), else (None,
    what classify makes of it)."""
    if name[-3:].lower() == " is":  # "Loss is 1.26", "Current learning rate is 0.046"
        name = name[:-3]
    kind = position_name(name)
    if not kind and " ".join(words(name)) in POSITION_NAMES:
        kind = "position"
    return (kind, None) if kind else (None, classify(name, stage))


# Per-line regex work is cached by the line's shape: the ASCII text with every digit mapped to 0. _PREFIX, _PAIR and
# _LOSS_GROUP (and _NUM, _BRACKET_KEY inside them) treat all digits alike (classes only, no digit literal: a test
# checks), so a line's match spans are those of its shape; the values are then cut from the line itself. A training
# log prints a handful of shapes millions of times: one dict lookup replaces a backtracking search (~35k instructions
# a line).
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
SHAPE_CACHE_MAX = 4096
_prefix_ends: dict[bytes, int] = {}
# shape -> (_PAIR's name, value and total spans a pair, the line's loss groups: _loss_groups)
_pair_spans: dict[bytes, tuple[list[tuple[int, int, int, int, int, int]], tuple[tuple[int, int, int, int], ...]]] = {}


def _shape(text: str) -> bytes | None:
    """The line with its digits mapped to 0, or None for a non-ASCII line (read without the cache)."""
    return text.encode("ascii").translate(_DIGITS_TO_ZERO) if text.isascii() else None


def _prefix_end(text: str) -> int:
    """Where _PREFIX ends in ``text``, -1 when it does not match."""
    shape = _shape(text)
    if shape is None:
        m = _PREFIX.match(text)
        return m.end() if m else -1
    end = _prefix_ends.get(shape)
    if end is None:
        if len(_prefix_ends) >= SHAPE_CACHE_MAX:
            _prefix_ends.clear()
        m = _PREFIX.match(shape.decode("ascii"))
        end = _prefix_ends[shape] = m.end() if m else -1
    return end


def _spans(body: str) -> tuple[list[tuple[int, int, int, int, int, int]], tuple[tuple[int, int, int, int], ...]]:
    """_PAIR's spans in ``body`` (name, value, total; (-1, -1) for no total) and its loss groups, cached by shape."""
    shape = _shape(body)
    if shape is None:
        return ([m.span(1) + m.span(2) + m.span(3) for m in _PAIR.finditer(body)],
                _loss_groups(body) if "[" in body else ())
    entry = _pair_spans.get(shape)
    if entry is None:
        if len(_pair_spans) >= SHAPE_CACHE_MAX:
            _pair_spans.clear()
        text = shape.decode("ascii")
        entry = _pair_spans[shape] = ([m.span(1) + m.span(2) + m.span(3) for m in _PAIR.finditer(text)],
                                      _loss_groups(text) if "[" in text else ())
    return entry


def _pairs(body: str) -> list[tuple[str, str, str]]:
    """_PAIR.findall(body): (name, value, total) a pair, "" for no total."""
    return [(body[a:b], body[c:d], body[e:f] if e >= 0 else "") for a, b, c, d, e, f in _spans(body)[0]]


def _named_pairs(body: str) -> list[tuple[str, str, str]]:
    """_pairs(body), with a loss group's keys named by its label: "[Losses: x nan, total nan]" gives ("Losses/x",
    "nan", ""), ("Losses/total", "nan", ""). classify then reads every key of the group as a loss field.

    Which key of a group is THE loss: the one that names the whole loss, by classify's ranking as for any line. A
    plain loss word ("Losses/loss", rank 0) or a total word ("Losses/total", "sum", "overall", rank 1) beats an
    average (rank 2), which beats every other key, a component (rank 3: "Losses/x", "Losses/cls"). The whole is what
    the optimizer minimises (YOLOv3 prints total = x + y + w + h + conf + cls) and a nan in any component reaches
    it; a component that is nan beside a finite whole is a term that is only logged, not what is trained. With no
    whole printed, the components are the loss: the first stands in, and a non-finite one wins (_best_points), as
    their sum would be non-finite. Keys that are counters ("epoch", "step") keep their own meaning."""
    spans, groups = _spans(body)
    pairs = [(body[a:b], body[c:d], body[e:f] if e >= 0 else "") for a, b, c, d, e, f in spans]
    if groups:
        for index, span in enumerate(spans):
            for label_start, label_end, start, end in groups:
                name = pairs[index][0]
                if start <= span[0] < end and position_name(name) is None:
                    qualified = f"{body[label_start:label_end]}/{name}".replace(" ", "_")
                    pairs[index] = (qualified,) + pairs[index][1:]
    return _counter_then_value(pairs) if len(pairs) > 1 else pairs


_PLACE_WORDS = {"at", "for", "of", "after", "in"}
_LINK_WORDS = {"is", "was", "are", "were", "equals"}


def _counter_then_value(pairs: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Prose that names a metric at a counter, then its value: "The cross entropy loss at epoch 3 is 60.94" reads
    as ("cross entropy loss at epoch", "3"), ("is", "60.94"): the number after the counter word is the counter's
    (epoch 3), the one after the linking word ("is", "was") the metric's. Read as written, the epoch number was the
    loss (0, 1, 2, ...)."""
    out = list(pairs)
    for index in range(len(out) - 1):
        nxt = out[index + 1]
        if nxt[0].strip().lower() not in _LINK_WORDS:  # the cheap test first: this runs on every line read
            continue
        name, value, total = out[index]
        tokens = words(name)
        if len(tokens) >= 3 and tokens[-2] in _PLACE_WORDS and position_name(tokens[-1]):
            metric = name[:name.lower().rindex(tokens[-2])].strip()
            out[index] = (tokens[-1], value, total)
            out[index + 1] = (metric, nxt[1], nxt[2])
    return out


def strip_prefix(text: str) -> str:
    end = _prefix_end(text)
    return text[end:] if end >= 0 else text.strip()


def line_stage(body: str) -> str | None:
    """What a line reports when it says so first: fairseq 'valid | ...', timm 'Test: ...', 'Test set: ...'."""
    m = _STAGE.match(body)
    if not m:
        return None
    return SPLITS.get(m.group("stage").lower().replace("_inner", ""), None)


def _free_position(body: str, dll_span: tuple[int, int] | None) -> tuple[float, float] | None:
    """The first "pos/total" of a line outside its named pairs (and DLLogger's step tuple): a progress position."""
    consumed = [m.span() for m in _PAIR.finditer(body) if to_float(m.group("value")) is not None]
    if dll_span:
        consumed.append(dll_span)
    for m in _POSITION.finditer(body):
        if not any(a <= m.start() < b for a, b in consumed):
            return float(m.group("pos")), float(m.group("total"))
    return None


_CAFFE_OUTPUT = ("Train net output #", "Test net output #")
_LOSS_SERIES = (TRAIN_LOSS, VAL_LOSS, "train_loss_epoch", "test_loss")


def _caffe_output(candidates: list[tuple[str, float, int]]) -> list[tuple[str, float, int]]:
    """Caffe prints each output of its net on a line of its own ("Train net output #2: center_loss = 0.5 (* 0.008 =
    0.004 loss)"): a component alone on its line would read as the loss itself. A net output gives a loss only
    when it names the whole loss (rank 0-1), as "Train net output #0: loss = 6.9" does."""
    return [(series, value, rank) for series, value, rank in candidates if series not in _LOSS_SERIES or rank <= 1]


class TextMetricsReader(LineReader):
    """Any text line that names its metrics: 'name: value', 'name=value', 'name value', several a line."""

    name = "plain"
    description = ("metrics named in text, any case or separator, any order, several a line, behind timestamps, "
                   "log levels, rank tags or quote markers: 'Epoch [3/20] Step [100/600] Loss: 0.28', "
                   "'iter 3010: loss nan', 'Training Loss: 0.17  Validation Loss: 0.21', 'step=10 loss=0.5', "
                   "'[Epoch 0/30, Batch 323/1313] [Losses: x 0.1, ..., total 0.9]' (a loss group: its total), "
                   "Megatron/fairseq/timm/Keras/DLLogger lines")

    def read(self, text, line):  # noqa: C901 -- complexity debt, a list of independent cases; split when next changed
        body = strip_prefix(text)
        if not body or body.startswith("PARAMETER"):  # DLLogger run parameters, not metrics ...
            if body and "loss_scale" in body:  # ... but the loss scale is logged as one, every step
                m = _KV.search(body[body.index("loss_scale"):])
                value = to_float(m.group("value")) if m else None
                return [Point(line, "loss_scale", value)] if value is not None else []
            return None if not body else []
        if "[" in body:
            body = _BRACKET_KEY.sub(_bracket_key_colon, body)
        stage = line_stage(body)
        candidates, steps = [], []
        per_batch: dict[str, tuple[int, bool]] = {}  # series -> (rank, named per batch) of its best name on the line
        step = epoch = epoch_total = dll_span = None
        if body[0] == "(":  # DLLogger's step tuple: (epoch, iteration) or (epoch,)
            m = _DLL_STEP.match(body)
            if m:
                numbers = [float(g) for g in m.groups() if g is not None]
                epoch, step = numbers[0], (numbers[-1] if len(numbers) > 1 else None)
                dll_span = m.span()
        # Tuples, not match objects (this runs on every line read); the spans are needed only by the rare position
        # fallback below, which searches again.
        for name, raw, total in _named_pairs(body):
            try:
                value = float(raw)
            except ValueError:
                continue
            kind, found = _name_meaning(name, stage)
            if kind is not None:
                if kind == "step" or kind == "position" and total:
                    steps.append((value, float(total) if total else None))
                elif kind == "epoch" and epoch is None:
                    epoch, epoch_total = value, total or None  # "" when the line gives no total
                continue
            if not found:
                continue
            series, rank = found
            if total:  # "Accuracy: 9890/10000"
                if not series.endswith("acc"):
                    continue
                value = value / max(1.0, float(total))
            candidates.append((series, value, rank))
            if rank < per_batch.get(series, (99, False))[0]:
                per_batch[series] = (rank, _per_batch_name(name))
        if body.startswith(_CAFFE_OUTPUT):
            candidates = _caffe_output(candidates)
        if not candidates:
            return None
        position, step, epoch = _line_place(body, steps, step, epoch, epoch_total, dll_span)
        candidates = _measured(candidates, position)
        if not candidates:
            return []
        # A line that names an epoch and no place within it reports the epoch ("Epoch 3: train_loss=..."); one with
        # a step or a position reports that step. Kept apart (scan.separate_cadences) when a log prints both.
        cadence = "step" if step is not None or position else ("epoch" if epoch is not None else None)
        if _epoch_summary(position, step, epoch, candidates):
            cadence = "epoch"
        points = _best_points(candidates, line, step, epoch, cadence=cadence)
        if cadence == "epoch":  # "Epoch 3 - Batch loss: 0.41": one batch's loss stamped with its epoch, not the epoch's
            for point in points:
                if per_batch.get(point.name, (0, False))[1]:
                    point.cadence = "step"
        return points


def _measured(candidates: list, position) -> list:
    """The values a line measured: a line at position 0 of N (a progress bar before its first step) that prints a
    nan or inf is the bar's placeholder frame (running averages that start at inf), not a loss: none of its values
    is read (a component beside it would stand in for the total). Lines at any later position are read as they are."""
    if not position or position[0] != 0 or all(math.isfinite(c[1]) for c in candidates):
        return candidates
    return []


def _line_place(body: str, steps, step, epoch, epoch_total, dll_span):
    """(position, step, epoch) of a metrics line: a step counter, or a place within the epoch ("Epoch [3/20] Step
    [100/600]"), which also makes the epoch fractional."""
    position = None
    for value, total in steps:
        if total and epoch is not None:
            position = (value, total)  # "Epoch [3/20] Step [100/600]": a place within the epoch
        elif step is None:
            step = value
    if position is None and step is None:
        position = _free_position(body, dll_span)
    if position and epoch is not None and position[1] > 0:
        # "Epoch: [0]  [ 100/1504]" (torchvision's MetricLogger) counts epochs from 0; "Epoch [3/20]" from 1.
        zero_based = epoch_total is None and _ZERO_BASED_EPOCH.match(body) is not None
        epoch = (epoch - 1 if epoch >= 1 and not zero_based else epoch) + position[0] / position[1]
    return position, step, epoch


def _epoch_summary(position, step, epoch, candidates) -> bool:
    """A line whose only place is a position at its total, with a validation value on it, is the epoch's summary:
    Keras `fit(verbose=2)` prints "21/21 - 1s - loss: X - val_loss: Y - 63ms/epoch" (its "Epoch N/30" on the line
    before), verbose=1 ends each epoch with "21/21 [====] - loss: X - val_loss: Y". Validation runs at the epoch's
    end: the training value beside it is the epoch's mean, not one step's."""
    return (position is not None and step is None and epoch is None and position[1] > 0
            and position[0] == position[1] and any(name.startswith("val_") for name, _, _ in candidates))


PER_BATCH_WORDS = {"batch", "minibatch", "step", "iter", "iteration"}


@lru_cache(maxsize=4096)  # a log repeats a handful of names millions of times
def _per_batch_name(name: str) -> bool:
    """A metric name that says it is one batch's value ("Batch loss", "step_loss", "iter loss")."""
    return bool(PER_BATCH_WORDS & set(words(name)))


class JSONLineReader(LineReader):
    name = "jsonl"
    description = ("JSON lines: {\"step\": 1, \"loss\": 0.5, \"val_loss\": ...}, also behind a log prefix and with "
                   "values as strings (fairseq: '| INFO | train | {\"epoch\": 73, \"train_loss\": \"nan\", ...')")
    PAIR = re.compile(rf'"(?P<key>[\w/.\-]+)":\s*"?(?P<value>{NUMBER})"?(?=\s*[,}}]|\s*$)')

    def read(self, text, line):
        stripped = text.strip()
        if not (stripped.startswith("{") and stripped.endswith("}")) or '"' not in stripped:
            start = text.find('{"')
            if start < 0 or stripped.startswith("#"):
                return None
            # A JSON object behind a prefix, possibly wrapped over lines as pasted: read its "key": value pairs;
            # a line counts when a loss or accuracy is among them (not a printed configuration).
            points = _points_from_pairs(self.PAIR.findall(text[start:]), line)
            return points if any(p.name != "lr" for p in points) else None
        import json  # here: most logs hold no JSON line, and diagnose's start-up counts

        try:
            obj = json.loads(stripped)  # json accepts NaN and Infinity as Python writes them
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        pairs = [(k, str(v)) for k, v in obj.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        pairs += [(k, v) for k, v in obj.items() if isinstance(v, str) and to_float(v) is not None]
        return _points_from_pairs(pairs, line)


_TABLE_NAME = re.compile(r"[A-Za-z][\w./@\-]*(?: \(?[\w./@\-]+\)?)?")
_ROW_STRIP = " *`>|"


def _table_fields(text: str) -> list[str]:
    """A table line's cells: tab-separated, else separated by 2+ spaces, else by single spaces."""
    body = text.strip().strip(_ROW_STRIP).strip()
    if "\t" in body:
        cells = [c.strip().strip("*").strip() for c in body.split("\t")]
    else:
        cells = re.split(r"\s{2,}", body)
        if len(cells) == 1:
            cells = body.split()
    while cells and not cells[-1]:
        cells.pop()
    return cells


class TableReader(LineReader):
    """Tables with a header row: fastai's epoch table, chainer's LogReport, tab- or space-separated summaries.

    Stateful (the header is remembered): the scanner makes a fresh one for every log (``fresh``)."""

    name = "table"
    description = ("tables with a header row, tab- or space-separated: fastai 'epoch train_loss valid_loss accuracy "
                   "time', chainer 'epoch main/loss validation/main/loss ...', 'Epoch<TAB>train/loss<TAB>val/loss'")

    def __init__(self):
        self.columns: list[str] | None = None

    def fresh(self) -> "TableReader":
        return TableReader()

    def read(self, text, line):
        cells = _table_fields(text)
        if len(cells) < 2:
            return None
        numbers = [to_float(c.strip("*")) for c in cells]
        if numbers[0] is None and all(_TABLE_NAME.fullmatch(c) for c in cells):
            classified = [classify(c) for c in cells]
            if any(c and c[0] in (TRAIN_LOSS, "val_loss") for c in classified) and (
                    sum(c is not None or position_name(c_) is not None for c, c_ in zip(classified, cells)) >= 2):
                self.columns = cells
                return []
            return None
        if self.columns is None or numbers[0] is None:
            return None
        if not len(self.columns) - 1 <= len(cells) <= len(self.columns) + 2:
            return None
        pairs = [(name, cell.strip("*")) for name, cell, value in zip(self.columns, cells, numbers) if value is not None]
        if len(pairs) < 2:
            return None
        return _points_from_pairs(pairs, line)


class BareNumberReader(LineReader):
    """A line that is one number and nothing else. Read as the series "bare_number"; read_source keeps it as the
    training loss only when the log is such a list and names no loss (and says that it assumed so)."""

    name = "bare-numbers"
    description = ("a list of numbers, one a line (or a value and its step: '0.52 100'), read as a training-loss "
                   "series when the log names no metric")
    NUMBER_LINE = re.compile(rf"^\s*(?P<value>{_NUM})\s*,?\s*$")
    # Two numbers, one of them a whole step count (which one, the whole file decides: scan._bare_numbers).
    PAIR_LINE = re.compile(rf"^\s*(?P<first>{_NUM})\s*[,\s]\s*(?P<second>{_NUM})\s*$")

    def read(self, text, line):
        m = self.NUMBER_LINE.match(text)
        if m:
            value = to_float(m.group("value"))
            return [Point(line, "bare_number", value)] if value is not None else None
        m = self.PAIR_LINE.match(text)
        if not m:
            return None
        first, second = to_float(m.group("first")), to_float(m.group("second"))
        if first is None or second is None:
            return None
        return [Point(line, "bare_pair", first, step=second)]


class ResultsRowReader(LineReader):
    """YOLO-style results rows with no header: 'epoch/epochs  gpu_mem  box obj cls total  targets img_size  P R mAP
    mAP  val_box val_obj val_cls' (ultralytics yolov3/v5 results.txt, ScaledYOLOv4, yolov7)."""

    name = "yolo-results"
    description = "headerless YOLO results rows: '3/299  7G  0.09 0.15 0 0.24  66 640  P R mAP mAP  vbox vobj vcls'"
    ROW = re.compile(r"^\s*(?P<epoch>\d+)/(?P<epochs>\d+)\s+(?P<mem>[\d.]+[KMGT]?)\s+(?P<rest>(?:\S+\s+){10,13}\S+)\s*$")

    def read(self, text, line):
        m = self.ROW.match(text)
        if not m:
            return None
        numbers = [to_float(v) for v in m.group("rest").split()]
        if any(v is None for v in numbers):
            return None
        epoch = float(m.group("epoch"))
        # box, obj, cls, total | targets, img_size | P, R, mAP@.5, mAP@.5:.95 | val box, obj, cls (sum = val loss)
        points = [Point(line, TRAIN_LOSS, numbers[3], epoch=epoch)]
        if len(numbers) >= 13:
            points.append(Point(line, "val_loss", sum(numbers[-3:]), epoch=epoch))
        return points


class DarknetReader(LineReader):
    """Darknet's (pjreddie, AlexeyAB) console line per iteration: ' 32: 656.247864, 650.1 avg loss, 0.000100 rate,
    22.9 seconds, 320 images'. The batch loss is the training loss at that iteration; the rate is the LR."""

    name = "darknet"
    description = "darknet console lines: ' 32: 656.2478, 650.1 avg loss, 0.0001 rate, 22.9 seconds, 320 images'"
    ROW = re.compile(rf"^\s*(?P<step>\d+):\s*(?P<loss>{NUMBER}),\s*{NUMBER}\s+avg(?: loss)?,\s*(?P<lr>{NUMBER})\s+rate\b")

    def read(self, text, line):
        m = self.ROW.match(text)
        if not m:
            return None
        step = float(m.group("step"))
        return [Point(line, TRAIN_LOSS, float(m.group("loss")), step, cadence="step"),
                Point(line, "lr", float(m.group("lr")), step, cadence="step")]


FAILURE_READERS: list[LineReader] = [OOMReader(), TorchrunReader(), OverflowReader()]
METRIC_READERS: list[LineReader] = [HFDictReader(), DeepSpeedReader(), LightningBarReader(), JSONLineReader(),
                                    ResultsRowReader(), DarknetReader(), TextMetricsReader(), TableReader(), BareNumberReader()]
FORMAT_ALIASES = {"key-value": "plain"}  # the key=value reader of v1 is part of the text reader now
FILE_FORMATS = {
    "trainer-state": "HF Trainer trainer_state.json (log_history)",
    "csv": "CSV metrics with a header: Lightning CSVLogger metrics.csv (sparse rows), Keras CSVLogger, "
           "YOLOv5/Ultralytics results.csv (padded headers), timm summary.csv",
    "tensorboard": "TensorBoard event files (events.out.tfevents.*; needs the tensorboard extra)",
    "metrics-jsonl": "JSON-lines metric files: detectron2 metrics.json, mmengine scalars.json / *.log.json, "
                     "wandb-history.jsonl",
    "keras-history": "a Keras History saved as JSON (json.dump(history.history)), alone or under a 'history' key",
}


def known_formats() -> dict[str, str]:
    formats = {r.name: r.description for r in FAILURE_READERS + METRIC_READERS}
    formats.update(FILE_FORMATS)
    return formats


def trainer_state_points(obj: dict) -> list[Point]:
    points = []
    history = obj.get("log_history")
    if not isinstance(history, list):  # not the Trainer's list of dicts: nothing to read (said as unreadable)
        return points
    for index, entry in enumerate(history):
        if not isinstance(entry, dict) or "train_runtime" in entry:
            continue
        pairs = [(k, str(v)) for k, v in entry.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        points += _points_from_pairs(pairs, index + 1)
    return points


def csv_points(header: list[str], rows: Iterable[tuple[int, list[str]]]) -> list[Point]:
    columns = [h.strip() for h in header]
    points = []
    for line, row in rows:
        pairs = [(k, v) for k, v in zip(columns, row) if v.strip() != ""]
        points += _points_from_pairs(pairs, line)
    return points
