"""Every job of a plan on every node: node 0's runner (the method's) and the other nodes' follower loop.

A training run (trial, noise, sweep) runs at the cluster's shape: each node starts its --nproc ranks of one job,
ranks numbered and joined as torchrun numbers them across nodes (MASTER_ADDR = node 0's host, a fresh
MASTER_PORT per job), so its timing includes the real inter-node all-reduce and its global batch is the one
planned. A ceiling probe of one process runs on each node alone, under that node's own budget: a batch fits
only if it fits every node, so the smallest node sets the ceiling, and the recipe says which node did.

Node 0 posts each job to the rendezvous store, runs its own part, and collects the others' outcomes; a node
whose heartbeat stops (advisor.cluster.LOST_AFTER_S), or that reports a failure, ends the job everywhere
(``abort/K``) within seconds, and a lost node ends the plan: NodeLost names it.
"""

from __future__ import annotations

import sys
import time

from .cluster import LOST_AFTER_S, ClusterLink, NodeLost, free_port
from .errors import CancelledError, TrialError
from .events import Note
from .job import TrialJob
from .launch import CancelToken, JobOutcome, run_job
from .runner import JobRunner

POLL_S = 0.2
CHECK_EVERY_S = 0.5  # how often a running job asks the store whether another node failed or gave up


def cluster_torchrun_command(worker_module: str, job_path: str, nproc: int, node: dict) -> list[str]:
    """torchrun's own static rendezvous for this node's ranks of a job spanning nodes (where no fork server
    serves): the --nnodes/--node-rank/--master-addr/--master-port form torch/distributed/run.py documents."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={node['nnodes']}",
            f"--node-rank={node['node_rank']}", f"--master-addr={node['master_addr']}",
            f"--master-port={node['master_port']}", f"--nproc-per-node={nproc}", "--max-restarts=0",
            "-m", worker_module, "--job", job_path]


class _NodeServer:
    """A fork server whose jobs join ranks on other nodes: every spawn carries this node's place."""

    def __init__(self, server, node: dict):
        self.server, self.node = server, node

    def spawn(self, argv: list[str], nproc: int = 1):
        return self.server.spawn(argv, nproc, node=self.node)


class _ClusterCancel:
    """run_job's cancel token for one job: the user's cancel, a lost node, another node's failure, or node 0
    giving the job up; asked at most every CHECK_EVERY_S (each ask is a round trip to the store)."""

    def __init__(self, user: CancelToken | None, link: ClusterLink, number: int, lead: bool):
        self.user, self.link, self.number, self.lead = user, link, number, lead
        self.reason: str | None = None  # why the job was stopped, when it was not the user
        self._asked = 0.0

    @property
    def cancelled(self) -> bool:
        if self.user is not None and self.user.cancelled:
            return True
        if self.reason is None and time.monotonic() - self._asked > CHECK_EVERY_S:
            self._asked = time.monotonic()
            self.reason = self._why_stop()
        return self.reason is not None

    def _why_stop(self) -> str | None:
        link = self.link
        if link.store_error:
            return "lost"
        try:
            if not self.lead:
                return "aborted" if link.get_if_set(f"abort/{self.number}") is not None else None
            if link.lost_nodes():
                return "lost"
            for rank in range(1, link.spec.nnodes):
                report = link.get_if_set(f"done/{self.number}/{rank}")
                if report is not None and report["status"] != "ok":
                    return "failed elsewhere"
        except Exception:  # noqa: BLE001 - the store broke: node 0 is gone
            return "lost"
        return None


