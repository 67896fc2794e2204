"""A plan measured on the cluster: `advisor plan --nnodes N --node-rank R --rdzv-endpoint HOST:PORT`, started once
on every node as torchrun is, or under SLURM (`srun advisor plan ...`) from SLURM's own variables.

The shape is torchrun's (torch/distributed/run.py, elastic/rendezvous/c10d_rendezvous_backend.py): one agent per
node meets the others at a TCPStore on the rendezvous endpoint, and every job's ranks get the environment
torchrun's agent gives them (global rank = node rank x processes per node + local rank, as
``SimpleElasticAgent._assign_worker_ranks`` computes it). Two choices differ from torch's c10d backend, on purpose:

- Node 0 hosts the store, always (torch's backend guesses the host from the endpoint's hostname and, when it
  cannot bind the port, silently becomes a client of whatever holds it; a taken port must be an error instead).
- Nodes keep their --node-rank (torch's dynamic rendezvous assigns ranks in arrival order): node 0 runs the method
  and writes the recipe, so which node that is must be the user's choice, and a node that never joins is named.

This module is the agents' meeting and their protocol, plain data over the store; ``advisor.cluster_runner`` runs
the jobs. Nothing here imports torch at module level.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from .errors import CancelledError, SetupError

DEFAULT_RDZV_PORT = 29400  # torchrun's c10d default (c10d_rendezvous_backend.DEFAULT_PORT)
DEFAULT_JOIN_TIMEOUT_S = 300.0
HEARTBEAT_S = 1.0  # every node adds to its heartbeat counter this often
LOST_AFTER_S = 20.0  # a node whose counter has not moved for this long is lost (bounded: well under 2 minutes)
GOODBYE_WAIT_S = 20.0  # node 0 keeps the store up this long at the end, for the others to read how the plan ended
# What must be the same on every node, and how each is named in the refusal.
MUST_MATCH = (("torch", "torch"), ("advisor", "batch-advisor"), ("adapter", "the adapter"),
              ("device", "the device kind"), ("nproc", "processes per node (--nproc)"), ("workload", "--workload"))


class NodeLost(CancelledError):
    """A node stopped answering in the middle of the plan: every node's workers were stopped. A cancel in kind
    (every path that stops the warm server on a cancel does so here too), but a failure, not the user's choice."""

    exit_code = 1


# ------------------------------------------------------------------------------------------------ parsing

def expand_nodelist(text: str) -> list[str]:
    """SLURM's compact host list (``node[01-04],gpu7``, ``rack[1-2]-n[1,3]``) as host names, in SLURM's order;
    zero padding is kept (``node[08-10]`` -> node08, node09, node10)."""
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        hosts += _expand_item(item)
    if not hosts:
        raise SetupError(f"SLURM_JOB_NODELIST {text!r} names no host. Run inside a SLURM allocation (srun), or give "
                         "--nnodes, --node-rank and --rdzv-endpoint yourself.")
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0 or depth > 1:
            raise SetupError(f"SLURM_JOB_NODELIST {text!r}: unbalanced brackets.")
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise SetupError(f"SLURM_JOB_NODELIST {text!r}: unbalanced brackets.")
    items.append(text[start:])
    return [item for item in items if item]


def _expand_item(item: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", item)
    if not match:
        return [item]
    head, tail = item[:match.start()], item[match.end():]
    values: list[str] = []
    for part in match.group(1).split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise SetupError(f"SLURM_JOB_NODELIST entry {item!r}: {part!r} is not a number or a range of numbers.")
        width = len(low)
        values += [str(n).zfill(width) for n in range(int(low), int(high or low) + 1)]
    return [head + value + rest for value in values for rest in _expand_item(tail)]


def parse_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``[v6]:PORT``; a bare HOST takes torchrun's c10d port) as (host, port)."""
    match = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?|([^:\[\]]+)(?::(\d+))?", text.strip())
    if not match:
        raise SetupError(f"--rdzv-endpoint {text!r} is not HOST:PORT (for example node01:29400): give node 0's host "
                         "name or address and a free port, as for torchrun.")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4) or DEFAULT_RDZV_PORT)
    if not 0 < port < 65536:
        raise SetupError(f"--rdzv-endpoint {text!r}: the port must be 1-65535, not {port}.")
    return host, port


