"""Launch an adapter's workers, stream their events, and never leave a process behind.

Workers run in their own session (process group), so a timeout, an OOM on one
rank, or Ctrl-C ends every one of them with a single ``killpg``.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .errors import CancelledError, TrialError, WorkerCrashed
from .job import OOM_EXIT_CODE, EventReader, TrialJob
from .probe_server import TERM_GRACE_S

OOM_GRACE_S = 5.0  # after one rank reports OOM, how long the others get to report before the group is ended
_EXITCODE_RE = re.compile(r"exitcode\s*:\s*(-?\d+)")
_FAILURE_RE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank[^\n]*\n[^\n]*exitcode\s*:\s*(-?\d+)")
_ROOT_RANK_RE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank")


@dataclass
class JobOutcome:
    status: str  # "ok" | "oom"
    events: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    output_tail: list[str] = field(default_factory=list)

    def first(self, kind: str) -> dict | None:
        return next((e for e in self.events if e.get("event") == kind), None)

    def all(self, kind: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == kind]


def _reader(stream, sink: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        sink.put(line.rstrip("\n"))
    sink.put(None)


def _kill_group(proc) -> None:
    if hasattr(proc, "kill_group"):  # a job forked by the fork server: the server signals its group
        proc.kill_group()
        return
    for sig, wait in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # torchrun may be gone while a worker lingers in the group: make sure of it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


class CancelToken:
    """Set from any thread (a UI's Cancel button); a running job notices within a fraction of a second."""

    def __init__(self):
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    def reset(self) -> None:
        self._event.clear()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


def worker_env(job: TrialJob, adapter_env: dict | None) -> dict:
    env = dict(os.environ)
    # The adapter's variables are the ones the user's training must run with too (the recipe carries them).
    env.update(adapter_env or {})
    env["PYTHONUNBUFFERED"] = "1"
    env["BATCH_ADVISOR_ENGINE_PID"] = str(os.getpid())  # lets a leak check find this engine's workers only
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (job.workdir, env.get("PYTHONPATH", "")) if p)
    # torchrun warns about OMP_NUM_THREADS; the message is noise for our users.
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    return env