class ClusterRunner(JobRunner):
    """Node 0's runner: the same probes and runs as JobRunner, each on every node."""

    def __init__(self, adapter, settings, emit, cancel: CancelToken, options: dict | None = None, tf32: bool = False,
                 link: ClusterLink | None = None):
        super().__init__(adapter, settings, emit, cancel, options, tf32=tf32)
        self.link = link
        self.per_node = settings.nproc
        self.nproc = settings.nproc * link.spec.nnodes  # the runs' world size: what their global batch counts
        # 1: each node probes alone; else (sharded state: memory per device hangs on the world size) the probe
        # spans the nodes at the runs' world size.
        self.probe_nproc = adapter.probe_processes(self.nproc, self.options)
        self.probe_oom_nodes: dict[int, list[int]] = {}  # per probed batch: the nodes that ran out of memory

    def _launch(self, job: TrialJob, nproc: int, label: str, relay, server) -> JobOutcome:
        together = job.kind != "probe" or self.probe_nproc > 1
        local = self.per_node if together else 1
        number, link = self.link.next_job(), self.link
        node = ({"nnodes": link.spec.nnodes, "master_addr": link.spec.host, "master_port": free_port(),
                 "run_id": f"{link.spec.run_id}-{number}"} if together else None)
        link.set(f"job/{number}", {"job": job.to_json(), "local_nproc": local, "node": node, "label": label})
        token = _ClusterCancel(self.cancel, link, number, lead=True)
        here = {**node, "node_rank": 0} if node else None
        command_for = ((lambda path, n: cluster_torchrun_command(self.adapter.worker_module, path, n, here))
                       if here else self.adapter.command)
        try:
            outcome = run_job(command_for, job, local, self.s.trial_timeout_s, self.s.idle_timeout_s, relay, label,
                              env=self.env, cancel=token, server=_NodeServer(server, here) if server and here else server)
        except TrialError as exc:
            link.set(f"abort/{number}", {})
            if self.cancel.cancelled:
                raise
            return self._after_local_failure(number, exc, job, label)
        for event in outcome.events:
            event.setdefault("node", 0)
        if outcome.status == "oom" and together:
            link.set(f"abort/{number}", {})  # the others are blocked in a collective with the rank that failed
            self._note_oom(job, [0])
            return outcome
        return self._merged(outcome, self._reports(number, label), job, label)

    def _reports(self, number: int, label: str, wait_s: float | None = None) -> dict[int, dict]:
        """Every other node's outcome of job ``number``; NodeLost for a node that stopped answering."""
        link = self.link
        deadline = time.monotonic() + (self.s.trial_timeout_s if wait_s is None else wait_s)
        reports: dict[int, dict] = {}
        while True:
            for rank in range(1, link.spec.nnodes):
                if rank not in reports:
                    report = link.get_if_set(f"done/{number}/{rank}")
                    if report is not None:
                        reports[rank] = report
            if len(reports) == link.spec.nnodes - 1:
                return reports
            lost = [r for r in link.lost_nodes() if r not in reports]
            if lost:
                raise self._lost(lost, label)
            if self.cancel.cancelled:
                link.set(f"abort/{number}", {})
                raise CancelledError(f"The {label} was cancelled; every worker process on every node was stopped. "
                                     "No recipe was written (runs that had finished are kept in the plan history).")
            if time.monotonic() > deadline:
                if wait_s is not None:
                    return reports
                link.set(f"abort/{number}", {})
                missing = [r for r in range(1, link.spec.nnodes) if r not in reports]
                raise TrialError(f"The {label} did not finish on {', '.join(link.describe(r) for r in missing)} "
                                 f"within {self.s.trial_timeout_s:.0f} s (its node still answers): raise "
                                 "--trial-timeout if the model is just slow. Every worker process was stopped and "
                                 "nothing was written.")
            time.sleep(POLL_S)

    def _lost(self, lost: list[int], label: str) -> NodeLost:
        names = ", ".join(self.link.describe(r) for r in lost)
        return NodeLost(f"Lost {names} during the {label}: it stopped answering the rendezvous at "
                        f"{self.link.spec.endpoint} for {LOST_AFTER_S:.0f} s (its advisor process ended, or the node "
                        "or its network went down). The plan was stopped on every node; no recipe was written. "
                        "Check that node, then run the plan again on every node.")

    def _after_local_failure(self, number: int, exc: TrialError, job: TrialJob, label: str) -> JobOutcome:
        """Node 0's part failed: when another node's loss or failure caused it (its ranks' peers vanished), that is
        the answer; else node 0's own error is. Waits (bounded) for the node's heartbeat to settle the question."""
        try:
            reports = self._reports(number, label, wait_s=LOST_AFTER_S + 2 * CHECK_EVERY_S)
        except NodeLost:
            raise
        except TrialError:
            raise exc from None
        if any(report["status"] == "oom" for report in reports.values()):
            return self._merged(JobOutcome("ok", [], 0.0), reports, job, label)
        lost = self.link.lost_nodes()
        if lost:
            raise self._lost(lost, label)
        failed = [(rank, report) for rank, report in sorted(reports.items()) if report["status"] == "error"]
        if not failed:
            raise exc
        rank, report = failed[0]
        if isinstance(exc, CancelledError):  # node 0 stopped its part because the other node failed
            raise TrialError(f"On {self.link.describe(rank)}: {report['message']}")
        # Both failed (a rank that died takes its peers' collectives down): which came first is not known here.
        raise TrialError(f"On node 0: {exc}\nOn {self.link.describe(rank)}: {report['message']}")

    def _merged(self, outcome: JobOutcome, reports: dict[int, dict], job: TrialJob, label: str) -> JobOutcome:
        self._note_oom(job, merge_reports(outcome, reports, self.link.describe))
        return outcome

    def _note_oom(self, job: TrialJob, nodes: list[int]) -> None:
        """The nodes where this probe's batch ran out of memory (the latest probe of a batch counts)."""
        if job.kind == "probe":
            self.probe_oom_nodes[job.per_device_batch] = nodes

    def probe(self, batch: int, purpose: str, precision: str | None = None):
        trial = super().probe(batch, purpose, precision)
        nodes = self.probe_oom_nodes.get(batch)
        if nodes and len(nodes) < self.link.spec.nnodes:  # said live: a smaller node is what stopped the batch
            self.emit(Note(ceiling_set_by(nodes, batch, self.link.spec.nnodes, self.link.describe)))
        return trial

    def ceiling_set_by(self, smallest_oom: int | None) -> str | None:
        return ceiling_set_by(self.probe_oom_nodes.get(smallest_oom) if smallest_oom else None, smallest_oom,
                              self.link.spec.nnodes, self.link.describe)

    def cluster_record(self, ceiling) -> dict:
        """The recipe's [provenance.cluster] (and the history row's ``cluster``) for a plan whose ceiling is
        ``ceiling`` (a CeilingResult, or None)."""
        from .cluster import cluster_facts

        smallest_oom = ceiling.smallest_oom if ceiling else None
        return cluster_facts(self.link, self.ceiling_set_by(smallest_oom)).to_dict()


