"""Score `advisor diagnose` on the world corpus (tests/corpus/world): real files and run folders, labelled by
reading them before any detector read them (tests/corpus/world/labels.toml).

    python bench/diagnose_world.py                 # the tune split (tune on it as often as you like)
    python bench/diagnose_world.py --split holdout # the held-back split: for the lead, scored once
    python bench/diagnose_world.py --batch 3       # one batch only (batch 3 is held back whole: the lead's, once)
    python bench/diagnose_world.py --calibration-check  # batches 1-6 vs 7-13 (all spent), for a rule change

Each entry is judged through the command line a user runs (`advisor diagnose --json PATH`, in-process), so a
folder reader added at the CLI or in the engine counts alike. Per kind: precision and recall of the primary
findings (secondary findings, the co-finding rules, are not scored: the primary finding is the diagnosis).
A healthy run (kinds = []) raises a false alarm when any error-level finding is reported on it. An entry the
command cannot read (exit 2, no report, a crash of the tool) is wrong: it counts as missed for each of its kinds,
and a healthy one that cannot be read is not counted as right.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import time
import tomllib
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORLD = os.path.join(ROOT, "tests", "corpus", "world")
SPLITS = ("tune", "holdout")
PER_ENTRY_SECONDS = 120
JUDGEMENT_CALL = "judgement call"  # how a label's `why` marks a reading the labeller hesitated over


@dataclass
class Outcome:
    name: str
    expected: set[str]
    fmt: str
    found: set[str] = field(default_factory=set)
    error_level: list[str] = field(default_factory=list)
    unreadable: str | None = None  # why, when the command could not read it
    seconds: float = 0.0
    # The labeller named another reading in the label's `why` ("judgement call: ... is the other reading"): scored by
    # its label like every entry, and counted apart too, so a score says how much of it hangs on contested labels.
    judgement_call: bool = False

    @property
    def right(self) -> bool:
        return self.unreadable is None and self.found == self.expected


def load_labels(path: str = os.path.join(WORLD, "labels.toml")) -> dict[str, dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)["entries"]


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def run_cli(path: str) -> tuple[int, str, str]:
    """`advisor diagnose --json PATH` in this process: (exit code, stdout, stderr)."""
    from advisor.cli import main

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(PER_ENTRY_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["diagnose", "--json", path])
    except _Timeout:
        code, err = 124, io.StringIO(f"no answer within {PER_ENTRY_SECONDS} s")
    except SystemExit as exc:  # argparse and friends
        code = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # the tool crashed on this input: a wrong answer, never a crash of the bench
        code, err = 3, io.StringIO(f"{type(exc).__name__}: {exc}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()


def judge(name: str, entry: dict) -> Outcome:
    outcome = Outcome(name, set(entry["kinds"]), entry.get("format", "?"),
                      judgement_call=JUDGEMENT_CALL in entry.get("why", ""))
    start = time.perf_counter()
    code, stdout, stderr = run_cli(os.path.join(WORLD, name))
    outcome.seconds = time.perf_counter() - start
    if code not in (0, 1):
        why = (stderr.strip().splitlines() or [f"exit {code}"])[0].replace(WORLD + os.sep, "")
        outcome.unreadable = why[:160]
        return outcome
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        outcome.unreadable = "no JSON report on stdout"
        return outcome
    findings = report.get("findings", [])
    outcome.found = {f["kind"] for f in findings if not f.get("secondary_to")}
    outcome.error_level = sorted({f["kind"] for f in findings if f.get("severity") == "error"})
    if not findings and not report.get("read"):
        outcome.unreadable = "nothing read"
    return outcome


def kinds_known() -> tuple[str, ...]:
    from advisor.diagnose import KINDS

    return KINDS


def score(outcomes: list[Outcome]) -> dict[str, tuple[int, int, int, int]]:
    """kind -> (labelled, true positives, false positives, false negatives)."""
    rows = {}
    for kind in kinds_known():
        tp = sum(kind in o.found and kind in o.expected and o.unreadable is None for o in outcomes)
        fp = sum(kind in o.found and kind not in o.expected for o in outcomes)
        labelled = sum(kind in o.expected for o in outcomes)
        rows[kind] = (labelled, tp, fp, labelled - tp)
    return rows


def _ratio(a: int, b: int) -> str:
    return "  -  " if b == 0 else f"{a / b:5.2f}"


def report(split: str | None, outcomes: list[Outcome], batches: tuple[int, ...] | None = None) -> str:
    scope = f"split '{split}'" if split else "every split"
    if batches:
        scope += f", batch {', '.join(map(str, batches))}"
    lines = [f"advisor diagnose on the world corpus, {scope}: {len(outcomes)} entries",
             f"{'kind':<22} {'labelled':>8} {'tp':>4} {'fp':>4} {'fn':>4} {'precision':>9} {'recall':>7}"]
    for kind, (labelled, tp, fp, fn) in score(outcomes).items():
        lines.append(f"{kind:<22} {labelled:>8} {tp:>4} {fp:>4} {fn:>4} {_ratio(tp, tp + fp):>9} "
                     f"{_ratio(tp, tp + fn):>7}")
    healthy = [o for o in outcomes if not o.expected]
    alarms = [o for o in healthy if o.error_level]
    any_finding = [o for o in healthy if o.found]
    unreadable = [o for o in outcomes if o.unreadable]
    right = [o for o in outcomes if o.right]
    lines.append(f"healthy runs: {len(healthy)}; with an error-level finding (false alarm): {len(alarms)}; "
                 f"with any primary finding: {len(any_finding)}")
    lines.append(f"unreadable: {len(unreadable)} of {len(outcomes)}")
    lines.append(f"right (readable, primary kinds exactly the labels): {len(right)} of {len(outcomes)}"
                 f" ({_ratio(len(right), len(outcomes)).strip()})")
    contested = [o for o in outcomes if o.judgement_call]
    clear = [o for o in outcomes if not o.judgement_call]
    lines.append(f"  of them, labels marked a judgement call: {sum(o.right for o in contested)} of {len(contested)}; "
                 f"the other labels: {sum(o.right for o in clear)} of {len(clear)}"
                 f" ({_ratio(sum(o.right for o in clear), len(clear)).strip()})")
    formats = sorted({o.fmt for o in outcomes})
    lines.append("by format (right / entries, unreadable): " + "; ".join(
        f"{fmt} {sum(o.right for o in outcomes if o.fmt == fmt)}/{sum(o.fmt == fmt for o in outcomes)}"
        f" ({sum(bool(o.unreadable) for o in outcomes if o.fmt == fmt)})" for fmt in formats))
    for o in outcomes:
        if not o.right:
            why = f"unreadable: {o.unreadable}" if o.unreadable else f"found {sorted(o.found)}"
            lines.append(f"  wrong: {o.name}: labelled {sorted(o.expected)}, {why}")
    for o in alarms:
        lines.append(f"  false alarm: {o.name}: error-level {o.error_level}")
    lines.append(f"time: {sum(o.seconds for o in outcomes):.1f} s in all, slowest "
                 f"{max((o.seconds for o in outcomes), default=0):.1f} s")
    return "\n".join(lines)


def selected(labels: dict[str, dict], split: str | None, batches: tuple[int, ...] | None = None) -> dict[str, dict]:
    """The entries of `split` (None: every split) in `batches` (None: every batch; an entry without one is batch 1)."""
    return {name: entry for name, entry in labels.items()
            if (split is None or entry["split"] == split) and (batches is None or entry.get("batch", 1) in batches)}


def evaluate(split: str | None, labels: dict[str, dict] | None = None,
             batches: tuple[int, ...] | None = None) -> list[Outcome]:
    labels = load_labels() if labels is None else labels
    return [judge(name, entry) for name, entry in selected(labels, split, batches).items()]


# A rule change is calibrated on these batches (spent) and checked on the next ones (spent too, but not used to set
# it): named here, so no later batch (a fresh one, held back) is ever scored by this option.
CALIBRATION_BATCHES = (1, 2, 3, 4, 5, 6)
CHECK_BATCHES = (7, 8, 9, 10, 11, 12, 13)


def calibration_check(labels: dict[str, dict]) -> str:
    """Right / entries on the calibration batches and on the check batches, and each wrong entry of both."""
    lines = []
    for what, batches in (("calibration", CALIBRATION_BATCHES), ("check", CHECK_BATCHES)):
        outcomes = evaluate(None, labels, batches)
        right = sum(o.right for o in outcomes)
        lines.append(f"{what} (batches {batches[0]}-{batches[-1]}): {right} of {len(outcomes)} right "
                     f"({_ratio(right, len(outcomes)).strip()}); error-level on a healthy run: "
                     f"{sum(bool(o.error_level) for o in outcomes if not o.expected)}")
        if what == "check":  # a batch read to write the rules it checks is no confirmation: each apart
            by_batch = {b: [o for o in outcomes if labels[o.name].get("batch", 1) == b] for b in batches}
            lines.append("  by batch: " + ", ".join(f"{b} {sum(o.right for o in group)}/{len(group)}"
                                                    for b, group in by_batch.items()))
        lines += [f"  wrong: {o.name}: labelled {sorted(o.expected)}, "
                  + (f"unreadable: {o.unreadable}" if o.unreadable else f"found {sorted(o.found)}")
                  for o in outcomes if not o.right]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score advisor diagnose on the world corpus.")
    parser.add_argument("--split", choices=SPLITS,
                        help="tune (the default without --batch; tune on it freely) or holdout (the lead's, scored "
                             "once); with --batch and no --split, every entry of those batches")
    parser.add_argument("--batch", type=int, action="append", metavar="N",
                        help="score only the entries of batch N (repeat for several); batch 3 is held back whole")
    parser.add_argument("--json", metavar="FILE", help="also write each entry's outcome to FILE")
    parser.add_argument("--calibration-check", action="store_true",
                        help="score batches 1-6 (where a rule change is calibrated) and 7-13 (where it is checked) "
                             "apart; never a later batch")
    args = parser.parse_args(argv)
    if args.calibration_check:
        print(calibration_check(load_labels()))
        return 0
    split = args.split if args.split or args.batch else "tune"
    batches = tuple(sorted(set(args.batch))) if args.batch else None
    labels = load_labels()
    known = sorted({entry.get("batch", 1) for entry in labels.values()})
    if batches and not set(batches) <= set(known):
        print(f"no batch {sorted(set(batches) - set(known))} in tests/corpus/world/labels.toml (its batches: {known}); "
              "pass one of those to --batch.", file=sys.stderr)
        return 2
    outcomes = evaluate(split, labels, batches)
    print(report(split, outcomes, batches))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"name": o.name, "expected": sorted(o.expected), "found": sorted(o.found),
                        "error_level": o.error_level, "unreadable": o.unreadable, "format": o.fmt,
                        "right": o.right} for o in outcomes], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    sys.exit(main())
