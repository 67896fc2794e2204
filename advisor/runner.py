"""The real runner: jobs through one adapter's launcher, outcomes into ledger rows and typed events."""

from __future__ import annotations

import os
import statistics
import weakref

from .adapters import Adapter
from .method.ceiling import ProbeTrial
from .errors import AdvisorError, CancelledError, TrialError, WorkerCrashed
from .events import EvalPoint, Note, ProbeFinished, ProbeStarted, RunStarted, TrialFinished, TrialProgress
from .job import TrialJob
from .launch import CancelToken, JobOutcome, run_job, worker_env
from .ledger import TrialRecord
from .method import MethodSettings


WARM_WORKERS_ENV = "ADVISOR_WARM_WORKERS"


class JobRunner:
    """Runs probes and short trainings through one adapter; every run lands in the ledger."""

    def __init__(self, adapter: Adapter, settings: MethodSettings, emit, cancel: CancelToken,
                 options: dict | None = None, tf32: bool = False, warm_workers: bool | None = None):
        self.adapter, self.s, self.emit, self.cancel = adapter, settings, emit, cancel
        self.nproc = settings.nproc
        self.ledger: list[TrialRecord] = []
        self.model_info: dict | None = None
        self.optimizer_info: dict | None = None  # which optimizer implementation the workers ran
        self.ranking_info: dict | None = None  # which validation metric ranks the sweep, and why
        self.probe_batches: dict[int, dict] = {}  # per probed batch: what the probe fed (longest samples, shapes)
        self.probe_selection = None  # advisor.batches.ProbeSelection: the samples probes feed (set by the session)
        self.env = adapter.environment("cuda" if settings.device.startswith("cuda") else "cpu")
        self.tf32 = tf32
        if tf32:  # the workers set the flags themselves; the variable carries TF32 to the user's run (launch env)
            from .device import TF32_ENV

            self.env.update(TF32_ENV)
        # ``options``: validate_setup's adapter.plan_options answer (checked against the optimizer)
        if options is None:
            options = adapter.plan_options(dict(settings.adapter_options), settings.optimizer or "", settings.precision)
        self.options = options
        self.probe_nproc = adapter.probe_processes(settings.nproc, self.options)
        self.probe_precision = settings.start_precision
        self.script_seen: list[dict] = []  # per shim report: what the script's run saw
        self.job_extra: dict = {}  # more for every job (the script door: which script, how to set its batch)
        # On CPU every job (probes, trials, sweep runs; any number of ranks) forks from a pre-imported server
        # (advisor/probe_server.py) instead of paying a fresh launch; adapters that name no worker module (the
        # script door) launch through their command as before. On CUDA the server keeps the fork-safety rules
        # (it refuses to serve once CUDA is initialised) but has not run on a GPU yet: jobs there launch fresh
        # until it has.
        if warm_workers is None:  # ADVISOR_WARM_WORKERS=0: every job launches fresh (a library not fork-safe)
            warm_workers = os.environ.get(WARM_WORKERS_ENV, "1") != "0"
        self.warm_workers = (warm_workers and settings.device == "cpu"
                             and bool(adapter.worker_module))
        self.probe_server = None
        self.probe_server_unavailable: str | None = None  # why jobs fell back to fresh launches, if they did

    def close(self) -> None:
        """End the fork server (also done when the runner is collected or the engine exits)."""
        if self.probe_server is not None:
            self.probe_server.close()
            self.probe_server = None

    def __enter__(self) -> "JobRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start_server_early(self) -> None:
        """Launch the fork server for this runner's jobs now, without waiting for it: its start-up (an interpreter,
        torch, the worker and the workload's module) then overlaps what the caller waits for meanwhile (the CLI's
        workload check, a process of its own) instead of delaying the first probe, which waits for the rest and
        reports a failed start as usual. Call it from the thread that will run the jobs (the server dies with it)."""
        if self.warm_workers and self.probe_server is None:
            self._new_server(self._job(kind="probe", per_device_batch=1, steps=2)).launch()

    def _new_server(self, job: TrialJob):
        from .probe_server import ProbeServer

        self.probe_server = ProbeServer(self.adapter.worker_module, worker_env(job, self.env), job.workdir,
                                        job.workload)
        weakref.finalize(self, self.probe_server.close)
        return self.probe_server

    def _server_for(self, job: TrialJob):
        """The fork server for ``job``'s environment, started on first use; None where jobs launch fresh."""
        if not self.warm_workers:
            return None
        env = worker_env(job, self.env)
        if self.probe_server is not None and (self.probe_server.env != env or self.probe_server.cwd != job.workdir
                                              or self.probe_server.workload != job.workload):
            self.close()  # the environment changed (e.g. the caller's): a server carries the env it started with
        if self.probe_server is None:
            self._new_server(job)
        if not self.probe_server.start(self.cancel):  # starts it, or waits for an early one; at once when it serves
            self.probe_server_unavailable = self.probe_server.unavailable
            self.warm_workers = False
            self.close()
            self.emit(Note(f"Every probe and run starts a fresh launch: {self.probe_server_unavailable}."))
            return None
        return self.probe_server

    def _fresh_after_fork_failure(self, what: str, exc: TrialError) -> None:
        """A forked job died in a way a fresh launch might not (a library that is not fork-safe): the fresh launch
        is the reference path, so this job runs again that way, and so does the rest of the plan."""
        self.warm_workers = False
        self.close()
        self.emit(Note(f"A forked {what} failed ({str(exc).splitlines()[0][:160]}); running it again with a fresh "
                       "launch, as every later probe and run of this plan will be."))

    def _job(self, **kw) -> TrialJob:
        return TrialJob(workload=self.s.workload, device=self.s.device, memory_budget_bytes=self.s.memory_budget_bytes,
                        collective_timeout_s=self.s.collective_timeout_s, workdir=self.s.workdir, tf32=self.tf32,
                        extra={"adapter_options": self.options, "optimizer": self.s.optimizer, **self.job_extra},
                        **kw)

    def _run(self, job: TrialJob, nproc: int, label: str, on_event=None, server=None) -> JobOutcome:
        def relay(event):
            if event.get("seen"):  # the script door's shim: what the user's script fed and ran
                self.script_seen.append({"kind": job.kind, "batch": job.per_device_batch, **event["seen"]})
            if event["event"] == "model" and self.model_info is None:
                self.model_info = event
            elif event["event"] == "optimizer":
                self.optimizer_info = event
            elif on_event:
                on_event(event)

        try:
            return self._launch(job, nproc, label, relay, server)
        except CancelledError:
            self.close()  # a cancel stops everything, the warm server too; the next job starts a new one
            raise

    def _launch(self, job: TrialJob, nproc: int, label: str, relay, server) -> JobOutcome:
        """Run ``job`` on this host's ``nproc`` workers (advisor.cluster_runner runs it on every node)."""
        return run_job(self.adapter.command, job, nproc, self.s.trial_timeout_s, self.s.idle_timeout_s, relay,
                       label, env=self.env, cancel=self.cancel, server=server)

    def probe(self, batch: int, purpose: str, precision: str | None = None) -> ProbeTrial:
        precision = precision or self.probe_precision
        self.emit(ProbeStarted(batch, purpose, self.probe_nproc))
        job = self._job(kind="probe", per_device_batch=batch, steps=2, precision=precision)
        selection = self.probe_selection
        if selection is not None and selection.indices:
            job.extra["probe_indices"] = selection.indices
        label = f"ceiling probe at batch {batch}"
        server = self._server_for(job)
        try:
            outcome = self._run(job, self.probe_nproc, label, server=server)
        except CancelledError:
            raise
        except TrialError as exc:
            if server is None:
                outcome = self._segfault_as_oom(exc)
            else:
                self._fresh_after_fork_failure(f"memory probe at batch {batch}", exc)
                try:
                    outcome = self._run(job, self.probe_nproc, label)
                except CancelledError:
                    raise
                except TrialError as again:
                    outcome = self._segfault_as_oom(again)
        events = outcome.all("probe")
        shapes = next((e["batch_shapes"] for e in events if e.get("batch_shapes")), None)
        if shapes:
            self.probe_batches[batch] = {"batch": batch, "samples": selection.reason if selection else
                                         "random samples", "shapes": shapes}
        fitted = outcome.status == "ok" and events and all(e.get("status") == "ok" for e in events)
        worst = max(events, key=lambda e: e.get("peak_bytes") or 0) if events else {}
        oom = next((e for e in events if e.get("status") == "oom"), {})
        trial = ProbeTrial(batch, "ok" if fitted else "oom", worst.get("peak_bytes") if fitted else None,
                           outcome.seconds, purpose, oom.get("message", ""), worst.get("breakdown") or {},
                           worst.get("measured_by") or "", worst.get("budget") or {})
        self.ledger.append(TrialRecord("ceiling", batch, self.probe_nproc, 1, batch * self.probe_nproc, trial.status,
                                       round(outcome.seconds, 3), precision=precision, peak_bytes=trial.peak_bytes,
                                       step_seconds=worst.get("step_seconds") if fitted else None,
                                       note=f"{purpose} probe" + (f": {trial.message}" if trial.message else "")))
        self.emit(ProbeFinished(trial))
        return trial

    def _segfault_as_oom(self, exc: TrialError) -> JobOutcome:
        """A CPU probe killed by SIGSEGV under its memory limit ran out of memory: a native library that does not
        check for a failed allocation (seen in a transformers ResNet's convolutions near the edge, fresh launch
        and fork alike) dies that way instead of raising. Any other failure stays the error it is."""
        if not (self.s.device == "cpu" and self.s.memory_budget_bytes and "SIGSEGV" in str(exc)):
            raise exc
        message = ("killed by SIGSEGV under the memory limit (counted as out of memory: a native library that does "
                   "not check for a failed allocation dies this way at the CPU memory edge)")
        return JobOutcome("oom", [{"event": "probe", "status": "oom", "message": message}])

    def train(self, phase: str, per_device: int, steps: int, lr: float, warmup_steps: int = 0,
              accumulation: int = 1, evaluate: bool = False, precision: str = "fp32",
              eval_points: int = 1, seed: int = 0) -> TrialRecord:
        job = self._job(kind="train", per_device_batch=per_device, steps=steps, lr=lr, warmup_steps=warmup_steps,
                        seed=seed,
                        accumulation_steps=accumulation, evaluate=evaluate, loss_every=max(1, steps // 20),
                        precision=precision, eval_points=eval_points if evaluate else 1)
        self.emit(RunStarted(phase, per_device, self.nproc, accumulation, steps, precision, lr))

        def on_event(event):
            if event["event"] == "progress":
                self.emit(TrialProgress(phase, per_device, event["step"], event["steps"], event["loss"],
                                        event["seconds"], event.get("data_seconds")))
            elif event["event"] == "eval":
                self.emit(EvalPoint(phase, per_device, event["step"], event["train_seconds"], event.get("val_loss"),
                                    event.get("val_metric")))

        label = f"{phase} at {per_device} per device"
        server = self._server_for(job)
        try:
            outcome = self._run(job, self.nproc, label, on_event, server=server)
        except WorkerCrashed as exc:
            # An error the workload reported, a hang or a cancel is the run's answer whichever way it started;
            # a rank killed by a signal without a word may be the fork's doing: the fresh launch decides.
            if server is None or not exc.by_signal:
                raise
            self._fresh_after_fork_failure(label, exc)
            outcome = self._run(job, self.nproc, label, on_event)
        global_batch = per_device * self.nproc * accumulation
        common = dict(lr=lr, warmup_steps=warmup_steps, precision=precision, steps=steps, seed=seed)
        if outcome.status == "oom":
            oom = outcome.first("oom") or {}
            record = TrialRecord(phase, per_device, self.nproc, accumulation, global_batch, "oom",
                                 round(outcome.seconds, 3), note=oom.get("message", "out of memory"), **common)
        else:
            results = outcome.all("result")
            if not results:
                raise AdvisorError(f"The {phase} at {per_device} per device ended without a result. "
                                   "Worker output:\n" + "\n".join(outcome.output_tail[-10:]))
            lead = next((r for r in results if r.get("rank") == 0), results[0])
            if lead.get("ranking"):
                self.ranking_info = lead["ranking"]
            peak = max((r.get("peak_bytes") or 0) for r in results) or None
            noise = (lead.get("noise") or {}).get("b_simple")
            record = TrialRecord(phase, per_device, self.nproc, accumulation, global_batch, "ok",
                                 round(outcome.seconds, 3), peak_bytes=peak,
                                 step_seconds=statistics.median(r["step_seconds"] for r in results),
                                 # the slowest rank's loader holds every rank at the next all-reduce
                                 data_seconds=max((r.get("data_seconds") or 0.0) for r in results),
                                 throughput=min(r["throughput"] for r in results), final_loss=lead.get("final_loss"),
                                 val_loss=lead.get("val_loss"), val_metric=lead.get("val_metric"),
                                 val_metric_name=lead.get("val_metric_name"),
                                 higher_is_better=lead.get("higher_is_better"),
                                 val_metrics=lead.get("val_metrics") or {},
                                 noise_scale=noise, train_seconds=lead.get("train_seconds"),
                                 losses=lead.get("losses") or [], evals=lead.get("evals") or [],
                                 gradient_norms=lead.get("noise") or {}, **common)
        self.ledger.append(record)
        self.emit(TrialFinished(record))
        return record
