"""What several test files share: the decisions' stub runner and settings, hand-made sweep runs, recipes for the
exports, the in-process training helpers and the process-leak checks. Test files import from here, never from
one another (conftest.py holds the fixtures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import psutil
import tomli_w
import torch

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.ledger import TrialRecord
from advisor.method import MethodSettings, WorkloadInfo
from advisor.method.ceiling import ProbeTrial
from advisor.session import Session, validate_setup

REPO = Path(__file__).resolve().parents[1]
TEST_WORKLOADS = REPO / "tests" / "workloads"


WORKER_MARKERS = ("advisor_adapters.", "torch.distributed.run", "advisor.shim")


def advisor_processes(engine_pids=None, include_self=True):
    """Worker or launcher processes that an advisor engine in this test run started and that are still alive.

    Workers carry BATCH_ADVISOR_ENGINE_PID; only those of this process (or the given engine pids, e.g. a
    CLI subprocess) count, so other advisor runs on the same machine are left alone. ``include_self=False``:
    only the given engines' (a test waiting for its CLI's workers must not see an earlier test's last ones).
    """
    owners = ({str(os.getpid())} if include_self else set()) | {str(p) for p in (engine_pids or ())}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if proc.info["status"] == psutil.STATUS_ZOMBIE or not any(m in cmd for m in WORKER_MARKERS):
            continue
        try:
            owner = proc.environ().get("BATCH_ADVISOR_ENGINE_PID")
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if owner in owners or (engine_pids is None and owner is not None and not psutil.pid_exists(int(owner))):
            found.append(proc)  # ours, or orphaned by an engine that is gone
    return found


def assert_none_left(find) -> None:
    """Give the processes ``find()`` lists 5 s to end; kill any survivor (so later tests stay clean) and fail."""
    deadline = time.monotonic() + 5
    while find() and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = find()
    described = []
    for proc in survivors:
        try:
            described.append(proc.cmdline())
        except psutil.Error:
            described.append(f"pid {proc.pid} (gone)")
        proc.kill()
    assert not survivors, f"processes left behind: {described}"


def workload_spec(function: str) -> str:
    return f"{TEST_WORKLOADS / 'faulty.py'}:{function}"


def plain_strategy(job):
    """The worker's plain single-process strategy (CPU), set up for ``job``."""
    from advisor.worker import WorkerStrategy

    strategy = WorkerStrategy()
    strategy.setup(job)
    return strategy


def train_in_process(workload, capsys, **job_kw) -> dict:
    """run_training in this process with the plain strategy; returns its result event."""
    from advisor.job import EventReader, TrialJob
    from advisor.worker import run_training

    job = TrialJob(kind="train", workload=workload.name, **job_kw)
    strategy = plain_strategy(job)
    model = workload.build_model()
    optimizer = strategy.make_optimizer(workload, model, job)
    model, optimizer = strategy.prepare(model, optimizer, job)
    run_training(job, workload, strategy, model, optimizer, {"enforced": False})
    found = [e for e in map(EventReader().feed, capsys.readouterr().out.splitlines()) if e]
    return next(e for e in found if e["event"] == "result")


def analytic_linear_regression_b_simple(dim: int, distance_sq: float, noise_var: float) -> float:
    """B_simple for least squares 0.5(w.x - y)^2, x ~ N(0, I_dim), y = w*.x + N(0, noise_var), at |w - w*|^2 = distance_sq.

    G = d, Sigma = (|d|^2 + noise_var) I + d d^T (Isserlis), so tr(Sigma) = dim(|d|^2 + noise_var) + |d|^2.
    Checks advisor.method.noise's estimator against a value known in closed form.
    """
    return (dim * (distance_sq + noise_var) + distance_sq) / distance_sq


MIB = 2**20


def info(**kw):
    base = dict(name="w", task="image-classification", num_classes=10, optimizer="sgd", train_size=50_000,
                val_size=1000, parameters=1000, has_batchnorm=False, base_lr=0.1, base_global_batch=256,
                base_source="test")
    base.update(kw)
    return WorkloadInfo(**base)


