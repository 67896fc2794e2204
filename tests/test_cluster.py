"""`advisor plan` across nodes: the flags and SLURM's variables (fast), and two real "nodes" on this host, each its
own process tree and working folder, meeting through a TCPStore rendezvous on 127.0.0.1 with gloo (slow)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import psutil
import pytest

import advisor

from advisor.cluster import ClusterSpec, cluster_spec, environment_mismatch, expand_nodelist, parse_endpoint
from advisor.errors import SetupError
from advisor.recipe import load_recipe

from helpers import REPO


def test_cluster_flags_and_slurm_variables():
    assert expand_nodelist("node[01-04],gpu7") == ["node01", "node02", "node03", "node04", "gpu7"]
    assert expand_nodelist("n[08-10]") == ["n08", "n09", "n10"]  # zero padding kept across a digit change
    assert expand_nodelist("rack[1-2]-n[1,3]") == ["rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"]
    assert expand_nodelist("a,b[3]") == ["a", "b3"]
    for bad in ("node[1-", "node[a-b]", ""):
        with pytest.raises(SetupError):
            expand_nodelist(bad)
    assert parse_endpoint("10.0.0.1:29500") == ("10.0.0.1", 29500)
    assert parse_endpoint("node01") == ("node01", 29400)  # torchrun's c10d default port
    assert parse_endpoint("[fe80::1]:7000") == ("fe80::1", 7000)
    with pytest.raises(SetupError, match="HOST:PORT"):
        parse_endpoint("a:b:c")

    assert cluster_spec(None, None, None, None, environ={}) is None  # no flags, no SLURM: a one-host plan
    assert cluster_spec(None, None, None, None, environ={"SLURM_NNODES": "1", "SLURM_NODEID": "0"}) is None
    spec = cluster_spec(2, 1, "127.0.0.1:29611", "x", 30, environ={})
    assert spec == ClusterSpec(2, 1, "127.0.0.1", 29611, "x", 30, "flags")
    slurm = {"SLURM_NNODES": "4", "SLURM_NODEID": "2", "SLURM_JOB_NODELIST": "gpu[07-10]", "SLURM_JOB_ID": "881",
             "SLURM_LOCALID": "0"}
    spec = cluster_spec(None, None, None, None, environ=slurm)
    assert (spec.nnodes, spec.node_rank, spec.endpoint, spec.run_id, spec.source) == (4, 2, "gpu07:29400",
                                                                                       "slurm-881", "SLURM")
    assert cluster_spec(3, 0, "h:1", None, environ=slurm).nnodes == 3  # flags win over SLURM's values
    spec = cluster_spec(None, None, "gpu07:29555", None, environ=slurm)  # a port of one's own under srun
    assert (spec.nnodes, spec.node_rank, spec.port, spec.run_id) == (4, 2, 29555, "slurm-881")
    with pytest.raises(SetupError, match="--ntasks-per-node=1"):
        cluster_spec(None, None, None, None, environ={**slurm, "SLURM_LOCALID": "1"})
    with pytest.raises(SetupError) as refused:
        cluster_spec(2, 2, None, None, environ={})
    assert "--node-rank 2 is not between 0 and 1" in str(refused.value) and "--rdzv-endpoint is missing" in str(
        refused.value)

    lead = {"hostname": "a", "torch": "2.13.0", "advisor": "0.1.0 (source 1)", "adapter": "ddp 2.13.0",
            "device": "cuda", "nproc": 8, "workload": "w"}
    assert environment_mismatch({0: lead, 1: {**lead, "hostname": "b"}}) is None
    said = environment_mismatch({0: lead, 1: {**lead, "hostname": "b", "torch": "2.12.1"}, 2: dict(lead)})
    assert "torch: 2.13.0 on node 0 (a), 2.12.1 on node 1 (b)" in said and "node 2" not in said


def test_other_nodes_outcomes_decide_the_job():
    from advisor.cluster_runner import ceiling_set_by, merge_reports
    from advisor.errors import TrialError
    from advisor.launch import JobOutcome

    def describe(rank):
        return f"node {rank} (h{rank})"

    here = JobOutcome("ok", [{"event": "probe", "status": "ok", "peak_bytes": 10, "rank": 0}])
    fitted = {"status": "ok", "events": [{"event": "probe", "status": "ok", "peak_bytes": 30, "rank": 0}]}
    short = {"status": "oom", "events": [{"event": "probe", "status": "oom", "message": "can't allocate", "rank": 0}]}
    assert merge_reports(here, {1: fitted, 2: short}, describe) == [2]  # the smallest node's answer is the job's
    assert here.status == "oom" and [e.get("node", 0) for e in here.events] == [0, 1, 2]
    assert here.events[-1]["message"] == "node 2 (h2): can't allocate" and here.events[1]["peak_bytes"] == 30
    with pytest.raises(TrialError, match=r"^On node 1 \(h1\): boom"):
        merge_reports(JobOutcome("ok", []), {1: {"status": "error", "message": "boom"}}, describe)
    assert ceiling_set_by([2], 418, 3, describe) == ("node 2 (h2): batch 418 ran out of memory there and fit on "
                                                     "node 0 (h0), node 1 (h1)")
    assert ceiling_set_by([0, 1], 512, 2, describe).startswith("every node alike")
    assert ceiling_set_by(None, None, 2, describe) is None


def test_the_starting_value_divides_the_base_global_batch_over_every_nodes_processes():
    """Step 2 on a plan across 2 nodes of 1 process: the base global batch (32, where the LR was validated) over the
    2 processes every run has is 16 per device. It divided over one node's --nproc (32 per device, a global batch of
    64 in the trial: twice the base, the LR scaled for it), while the World size row beside it said 2. A stub
    session: milliseconds."""
    from helpers import StubRunner, settings

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.session import Session, validate_setup

    s = settings(nproc=1, nodes=2, cluster_nodes=2, base_batch=32)
    adapter = load_adapter("ddp")
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=StubRunner(saturate=None))
    session.ceiling()
    start = session.choose_start()
    assert start.per_device == 16, start.reason
    assert "your base global batch 32" in start.reason and "over 2 process(es) = 16 per device" in start.reason
    plan, why = session.preview_plan(start.per_device)
    assert plan.target_global == 32 and why.startswith("16 per device x 2 process(es)"), why


def test_the_app_runs_on_node_0_only_and_checks_the_cluster_flags_first(capsys, monkeypatch):
    """`advisor [tui] --nnodes ...`: a node other than 0 (from the flags or from SLURM's variables under srun) is
    told, in one paragraph, the `advisor plan` command to run there; wrong flags are refused as `advisor plan`
    refuses them. All before the terminal check (these runs have none) and before torch loads."""
    from advisor.cli import main

    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    where = ["--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29555"]

    def refused(argv, env=None) -> str:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("advisor: ") and len(err.strip().splitlines()) == 1, (code, err)
        assert "Traceback" not in err
        return err

    for argv in (["--workload", "digits-mlp", "--node-rank", "1", *where],
                 ["tui", "--workload", "digits-mlp", "--node-rank", "1", *where]):
        err = refused(argv)
        assert "The app runs on node 0 only" in err and "this is node 1 of 2" in err
        assert ("`advisor plan --workload digits-mlp --adapter ddp --nnodes 2 --node-rank 1 --rdzv-endpoint "
                "127.0.0.1:29555`" in err)
    err = refused([], env={"SLURM_NNODES": "3", "SLURM_NODEID": "2", "SLURM_JOB_NODELIST": "gpu[07-09]",
                           "SLURM_JOB_ID": "77", "SLURM_LOCALID": "0"})
    assert "this is node 2 of 3 (from SLURM's variables)" in err and "--rdzv-endpoint gpu07:29400 --rdzv-id slurm-77" in err
    for key in ("SLURM_NNODES", "SLURM_NODEID", "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_LOCALID"):
        monkeypatch.delenv(key)
    assert "--nnodes must be 2 or more, not 1" in refused(["--nnodes", "1", "--node-rank", "0",
                                                          "--rdzv-endpoint", "h:1"])
    assert "--rdzv-endpoint is missing" in refused(["tui", "--nnodes", "2", "--node-rank", "0"])
    assert "--rdzv-timeout must be a positive" in refused(["--node-rank", "0", *where, "--rdzv-timeout=-5"])
    assert "is not HOST:PORT" in refused(["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "a:b:c"])
    assert "`advisor tui`: --nnodes takes a whole number" in refused(["tui", "--nnodes", "two"])
    assert "own script (`-- SCRIPT`) runs on one host" in refused(["--node-rank", "0", *where, "--", "train.py"])
    # node 0 without a terminal: the help, as a bare `advisor` gives it (the app cannot open here)
    assert main(["--node-rank", "0", *where]) == 0 and "needs a terminal" in capsys.readouterr().err


class _CountingStore:
    """The few TCPStore calls a link's heartbeat makes, in memory (the meeting itself is tested with real stores)."""

    def __init__(self):
        self.values = {}

    def add(self, key, amount):
        self.values[key] = self.values.get(key, 0) + amount
        return self.values[key]


def test_a_later_setup_on_node_0_keeps_the_nodes_only_with_what_they_met_with():
    """The app's Setup started again on the same nodes: they run their own flags, so the workload, adapter,
    processes and device kind must be what they met with (both values named); the rest is node 0's new facts."""
    from advisor.cluster import ClusterLink

    met = {"hostname": "a", "torch": "2.13.0", "advisor": "0.1.0 (source 1)", "adapter": "ddp 2.13.0",
           "device": "cpu", "nproc": 1, "workload": "digits-mlp", "memory_budget_bytes": 64 << 20}
    link = ClusterLink(ClusterSpec(2, 0, "127.0.0.1", 1), _CountingStore(), {0: dict(met), 1: {**met, "hostname": "b"}})
    try:
        link.refit_node_0({**met, "memory_budget_bytes": 32 << 20})
        assert link.facts[0]["memory_budget_bytes"] == 32 << 20
        with pytest.raises(SetupError, match="--workload: digits-mlp when the nodes met, digits-cnn now"):
            link.refit_node_0({**met, "workload": "digits-cnn"})
        assert link.facts[0]["workload"] == "digits-mlp" and [link.next_job(), link.next_job()] == [1, 2]
    finally:
        link.close()


# ------------------------------------------------------------------------------------------------ real nodes

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PLAN = ["--workload", "digits-mlp", "--nproc", "1", "--device", "cpu", "--device-memory", "64MiB",
        "--trial-steps", "8", "--sweep-steps", "40", "--sweep-seeds", "1"]


class Nodes:
    """`advisor plan` started once per "node": each in its own session (process group) and folder; every process
    they start inherits a marker variable, so what is left of them is found by /proc scan alone."""

    def __init__(self, tmp_path):
        self.tmp, self.tag, self.port = tmp_path, uuid.uuid4().hex, _free_port()
        self.procs: dict[int, subprocess.Popen] = {}

    def start(self, rank: int, *extra, python=(sys.executable, "-m", "advisor.cli"), timeout=60, slurm=False,
              env_extra=None, name=None, nnodes=2):
        """Node ``rank``, with the cluster flags, or (``slurm``) as `srun` starts it: SLURM's variables give the
        node count and rank (the endpoint stays a flag: SLURM's default port could be taken on a shared host)."""
        name = name or f"node{rank}"
        folder = self.tmp / name
        folder.mkdir(exist_ok=True)
        env = {**os.environ, "ADVISOR_CLUSTER_TEST": self.tag, "ADVISOR_HISTORY": str(folder / ".history.jsonl"),
               "PYTHONPATH": str(REPO), **(env_extra or {})}
        where = ["--nnodes", str(nnodes), "--node-rank", str(rank)]
        if slurm:
            env.update(SLURM_NNODES="2", SLURM_NODEID=str(rank), SLURM_JOB_NODELIST="localhost,localhost",
                       SLURM_JOB_ID=self.tag[:8], SLURM_LOCALID="0")
            where = []
        argv = [*python, "plan", *PLAN, *where, "--rdzv-endpoint", f"127.0.0.1:{self.port}",
                "--rdzv-timeout", str(timeout), *extra]
        # Output to files beside the node folders: a pipe nobody reads while the test waits on the other node
        # could fill and stall a node.
        with open(self.tmp / f"{name}.out", "w") as out, open(self.tmp / f"{name}.err", "w") as err:
            self.procs[name] = subprocess.Popen(argv, cwd=folder, env=env, stdout=out, stderr=err,
                                                start_new_session=True)
        return self.procs[name]

    def err(self, node) -> str:
        return (self.tmp / f"{_name(node)}.err").read_text()

    def finish(self, node, timeout: float) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``node`` (a rank, or the name it was started with) once it ended."""
        code = self.procs[_name(node)].wait(timeout=timeout)
        return code, (self.tmp / f"{_name(node)}.out").read_text(), self.err(node)

    def wait_for(self, node, text: str, within_s: float = 400) -> None:
        """Until ``node``'s stderr holds ``text`` (it is at that step)."""
        deadline = time.monotonic() + within_s
        while text not in self.err(node):
            assert self.procs[_name(node)].poll() is None and time.monotonic() < deadline, self.err(node)[-2000:]
            time.sleep(0.2)

    def left(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["pid"]):
            try:
                if proc.environ().get("ADVISOR_CLUSTER_TEST") == self.tag and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
        return found

    def assert_none_left(self, within_s: float = 10.0) -> None:
        deadline = time.monotonic() + within_s
        while self.left() and time.monotonic() < deadline:
            time.sleep(0.3)
        survivors = [" ".join(p.cmdline()[:6]) for p in self.left()]
        self.kill_all()
        assert not survivors, f"left running: {survivors}"

    def kill_all(self) -> None:
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.left():
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass


def _name(node) -> str:
    return node if isinstance(node, str) else f"node{node}"


@pytest.fixture
def nodes(tmp_path):
    started = Nodes(tmp_path)
    yield started
    started.kill_all()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_nodes_plan_digits_mlp(nodes, tmp_path):
    # ~60 s quiet; each node's processes share 2 cores with the rest of the machine
    nodes.start(0, "--out", str(tmp_path / "node0" / "mlp.toml"))
    # Node 1 has less memory (its own --device-memory, as a smaller GPU has): it must set the ceiling.
    nodes.start(1, "--out", str(tmp_path / "node1" / "mlp.toml"), "--device-memory", "4MiB")
    code0, out0, err0 = nodes.finish(0, timeout=1100)
    code1, _, err1 = nodes.finish(1, timeout=120)
    assert code0 == 0, err0[-3000:]
    assert code1 == 0, err1[-3000:]
    recipe = load_recipe(tmp_path / "node0" / "mlp.toml").data
    batch = recipe["batch"]
    assert batch["world_size"] == 2 and batch["global"] == batch["per_device"] * 2
    assert batch["validated_global"] == batch["global"] and batch["extrapolation"] == 1.0
    assert batch["per_device"] == recipe["method"]["sweep_choice"]  # the pick ran at the planned world size
    launch = recipe["launch"]["example"]
    assert "torchrun --nnodes=2 --node-rank=" in launch and "--rdzv-endpoint=" in launch
    cluster = recipe["provenance"]["cluster"]
    assert (cluster["nodes"], cluster["processes_per_node"], cluster["world_size"]) == (2, 1, 2)
    assert [n["rank"] for n in cluster["node"]] == [0, 1]
    assert [n["memory_budget_bytes"] for n in cluster["node"]] == [64 * 2**20, 4 * 2**20]
    assert cluster["ceiling_set_by"].startswith("node 1 (") and "fit on node 0" in cluster["ceiling_set_by"]
    assert all(n["device"] == "cpu" and n["device_memory_bytes"] > 0 for n in cluster["node"])
    # every run of the ledger ran at the cluster's world size; the probes ran on both nodes (one process each)
    runs = [row for row in recipe["ledger"] if row["phase"] in ("trial", "sweep")]
    assert runs and all(row["world_size"] == 2 and row["status"] == "ok" for row in runs)
    assert err1.count("ceiling probe at batch") >= 2 and "sweep at" in err1
    assert "ran out of memory there and fit on node 0" in err0  # said live, as the probe ends
    history = [json.loads(line) for line in (tmp_path / "node0" / ".history.jsonl").read_text().splitlines()]
    assert [row["cluster"]["nodes"] for row in history if row["kind"] == "plan"] == [2]
    # its own device class: a one-host plan on node 0's host never reuses these runs, nor this plan its runs
    assert {row["device"]["host_fingerprint"][:8] for row in history} == {"cluster-"}
    assert "Traceback" not in err0 + err1
    assert sorted(p.name for p in (tmp_path / "node1").iterdir()) == []  # node 1 wrote nothing (no history either)
    nodes.assert_none_left()


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("adapter", ["fsdp", "accelerate"])
def test_two_nodes_plan_with_another_adapter(nodes, tmp_path, adapter):
    # FSDP and Accelerate's DDP hold per-device memory that hangs on the world size: their probes span the nodes.
    nodes.start(0, "--adapter", adapter, "--out", str(tmp_path / "node0" / "mlp.toml"))
    nodes.start(1, "--adapter", adapter)
    code0, _, err0 = nodes.finish(0, timeout=1100)
    code1, _, err1 = nodes.finish(1, timeout=120)
    assert code0 == 0 and code1 == 0, (err0[-2000:], err1[-2000:])
    recipe = load_recipe(tmp_path / "node0" / "mlp.toml").data
    assert recipe["adapter"]["name"] == adapter and recipe["ceiling"]["probe_world_size"] == 2
    assert recipe["batch"]["world_size"] == 2 and recipe["batch"]["extrapolation"] == 1.0
    assert "--nnodes=2" in recipe["launch"]["example"] and recipe["provenance"]["cluster"]["nodes"] == 2
    nodes.assert_none_left()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_losing_a_node_mid_plan_stops_every_node(nodes, tmp_path):
    out = tmp_path / "node0" / "mlp.toml"
    nodes.start(0, "--out", str(out), slurm=True)  # as `srun advisor plan` starts them
    other = nodes.start(1, slurm=True)
    nodes.wait_for(1, "trial at")  # node 1 runs its part of the first training run
    killed = time.monotonic()
    os.killpg(other.pid, signal.SIGKILL)  # node 1's whole process group, as a node going down
    code0, _, err0 = nodes.finish(0, timeout=300)
    took = time.monotonic() - killed
    assert code0 != 0 and took < 120, (took, err0[-2000:])
    assert "Lost node 1" in err0 and "no recipe was written" in err0 and "Traceback" not in err0
    assert f"run id slurm-{nodes.tag[:8]}" in err0  # the cluster came from SLURM's variables
    assert not out.exists()
    nodes.assert_none_left()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_losing_node_0_stops_the_others(nodes, tmp_path):
    out = tmp_path / "node0" / "mlp.toml"
    lead = nodes.start(0, "--out", str(out))
    nodes.start(1)
    nodes.wait_for(1, "trial at")
    killed = time.monotonic()
    os.killpg(lead.pid, signal.SIGKILL)  # node 0 goes down, and the rendezvous store with it
    code1, _, err1 = nodes.finish(1, timeout=300)
    took = time.monotonic() - killed
    assert code1 == 1 and took < 120, (took, err1[-2000:])
    assert "Lost node 0" in err1 and "Traceback" not in err1 and "frame #" not in err1
    assert not out.exists()
    nodes.assert_none_left()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_node_whose_workers_fail_is_named(nodes, tmp_path):
    workload = ["--workload", f"{REPO}/tests/workloads/faulty.py:digits_mlp_failing_where_marked"]
    out = tmp_path / "node0" / "mlp.toml"
    nodes.start(0, *workload, "--out", str(out))
    nodes.start(1, *workload, env_extra={"ADVISOR_TEST_NODE_FAILS": "1"})
    code0, _, err0 = nodes.finish(0, timeout=400)
    code1, _, err1 = nodes.finish(1, timeout=120)
    assert code0 == 1 and "On node 1 (" in err0 and "copy of the data set is missing" in err0, err0[-2000:]
    assert code1 == 1 and "node 0's plan ended without a recipe" in err1, err1[-2000:]
    assert not out.exists()
    nodes.assert_none_left()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_cluster_faults_at_the_start(nodes, tmp_path):
    # A node that never joins: node 0 names it after --rdzv-timeout.
    started = time.monotonic()
    nodes.start(0, timeout=8)
    code, _, err = nodes.finish(0, timeout=120)
    assert code == 2 and "Node(s) 1 of 2 never joined" in err and "Traceback" not in err, err[-2000:]
    assert time.monotonic() - started < 90

    # The rendezvous port taken by another program: one paragraph, exit 2.
    with socket.socket() as squatter:
        squatter.bind(("", nodes.port))
        squatter.listen()
        nodes.start(0, timeout=8)
        code, _, err = nodes.finish(0, timeout=120)
    assert code == 2 and "cannot host the rendezvous" in err and "Traceback" not in err, err[-2000:]
    assert len(err.strip().splitlines()) == 1

    # A node with another batch-advisor: refused on every node, both versions named, nothing run. A second node
    # started as node 1 is refused for its rank. Three nodes, so the order is certain: node 0 keeps waiting for
    # node 2 (started only once the duplicate was refused), so the duplicate always meets a node 0 still up (with
    # two nodes, node 0 could refuse the versions and leave before the duplicate even connected).
    nodes.port = _free_port()
    nodes.start(0, timeout=60, nnodes=3)
    other_version = (sys.executable, "-c", "import sys, advisor; advisor.__version__ = '9.9.9'; "
                                          "from advisor.cli import main; sys.exit(main())")
    nodes.start(1, timeout=60, python=other_version, nnodes=3)
    nodes.start(1, timeout=60, python=other_version, name="node1-again", nnodes=3)
    deadline = time.monotonic() + 120
    while all(nodes.procs[name].poll() is None for name in ("node1", "node1-again")):
        assert time.monotonic() < deadline, "neither node 1 was refused for its rank"
        time.sleep(0.2)
    duplicate = "node1" if nodes.procs["node1"].poll() is not None else "node1-again"
    code, _, err = nodes.finish(duplicate, timeout=10)
    assert code == 2 and "as node 1: give every node its own --node-rank" in err, err[-2000:]
    nodes.start(2, timeout=60, nnodes=3)
    joined = "node1-again" if duplicate == "node1" else "node1"
    for node in (0, joined, 2):
        code, _, err = nodes.finish(node, timeout=120)
        assert code == 2 and f"batch-advisor: {advisor.__version__}" in err and "9.9.9 (source" in err, err[-2000:]
        assert "on node 1" in err and "Traceback" not in err, err[-2000:]
    nodes.assert_none_left()


def test_a_node_that_cannot_reach_node_0_says_so_in_one_paragraph_without_torchs_native_stack(nodes):
    """Known (issue 38): before our paragraph, torch's C++ client logged `[E... socket.cpp:1028] ...` lines and a
    stack of native frames (`frame #0 ...`) to stderr; TORCH_CPP_LOG_LEVEL=ERROR (set before) still printed
    them. Node 1 alone, nothing listening at the endpoint: ~2 s of work past torch's import."""
    nodes.start(1, timeout=1)
    code, _, err = nodes.finish(1, timeout=120)
    assert code == 2 and "Node 1 could not reach node 0's rendezvous" in err, err[-2000:]
    assert "frame #" not in err and "socket.cpp" not in err and "[E" not in err, err[-2000:]
    assert err.startswith("advisor: ") and len(err.strip().splitlines()) == 1
    nodes.assert_none_left()


def test_the_quiet_c10_log_level_is_this_processs_only(monkeypatch):
    """The workers a node starts inherit the environment: they keep the user's C++ log level (none, or theirs)."""
    from advisor.cli import _torch_cpp_log_quiet_here

    monkeypatch.delenv("TORCH_CPP_LOG_LEVEL", raising=False)
    with _torch_cpp_log_quiet_here(True):
        assert os.environ["TORCH_CPP_LOG_LEVEL"] == "FATAL"
    assert "TORCH_CPP_LOG_LEVEL" not in os.environ
    monkeypatch.setenv("TORCH_CPP_LOG_LEVEL", "INFO")  # a user debugging the store keeps the lines asked for
    with _torch_cpp_log_quiet_here(True):
        assert os.environ["TORCH_CPP_LOG_LEVEL"] == "INFO"


@pytest.mark.timeout(300)
def test_a_node_that_fails_its_own_checks_is_named_by_node_0_at_once(nodes, tmp_path):
    """Node 1 cannot load the workload (its file was never copied to that node): it tells node 0 through the
    rendezvous store before it exits 2, and node 0 names node 1 and its problem at once, well within
    --rdzv-timeout (it said only "never joined", after the timeout, before)."""
    for name in ("node0", "node1"):
        (tmp_path / name).mkdir()
    (tmp_path / "node0" / "my_workload.py").write_text("from advisor.workloads.digits import digits_mlp  # noqa: F401\n")
    workload = ["--workload", "my_workload.py:digits_mlp"]
    out = tmp_path / "node0" / "mlp.toml"
    started = time.monotonic()
    nodes.start(0, *workload, "--out", str(out), timeout=90)
    nodes.start(1, *workload, timeout=90)
    code1, _, err1 = nodes.finish(1, timeout=150)
    code0, _, err0 = nodes.finish(0, timeout=150)
    took = time.monotonic() - started
    assert code1 == 2 and "my_workload.py" in err1 and "telling node 0" in err1, err1[-2000:]
    assert code0 == 2 and "Node(s) 1 of 2 cannot take part in the plan" in err0, err0[-2000:]
    assert "On node 1 (" in err0 and "my_workload.py" in err0 and "never joined" not in err0, err0[-2000:]
    assert took < 45, f"{took:.0f} s: node 0 waited for the --rdzv-timeout (90 s) instead of hearing node 1"
    assert "Traceback" not in err0 + err1 and not out.exists()
    nodes.assert_none_left()


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_the_app_on_node_0_plans_across_two_nodes(nodes, tmp_path, monkeypatch):
    """`advisor --nnodes 2 --node-rank 0 ...` (the app) with node 1 a real `advisor plan --node-rank 1`: the Setup
    says the plan spans 2 nodes, every step runs on both, and the recipe saved is the one `advisor plan --nnodes 2`
    writes (world size 2 measured, a two-node launch line, [provenance.cluster], the cluster flags in its command);
    as the app closes, node 1 hears the plan ended with a recipe and exits 0, having written nothing."""
    from tui_stub import screen_text, wait_for, walk_to

    from advisor.tui.app import Prefill, create_app

    folder = tmp_path / "node0"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("ADVISOR_CLUSTER_TEST", nodes.tag)  # node 0's workers (the app's) carry the marker too
    monkeypatch.setenv("ADVISOR_HISTORY", str(folder / ".history.jsonl"))
    nodes.start(1, timeout=180)
    spec = cluster_spec(2, 0, f"127.0.0.1:{nodes.port}", None, 180, environ={})
    app = create_app(Prefill("digits-mlp", "ddp", 1, "64MiB", 8, 40), cluster=spec)
    saved = folder / "recipes" / "digits-mlp.toml"
    async with app.run_test(size=(120, 40)) as pilot:
        assert "2 nodes" in screen_text(app, "#cluster") and "world size 2 x 1 = 2" in screen_text(app, "#cluster")
        app.screen.query_one("#sweep-seeds").value = "1"
        await walk_to(pilot, "recipe", timeout=600)
        await wait_for(pilot, lambda: "recipe" in app.done, timeout=300, what="the plan")
        world = {label: why for label, _, why in app.screen.query_one("#numbers")._rows}["World size"]
        assert world.startswith("2 nodes x 1 process(es) per node, measured across them"), world
        await pilot.press("ctrl+s")
        await wait_for(pilot, saved.exists, what="the saved recipe")
    code1, _, err1 = nodes.finish(1, timeout=120)
    assert code1 == 0 and "the plan ended on node 0; this node wrote nothing" in err1, err1[-3000:]
    recipe = load_recipe(saved).data
    batch = recipe["batch"]
    assert batch["world_size"] == 2 and batch["global"] == batch["per_device"] * 2
    assert batch["validated_global"] == batch["global"] and batch["extrapolation"] == 1.0
    assert "torchrun --nnodes=2 --node-rank=" in recipe["launch"]["example"]
    cluster = recipe["provenance"]["cluster"]
    assert (cluster["nodes"], cluster["processes_per_node"], cluster["world_size"]) == (2, 1, 2)
    assert [n["rank"] for n in cluster["node"]] == [0, 1] and cluster["rendezvous"] == f"127.0.0.1:{nodes.port}"
    runs = [row for row in recipe["ledger"] if row["phase"] in ("trial", "sweep")]
    assert runs and all(row["world_size"] == 2 for row in runs)
    command = recipe["provenance"]["command"]
    assert command.startswith("advisor plan ") and f"--nnodes 2 --node-rank 0 --rdzv-endpoint 127.0.0.1:{nodes.port}" in command
    history = [json.loads(line) for line in (folder / ".history.jsonl").read_text().splitlines()]
    assert {row["device"]["host_fingerprint"][:8] for row in history} == {"cluster-"}  # as `advisor plan --nnodes`
    assert err1.count("ceiling probe at batch") >= 2 and "sweep at" in err1 and "Traceback" not in err1
    assert sorted(p.name for p in (tmp_path / "node1").iterdir()) == []
    nodes.assert_none_left()


async def test_the_setup_cluster_row_wraps_inside_the_form(tmp_path, monkeypatch):
    """The Cluster row (what the plan spans, where the nodes meet, the command for the other nodes) wraps within the
    form as the Devices row does: at 120x40 it ran off the right edge, cutting "...spans the[m. This is node 0: it]
    runs the method" and the `--node-rank` it tells you to give the other nodes. Nothing is started."""
    from tui_stub import cpu_host, screen_text

    from advisor.tui.app import Prefill, create_app
    from advisor.tui.screens.setup import cluster_text

    monkeypatch.chdir(tmp_path)
    spec = ClusterSpec(2, 0, "127.0.0.1", _free_port(), "app-wrap", 120)
    app = create_app(Prefill("digits-mlp", "ddp", 1, "64MiB", 8, 40), host=cpu_host(), cluster=spec)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        row = app.screen.query_one("#cluster")
        form = app.screen.query_one("#form")
        assert row.region.right <= form.content_region.right, (row.region, form.content_region)
        assert row.region.height >= 3  # wrapped onto lines of its own, all of them shown
        # Two nodes: the other one's rank, not "its own --node-rank (1 to 1)".
        assert "on it, run `advisor plan` with the same workload and settings and --node-rank 1." in " ".join(
            screen_text(app, "#cluster").split())
    assert "its own --node-rank (1 to 3)" in cluster_text(ClusterSpec(4, 0, "h", 1, "r", 9), "2")


@pytest.mark.slow
async def test_the_apps_start_on_node_0_refuses_a_target_cluster_and_esc_stops_the_wait(tmp_path, monkeypatch):
    """The app on node 0, no other node started: the Target nodes field is refused beside the cluster (in the
    form's words, as `advisor plan --nnodes` refuses --nodes); Start then waits for node 1 at the endpoint, Esc
    stops the wait (no plan, no session), and a second Start hosts the rendezvous again on the same port.
    27 s at load 13 (the workload check and torch's import in the app), so slow."""
    from tui_stub import cpu_host, screen_text, wait_for

    from advisor.tui.app import Prefill, create_app

    monkeypatch.chdir(tmp_path)
    spec = ClusterSpec(2, 0, "127.0.0.1", _free_port(), "app-esc", 120)
    app = create_app(Prefill("digits-mlp", "ddp", 1, "64MiB", 8, 40), host=cpu_host(), cluster=spec)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: screen_text(app, "#workload-status").strip() and "checking" not in screen_text(
            app, "#workload-status"), timeout=120, what="the workload check")
        app.screen.query_one("#nodes").value = "4"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.screen.query_one(".error-panel").has_class("shown"), timeout=60,
                       what="the refusal")
        assert '"Target nodes" describe a cluster a one-host plan extrapolates to' in screen_text(app, ".error-panel")
        app.screen.query_one("#nodes").value = ""
        for attempt in range(2):  # the second: the first wait's store was let go, its port is free again
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: "waiting at 127.0.0.1" in screen_text(app, "#status"), timeout=60,
                           what=f"the wait for node 1 ({attempt})")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen.query_one(".error-panel").has_class("shown"), timeout=30,
                           what="the wait to stop")
            assert "Start stopped waiting for the other nodes (Esc)" in screen_text(app, ".error-panel")
            assert app.session is None and app.cluster_link is None


@pytest.mark.slow
async def test_a_node_lost_during_a_step_of_the_app_is_a_failure_not_a_cancel():
    """NodeLost is a CancelledError in kind (every path that stops the workers on a cancel does so), but the app
    shows it as the step's failure with its message, not as the user's cancel."""
    from tui_stub import screen_text, start_walk, stub_app, wait_for

    from advisor.cluster import NodeLost

    def lost():
        raise NodeLost("Lost node 1 (b) during the trial at 32 per device: it stopped answering the rendezvous.")

    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await start_walk(pilot)
        await wait_for(pilot, lambda: app.running is None, what="the ceiling step")
        assert app.run_step("ceiling", lost)
        await wait_for(pilot, lambda: app.running is None and "Lost node 1" in screen_text(app, ".error-panel"),
                       what="the step to fail")
        assert "Memory ceiling failed" in screen_text(app, ".error-panel") and "Cancelled" not in screen_text(
            app, ".error-panel")
        # r cannot run it again (the plan has ended on every node, and a later Start refuses the lost link): the
        # status line says what does, not "then r to run again".
        status = screen_text(app, "#status")
        assert "r to run again" not in status and "Quit the app (ctrl+q) and start the plan again on every node" \
            in status, status
        assert "ceiling" not in app.done
