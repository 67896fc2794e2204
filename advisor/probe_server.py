"""A pre-imported fork server for a plan's jobs: a fresh process per job without the start-up.

Every ceiling probe must run in a process of its own: after an out-of-memory glibc keeps the grown heap,
so a later probe in the same process would meet the limit early. A fresh torchrun launch gives that, but
pays interpreter start-up, torchrun's agent and ``import torch`` per process (several CPU-seconds a job,
most of a small plan's time, and more on a GPU host, where the steps take milliseconds). The server pays
them once: it starts with the workers' environment (the recipe's ``[launch.env]``, e.g. the allocator
settings glibc reads at start-up, which a fork inherits), imports the adapter's worker module (torch with
it) and the workload's module, and then only forks. Each job is forked from that clean parent, which never
runs a job itself: a job that ran out of memory, crashed or hung is never reused; the next job is a new fork.

A 1-process job is one child: its own session (process group), running the worker module's ``__main__``
exactly as a torchrun worker of world size 1 would (RANK/WORLD_SIZE/MASTER_* set as torchrun sets them).
An N-process job is a leader child in a session of its own that forks the N ranks with the environment
torchrun gives each (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT, ...) and does what torchrun's agent
does: waits for them, stops the rest with SIGTERM when one fails, and prints torchrun's failure summary
("Root Cause (first observed failure)" with the rank and its exit code), so ``run_job`` reads one format.

Fork safety (torch's rules, torch/cuda/__init__.py): CUDA cannot be used in a child forked after the parent
initialised it ("Cannot re-initialize CUDA in forked subprocess"), and even ``torch.cuda.is_available()``
runs cuInit (unless PYTORCH_NVML_BASED_CUDA_CHECK=1). So the parent never touches a device; after its imports
it checks that torch did not initialise CUDA and that the driver library is not loaded, and refuses to serve
otherwise; the engine then launches jobs the ordinary way. The parent runs
no torch op, so no intra-op thread pool exists to be lost in the fork.

Nothing outlives the engine: the server exits (ending its children) when the engine's end of the control
socket closes, and server, leaders and ranks ask the kernel for SIGKILL when their parent dies.

Protocol over a Unix stream socket, one JSON object a line. Engine -> server: ``{"op": "run", "argv": [...],
"cwd": dir, "nproc": N}`` with the write end of the job's output pipe attached (SCM_RIGHTS; every rank
writes to it, as torchrun's workers share its stdout), and ``{"op": "kill", "pid": N}``. Server -> engine:
``{"ready": true}`` or ``{"ready": false, "reason": ...}``, then ``{"pid": N}`` per run, ``{"exit": N,
"code": C}`` when a job ends (negative C: killed by signal -C).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .errors import TrialError

SERVER_MODULE = "advisor.probe_server"
START_TIMEOUT_S = 120.0  # the server's own imports (torch, the adapter's framework) on a loaded machine
TERM_GRACE_S = 3.0  # after SIGTERM to a job's process group (a cancel, a timeout), how long before SIGKILL
CLOSE_GRACE_S = 2.0  # after the engine closes the socket, how long the server gets to exit by itself
STOP_GRACE_S = 5.0  # after one rank fails, how long the others get to end on SIGTERM before SIGKILL
_PR_SET_PDEATHSIG = 1
# What every worker imports after reading its job (the engine's worker-side modules, the CPU memory tracker):
# imported once here. The workload's module is imported too (its imports: transformers, a model zoo); its
# function, which builds the data and the model, runs in each job, as in training.
PRELOADED = ("advisor.workload", "advisor.memory", "advisor.batches", "advisor.oom", "advisor.optimizers",
             "advisor.device", "advisor.method.noise", "torch.distributed._tools.mem_tracker")


def _die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux); elsewhere the socket's EOF does it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


# ----------------------------------------------------------------------------------------------- engine side


class ForkedWorker:
    """One forked job (a worker, or the leader of N ranks), as ``run_job`` drives it: its output, its exit, a
    kill of its group."""

    def __init__(self, server: "ProbeServer", pid: int, stdout=None):
        self.server, self.pid, self.stdout = server, pid, stdout  # stdout: set by spawn, once the pid is in
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked job {self.pid}", timeout)
        return self.returncode

    def kill_group(self) -> None:
        """SIGTERM, then SIGKILL, to the child's whole process group (it is a session leader)."""
        for sig, wait in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
            if self._ended.is_set():
                return
            self.server.signal(self.pid, sig)
            if self._ended.wait(wait):
                return