class StubRunner:
    """Memory = fixed + per_sample x batch (activations halved by mixed precision); throughput saturates at
    ``saturate``. A precision in ``unsupported`` fails at every batch with oneDNN's primitive error."""

    def __init__(self, nproc=2, fixed=10 * MIB, per_sample=1 * MIB, budget=300 * MIB, saturate=10_000,
                 val=None, train_seconds=None, evals=None, unsupported=(), seeded_val=None):
        self.nproc, self.fixed, self.per_sample, self.budget, self.saturate = nproc, fixed, per_sample, budget, saturate
        self.val = val or (lambda batch: 0.9)
        self.seeded_val = seeded_val  # (batch, seed) -> the run's validation metric, when the seed matters
        self.train_seconds = train_seconds or (lambda batch: batch / 100)
        self.evals = evals
        self.unsupported = set(unsupported)
        self.calls: list[tuple] = []
        self.runs: list[dict] = []  # every train() call's settings
        self.ledger: list[TrialRecord] = []
        self.model_info = {"parameters": 1000, "has_batchnorm": False}
        self.env, self.options = {}, {}

    def peak(self, batch, precision="fp32"):
        activations = self.per_sample * batch * (0.5 if precision != "fp32" else 1)
        return self.fixed + activations

    def probe(self, batch, purpose, precision="fp32"):
        self.calls.append(("probe", batch, precision))
        if precision in self.unsupported:
            return ProbeTrial(batch, "oom", None, 0.01, purpose, "RuntimeError: could not create a primitive")
        peak = self.peak(batch, precision)
        fits = peak <= self.budget
        return ProbeTrial(batch, "ok" if fits else "oom", int(peak) if fits else None, 0.01, purpose,
                          "" if fits else "DefaultCPUAllocator: can't allocate memory")

    def train(self, phase, per_device, steps, lr, warmup_steps=0, accumulation=1, evaluate=False,
              precision="fp32", eval_points=1, seed=0):
        self.calls.append((phase, per_device, precision))
        self.runs.append(dict(phase=phase, per_device=per_device, steps=steps, lr=lr, warmup_steps=warmup_steps,
                              seed=seed))
        peak = self.peak(per_device, precision)
        g = per_device * self.nproc
        if peak > self.budget or precision in self.unsupported:
            record = TrialRecord(phase, per_device, self.nproc, accumulation, g, "oom", 0.1, lr=lr,
                                 precision=precision, note="could not create a primitive"
                                 if precision in self.unsupported else "out of memory")
        else:
            throughput = min(g, self.saturate) * 100.0 if self.saturate else g * 100.0
            metric = None if not evaluate else \
                self.seeded_val(per_device, seed) if self.seeded_val else self.val(per_device)
            evals = self.evals(per_device) if (evaluate and self.evals) else []
            # A trial's clock follows its throughput (the trial reads samples/s = g / step time), and so do the
            # trial's timing rounds; the sweep's runs and its timing rounds keep train_seconds' clock, which the
            # sweep's tests set per batch. The sweep's timing rounds come after its runs (run here, or reused from
            # the history: both land in the ledger); the trial's before any.
            swept = any(r.phase == "sweep" and r.status == "ok" for r in self.ledger)
            trial_clock = phase == "trial" or (phase == "timing" and not swept)
            seconds = steps * g / throughput if trial_clock else self.train_seconds(per_device)
            # The step time agrees with the run's clock; the sweep's samples/s read it (global batch / step time).
            record = TrialRecord(phase, per_device, self.nproc, accumulation, g, "ok", 0.1, lr=lr,
                                 precision=precision, steps=steps, peak_bytes=int(peak), step_seconds=seconds / steps,
                                 throughput=throughput, final_loss=1.0, val_loss=1 - (metric or 0),
                                 val_metric=metric, train_seconds=seconds, losses=[2.0, 1.0], evals=evals)
        self.ledger.append(record)
        return record


class WarmupStubRunner(StubRunner):
    """The decisions' stub, recording the warmup each run was given as the real runner does."""

    def train(self, phase, per_device, steps, lr, warmup_steps=0, **kw):
        record = super().train(phase, per_device, steps, lr, warmup_steps, **kw)
        record.warmup_steps = warmup_steps
        return record


class LedgerStubRunner(StubRunner):
    """StubRunner whose probes land in the ledger (as the real runner's do) and whose runs estimate a noise
    scale, numbered so a test sees which walk a row came from."""

    STEPS = 5  # measured noise steps each training run reports

    def __init__(self, **kw):
        super().__init__(**kw)
        self.trained = 0

    def probe(self, batch, purpose, precision="fp32"):
        trial = super().probe(batch, purpose, precision)
        self.ledger.append(TrialRecord("ceiling", batch, self.nproc, 1, batch * self.nproc, trial.status, 0.01,
                                       precision=precision, peak_bytes=trial.peak_bytes, note=f"{purpose} probe"))
        return trial

    def train(self, *args, **kw):
        record = super().train(*args, **kw)
        self.trained += 1
        # Per-step norms of a known B_simple (|G|^2 = 1, tr(Sigma) = 32 at b = 32 vs 64), slightly different per run.
        small = [2.0 + 0.01 * self.trained + 0.001 * i for i in range(self.STEPS)]
        record.gradient_norms = dict(small_sq=small[0], big_sq=1.5, b_small=32, b_big=64, steps=self.STEPS,
                                     small_sq_steps=small, big_sq_steps=[1.5] * self.STEPS)
        return record


