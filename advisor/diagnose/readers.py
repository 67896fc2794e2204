"""Line readers for training logs, one per format, plus whole-file readers (JSON state, CSV metrics).

A line reader's ``read(text, line_no)`` returns None when the line is not its
format, else the records it holds (possibly none). The scanner keeps them in an
ordered list and tries the last one that matched first (toolong's pattern).
Failure readers (OOM, torchrun) always run: failures look the same in any log.
"""

from __future__ import annotations

import json
import re
from typing import Iterable

from .records import TRAIN_LOSS, VAL_LOSS, LogEvent, Point

NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|inf|Inf|-inf)"
SIZE = r"[\d.]+\s*(?:[KMGT]?i?B|bytes)"
RANK_PREFIX = re.compile(r"^\s*(?:\[(?:rank|default)\d+\]:\s*)+")

_TRAIN_NAMES = {
    "loss", "train_loss", "train_loss_step", "train/loss", "training_loss", "train loss", "trn_loss",
    "loss_step", "train/loss_step", "train_loss_batch",
}
_TRAIN_EPOCH_NAMES = {"train_loss_epoch", "train/loss_epoch", "loss_epoch"}
_VAL_NAMES = {
    "val_loss", "eval_loss", "validation_loss", "valid_loss", "val/loss", "eval/loss", "val loss",
    "validation/loss", "val_loss_epoch", "test_loss", "test loss", "dev_loss", "average loss",
}
_LR_NAMES = {"lr", "learning_rate", "learning rate", "lr-sgd", "lr-adam", "lr-adamw"}


def normalise_name(raw: str) -> str | None:
    """Map a metric name as printed to a series name, or None to ignore it."""
    name = raw.strip().strip("'\"").lower()
    if name in _TRAIN_NAMES:
        return TRAIN_LOSS
    if name in _TRAIN_EPOCH_NAMES:
        return "train_loss_epoch"
    if name in _VAL_NAMES or (name.endswith("_loss") and name.startswith(("eval_", "val_", "validation_"))):
        return VAL_LOSS
    if name in _LR_NAMES or name.startswith("lr-"):
        return "lr"
    if name in ("grad_norm", "gradient_norm", "grad-norm"):
        return "grad_norm"
    return None


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
    LEGACY = re.compile(
        rf"CUDA out of memory\. Tried to allocate (?P<tried>{SIZE}) \(GPU (?P<gpu>\d+); (?P<total>{SIZE}) total "
        rf"capacity; (?P<allocated>{SIZE}) already allocated; (?P<free>{SIZE}) free;"
        rf"(?: (?P<limit>{SIZE}) allowed;)? (?P<reserved>{SIZE}) (?:reserved in total by PyTorch|cached)\)?")
    MODERN = re.compile(
        rf"(?:CUDA|HIP|XPU|MPS)? ?out of memory\. Tried to allocate (?P<tried>{SIZE})\. GPU (?P<gpu>\d+) has a total "
        rf"capaci?ty of (?P<total>{SIZE}) of which (?P<free>{SIZE}) is free\.(?:.*?this process has "
        rf"(?P<in_use>{SIZE}) memory in use\.)?(?:.*?(?P<allocated>{SIZE}) is allocated by PyTorch,"
        rf" and (?P<reserved_unallocated>{SIZE}) is reserved by PyTorch but unallocated)?")
    CPU = re.compile(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate "
                     r"(?P<tried_bytes>\d+) bytes")
    OTHER = re.compile(r"CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|torch\.(?:cuda\.)?OutOfMemoryError"
                       r"|CUDA out of memory|RuntimeError: \[enforce fail at alloc_cpu\.cpp")

    def read(self, text, line):
        if "memory" not in text and "ALLOC" not in text and "OutOfMemory" not in text:
            return None  # every message this reader knows has one of these words
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
                return [LogEvent(line, "oom", text.strip()[:400], details)]
        m = self.OTHER.search(text)
        if m:
            return [LogEvent(line, "oom", text.strip()[:400], {"device": "cpu" if "cpu" in m.group(0) else "cuda"})]
        return None