def run_job(
    command_for: Callable[[str, int], list[str]],
    job: TrialJob,
    nproc: int,
    timeout_s: float,
    idle_timeout_s: float | None = None,
    on_event: Callable[[dict], None] | None = None,
    label: str = "trial",
    env: dict | None = None,
    cancel: CancelToken | None = None,
    server=None,
) -> JobOutcome:
    """Run ``job`` on ``nproc`` workers; return their events, or raise TrialError with the cause.

    ``server``: an ``advisor.probe_server.ProbeServer`` started with ``worker_env(job, env)``; the job's
    ``nproc`` processes are then forked from it instead of launched (same worker, same environment, the
    environment torchrun gives each rank, no start-up)."""
    with tempfile.TemporaryDirectory(prefix="advisor-job-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(job.to_json())
        started = time.monotonic()
        if server is not None:
            proc = server.spawn(["--job", str(job_path)], nproc)
        else:
            proc = subprocess.Popen(command_for(str(job_path), nproc), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
                                    bufsize=1, env=worker_env(job, env), cwd=job.workdir, start_new_session=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        outcome = JobOutcome(status="ok")
        tail: collections.deque[str] = collections.deque(maxlen=60)
        watch = _Watch(label, nproc, started, timeout_s, idle_timeout_s, cancel, on_event)
        try:
            if _follow(proc, lines, outcome, tail, watch):
                try:
                    proc.wait(timeout=max(1.0, timeout_s - (time.monotonic() - started)))
                except subprocess.TimeoutExpired:
                    raise TrialError(_hung_message(label, outcome, nproc, "closed its output but did not exit",
                                                   "a worker is stuck at shutdown")) from None
        except KeyboardInterrupt:
            _kill_group(proc)
            raise CancelledError(f"The {label} was interrupted (Ctrl-C); every worker process was stopped. "
                                 "No recipe was written (runs that had finished are kept in the plan history).") from None
        finally:
            _kill_group(proc)
        outcome.seconds = time.monotonic() - started
        outcome.output_tail = list(tail)
        if outcome.status != "oom":
            _raise_for_failure(outcome, tail, proc.returncode, label, nproc, bool(job.extra.get("script")))
        return outcome


@dataclass
class _Watch:
    """What run_job watches a running job for: cancellation, its time limits, and who hears its events."""

    label: str
    nproc: int
    started: float
    timeout_s: float
    idle_timeout_s: float | None
    cancel: CancelToken | None
    on_event: Callable[[dict], None] | None


def _follow(proc, lines: queue.Queue, outcome: JobOutcome, tail, watch: _Watch) -> bool:
    """Read the job's output until it ends (True) or an OOM's grace is over (False): events into ``outcome``,
    other output into ``tail``; TrialError/CancelledError on a timeout, a stall or a cancel."""
    reader = EventReader()
    last_activity = watch.started
    oom_deadline = None
    while True:
        now = time.monotonic()
        _check_limits(proc, watch, outcome, now, last_activity)
        if oom_deadline and now > oom_deadline:
            return False  # the other ranks are blocked in a collective; the trial's answer is already known
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if line is None:
            return True
        event = reader.feed(line)
        if event is None:
            if reader.is_output(line):
                tail.append(line)
            else:
                last_activity = time.monotonic()  # a part of a long event
            continue
        last_activity = time.monotonic()
        outcome.events.append(event)
        if event["event"] in ("oom",) or (event["event"] == "probe" and event.get("status") == "oom"):
            outcome.status = "oom"
            oom_deadline = oom_deadline or time.monotonic() + OOM_GRACE_S
        if watch.on_event:
            watch.on_event(event)


def _check_limits(proc, watch: _Watch, outcome: JobOutcome, now: float, last_activity: float) -> None:
    """Stop the job when it was cancelled, ran past its time or made no progress for too long."""
    if watch.cancel is not None and watch.cancel.cancelled:
        _kill_group(proc)
        raise CancelledError(f"The {watch.label} was cancelled; every worker process was stopped. "
                             "No recipe was written (runs that had finished are kept in the plan history).")
    if now - watch.started > watch.timeout_s:
        raise TrialError(_hung_message(watch.label, outcome, watch.nproc,
                                       f"did not finish within {watch.timeout_s:.0f} s",
                                       "raise --trial-timeout if the model is just slow"))
    if watch.idle_timeout_s and now - last_activity > watch.idle_timeout_s:
        raise TrialError(_hung_message(watch.label, outcome, watch.nproc,
                                       f"made no progress for {watch.idle_timeout_s:.0f} s",
                                       "a rank is stuck (a deadlock, a blocked collective or a "
                                       "data loader that never returns)"))


def _raise_for_failure(outcome: JobOutcome, tail, returncode: int | None, label: str, nproc: int,
                       from_script: bool) -> None:
    """The root cause of a failed job, as TrialError or WorkerCrashed; nothing when it succeeded."""
    errors = outcome.all("error")
    root_rank, root_code = _root_cause(tail)
    errored = {e.get("rank") for e in errors}
    # torchrun ends the survivors with SIGTERM: those are not the cause.
    silent_deaths = sorted(((r, c) for r, c in _failures(tail) if c < 0 and r not in errored),
                           key=lambda rc: rc[1] == -signal.SIGTERM)
    if errors:
        # A rank that reported an error and a peer that torchrun then stopped with SIGTERM (before the
        # peer reached the same error): the SIGTERM is the echo, the report is the cause.
        silent_deaths = [(r, c) for r, c in silent_deaths if c != -signal.SIGTERM]
        if root_code == -signal.SIGTERM:
            root_rank, root_code = None, None
    if silent_deaths:  # killed by a signal without a word: that is the cause, not its peers' errors
        root_rank, root_code = silent_deaths[0]
    if root_rank is not None and root_rank not in errored:
        # Another rank died first (a signal, a hard crash): errors on the rest are only its echo.
        raise WorkerCrashed(_crash_message(label, root_rank, root_code, tail, nproc), root_code)
    if errors:
        first = next((e for e in errors if e.get("rank") == root_rank), errors[0])
        raise TrialError(
            f"The {label} failed on rank {first.get('rank')}: {first.get('error')}: {first.get('message')}\n"
            + "\n".join("    " + l for l in first.get("traceback", [])[-6:])
            + ("\nFix the error in the script (run its command once by hand with the same arguments to check), "
               "then run again." if from_script else
               "\nFix the error in the workload (run its model on one batch by hand to check), then run again.")
        )
    if returncode not in (0, None):
        code = root_code or returncode
        raise WorkerCrashed(_crash_message(label, root_rank, code, tail, nproc), code)


def _hung_message(label: str, outcome: JobOutcome, nproc: int, what: str, hint: str) -> str:
    started = {e.get("rank") for e in outcome.all("started")}
    progress = outcome.all("progress")
    where = f"; the last progress was step {progress[-1]['step']}" if progress else ""
    missing = sorted(set(range(nproc)) - started)
    ranks = f"; ranks that never started: {missing}" if missing else ""
    stalled = outcome.all("stalled")
    if stalled:  # a worker said why it cannot go on (e.g. a stale build lock): that is the fix to give
        hint = stalled[-1].get("message") or hint
    return (f"The {label} {what} ({nproc} process(es){where}{ranks}): {hint}. "
            "Every worker process was stopped and nothing was written.")


def _failures(tail) -> list[tuple[int, int]]:
    """(rank, exit code) of every failed worker torchrun listed."""
    text = "\n".join(tail)
    return [(int(m.group(1)), int(m.group(2))) for m in _FAILURE_RE.finditer(text)]


def _root_cause(tail) -> tuple[int | None, int | None]:
    """(rank, exit code) of torchrun's 'Root Cause (first observed failure)' block, if it printed one."""
    text = "\n".join(tail)
    start = text.find("Root Cause")
    if start < 0:
        return None, None
    block = text[start:]
    rank = _ROOT_RANK_RE.search(block)
    code = _EXITCODE_RE.search(block)
    return (int(rank.group(1)) if rank else None), (int(code.group(1)) if code else None)


def _crash_message(label: str, rank: int | None, code: int, tail, nproc: int) -> str:
    who = f"rank {rank}" if rank is not None else "a worker"
    if code == OOM_EXIT_CODE:
        cause = "ran out of memory"
    elif code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        cause = f"was killed by {name}"
        if -code == signal.SIGKILL:
            cause += " (the kernel's OOM killer sends SIGKILL when host memory runs out; so does `kill -9`)"
    else:
        cause = f"exited with code {code}"
    last = "\n".join("    " + l for l in list(tail)[-8:] if l.strip())
    return (f"The {label} failed: {who} {cause}; the other {nproc - 1} worker(s) were stopped. "
            f"Check host memory (dmesg) and the worker output below, then run again.\n{last}")