@dataclass(frozen=True)
class ClusterSpec:
    """Where this node stands in the cluster and where the nodes meet."""

    nnodes: int
    node_rank: int
    host: str  # node 0's host: the rendezvous store and every job's MASTER_ADDR
    port: int
    run_id: str = "advisor"
    join_timeout_s: float = DEFAULT_JOIN_TIMEOUT_S
    source: str = "flags"  # "flags" | "SLURM"

    @property
    def endpoint(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def flags(self, node_rank: int | None = None) -> list[str]:
        """The cluster flags that start node ``node_rank`` (default: this one) of this plan, as `advisor plan` takes
        them (a default --rdzv-id or --rdzv-timeout is left out)."""
        rank = self.node_rank if node_rank is None else node_rank
        flags = ["--nnodes", str(self.nnodes), "--node-rank", str(rank), "--rdzv-endpoint", self.endpoint]
        if self.run_id != "advisor":
            flags += ["--rdzv-id", self.run_id]
        if self.join_timeout_s != DEFAULT_JOIN_TIMEOUT_S:
            flags += ["--rdzv-timeout", f"{self.join_timeout_s:g}"]
        return flags


def cluster_spec(nnodes: int | None, node_rank: int | None, endpoint: str | None, run_id: str | None,
                 join_timeout_s: float | None = None, environ=None) -> ClusterSpec | None:
    """The cluster from the flags and, under SLURM (``srun advisor plan``), SLURM's variables for what the flags
    leave out: SLURM_NNODES, SLURM_NODEID, the first host of SLURM_JOB_NODELIST on port 29400, SLURM_JOB_ID;
    None for a one-host plan. A flag given wins over SLURM's value (`srun advisor plan --rdzv-endpoint
    node01:29555` keeps SLURM's node count and ranks)."""
    environ = os.environ if environ is None else environ
    slurm_nodes = _int_var(environ, "SLURM_NNODES")
    from_slurm = bool(slurm_nodes and slurm_nodes > 1 and nnodes is None)
    if from_slurm:
        nnodes, node_rank, endpoint, run_id = _from_slurm(environ, slurm_nodes, node_rank, endpoint, run_id)
    if nnodes is None and node_rank is None and endpoint is None:
        return None
    problems = _flag_problems(nnodes, node_rank, endpoint)
    if join_timeout_s is not None and not 0 < join_timeout_s < math.inf:  # -5 read 'within -5 s' after a try
        problems.append(f"--rdzv-timeout must be a positive number of seconds, not {join_timeout_s:g}")
    if problems:
        raise SetupError("The cluster flags are incomplete or wrong: " + "; ".join(problems) + ". Start the same "
                         "command on every node with --nnodes N --node-rank R (0 on the node that writes the recipe) "
                         "--rdzv-endpoint NODE0_HOST:PORT, as for torchrun, or run it under SLURM with srun.")
    host, port = parse_endpoint(endpoint)
    return ClusterSpec(nnodes, node_rank, host, port, run_id or "advisor",
                       DEFAULT_JOIN_TIMEOUT_S if join_timeout_s is None else join_timeout_s,
                       "SLURM" if from_slurm else "flags")


def _from_slurm(environ, slurm_nodes: int, node_rank, endpoint, run_id) -> tuple:
    if environ.get("SLURM_LOCALID", "0") != "0":
        raise SetupError("advisor plan runs once per node, and SLURM started more than one task on this node "
                         f"(SLURM_LOCALID={environ['SLURM_LOCALID']}): use `srun --ntasks-per-node=1 advisor plan "
                         "...`; the plan starts --nproc processes per node itself.")
    if node_rank is None:
        node_rank = _int_var(environ, "SLURM_NODEID")
        if node_rank is None:
            raise SetupError("SLURM_NNODES is set but SLURM_NODEID is not: start the plan with `srun` (one task per "
                             "node) so every node knows its rank, or give --node-rank yourself.")
    if endpoint is None:
        endpoint = f"{expand_nodelist(environ.get('SLURM_JOB_NODELIST', ''))[0]}:{DEFAULT_RDZV_PORT}"
    if run_id is None and environ.get("SLURM_JOB_ID"):
        run_id = f"slurm-{environ['SLURM_JOB_ID']}"
    return slurm_nodes, node_rank, endpoint, run_id


def _flag_problems(nnodes, node_rank, endpoint) -> list[str]:
    problems = []
    if nnodes is None or nnodes < 2:
        problems.append(f"--nnodes must be 2 or more, not {nnodes}" if nnodes is not None else "--nnodes is missing")
    if node_rank is None:
        problems.append("--node-rank is missing")
    elif nnodes and not 0 <= node_rank < nnodes:
        problems.append(f"--node-rank {node_rank} is not between 0 and {nnodes - 1}")
    if not endpoint:
        problems.append("--rdzv-endpoint is missing")
    return problems


def _int_var(environ, name: str) -> int | None:
    value = environ.get(name)
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        raise SetupError(f"{name}={value!r} is not a whole number; is this a SLURM job?") from None


SCRIPT_ON_ONE_HOST = ("A plan of your own script (`-- SCRIPT`) runs on one host for now: drop --nnodes (and the SLURM "
                      "launch), or plan a workload (--workload) across the nodes.")


def measure_on_cluster(settings, spec: ClusterSpec, options: dict, script: bool = False, words=lambda flag: flag) -> None:
    """Settings of a plan measured on the cluster (`advisor plan --nnodes`, the app on node 0): the runs span its
    nodes, and it is the target. ``options``: the named plan options; a target cluster given beside it (--nodes,
    --gpus-per-node, --world-size) or a script (``script``) is refused. ``words``: how a flag is named to the user
    (the app names its fields)."""
    given = [words(f"--{name.replace('_', '-')}") for name in ("nodes", "gpus_per_node", "world_size")
             if options.get(name) not in (None, "")]
    if given:
        raise SetupError(f"{', '.join(given)} describe a cluster a one-host plan extrapolates to; a plan started on "
                         f"every node (here {spec.nnodes} nodes x {settings.nproc} process(es) per node) measures the "
                         "cluster itself. Leave them empty.")
    if script:
        raise SetupError(SCRIPT_ON_ONE_HOST)
    settings.nodes = settings.cluster_nodes = spec.nnodes


# ------------------------------------------------------------------------------------------------ node facts

def node_facts(settings, adapter, host) -> dict:
    """What this node is (host, device, memory) and what it runs (versions): compared at the start, recorded in
    the recipe's [provenance.cluster]."""
    import torch

    from . import __version__
    from .history import host_fingerprint

    version = adapter.version() if callable(getattr(adapter, "version", None)) else None
    facts = {"hostname": platform.node(), "pid": os.getpid(), "torch": torch.__version__,
             "advisor": f"{__version__} (source {_source_digest()})",
             "adapter": f"{adapter.name} {version}" if version else adapter.name, "python": platform.python_version(),
             "device": settings.device, "nproc": settings.nproc, "workload": settings.workload,
             "memory_budget_bytes": settings.memory_budget_bytes, "host_fingerprint": host_fingerprint(host)}
    if host.type == "cuda" and host.names:
        facts.update(device_name=host.names[0], device_memory_bytes=host.memories[0], devices=len(host.names))
    else:
        facts.update(device_name=f"CPU ({host.cpu_count} cores)", device_memory_bytes=host.physical_memory)
    return facts


def _source_digest() -> str:
    """A short digest of the installed advisor package's Python files: nodes with the same version number but
    different code (two checkouts) differ here."""
    digest = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def environment_mismatch(nodes: dict[int, dict]) -> str | None:
    """The refusal when a node runs a different torch, batch-advisor, adapter, device kind, --nproc or workload than
    node 0 (both values named); None when they agree."""
    lead = nodes[0]
    differences = []
    for key, words in MUST_MATCH:
        for rank in sorted(nodes):
            if rank and nodes[rank].get(key) != lead.get(key):
                differences.append(f"{words}: {lead.get(key)} on node 0 ({lead.get('hostname')}), "
                                   f"{nodes[rank].get(key)} on node {rank} ({nodes[rank].get('hostname')})")
    if not differences:
        return None
    return ("The nodes differ, and a plan measured across them would mix them: " + "; ".join(differences) + ". "
            "Install the same versions and start the same command on every node (a shared environment, or the same "
            "container image), then run again. Nothing was run.")


# ------------------------------------------------------------------------------------------------ the meeting

class ClusterLink:
    """This node's connection to the others: the store, the facts every node posted, the heartbeats.

    Keys (under ``advisor/<run id>/``): ``node/R`` facts; ``verdict`` node 0's answer to the meeting; ``hb/R`` a
    counter each node bumps every second; ``job/K`` node 0's K-th job, ``done/K/R`` node R's outcome of it,
    ``abort/K`` node 0 gave up on it; ``end`` how the plan ended; ``bye/R`` node R read it."""

    def __init__(self, spec: ClusterSpec, store, facts: dict[int, dict]):
        self.spec, self.store, self.facts = spec, store, facts
        self.prefix = f"advisor/{spec.run_id}/"
        self._stop = threading.Event()
        self._seen: dict[int, tuple[int, float]] = {}  # node -> (its last counter, when it last moved)
        self._lock = threading.Lock()
        self.store_error: str | None = None  # set when the store stopped answering (node 0 is gone)
        self.jobs = 0  # node 0's jobs posted so far: numbered by the link, so a new session (the app's) goes on
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    @property
    def rank(self) -> int:
        return self.spec.node_rank

    def key(self, *parts) -> str:
        return self.prefix + "/".join(str(p) for p in parts)

    def set(self, key: str, value: dict) -> None:
        self.store.set(self.key(key) if not key.startswith(self.prefix) else key, json.dumps(value))

    def get_if_set(self, key: str) -> dict | None:
        full = self.key(key)
        if not self.store.check([full]):
            return None
        return json.loads(self.store.get(full))

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self.store.add(self.key("hb", self.rank), 1)
                if self.rank == 0:
                    self._watch()
            except Exception as exc:  # noqa: BLE001 - the store's connection broke: node 0 (its host) is gone
                self.store_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                return

    def _watch(self) -> None:
        now = time.monotonic()
        for rank in range(1, self.spec.nnodes):
            count = self.store.add(self.key("hb", rank), 0)
            with self._lock:
                last = self._seen.get(rank)
                if last is None or last[0] != count:
                    self._seen[rank] = (count, now)

    def lost_nodes(self) -> list[int]:
        """Nodes whose heartbeat has not moved for LOST_AFTER_S (node 0's view)."""
        now = time.monotonic()
        with self._lock:
            return sorted(rank for rank, (_, moved) in self._seen.items() if now - moved > LOST_AFTER_S)

    def fingerprint(self) -> str:
        """The cluster as a device class for the history: every node's host fingerprint, in rank order."""
        hosts = [self.facts[rank].get("host_fingerprint") or self.facts[rank].get("hostname") for rank in
                 sorted(self.facts)]
        return "cluster-" + hashlib.sha256(json.dumps(hosts).encode()).hexdigest()[:16]

    def next_job(self) -> int:
        self.jobs += 1
        return self.jobs

    def refit_node_0(self, facts: dict) -> None:
        """Node 0 set up again (the app's Setup, started anew on the same nodes): what must match must be what the
        nodes met with (they run their own flags); the rest (its memory budget) is node 0's new facts. SetupError
        naming both values when a must-match one changed."""
        met = self.facts[0]
        changed = [f"{words}: {met.get(key)} when the nodes met, {facts.get(key)} now" for key, words in MUST_MATCH
                   if facts.get(key) != met.get(key)]
        if changed:
            raise SetupError("The other nodes joined this plan with other settings, and they run their own: "
                             + "; ".join(changed) + ". Put them back, or quit and start every node again with the "
                             "new ones (`advisor plan ... --node-rank R` there).")
        self.facts[0] = facts

    def describe(self, rank: int) -> str:
        facts = self.facts.get(rank, {})
        return f"node {rank} ({facts.get('hostname', '?')})"

    def close(self) -> None:
        """Stop the heartbeat (and wait for it: a beat after node 0 closed the store would only log noise)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


def join(spec: ClusterSpec, facts: dict, say=lambda text: None, cancel=None) -> ClusterLink:
    """Meet the other nodes at the endpoint: node 0 hosts the store and waits for every node (naming the ones
    that never came, or that failed their own checks), checks they run the same versions, and posts its verdict;
    every node returns its link or raises SetupError with the verdict. ``cancel`` (a CancelToken): node 0 stops
    waiting (CancelledError; the nodes that joined hear it)."""
    store = _open_store(spec)
    try:
        return _meet(spec, store, facts, say, cancel)
    except (RuntimeError, OSError) as exc:  # the store's connection broke: node 0 ended during the meeting
        raise SetupError(f"Node 0's rendezvous at {spec.endpoint} went away while the nodes met ({_first_line(exc)}): "
                         "node 0 stopped. Start the plan again on every node.") from None


def _meet(spec: ClusterSpec, store, facts: dict, say, cancel=None) -> ClusterLink:
    prefix = f"advisor/{spec.run_id}/"
    claimed = store.add(f"{prefix}claim/{spec.node_rank}", 1)
    if claimed > 1:
        raise SetupError(f"Another node already joined the rendezvous at {spec.endpoint} (run id {spec.run_id}) as "
                         f"node {spec.node_rank}: give every node its own --node-rank (0 to {spec.nnodes - 1}), or a "
                         "new --rdzv-id for a new plan.")
    store.set(f"{prefix}node/{spec.node_rank}", json.dumps(facts))
    if spec.node_rank == 0:
        say(f"   cluster: waiting at {spec.endpoint} for {spec.nnodes - 1} more node(s) (run id {spec.run_id}, "
            f"up to {spec.join_timeout_s:.0f} s)")
        everyone = _await_nodes(store, prefix, spec, cancel)
        refusal = environment_mismatch(everyone)
        store.set(f"{prefix}verdict", json.dumps({"ok": refusal is None, "message": refusal}))
        if refusal:
            _let_them_read(store, prefix, spec)
            raise SetupError(refusal)
        link = ClusterLink(spec, store, everyone)
        say("   cluster: " + ", ".join(f"{link.describe(r)} {everyone[r]['device_name']}" for r in sorted(everyone)))
        return link
    verdict = _await_key(store, f"{prefix}verdict", spec.join_timeout_s)
    if verdict is None:
        raise SetupError(f"Node 0 at {spec.endpoint} did not answer within {spec.join_timeout_s:.0f} s of this node "
                         "joining: check that node 0 started with the same --nnodes and --rdzv-id, then run again.")
    if not verdict["ok"]:
        store.set(f"{prefix}bye/{spec.node_rank}", "1")
        raise SetupError(verdict["message"])
    everyone = {r: json.loads(store.get(f"{prefix}node/{r}")) for r in range(spec.nnodes)}
    return ClusterLink(spec, store, everyone)


def _open_store(spec: ClusterSpec):
    from torch.distributed import TCPStore

    timeout = timedelta(seconds=max(1.0, spec.join_timeout_s))
    if spec.node_rank == 0:
        try:
            return TCPStore(spec.host, spec.port, None, True, timeout, wait_for_workers=False)
        except (RuntimeError, ValueError, OSError) as exc:
            raise SetupError(
                f"Node 0 cannot host the rendezvous at {spec.endpoint}: {_first_line(exc)}. Another program holds the "
                f"port (an earlier plan or a torchrun still running: `ss -ltnp | grep {spec.port}`), or the address is "
                "not this machine's. Stop it, or start every node with another --rdzv-endpoint port; node 0 must be "
                "the endpoint's host.") from None
    try:
        return TCPStore(spec.host, spec.port, None, False, timeout)
    except (RuntimeError, ValueError, OSError) as exc:
        raise SetupError(
            f"Node {spec.node_rank} could not reach node 0's rendezvous at {spec.endpoint} within "
            f"{spec.join_timeout_s:.0f} s ({_first_line(exc)}). Start node 0 (--node-rank 0) on that host with the "
            "same --rdzv-endpoint, check the host name and that the port is open between the nodes, then run "
            "again.") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _await_nodes(store, prefix: str, spec: ClusterSpec, cancel=None) -> dict[int, dict]:
    deadline = time.monotonic() + spec.join_timeout_s
    keys = {rank: f"{prefix}node/{rank}" for rank in range(spec.nnodes)}
    while True:
        missing = [rank for rank, key in keys.items() if not store.check([key])]
        if not missing:
            return {rank: json.loads(store.get(key)) for rank, key in keys.items()}
        failed = {rank: json.loads(store.get(f"{prefix}failed/{rank}")) for rank in missing
                  if store.check([f"{prefix}failed/{rank}"])}
        if failed:
            _refuse_the_meeting(store, prefix, spec, missing, _failed_nodes_message(spec, failed))
        if cancel is not None and cancel.cancelled:
            _refuse_the_meeting(store, prefix, spec, missing, "Node 0 stopped waiting for the other nodes (cancelled "
                                "there) before they all joined. Nothing was run; start the plan again on every node.",
                                CancelledError)
        if time.monotonic() > deadline:
            break
        time.sleep(0.25)
    names = ", ".join(str(r) for r in missing)
    _refuse_the_meeting(store, prefix, spec, missing, (
        f"Node(s) {names} of {spec.nnodes} never joined the rendezvous at {spec.endpoint} (run id {spec.run_id}) "
        f"within {spec.join_timeout_s:.0f} s. Start `advisor plan` with the same flags on every node (--node-rank "
        f"{names} there; under SLURM, `srun --ntasks-per-node=1 advisor plan ...` does it), or raise "
        "--rdzv-timeout if they start late. Nothing was run."))


def _failed_nodes_message(spec: ClusterSpec, failed: dict[int, dict]) -> str:
    said = " ".join(f"On node {rank} ({report.get('hostname', '?')}): {report.get('message', '')}"
                    for rank, report in sorted(failed.items()))
    names = ", ".join(str(rank) for rank in sorted(failed))
    return (f"Node(s) {names} of {spec.nnodes} cannot take part in the plan: their own checks failed before they "
            f"joined. {said} Fix that on node(s) {names} (its flags, its files, its installation), then start the "
            "plan again on every node. Nothing was run.")


def _refuse_the_meeting(store, prefix: str, spec: ClusterSpec, missing: list[int], message: str,
                        error=SetupError) -> None:
    """Node 0 ends the meeting without a plan: every node that joined hears why (bounded), then ``error``."""
    store.set(f"{prefix}verdict", json.dumps({"ok": False, "message": message}))
    _let_them_read(store, prefix, spec, [r for r in range(1, spec.nnodes) if r not in missing])
    raise error(message)


def report_setup_failure(spec: ClusterSpec, message: str, say=lambda text: None) -> bool:
    """A node other than 0 whose own checks failed (before it could join): leave its message where node 0, waiting
    for it, reads it (the rendezvous store: the only place every host reaches), so node 0 names this node and its
    problem at once instead of "never joined" after --rdzv-timeout. Waits for node 0's store up to --rdzv-timeout;
    False when it could not be reached (node 0 then says "never joined")."""
    say(f"advisor: node {spec.node_rank} cannot take part (below); telling node 0 at {spec.endpoint} (up to "
        f"{spec.join_timeout_s:.0f} s)")
    try:
        store = _open_store(spec)
        store.set(f"advisor/{spec.run_id}/failed/{spec.node_rank}",
                  json.dumps({"hostname": platform.node(), "message": message}))
    except (SetupError, RuntimeError, OSError):
        return False
    return True


def _await_key(store, key: str, timeout_s: float) -> dict | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if store.check([key]):
            return json.loads(store.get(key))
        time.sleep(0.25)
    return None


def _let_them_read(store, prefix: str, spec: ClusterSpec, ranks=None, wait_s: float = GOODBYE_WAIT_S) -> None:
    """Node 0 hosts the store: before it exits, give the other nodes time to read the last word (bounded)."""
    ranks = list(range(1, spec.nnodes)) if ranks is None else ranks
    deadline = time.monotonic() + wait_s
    while ranks and time.monotonic() < deadline:
        ranks = [r for r in ranks if not store.check([f"{prefix}bye/{r}"])]
        time.sleep(0.2)


def finish(link: ClusterLink, ok: bool, message: str = "") -> None:
    """Node 0: tell every node how the plan ended, wait (bounded) until the live ones read it, close."""
    try:
        link.set("end", {"ok": ok, "message": message})
        alive = [r for r in range(1, link.spec.nnodes) if r not in link.lost_nodes()]
        _let_them_read(link.store, link.prefix, link.spec, alive)
    except Exception:  # noqa: BLE001 - the plan's own outcome is what the user must see
        pass
    link.close()


def free_port() -> int:
    """A port free on every interface of this node, for a job's MASTER_PORT (the other nodes connect to it)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@dataclass
class ClusterFacts:
    """The cluster as the recipe's [provenance.cluster] records it."""

    nodes: int
    processes_per_node: int
    world_size: int
    endpoint: str
    source: str
    per_node: list[dict] = field(default_factory=list)
    ceiling_set_by: str | None = None

    def to_dict(self) -> dict:
        return {"nodes": self.nodes, "processes_per_node": self.processes_per_node, "world_size": self.world_size,
                "rendezvous": self.endpoint, "from": self.source,
                **({"ceiling_set_by": self.ceiling_set_by} if self.ceiling_set_by else {}),
                "node": self.per_node}


def cluster_facts(link: ClusterLink, ceiling_set_by: str | None) -> ClusterFacts:
    keep = ("hostname", "device", "device_name", "device_memory_bytes", "memory_budget_bytes", "torch", "advisor",
            "adapter", "python")
    per_node = [{"rank": rank, **{k: link.facts[rank].get(k) for k in keep if link.facts[rank].get(k) is not None}}
                for rank in sorted(link.facts)]
    nproc = link.facts[0]["nproc"]
    return ClusterFacts(link.spec.nnodes, nproc, nproc * link.spec.nnodes, link.spec.endpoint, link.spec.source,
                        per_node, ceiling_set_by)


def say_on_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