class CurveRunner(StubRunner):
    """The stub's memory and throughput, with a loss curve per per-device batch (default: a healthy one); a curve
    may be a function of the run's LR."""

    def __init__(self, curves, **kw):
        super().__init__(**kw)
        self.curves = curves

    def train(self, phase, per_device, steps, lr, *args, **kw):
        record = super().train(phase, per_device, steps, lr, *args, **kw)
        if record.status == "ok":
            curve = self.curves.get(per_device, HEALTHY_RUN)
            record.losses = list(curve(lr) if callable(curve) else curve)
            record.final_loss = record.losses[-1]
        return record


def settings(**kw):
    base = dict(workload="digits-mlp", adapter_name="ddp", nproc=2, device="cpu", memory_budget_bytes=300 * MIB,
                trial_steps=8, sweep_steps=8)
    base.update(kw)
    return MethodSettings(**base)


def swept_session(val, train_seconds=None, centre=32, extensions=1, budget=300 * MIB, sweep_steps=40,
                  seeded_val=None, **settings_kw):
    """A stub session (2 processes) through its ceiling and a sweep around ``centre``: (session, runner, outcome)."""
    adapter = load_adapter("ddp")
    s = settings(nproc=2, sweep_steps=sweep_steps, sweep_extensions=extensions, memory_budget_bytes=budget, **settings_kw)
    runner = StubRunner(saturate=None, budget=budget, val=val, train_seconds=train_seconds, seeded_val=seeded_val)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=runner)
    session.ceiling()
    return session, runner, session.sweep(centre)


DIVERGED_TRIAL = [2.31, 2.3, 2.3, 2.3, 2.28, 2.28, 2.27, 2.24, 2.21, 2.13, 1.95, 1.74, 1.33, 1.05, 7.44, 3.79, 2.26,
                  2.26, 2.3, 2.27, 2.28, 2.28, 2.22, 2.16, 2.24, 1.93, 1.66, 2.89, 7.79, 2.63, 2.52, 2.31, 2.27, 2.26,
                  2.21, 2.2, 2.13, 2.14, 2.1, 2.07]  # digits-cnn's trial at 64 per device, LR 0.04 (the recipe's ledger)


HEALTHY_RUN = [2.3, 2.26, 2.02, 4.6, 0.89, 0.77, 0.51, 0.48, 0.05, 0.08, 0.01, 0.06, 0.04, 0.03, 0.07, 0.01, 0.0, 0.18,
               0.0, 0.0, 0.02, 0.0, 0.05, 0.01]  # its sweep at 16 per device: a spike early, then down and held


FLAT_RUN = [2.31, 2.30, 2.32, 2.29, 2.30, 2.31, 2.28, 2.30, 2.31, 2.29, 2.30, 2.30]  # at chance (ln 10 = 2.30)


def sweep_run(batch, seed, value, *, step_seconds=0.01, losses=HEALTHY_RUN, evals=None, status="ok", metric=True):
    """A 1-process sweep run whose last two checkpoints both read ``value``."""
    evals = evals if evals is not None else [{"step": 10, "val_metric" if metric else "val_loss": value}] * 2
    return TrialRecord("sweep", batch, 1, 1, batch, status, 1.0, seed=seed, step_seconds=step_seconds,
                       val_metric=value if metric and status == "ok" else None,
                       val_loss=(1 - value if metric else value) if status == "ok" else None,
                       losses=list(losses) if status == "ok" else [], evals=evals if status == "ok" else [])


