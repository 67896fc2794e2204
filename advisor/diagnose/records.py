"""Records that cross the diagnosis modules: what readers extract and what detectors conclude."""

from __future__ import annotations

TRAIN_LOSS = "train_loss"
VAL_LOSS = "val_loss"

_MISSING = object()


class field:  # named as the dataclasses helper it stands in for
    """A record field's default made fresh for each record (``default_factory``), or kept out of its repr."""

    __slots__ = ("default_factory", "repr")

    def __init__(self, *, default_factory, repr: bool = True):
        self.default_factory, self.repr = default_factory, repr


def dataclass(cls):
    """A plain ``@dataclass`` (init, repr, eq; unhashable) built without the dataclasses module: importing it
    (with inspect, ast, dis, tokenize) was ~8 ms of every `advisor diagnose` start-up. Fields are the class's own
    annotations, in order; defaults are plain values or ``field(default_factory=...)``."""
    names = list(cls.__dict__.get("__annotations__", {}))
    params, body, shown = [], [], []
    scope: dict = {"_MISSING": _MISSING}
    for name in names:
        default = cls.__dict__.get(name, _MISSING)
        if isinstance(default, field):
            scope[f"_make_{name}"] = default.default_factory
            params.append(f"{name}=_MISSING")
            body.append(f"self.{name} = _make_{name}() if {name} is _MISSING else {name}")
            delattr(cls, name)
            if default.repr:
                shown.append(name)
            continue
        if default is _MISSING:
            params.append(name)
        else:
            scope[f"_default_{name}"] = default
            params.append(f"{name}=_default_{name}")
        body.append(f"self.{name} = {name}")
        shown.append(name)
    namespace: dict = {}
    exec(f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"]), scope, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"

    def __repr__(self):
        return f"{type(self).__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in shown) + ")"

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)
        return NotImplemented

    cls.__init__, cls.__repr__, cls.__eq__, cls.__hash__ = init, __repr__, __eq__, None
    cls.__record_fields__ = tuple(names)
    return cls


def asdict(obj):
    """dataclasses.asdict for these records: records, lists, tuples and dicts copied all the way down."""
    names = getattr(type(obj), "__record_fields__", None)
    if names is not None:
        return {n: asdict(getattr(obj, n)) for n in names}
    if isinstance(obj, (list, tuple)):
        return type(obj)(asdict(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((asdict(k), asdict(v)) for k, v in obj.items())
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    import copy

    return copy.deepcopy(obj)


@dataclass
class Point:
    """One metric value read from a log line."""

    line: int
    name: str  # normalised: train_loss, val_loss, lr, grad_norm, ...
    value: float
    step: float | None = None
    epoch: float | None = None
    redraw: bool = False  # from a progress bar that redraws the same values: repeats collapse
    cadence: str | None = None  # "step" | "epoch" where the source says which (a per-epoch row, a per-step line)


@dataclass
class LogEvent:
    """Something that happened: an out-of-memory error, a killed worker, a crash, a skipped step."""

    line: int
    kind: str  # "oom" | "killed" | "signal" | "crash" | "overflow" | "loss-scale-floor"
    text: str
    details: dict = field(default_factory=dict)


@dataclass
class Finding:
    kind: str  # oom | crash | oscillation-jitter | oscillation-periodic | overfitting | slow-convergence | diverged
    #            | not-learning
    severity: str  # "error" | "warning"
    summary: str
    evidence: dict
    actions: list[str]
    secondary_to: str | None = None  # set by the co-finding rules: a weaker finding another one explains
    confidence: str = "high"  # low | medium | high: how much of the curve the finding stands on

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ReadStats:
    """What was read, so a partial diagnosis can say what it skipped."""

    sources: list[str] = field(default_factory=list)
    lines: int = 0
    parsed_lines: int = 0
    skipped_binary_lines: int = 0
    truncated_lines: int = 0
    formats: dict[str, int] = field(default_factory=dict)  # reader name -> lines it read
    sampling_stride: int = 1
    validation_sampled: bool = False  # validation lines too frequent to read all: sampled like training lines
    series_lengths: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unreadable: str = ""  # why nothing was read, when the reader knows (a cut-off JSON file): the CLI says it
    skipped: list[str] = field(default_factory=list)  # a run folder's files not read, each "path: why"