class TorchrunReader(LineReader):
    name = "torchrun"
    description = "torchrun / elastic failures: exit codes, signals, ChildFailedError"
    FAILED = re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<rank>\d+) \(pid: (?P<pid>\d+)\)")
    EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")
    SIGNAL = re.compile(r"Signal (?P<sig>\d+) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)")
    KILLED = re.compile(r"^(?:.*: )?Killed\s*$|Out of memory: Killed process (?P<pid>\d+)")
    WORDS = ("exitcode", "Signal", "Killed", "Error", "Exception")

    def read(self, text, line):
        if not any(word in text for word in self.WORDS):
            return None
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
        if "ChildFailedError" in text or re.search(r"^\w*(?:Error|Exception): ", text.strip()):
            return [LogEvent(line, "crash", text.strip()[:300], {})]
        return None


# ---------------------------------------------------------------- metric formats

_KV = re.compile(rf"(?P<key>[A-Za-z_][\w/.\-]*(?: loss)?)\s*[=:]\s*(?P<value>{NUMBER})(?![\w.])")


def _points_from_pairs(pairs: Iterable[tuple[str, str]], line: int, step=None, epoch=None) -> list[Point]:
    values: dict[str, float] = {}
    for key, raw in pairs:
        k = key.strip().strip("'\"").lower()
        value = to_float(raw)
        if value is None:
            continue
        if k in ("step", "global_step", "iter", "iteration", "it"):
            step = value
        elif k == "epoch":
            epoch = value
        else:
            values[k] = value
    points = []
    for key, value in values.items():
        name = normalise_name(key)
        if name:
            points.append(Point(line, name, value, step, epoch))
    return points


class HFDictReader(LineReader):
    name = "hf-trainer"
    description = "HF Transformers Trainer dict lines: {'loss': ..., 'learning_rate': ..., 'epoch': ...}"
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
        return _points_from_pairs(pairs, line)


class DeepSpeedReader(LineReader):
    name = "deepspeed"
    description = "DeepSpeed step/lr lines, timers (SamplesPerSec, MemAllocated), OVERFLOW / loss-scale lines"
    STEP = re.compile(rf"\[Rank (?P<rank>\d+)\] step=(?P<step>\d+), skipped=(?P<skipped>\d+), lr=\[(?P<lr>{NUMBER})")
    OVERFLOW = re.compile(r"OVERFLOW!.*?Skipping step\.?(?:.*?Attempted loss scale: (?P<attempted>[\d.e+]+), "
                          r"reducing to (?P<reduced>[\d.e+]+))?")
    SCALE = re.compile(r"[Gg]rad(?:ient)? overflow.*?loss scale.*?(?P<scale>[\d.e+]+)|Current loss scale "
                       r"already at minimum")
    TIMER = re.compile(rf"SamplesPerSec=(?P<sps>{NUMBER})|MemAllocated=(?P<mem>[\d.]+\s*[KMGT]?B)")

    def read(self, text, line):
        m = self.STEP.search(text)
        if m:
            step = float(m.group("step"))
            return [Point(line, "lr", float(m.group("lr")), step), Point(line, "skipped", float(m.group("skipped")),
                                                                           step)]
        m = self.OVERFLOW.search(text)
        if m:
            details = {k: float(v) for k, v in m.groupdict().items() if v}
            return [LogEvent(line, "overflow", text.strip()[:300], details)]
        if "Current loss scale already at minimum" in text:
            return [LogEvent(line, "loss-scale-floor", text.strip()[:300], {})]
        if self.TIMER.search(text):
            return []
        return None


class LightningBarReader(LineReader):
    name = "lightning"
    description = "PyTorch Lightning tqdm and rich progress bars (TTY or not), train_loss_step / val_loss"
    EPOCH = re.compile(r"^\s*(?:Epoch|Validation|Training)\s+(?P<epoch>\d+)(?:/\d+)?\b")
    STEP = re.compile(r"(?P<step>\d+)/(?P<total>\d+)")

    def read(self, text, line):
        m = self.EPOCH.search(text)
        if not m:
            return None
        epoch = float(m.group("epoch"))
        rest = text[m.end():]
        step_match = self.STEP.search(rest)
        step = float(step_match.group("step")) if step_match else None
        pairs = [(k, v) for k, v in _KV.findall(rest) if k != "v_num"]
        points = _points_from_pairs(pairs, line, epoch=epoch)
        for p in points:
            # Step-level values move with the bar: order them by a fractional epoch. Epoch-level values
            # (val_loss, *_epoch) are redrawn on every frame: keep the whole epoch so repeats collapse.
            if p.name == TRAIN_LOSS and step is not None and float(step_match.group("total")) > 0:
                p.step = None
                p.epoch = epoch + step / float(step_match.group("total"))
        return points