class ProbeServer:
    """Engine-side handle of one fork server (one per worker module and environment); started lazily."""

    def __init__(self, worker_module: str, env: dict, cwd: str | None = None, workload: str | None = None):
        self.worker_module, self.env, self.cwd, self.workload = worker_module, env, cwd, workload
        self.proc: subprocess.Popen | None = None
        self.unavailable: str | None = None  # why the server cannot serve (then probes launch as before)
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._children: dict[int, ForkedWorker] = {}
        # (event, slot) for replies {"pid": N}, in request order; the reply's handler puts the ForkedWorker,
        # already registered, in the slot
        self._pending: list = []
        self._ready = threading.Event()

    def launch(self) -> None:
        """Start the server's process and return at once: its imports run while the caller does something else;
        ``start`` waits for them. The server dies with the thread that launched it (PDEATHSIG follows the parent
        thread), so launch from a thread that outlives the jobs, never from a short-lived helper thread."""
        if self.proc is not None or self.unavailable:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        argv = [sys.executable, "-m", SERVER_MODULE, self.worker_module, str(theirs.fileno()), self.workload or ""]
        # A file, not a pipe, for the server's own messages: nobody reads them unless the start fails.
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._stderr, pass_fds=(theirs.fileno(),),
                                     start_new_session=True)
        theirs.close()
        self._sock = ours
        self._closed = False
        self._launched_at = time.monotonic()
        threading.Thread(target=self._read_replies, daemon=True).start()

    def start(self, cancel=None) -> bool:
        """Start the server if needed (or wait for one launched before); False (with ``unavailable`` saying why)
        when it cannot serve. A set ``cancel`` token (the app's Esc) stops the start at once: CancelledError, no
        process left."""
        self.launch()
        if self.unavailable:
            return False
        deadline = self._launched_at + START_TIMEOUT_S
        while not self._ready.wait(0.2) and time.monotonic() < deadline:
            if cancel is not None and cancel.cancelled:
                self.close()
                from .errors import CancelledError

                raise CancelledError("The memory probe was cancelled while its probe server started; every worker "
                                     "process was stopped. Nothing was recorded for it.")
        if not self._ready.is_set() or self.unavailable:
            self.unavailable = self.unavailable or f"the probe server did not start within {START_TIMEOUT_S:.0f} s"
            self.close()
            return False
        return True

    def _read_replies(self) -> None:
        buffer = b""
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                self._handle(json.loads(line))
        # The server is gone: every child still running was killed with it (PDEATHSIG); wake whoever waits.
        if not self._ready.is_set():
            self.proc.wait()
            self._stderr.seek(0)
            err = self._stderr.read().decode(errors="replace")[-2000:]
            self.unavailable = f"the probe server exited at start-up: {err.strip() or 'no output'}"
            self._ready.set()
        with self._lock:
            for event, slot in self._pending:
                slot.append(None)
                event.set()
            self._pending.clear()
            for child in list(self._children.values()):
                child._exited(-signal.SIGKILL)
            self._children.clear()

    def _handle(self, reply: dict) -> None:
        if "ready" in reply:
            if not reply["ready"]:
                self.unavailable = reply.get("reason") or "the probe server refused to serve"
            self._ready.set()
        elif "pid" in reply:
            # Registered here, by the thread that reads the replies, before it reads the next one: the server
            # reports the exit as soon as it reaps the job (a forked probe can end within 0.2 s), and an exit
            # that came before its child was registered would be dropped, leaving the job's wait to the trial
            # timeout (the asking thread may be scheduled again only after both replies were read).
            with self._lock:
                event, slot = self._pending.pop(0)
                child = ForkedWorker(self, reply["pid"])
                self._children[child.pid] = child
            slot.append(child)
            event.set()
        elif "exit" in reply:
            with self._lock:
                child = self._children.pop(reply["exit"], None)
            if child:
                child._exited(reply["code"])

    def _send(self, message: dict, fds=()) -> None:
        data = (json.dumps(message) + "\n").encode()
        if fds:
            socket.send_fds(self._sock, [data], list(fds))
        else:
            self._sock.sendall(data)

    def spawn(self, argv: list[str], nproc: int = 1, node: dict | None = None) -> ForkedWorker:
        """Fork a job of ``nproc`` ranks running the worker module with ``argv`` (``--job PATH``), in the
        server's environment; one process for 1, a leader and its ranks for more. ``node`` (a plan across
        nodes, advisor.cluster_runner): this node's place in a job whose ranks span several nodes (node_rank,
        nnodes, master_addr, master_port, run_id)."""
        read_fd, write_fd = os.pipe()
        event, slot = threading.Event(), []
        try:
            with self._lock:
                self._pending.append((event, slot))
                self._send({"op": "run", "argv": argv, "cwd": self.cwd, "nproc": nproc, "node": node},
                           fds=(write_fd,))
        except OSError as exc:
            os.close(read_fd)
            raise TrialError(f"The fork server is gone ({exc}); the job could not start.") from None
        finally:
            os.close(write_fd)
        if not event.wait(30) or slot[0] is None:
            os.close(read_fd)
            raise TrialError("The fork server did not start the job's processes (it exited or hung); "
                             "run again, and report it if it repeats.")
        child = slot[0]  # registered by the reply's handler (it may have ended already: its exit is kept)
        child.stdout = os.fdopen(read_fd, "r", errors="replace", buffering=1)
        return child

    def signal(self, pid: int, sig: int) -> None:
        try:
            self._send({"op": "kill", "pid": pid, "signal": int(sig)})
        except OSError:
            pass

    def close(self) -> None:
        """End the server and any probe it still runs (idempotent)."""
        if self.proc is not None and not self._closed:
            self._closed = True
            _close_server(self.proc, self._sock, self._stderr)


