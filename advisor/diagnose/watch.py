"""`advisor diagnose --watch`: follow a growing log and report each finding when it first appears."""

from __future__ import annotations

import json
import os
import sys
import time

from ..errors import AdvisorError
from . import exit_code_for
from .detectors import Context, run_detectors
from .scan import Scanner, sniff_file_format


def _finding_key(finding) -> tuple[str, bool]:
    return finding.kind, finding.secondary_to is None


def watch(path: str, forced_format: str | None = None, context: Context | None = None, interval: float = 2.0,
          seconds: float | None = None, as_json: bool = False, out=None, fail_on: str = "warning") -> int:
    """Read new complete lines every ``interval`` seconds; print a finding the first time it appears.

    A finding that stops holding is withdrawn (printed as such). Returns 1 when a finding at or above ``fail_on``
    still holds at the end, 0 otherwise (stopped by ``seconds`` or Ctrl-C).
    """
    out = out or sys.stdout
    if os.path.isdir(path):
        raise AdvisorError(f"{path} is a directory; pass the log file inside it (for example {path}/train.log).")
    deadline = None if seconds is None else time.monotonic() + seconds
    while not os.path.exists(path):  # a run that has not created its log yet
        if deadline is not None and time.monotonic() >= deadline:
            raise AdvisorError(f"{path}: no such log file, and none appeared while watching.")
        time.sleep(min(interval, 0.5))
    print(f"advisor: watching {path} (Ctrl-C stops)", file=sys.stderr, flush=True)
    scanner = Scanner(forced_format)
    reported: dict[tuple[str, bool], object] = {}  # findings that hold now, by key
    carry, line_no, position = b"", 1, 0
    try:
        with open(path, "rb") as log:
            while True:
                if os.path.getsize(path) < position:  # truncated or rotated: start over
                    log.seek(0)
                    scanner, carry, line_no, position = Scanner(forced_format), b"", 1, 0
                data = log.read()
                position = log.tell()
                if data and sniff_file_format(data[:65536], path) and line_no == 1:
                    raise AdvisorError(f"{path}: --watch follows text logs; a metrics CSV or trainer_state.json is "
                                       "rewritten as a whole: run `advisor diagnose` on it instead.")
                if data:
                    data = carry + data
                    cut = data.rfind(b"\n")
                    if cut >= 0:
                        line_no = scanner.parse_block(data, line_no, lo=0, hi=cut)
                        carry = data[cut + 1:]
                    else:
                        carry = data
                    _report_new(scanner, context, reported, as_json, out)
                if deadline is not None and time.monotonic() >= deadline:
                    break
                time.sleep(interval)
    except KeyboardInterrupt:
        pass
    return exit_code_for(list(reported.values()), fail_on)


def _report_new(scanner: Scanner, context: Context | None, reported: set, as_json: bool, out) -> None:
    collected = scanner.collected
    ctx = Context(**vars(context)) if context else Context()
    ctx.merge_log(collected.context)
    findings = run_detectors(collected.series, collected.events, collected.event_counts, ctx, collected.non_finite)
    lines_read = collected.stats.lines
    current = {_finding_key(f) for f in findings}
    for key in [k for k in reported if k not in current]:
        # A finding that no longer holds (a warmup plateau that started to fall) is withdrawn, and said so.
        withdrawn = reported.pop(key)
        if as_json:
            print(json.dumps({"lines_read": lines_read, "withdrawn": withdrawn.kind,
                              "summary": withdrawn.summary}, default=str), file=out, flush=True)
        else:
            print(f"[{time.strftime('%H:%M:%S')}] after {lines_read} lines: withdrawn: {withdrawn.kind} no longer "
                  f"holds (was: {withdrawn.summary})", file=out, flush=True)
    for finding in findings:
        key = _finding_key(finding)
        if key in reported:
            reported[key] = finding
            continue
        reported[key] = finding
        if as_json:
            print(json.dumps({"lines_read": lines_read, **finding.to_dict()}, default=str), file=out, flush=True)
            continue
        secondary = f" (secondary to {finding.secondary_to})" if finding.secondary_to else ""
        print(f"[{time.strftime('%H:%M:%S')}] after {lines_read} lines: [{finding.severity}] {finding.kind}"
              f"{secondary} (confidence: {finding.confidence}): {finding.summary}", file=out)
        for index, action in enumerate(finding.actions, 1):
            print(f"    {index}. {action}", file=out)
        out.flush()


__all__ = ["watch"]