def export_recipe_data(per_device=16, world=4, accumulation=2, optimizer="adamw", precision="bf16", device="cuda", nodes=1,
           adapter="deepspeed", zero_stage=2, warmup=30, lr=0.002):
    data = {
        "schema_version": 1,
        "batch": {"per_device": per_device, "world_size": world, "accumulation_steps": accumulation,
                  "global": per_device * world * accumulation},
        "lr": {"value": lr, "base": 0.001, "base_global_batch": 32, "rule": "sqrt", "optimizer": optimizer},
        "warmup": {"steps": warmup, "epochs": 1.0},
        "precision": {"mode": precision},
        "workload": {"optimizer": optimizer, "parameters": 85_000},
        "adapter": {"name": adapter, **({"zero_stage": zero_stage} if adapter == "deepspeed" else {})},
        "inputs": {"device": device, "nodes": nodes, "world_size": world, "adapter": adapter},
        "launch": {"env": {"MALLOC_MMAP_THRESHOLD_": "65536"} if device == "cpu" else {}},
        # Not the libraries' defaults, so a launch that drops them cannot pass for one that carries them.
        "optimizer": {"name": optimizer, "momentum": 0.8, "weight_decay": 0.05, "betas": [0.85, 0.98], "eps": 1e-6},
    }
    return data


def write_recipe_file(tmp_path, data, name="recipe.toml"):
    path = tmp_path / name
    path.write_text(tomli_w.dumps(data))
    return path


def deepspeed_accepts(config: dict, world: int):
    """DeepSpeed's own config class, told the data-parallel world size through an mpu object."""
    import deepspeed.runtime.config as ds_config

    mpu = types.SimpleNamespace(get_data_parallel_world_size=lambda: world, get_model_parallel_world_size=lambda: 1)
    real_rank = ds_config.dist.get_rank
    ds_config.dist.get_rank = lambda *a, **k: 0  # no process group in a unit test; the world size comes from mpu
    try:
        return ds_config.DeepSpeedConfig(config, mpu=mpu)
    finally:
        ds_config.dist.get_rank = real_rank


def launch_exported(line: str, workdir, timeout=300) -> list[dict]:
    """Run a launch line as a user pastes it (bash, in the directory holding train.py and the config);
    return each process's report, ordered by rank. The launcher's whole process group dies with the test."""
    import os
    import shutil
    import signal

    shutil.copy(REPO / "tests" / "launched_train.py", workdir / "train.py")
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1",
           "DS_ACCELERATOR": "cpu"}  # TORCH_EXTENSIONS_DIR: one cache per venv, set in conftest
    proc = subprocess.Popen(["bash", "-c", line], cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = "", f"timed out after {timeout} s"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the launcher's workers, if any outlived it
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, f"{line}\n{err[-3000:]}"
    reports = [json.loads(path.read_text()) for path in (workdir / "reports").glob("rank*.json")]
    return sorted(reports, key=lambda r: r["rank"])


def devices_of(calls, name):
    return [torch.device(c[1][0]) if not isinstance(c[1][0], int) else torch.device("cuda", c[1][0])
            for c in calls if c[0] == name]


PLUGIN = REPO / "examples" / "single-process-plugin"
PROTOCOL_PLUGIN = REPO / "examples" / "protocol-worker"


def dist_info(site, name, entry_points):
    """What `pip install` leaves for a plugin: a dist-info folder with its entry points."""
    folder = site / f"{name}-0.1.0.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (folder / "entry_points.txt").write_text("[batch_advisor.adapters]\n" + entry_points + "\n")


GIB, FAKE_CARD_BYTES = 2**30, 80 * 2**30


def install_fake_cuda(monkeypatch, in_use_bytes: int = 0, reserved_bytes: int = 0) -> list:
    """A fake 80 GiB card at torch.cuda's device boundary (no GPU here): each call the code under test makes is
    recorded as (name, args, kwargs). ``in_use_bytes``: what the process already holds on the card (mem_get_info),
    ``reserved_bytes`` of it by the caching allocator; the rest is the CUDA context and NCCL's buffers."""
    calls: list = []

    def recorded(name, result=None):
        def call(*args, **kwargs):
            calls.append((name, args, kwargs))
            return result(*args, **kwargs) if callable(result) else result
        return call

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    for name in ("synchronize", "reset_peak_memory_stats", "set_per_process_memory_fraction"):
        monkeypatch.setattr(torch.cuda, name, recorded(name))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", recorded("max_memory_allocated", 123 * 2**20))
    monkeypatch.setattr(torch.cuda, "get_device_properties", recorded(
        "get_device_properties", types.SimpleNamespace(total_memory=FAKE_CARD_BYTES, name="Fake H100", major=9,
                                                       minor=0)))
    monkeypatch.setattr(torch.cuda, "mem_get_info", recorded("mem_get_info",
                                                             (FAKE_CARD_BYTES - in_use_bytes, FAKE_CARD_BYTES)))
    monkeypatch.setattr(torch.cuda, "memory_reserved", recorded("memory_reserved", reserved_bytes))
    return calls
