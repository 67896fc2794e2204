"""Calibration: per-kind precision and recall on the labelled corpus, the held-back part apart.

Thresholds are set on the "tune" logs; the "holdout" logs (real runs with other seeds) are only scored here.
Secondary findings (the co-finding rules) are not scored: the primary finding is the diagnosis.
"""

import tomllib
from pathlib import Path

import pytest

from advisor.diagnose import KINDS, diagnose_source

CORPUS = Path(__file__).parent / "corpus"
LABELS = tomllib.loads((CORPUS / "labels.toml").read_text())
MINIMUM = 0.9


def primary_kinds(name):
    return {f.kind for f in diagnose_source(str(CORPUS / "logs" / name)).findings if f.secondary_to is None}


def score(split):
    tp, fp, fn = ({k: 0 for k in KINDS} for _ in range(3))
    misses = []
    for name, entry in LABELS.items():
        if entry["split"] != split:
            continue
        found, expected = primary_kinds(name), set(entry["kinds"])
        if found != expected:
            misses.append((name, sorted(expected), sorted(found)))
        for kind in KINDS:
            tp[kind] += kind in found and kind in expected
            fp[kind] += kind in found and kind not in expected
            fn[kind] += kind not in found and kind in expected
    rows = {}
    for kind in KINDS:
        precision = tp[kind] / (tp[kind] + fp[kind]) if tp[kind] + fp[kind] else None
        recall = tp[kind] / (tp[kind] + fn[kind]) if tp[kind] + fn[kind] else None
        rows[kind] = (tp[kind] + fn[kind], precision, recall)
    return rows, misses


def _print(split, rows, misses, capsys):
    with capsys.disabled():
        print(f"\n{split}: kind, labelled logs, precision, recall")
        for kind, (n, p, r) in rows.items():
            fmt = lambda x: "  -  " if x is None else f"{x:5.2f}"  # noqa: E731
            print(f"  {kind:<22} {n:>3} {fmt(p)} {fmt(r)}")
        for name, expected, found in misses:
            print(f"  miss: {name}: labelled {expected}, found {found}")


def test_every_log_has_a_label_and_a_split():
    logs = {p.name for p in (CORPUS / "logs").iterdir()}
    assert set(LABELS) <= logs, set(LABELS) - logs
    assert {e["split"] for e in LABELS.values()} <= {"tune", "holdout", "real-tune", "real-holdout", "v4-tune",
                                                     "v4-holdout-1", "v4-holdout-2"}
    assert all(set(e["kinds"]) <= set(KINDS) for e in LABELS.values())


def test_holdout_precision_and_recall_per_kind(capsys):
    rows, misses = score("holdout")
    _print("holdout", rows, misses, capsys)
    labelled = {kind for kind, (n, _, _) in rows.items() if n}
    assert labelled >= set(KINDS) - {"oom", "not-learning"}, "every kind but OOM (no GPU here) has held-back logs"
    low = {kind: (p, r) for kind, (n, p, r) in rows.items()
           if (p is not None and p < MINIMUM) or (r is not None and r < MINIMUM)}
    assert not low, f"below {MINIMUM} on held-back logs: {low}; misses: {misses}"


def test_tune_precision_and_recall_per_kind(capsys):
    rows, misses = score("tune")
    _print("tune", rows, misses, capsys)
    assert all(n >= 1 for kind, (n, _, _) in rows.items() if kind != "not-learning"), "every kind has tuning logs"
    low = {kind: (p, r) for kind, (n, p, r) in rows.items()
           if (p is not None and p < MINIMUM) or (r is not None and r < MINIMUM)}
    assert not low, f"below {MINIMUM} on tuning logs: {low}; misses: {misses}"


@pytest.mark.parametrize("name", [n for n, e in LABELS.items() if not e["kinds"]])
def test_healthy_logs_and_traps_get_no_primary_finding(name):
    if LABELS[name]["split"] in ("holdout", "v4-tune", "v4-holdout-1", "v4-holdout-2"):
        pytest.skip("held-back logs are scored per kind, not one by one (v4 logs: tests/test_diagnose_public_excerpts.py)")
    assert primary_kinds(name) == set()


def score_split(split: str) -> tuple[int, int, list]:
    """(logs whose primary findings are exactly their labels, logs in ``split``, error-level findings on a
    healthy log)."""
    right, total, false_errors = 0, 0, []
    for name, entry in LABELS.items():
        if entry["split"] != split:
            continue
        findings = [f for f in diagnose_source(str(CORPUS / "logs" / name)).findings if f.secondary_to is None]
        total += 1
        right += {f.kind for f in findings} == set(entry["kinds"])
        if not entry["kinds"]:
            false_errors += [(name, f.kind) for f in findings if f.severity == "error"]
    return right, total, false_errors


def test_real_holdout_excerpts_score_90_percent_with_no_error_on_a_healthy_log():
    """56 excerpts pasted in public issues (sources in labels.toml); the real-holdout half was scored once."""
    right, total, false_errors = score_split("real-holdout")
    assert total >= 20 and right / total >= MINIMUM, (right, total)
    assert not false_errors


def test_v4_holdout_2_scores_90_percent_with_no_error_on_a_healthy_log():
    """21 excerpts pasted in public issues, held back and scored once (19/21, tests/corpus/README.md)."""
    right, total, false_errors = score_split("v4-holdout-2")
    assert total >= 20 and right / total >= MINIMUM, (right, total)
    assert not false_errors