class PlainReader(LineReader):
    name = "plain"
    description = ("plain loops: 'Epoch [3/20] Step [100/600] Loss: 0.28', 'Train Epoch: 1 [4672/60000 (31%)] "
                   "Loss: 0.12', 'step 3000: train loss 4.03, val loss 4.04', 'iter 10: loss 2.3'")
    BRACKETS = re.compile(rf"Epoch\s*\[?(?P<epoch>\d+)(?:/\d+)?\]?,?\s*(?:Step|Iter|Batch)\s*\[?(?P<step>\d+)"
                          rf"(?:/(?P<total>\d+))?\]?,?\s*(?:Train\s*)?Loss:?\s*(?P<loss>{NUMBER})", re.I)
    MNIST = re.compile(rf"Train Epoch: (?P<epoch>\d+) \[(?P<seen>\d+)/(?P<total>\d+) \(\d+%\)\]\s*Loss: "
                       rf"(?P<loss>{NUMBER})")
    MNIST_TEST = re.compile(rf"(?:Test|Validation) set: Average loss: (?P<loss>{NUMBER})")
    NANOGPT = re.compile(rf"step (?P<step>\d+): train loss (?P<train>{NUMBER}), val loss (?P<val>{NUMBER})")
    ITER = re.compile(rf"^(?:iter|step|it)\s+(?P<step>\d+)\s*[:,]\s*(?:train\s+)?loss\s+(?P<loss>{NUMBER})", re.I)

    def read(self, text, line):
        m = self.NANOGPT.search(text)
        if m:
            step = float(m.group("step"))
            return [Point(line, TRAIN_LOSS, float(m.group("train")), step),
                    Point(line, VAL_LOSS, float(m.group("val")), step)]
        m = self.MNIST.search(text)
        if m:
            epoch = float(m.group("epoch")) - 1 + int(m.group("seen")) / max(1, int(m.group("total")))
            return [Point(line, TRAIN_LOSS, float(m.group("loss")), None, epoch)]
        m = self.MNIST_TEST.search(text)
        if m:
            return [Point(line, VAL_LOSS, float(m.group("loss")))]
        m = self.BRACKETS.search(text)
        if m:
            epoch, step = float(m.group("epoch")), float(m.group("step"))
            if m.group("total"):
                return [Point(line, TRAIN_LOSS, float(m.group("loss")), None,
                              epoch - 1 + step / max(1.0, float(m.group("total"))))]
            return [Point(line, TRAIN_LOSS, float(m.group("loss")), step, epoch)]
        m = self.ITER.search(text.strip())
        if m:
            return [Point(line, TRAIN_LOSS, float(m.group("loss")), float(m.group("step")))]
        return None


class JSONLineReader(LineReader):
    name = "jsonl"
    description = "JSON lines: {\"step\": 1, \"loss\": 0.5, \"val_loss\": ...}"

    def read(self, text, line):
        stripped = text.strip()
        if not (stripped.startswith("{") and stripped.endswith("}")) or '"' not in stripped:
            return None
        try:
            obj = json.loads(stripped)  # json accepts NaN and Infinity as Python writes them
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        pairs = [(k, str(v)) for k, v in obj.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return _points_from_pairs(pairs, line)


class KeyValueReader(LineReader):
    name = "key-value"
    description = "key=value or key: value pairs with a loss-like key (step=10 loss=0.5 val_loss=0.6)"

    def read(self, text, line):
        if "=" not in text and ":" not in text:
            return None
        pairs = _KV.findall(text)
        if not pairs:
            return None
        points = _points_from_pairs(pairs, line)
        return points if any(p.name in (TRAIN_LOSS, VAL_LOSS, "train_loss_epoch") for p in points) else None


FAILURE_READERS: list[LineReader] = [OOMReader(), TorchrunReader()]
METRIC_READERS: list[LineReader] = [HFDictReader(), DeepSpeedReader(), LightningBarReader(), PlainReader(),
                                    JSONLineReader(), KeyValueReader()]
FILE_FORMATS = {
    "trainer-state": "HF Trainer trainer_state.json (log_history)",
    "csv": "CSV metrics with a header, e.g. Lightning CSVLogger metrics.csv (sparse rows)",
}


def known_formats() -> dict[str, str]:
    formats = {r.name: r.description for r in FAILURE_READERS + METRIC_READERS}
    formats.update(FILE_FORMATS)
    return formats


def trainer_state_points(obj: dict) -> list[Point]:
    points = []
    for index, entry in enumerate(obj.get("log_history", [])):
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

