"""The curves a diagnosis read, one per (metric, stage, cadence), and where each finding starts: what a plot draws.

The detectors work on series named for what they measure (``train_loss``, ``train_loss_epoch``, ``val_loss``,
``test_acc``, ``lr``, ...; scan.separate_series keeps stages and cadences apart). Here each name is read back as
its key, stage and cadence, so a picture never draws two of them as one line.
"""

from __future__ import annotations

import math

from .records import TRAIN_LOSS, Finding, Point

STAGES = {"train": "train", "val": "val", "test": "test"}
# Series that belong to training whatever their name says: the optimizer's state.
TRAINING_KEYS = {"lr": "lr", "grad_norm": "grad_norm", "loss_scale": "loss_scale"}


def series_key(name: str) -> tuple[str, str, str | None]:
    """(metric, stage, cadence the name fixes or None) for a series name: 'train_loss_epoch' is ('loss', 'train',
    'epoch'); 'val_acc' ('acc', 'val', None); 'lr' ('lr', 'train', None)."""
    cadence = None
    if name.endswith("_epoch"):
        name, cadence = name[: -len("_epoch")], "epoch"
    if name in TRAINING_KEYS:
        return TRAINING_KEYS[name], "train", cadence
    stage, _, metric = name.partition("_")
    if stage in STAGES and metric:
        return metric, STAGES[stage], cadence
    return name, "train", cadence


def cadence_of(points: list[Point]) -> str:
    """'step' or 'epoch': what the points' source said, else 'epoch' when every point has a whole epoch number and
    no step (an HF eval dict, a per-epoch CSV row), else 'step'."""
    said = {p.cadence for p in points if p.cadence}
    if len(said) == 1:
        return said.pop()
    if points and all(p.step is None and p.epoch is not None and float(p.epoch).is_integer() for p in points):
        return "epoch"
    return "step"


def epoch_loss_curve(series: dict[str, list[Point]], min_points: int) -> tuple[str, list[Point]] | None:
    """The training loss by epoch: Lightning's ``train_loss_epoch`` means, else a training loss logged once an epoch;
    (its series name, its finite points) when it has ``min_points`` or more, else None."""
    for name in ("train_loss_epoch", TRAIN_LOSS):
        points = [p for p in series.get(name, []) if math.isfinite(p.value)]
        if len(points) >= min_points and (name == "train_loss_epoch" or cadence_of(points) == "epoch"):
            return name, points
    return None


def curves(series: dict[str, list[Point]]) -> dict[tuple[str, str, str], list[Point]]:
    """The series a diagnosis read (SourceReport.series), keyed (metric, stage, cadence): ('loss', 'train', 'step'),
    ('loss', 'train', 'epoch'), ('loss', 'val', 'epoch'), ('acc', 'test', 'epoch'), ('lr', 'train', 'step'), ...
    Points are in log order; a key holds one curve."""
    out: dict[tuple[str, str, str], list[Point]] = {}
    for name, points in series.items():
        if not points:
            continue
        metric, stage, cadence = series_key(name)
        key = (metric, stage, cadence or cadence_of(points))
        out[key] = sorted(out.get(key, []) + list(points), key=lambda p: p.line)
    return out


WHERE_KEYS = ("from", "first_non_finite", "val_best_at", "restarts")


def _places(value) -> list[dict]:
    """Every place (a dict with an int 'line') an evidence value names, nested anywhere."""
    if isinstance(value, dict):
        own = [value] if isinstance(value.get("line"), int) else []
        return own + [place for inner in value.values() for place in _places(inner)]
    if isinstance(value, (list, tuple)):
        return [place for inner in value for place in _places(inner)]
    return []


def finding_start(finding: Finding) -> dict | None:
    """Where a finding starts, as {'series': name or None, 'line': ..., 'step'/'epoch' when known}: the start of the
    stretch it stands on, the first non-finite value, validation's best (where overfitting begins), the first
    restart of a sawtooth; else the earliest place its evidence names anywhere; else the line of a crash or OOM.
    None when the finding names no place (a judgement on the whole curve). The one owner of this answer: the
    plot's marks and the curves' readers both ask it."""
    evidence = finding.evidence
    series = evidence.get("series")
    for key in WHERE_KEYS:
        where = evidence.get(key)
        if isinstance(where, list):
            where = where[0] if where else None
        if isinstance(where, dict) and "line" in where:
            return {"series": series or ("val_loss" if key == "val_best_at" else None), **where}
    places = _places(evidence)
    if places:
        return {"series": series, **min(places, key=lambda where: where["line"])}
    for key in ("line", "first_line"):
        if isinstance(evidence.get(key), int):
            return {"series": series, "line": evidence[key]}
    return None


__all__ = ["cadence_of", "curves", "finding_start", "series_key"]