def _close_server(proc: subprocess.Popen, sock: socket.socket, stderr) -> None:
    """Closing the socket tells the server to end its children and exit; make sure it did."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
    try:
        # A server that is idle reads the EOF and exits at once; one still building the workload (a cancel
        # during its start) reads nothing until it is done, and nothing it would finish is wanted: its forked
        # jobs die with it (PDEATHSIG), so a short grace, then SIGKILL, keeps Esc within seconds.
        proc.wait(timeout=CLOSE_GRACE_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    stderr.close()


# ----------------------------------------------------------------------------------------------- server side


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun_env(local_rank: int, nproc: int, port: int, node: dict | None = None) -> dict[str, str]:
    """What torchrun's agent sets for worker ``local_rank`` of an ``nproc``-process job on one node
    (torch/distributed/elastic/agent/server/local_elastic_agent.py); rank 0 hosts the env:// store. With
    ``node`` the job spans nodes: global rank = node rank x nproc + local rank, as torchrun's
    ``SimpleElasticAgent._assign_worker_ranks`` gives equal nodes, and node 0's address and port for the store."""
    node = node or {}
    node_rank, nnodes = int(node.get("node_rank", 0)), int(node.get("nnodes", 1))
    rank, world = node_rank * nproc + local_rank, nnodes * nproc
    return {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": str(node_rank), "GROUP_WORLD_SIZE": str(nnodes),
            "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world), "ROLE_NAME": "default",
            "MASTER_ADDR": str(node.get("master_addr", "127.0.0.1")), "MASTER_PORT": str(node.get("master_port", port)),
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
            "TORCHELASTIC_RUN_ID": str(node.get("run_id", f"advisor-{os.getpid()}")),
            "TORCHELASTIC_USE_AGENT_STORE": "False",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")}


def _run_worker(worker_module: str, argv: list[str]) -> None:
    """Run the worker module's ``__main__`` in this process (it ends with os._exit)."""
    import runpy

    sys.argv = [worker_module, *argv]
    runpy.run_module(worker_module, run_name="__main__", alter_sys=True)


def _exit_after(body) -> None:
    """In a forked child: run ``body()`` and leave with the code it returns (1 if it returns nothing or raises,
    with the traceback printed), never returning into the server's own code or running its cleanup."""
    code = 1
    try:
        returned = body()
        code = 1 if returned is None else returned
    except BaseException:  # noqa: BLE001 - report, then leave without running the server's cleanup
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _run_child(worker_module: str, argv: list[str], cwd: str | None, out_fd: int, control: socket.socket,
               nproc: int = 1, node: dict | None = None) -> None:
    """In the forked child: a session of its own, then the worker itself (1 process) or the ranks' leader."""

    def body() -> int | None:
        os.setsid()
        _die_with_parent()
        control.close()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        if cwd:
            os.chdir(cwd)
        if nproc == 1:
            os.environ.update(_torchrun_env(0, 1, _free_port(), node))
            return _run_worker(worker_module, argv)  # worker_main ends with os._exit
        return _lead(worker_module, argv, nproc, node)

    _exit_after(body)


def _lead(worker_module: str, argv: list[str], nproc: int, node: dict | None = None) -> int:
    """torchrun's agent for one job: fork the ranks, wait, stop the rest when one fails, report as torchrun does."""
    port = _free_port()
    ranks: dict[int, int] = {}  # pid -> rank
    for rank in range(nproc):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            def rank_body(rank=rank) -> None:
                _die_with_parent()
                os.environ.update(_torchrun_env(rank, nproc, port, node))
                _run_worker(worker_module, argv)  # worker_main ends with os._exit

            _exit_after(rank_body)
        ranks[pid] = rank
    first_failure = None  # (rank, exit code, pid): the root cause, as torchrun reports it
    stop_deadline = None
    while ranks:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                for other in ranks:
                    _signal_quietly(other, signal.SIGKILL)
                stop_deadline = float("inf")
            time.sleep(0.02)
            continue
        rank = ranks.pop(pid, None)
        if rank is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and first_failure is None:
            first_failure = (rank, code, pid)
            for other in ranks:  # torchrun stops the survivors the same way
                _signal_quietly(other, signal.SIGTERM)
            stop_deadline = time.monotonic() + STOP_GRACE_S
    if first_failure is None:
        return 0
    rank, code, pid = first_failure
    rank_here = int((node or {}).get("node_rank", 0)) * nproc + rank  # torchrun names the global rank
    print(f"{worker_module} FAILED (forked by the advisor's fork server, as torchrun would report it)\n"
          "Root Cause (first observed failure):\n[0]:\n"
          f"  rank      : {rank_here} (local_rank: {rank})\n  exitcode  : {code} (pid: {pid})", flush=True)
    return 1


def _signal_quietly(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _cuda_driver_loaded() -> bool:
    """Whether the CUDA driver library is mapped: ``torch.cuda.is_available()`` calls cuInit without marking
    torch initialised, and a driver initialised before a fork is unusable in the child."""
    try:
        with open("/proc/self/maps") as maps:
            return any("libcuda.so" in line for line in maps)
    except OSError:
        return False


def _preload_workload(spec: str) -> None:
    """Import the module of the workload ``spec`` (not its function), or for a script the installed packages it
    imports (not the script: it runs in each job); a failure is the job's to report."""
    import importlib

    from .script_source import SCRIPT_WORKLOAD_PREFIX, installed_imports
    from .workload import load_workload_function

    if spec.startswith(SCRIPT_WORKLOAD_PREFIX):
        for module in installed_imports(Path(spec[len(SCRIPT_WORKLOAD_PREFIX):])):
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - the script imports it again in its job and reports the error
                pass
        return
    try:
        load_workload_function(spec)
    except Exception:  # noqa: BLE001 - every job imports it again and reports the error as its own
        pass


def serve(worker_module: str, control_fd: int, workload: str = "") -> None:
    _die_with_parent()
    control = socket.socket(fileno=control_fd)

    def reply(message: dict) -> None:
        control.sendall((json.dumps(message) + "\n").encode())

    not_ready = _preload(worker_module, workload)
    if not_ready:
        reply({"ready": False, "reason": not_ready})
        return
    reply({"ready": True})
    children: set[int] = set()
    buffer, fds = b"", []
    try:
        while True:
            readable, _, _ = select.select([control], [], [], 0.05)
            if readable:
                data, new_fds, _, _ = socket.recv_fds(control, 65536, 16)
                if not data:
                    break  # the engine is gone (or closed us): end everything
                buffer += data
                fds.extend(new_fds)
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    _handle(json.loads(line), worker_module, control, fds, children, reply)
            _reap(children, reply)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        _end_children(children)


def _preload(worker_module: str, workload: str) -> str | None:
    """Import what every probe imports, once, before forking; why the server cannot serve, or None."""
    try:
        import importlib

        import torch

        importlib.import_module(worker_module)
        for module in PRELOADED:
            importlib.import_module(module)
        if workload:
            _preload_workload(workload)
        if torch.cuda.is_initialized() or _cuda_driver_loaded():
            what = f"{worker_module} or the workload {workload!r}" if workload else worker_module
            return f"importing {what} initialised CUDA, and a forked child cannot use CUDA then"
    except Exception as exc:  # noqa: BLE001 - the engine falls back to launching each probe
        return f"importing {worker_module} failed: {type(exc).__name__}: {exc}"
    return None


def _handle(request: dict, worker_module: str, control, fds: list, children: set[int], reply) -> None:
    """One request from the engine: run a probe in a forked child (its output on the passed descriptor), or kill
    one of ours."""
    if request["op"] == "run":
        out_fd = fds.pop(0)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(worker_module, request["argv"], request.get("cwd"), out_fd, control,
                       int(request.get("nproc", 1)), request.get("node"))
        os.close(out_fd)
        children.add(pid)
        reply({"pid": pid})
    elif request["op"] == "kill" and request["pid"] in children:
        try:
            os.killpg(request["pid"], request.get("signal", signal.SIGKILL))
        except ProcessLookupError:
            pass


def _reap(children: set[int], reply) -> None:
    """Report each finished child's exit code, after ending anything left in its process group."""
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            children.discard(pid)
            try:
                os.killpg(pid, signal.SIGKILL)  # anything the probe started in its group goes with it
            except ProcessLookupError:
                pass
            reply({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _end_children(children: set[int]) -> None:
    """The server is ending: kill every child's group and wait up to 5 s for them."""
    for pid in children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while children and time.monotonic() < deadline:
        for pid in list(children):
            if os.waitpid(pid, os.WNOHANG)[0]:
                children.discard(pid)
        time.sleep(0.02)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