def merge_reports(outcome: JobOutcome, reports: dict[int, dict], describe) -> list[int]:
    """Put every other node's events into node 0's ``outcome`` (marked with their node; an out-of-memory message
    names it); an out-of-memory anywhere makes the job's answer out of memory, an error anywhere is the job's
    error (TrialError naming the node). Returns the nodes that ran out of memory."""
    oom_nodes = [0] if outcome.status == "oom" else []
    for rank, report in sorted(reports.items()):
        if report["status"] == "error":
            raise TrialError(f"On {describe(rank)}: {report['message']}")
        for event in report.get("events", []):
            event["node"] = rank
            if event.get("status") == "oom" or event.get("event") == "oom":
                event["message"] = f"{describe(rank)}: {event.get('message', 'out of memory')}"
            outcome.events.append(event)
        if report["status"] == "oom":
            outcome.status = "oom"
            oom_nodes.append(rank)
    return oom_nodes


def ceiling_set_by(oom_nodes: list[int] | None, smallest_oom: int | None, nnodes: int, describe) -> str | None:
    """Which node set the ceiling: the nodes that ran out of memory at the smallest batch that did not fit, and
    the nodes where it fit; None when no probe ran out of memory (the ceiling came from elsewhere)."""
    if not oom_nodes:
        return None
    if len(oom_nodes) == nnodes:
        return f"every node alike: batch {smallest_oom} ran out of memory on all {nnodes}"
    fit = [r for r in range(nnodes) if r not in oom_nodes]
    return (f"{', '.join(describe(r) for r in oom_nodes)}: batch {smallest_oom} ran out of memory there and fit on "
            f"{', '.join(describe(r) for r in fit)}")


# ------------------------------------------------------------------------------------------------ other nodes

def follow(link: ClusterLink, adapter, settings, say) -> dict:
    """A node other than 0: run this node's part of every job node 0 posts, until node 0 says the plan ended;
    returns its last word ({"ok", "message"}). Writes nothing. NodeLost if node 0 stops answering."""
    runner: JobRunner | None = None
    number = 1
    try:
        while True:
            if link.store_error:
                raise _node0_gone(link)
            ended = link.get_if_set("end")
            if ended is not None:
                link.close()  # before the goodbye: node 0 closes the store once every node said it
                link.store.set(link.key("bye", link.rank), "1")
                return ended
            posted = link.get_if_set(f"job/{number}")
            if posted is None:
                time.sleep(POLL_S)
                continue
            job = TrialJob.from_json(posted["job"])
            if runner is None:
                runner = JobRunner(adapter, settings, lambda event: None, CancelToken(), tf32=job.tf32)
            say(f"   node {link.rank}: {posted['label']}")
            link.set(f"done/{number}/{link.rank}", _run_part(link, runner, number, job, posted))
            number += 1
    except (RuntimeError, OSError) as exc:  # the store's connection broke mid-call
        link.store_error = link.store_error or str(exc)
        raise _node0_gone(link) from None
    finally:
        if runner is not None:
            runner.close()
        link.close()


def _node0_gone(link: ClusterLink) -> NodeLost:
    return NodeLost(f"Lost node 0: the rendezvous at {link.spec.endpoint}, which node 0 hosts, stopped answering "
                    f"({link.store_error}). This node's workers were stopped and it wrote nothing; node 0 ended or "
                    "went down: check it, then run the plan again on every node.")


def _run_part(link: ClusterLink, runner: JobRunner, number: int, job: TrialJob, posted: dict) -> dict:
    """This node's part of job ``number``, as the report node 0 reads (status, events, or the error's message)."""
    s = runner.s
    # This node's own folder and budget (the same flags; "the GPU's own memory" is each node's own).
    job.workdir, job.memory_budget_bytes = s.workdir, s.memory_budget_bytes
    node = {**posted["node"], "node_rank": link.rank} if posted.get("node") else None
    server = runner._server_for(job)
    command_for = ((lambda path, n: cluster_torchrun_command(runner.adapter.worker_module, path, n, node))
                   if node else runner.adapter.command)
    token = _ClusterCancel(None, link, number, lead=False)
    try:
        # No idle timeout here: only rank 0 (node 0's) reports progress; node 0 judges a hang and aborts the job.
        outcome = run_job(command_for, job, int(posted["local_nproc"]), s.trial_timeout_s, None, None,
                          posted["label"], env=runner.env, cancel=token,
                          server=_NodeServer(server, node) if server and node else server)
    except CancelledError:
        if token.reason == "lost":
            raise _node0_gone(link) from None
        return {"status": "aborted"}
    except TrialError as exc:
        return {"status": "error", "message": str(exc)}
    return {"status": outcome.status, "events": outcome.events, "seconds": round(outcome.seconds, 3)}
