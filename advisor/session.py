"""The four-step method one step at a time: a Session a UI (or the CLI's loop) drives.

Each step is a call that returns a typed result and reports typed events as it works; an
earlier step's new answer invalidates the later ones; ``cancel()`` from any thread stops the
running job's process group within a second and raises ``CancelledError``. The steps' rules and
run loops live in ``advisor.method``; set-up is checked before the first process starts
(``advisor.setup_checks``), and the plan's result is assembled in ``advisor.assembly``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from .adapters import Adapter
from .method.ceiling import CeilingResult, ProbeTrial, search_ceiling
from .errors import AdvisorError, CancelledError, SetupError
from .events import Decision, Event, Note, StepFinished, StepStarted
from .launch import CancelToken
from .ledger import TrialRecord, trained_rows
from .method import (MethodSettings, SweepOutcome, TrialOutcome, WorkloadInfo,
                     choose_precision, data_cap, heterogeneous_devices_note, make_plan,
                     mixed_before_accumulation, noise_estimate, short_trial, validated_global)
from .method.goodput import GoodputResult
from .method.inputs import LauncherReports, SessionRunner
from .method.noise import NoiseEstimate
from .method.plan import Plan, Warning_, plan_data_parallel
from .method.caps import Cap, data_share_words, learnable_cap, lowered_by_training_runs
from .method.start import start_choice
from .method.noise_run import noise_run
from .method.sweep_run import comparison_sweep
from .history_reuse import HistoryReuse
from .walk import Walk
from .assembly import (TF32_ADVICE, MethodResult, PlanParts, StartChoice, StepResults, StepTiming,  # noqa: F401
                       assemble, launch_line, optimizer_hyperparameters, plan_at_cap, precision_reason,
                       stream_warning, workload_notes)  # MethodResult, StepTiming: re-exported for their callers
from .setup_checks import (MAX_CPU_OVERSUBSCRIPTION, Setup, host_problems, validate_setup,  # noqa: F401 -- the
                           workload_precision)  # set-up checklist's names, for callers that import them from here

STEP_TITLES = {1: "Memory ceiling", 2: "Starting value", 3: "Trial run", 4: "Sweep"}
STEP_NAMES = {1: "memory ceiling", 2: "starting value", 3: "short trial", 4: "comparison sweep"}  # recipe keys


class Session:
    """The four steps over one adapter. Call ``ceiling()``, ``choose_start()``, ``trial()``, ``sweep()``,
    ``finish()`` in order; redo any of them; ``cancel()`` from another thread stops the running one."""

    def __init__(self, adapter: Adapter, settings: MethodSettings, setup: Setup,
                 on_event: Callable[[Event], None] | None = None, runner: SessionRunner | None = None, known=None,
                 cluster=None):
        from .runner import JobRunner

        self.adapter, self.settings, self.setup = adapter, settings, setup
        self.on_event = on_event or (lambda event: None)
        self.cancel_token = CancelToken()
        supported = {p for p in ("bf16", "fp16") if adapter.capabilities.supports(p)}
        self.precision = workload_precision(settings, setup, supported) or choose_precision(
            settings.precision, settings.device, setup.host.bf16, supported)
        self.mixed = self.precision.mixed  # tried before halving and before accumulation
        # Tests hand in a stub runner with the same probe/train/ledger/model_info/env/options surface.
        self.cluster = cluster  # advisor.cluster.ClusterLink: a plan across nodes (the CLI's or the app's)
        if runner is None and cluster is not None:  # `advisor plan --nnodes`: every job on every node
            from .cluster_runner import ClusterRunner

            runner = ClusterRunner(adapter, settings, self._emit, self.cancel_token, setup.adapter_options,
                                   tf32=self.precision.tf32, link=cluster)
        self.runner = runner or JobRunner(adapter, settings, self._emit, self.cancel_token, setup.adapter_options,
                                          tf32=self.precision.tf32)
        if runner is not None and setup.adapter_options is not None:
            runner.options = setup.adapter_options  # a handed-in runner (tests, the app's stub) runs the checked ones
        self._mixed_ceilings: dict[str, CeilingResult | str] = {}  # per mixed precision: its ceiling, or why none
        self.timings: dict[int, StepTiming] = {}
        self._probes: dict[int, ProbeTrial] = {}
        self._walk = Walk(lambda: self.runner.ledger)  # which runs count: a redo supersedes the earlier ones
        self.ceiling_result: CeilingResult | None = None
        self.start: StartChoice | None = None
        self.trial_outcome: TrialOutcome | None = None
        self.sweep_outcome: SweepOutcome | None = None
        self.result: MethodResult | None = None
        self.known = known  # history.Known: what earlier runs of this workload on this device class measured
        for note in setup.notes:
            self._emit(Note(note))

    # -- plumbing -----------------------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        self.on_event(event)

    def cancel(self) -> None:
        """Thread-safe: the running step's workers are stopped and it raises CancelledError."""
        self.cancel_token.cancel()

    def _history(self) -> HistoryReuse:
        """The runner, with what the history measured before (``known``) to reuse."""
        return HistoryReuse(self.runner, self.known, self._emit)

    @property
    def reports(self) -> LauncherReports | None:
        """The launcher's reports (optimizer, ranking metric, probe batches, its fork server); a stub has none."""
        return self.runner if isinstance(self.runner, LauncherReports) else None

    @property
    def ledger(self) -> list[TrialRecord]:
        """The runs of the current walk: every row except those a redo superseded."""
        return self._walk.current()

    def _begin(self, step: int, keep=lambda row: False) -> tuple[float, int]:
        self._walk.begin(step, keep)
        self.cancel_token.reset()
        self._emit(StepStarted(step, STEP_TITLES[step]))
        return time.monotonic(), len(self.runner.ledger)

    def _end(self, step: int, began: tuple[float, int]) -> None:
        timing = StepTiming(STEP_NAMES[step], time.monotonic() - began[0], len(self.runner.ledger) - began[1])
        self.timings[step] = timing
        self._emit(StepFinished(step, STEP_TITLES[step], timing.seconds, timing.trials))

    def invalidate_after(self, step: int) -> None:
        """An earlier answer changed: later results no longer hold."""
        if step < 2:
            self.start = None
        if step < 3:
            self.trial_outcome = None
        if step < 4:
            self.sweep_outcome = None
        self.result = None
        for later in [k for k in self.timings if k > step]:
            del self.timings[later]

    @property
    def info(self) -> WorkloadInfo:
        w = self.setup.workload
        model = self.runner.model_info or {}
        return WorkloadInfo(w.name, w.task, w.num_classes, self.setup.optimizer, w.train_length, len(w.val_data),
                            model.get("parameters", 0), bool(model.get("has_batchnorm")), self.setup.base_lr,
                            self.setup.base_global_batch, self.setup.base_source, self.setup.base_warmup_epochs,
                            self.setup.base_warmup_source, self.setup.run_epochs, self.setup.run_source)

    @property
    def data_cap(self) -> int:
        return data_cap(self.setup.workload.train_length, self.settings.world_size)

    @property
    def cap_reason(self) -> str:
        return data_share_words(self.setup.workload.train_length, self.settings.world_size)

    @property
    def per_device_cap(self) -> int:
        """The largest per-device batch any later step may use: memory ceiling and data share."""
        if self.ceiling_result is None:
            raise AdvisorError("Run the memory ceiling (step 1) first.")
        return min(self.ceiling_result.per_device_max, self.data_cap)

    @property
    def cap(self) -> Cap:
        """The cap the start, the trial and the sweep use, and which limit binds (method.caps.learnable_cap)."""
        if self.ceiling_result is None:
            raise AdvisorError("Run the memory ceiling (step 1) first.")
        return learnable_cap(self.ceiling_result.per_device_max, self.setup.workload.train_length,
                             self.settings.world_size, self.settings.run_processes, self.info.run_epochs,
                             self.info.run_source)

    # -- step 1 -------------------------------------------------------------------------------------------
    def ceiling(self, headroom: float | None = None, reuse_probes: bool = False) -> CeilingResult:
        """Step 1. With ``reuse_probes`` a batch already probed is not run again (a new headroom is cheap)."""
        if headroom is not None:
            if not 0 <= headroom < 1:
                raise SetupError(f"Headroom must be a fraction in [0, 1), not {headroom}.")
            self.settings.headroom = headroom
        measure = self.precision.measure
        began = self._begin(1, keep=lambda row: reuse_probes and row.phase == "ceiling" and row.precision == measure
                            and row.per_device in self._probes)
        if self.reports is not None and self.reports.probe_selection is None:  # the worst case, measured once
            from .batches import select_probe_samples

            self.reports.probe_selection = select_probe_samples(self.setup.workload)
            self._emit(Note(f"Memory probes feed {self.reports.probe_selection.reason}."))
        if not reuse_probes:
            self._probes.clear()
        self._mixed_ceilings.clear()
        self.ceiling_result = self._search_ceiling(self.precision.measure, self._probes)
        self.invalidate_after(1)
        self._end(1, began)
        return self.ceiling_result

    def _search_ceiling(self, precision: str, probes: dict[int, ProbeTrial]) -> CeilingResult:
        def probe(batch: int, purpose: str) -> ProbeTrial:
            if batch not in probes:
                probes[batch] = self.runner.probe(batch, purpose, precision)
            return probes[batch]

        max_batch = min(self.settings.max_batch, self.data_cap)
        cap_reason = self.cap_reason if max_batch == self.data_cap else "the search's upper limit"
        found = self._history().seeded_ceiling(probe, precision, self.settings.memory_budget_bytes,
                                               self.settings.headroom, max_batch)
        if found is not None:
            return found
        hardware = None
        if self.settings.device == "cpu":
            from .device import cpu_runs_precision

            hardware = lambda: cpu_runs_precision(precision)  # noqa: E731 -- asked only when probes fail at 1-2
        return search_ceiling(probe, self.settings.memory_budget_bytes, self.settings.headroom, max_batch,
                              cap_reason=cap_reason, precision=precision, hardware_runs=hardware)

    def close(self) -> None:
        """End what the session holds between steps: the warm fork server the plan's jobs (probes, trial, sweep)
        share. It holds an imported torch and the workload's module, so it ends with the sweep, the last step
        that runs jobs, or with the session; a later step starts it again."""
        if self.reports is not None:
            self.reports.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _mixed_cap(self, mixed: str) -> tuple[int | None, str]:
        """The per-device cap with the ceiling re-probed in ``mixed`` precision, or None and why it cannot run."""
        if mixed not in self._mixed_ceilings:
            self._emit(Note(f"The plan needs accumulation in {self.precision.measure}: re-probing the memory "
                            f"ceiling in {mixed} first (mixed precision before accumulation)."))
            self._walk.attribute(self._walk.running_step)
            try:
                self._mixed_ceilings[mixed] = self._search_ceiling(mixed, {})
            except CancelledError:
                raise
            except AdvisorError as exc:
                self._mixed_ceilings[mixed] = str(exc)  # asked again (a new global target), the answer stands
            finally:
                self._walk.attribute(1)  # kept, like the answer, until the ceiling is redone
        found = self._mixed_ceilings[mixed]
        if isinstance(found, str):
            return None, found
        return min(found.per_device_max, self.data_cap), ""

    # -- step 2 -------------------------------------------------------------------------------------------
    def choose_start(self, per_device: int | None = None) -> StartChoice:
        """Step 2: the task table's value or the user's own, capped by the ceiling, the data and the steps per
        epoch (``cap``), whichever binds; the reason names it."""
        if per_device is None:
            per_device = self.settings.start_per_device  # --start, or a value typed on the app's screen
        began = self._begin(2)
        cap = self.cap
        if per_device is not None and per_device < 1:
            raise SetupError(f"The starting value must be at least 1, not {per_device}.")
        processes = self.settings.run_processes  # every node's, on a plan across nodes
        known = self.known.best_start(processes) if self.known and per_device is None else None
        chosen, reason = start_choice(per_device, known, cap, self.info.task, self.info.base_global_batch,
                                      processes, self.info.base_source)
        self.start = StartChoice(chosen, reason)
        self.invalidate_after(2)
        self._end(2, began)
        return self.start

    @property
    def amp_available(self) -> bool:
        """Whether the plan may advise mixed precision: a mixed one is tried on this device, or it is a CPU."""
        return self.mixed is not None or self.settings.device == "cpu"

    def preview_plan(self, per_device: int) -> tuple[Plan, str]:
        """The plan ``per_device`` (a starting value) gives before the trial and sweep run, and why its global
        target is what it is: the user's --global-batch, else that value over the target's processes."""
        s, info = self.settings, self.info
        target = s.global_batch or validated_global(s, per_device)
        plan = plan_data_parallel(target, s.world_size, self.per_device_cap, info.task, info.num_classes,
                                  info.has_batchnorm, s.device, self.precision.measure,
                                  amp_available=self.amp_available, train_size=info.train_size,
                                  run_epochs=info.run_epochs)
        why = (f"You asked for a global batch of {s.global_batch}." if s.global_batch else
               f"{per_device} per device x {s.run_processes} process(es); the sweep (step 4) decides the final value.")
        return plan, why

    # -- step 3 -------------------------------------------------------------------------------------------
    def trial(self) -> TrialOutcome:
        if self.start is None:
            self.choose_start()
        began = self._begin(3)
        cap = self.cap
        self.trial_outcome = short_trial(self.runner, self.start.per_device, self.ceiling_result,
                                         self.settings.trial_steps, self.info, self.precision.measure, self.mixed,
                                         lambda message: self._emit(Decision(3, message)), cap=max(cap.value, 1),
                                         cap_reason=cap.why)
        self.trial_outcome.noise_run = self._noise_run(self.trial_outcome)
        self.invalidate_after(3)
        self._end(3, began)
        return self.trial_outcome

    def _noise_run(self, trial: TrialOutcome) -> TrialRecord | None:
        """One device has no replicas to compare: when the adapter's worker can meter it, one short run with
        accumulation gives the two gradients instead (method.noise_run)."""
        if self.runner.nproc != 1 or not self.adapter.capabilities.noise_by_accumulation:
            return None
        return noise_run(self.runner, self.info, trial, self.settings.trial_steps,
                         lambda message: self._emit(Decision(3, message)), lambda message: self._emit(Note(message)))

    # -- step 4 -------------------------------------------------------------------------------------------
    def sweep(self, chosen: int | None = None) -> SweepOutcome:
        try:
            return self._sweep(chosen)
        finally:
            self.close()  # the last step that runs jobs

    def _sweep(self, chosen: int | None) -> SweepOutcome:
        if self.trial_outcome is None and chosen is None:
            raise AdvisorError("Run the short trial (step 3) first, or give the batch to sweep around.")
        began = self._begin(4)
        chosen = chosen or self.trial_outcome.chosen
        precision = self.trial_outcome.precision if self.trial_outcome else self.precision.measure
        self.sweep_outcome = comparison_sweep(self._history(), self.info,
                                              self.settings, chosen, precision, self.cap, self._trained_rows,
                                              lambda message: self._emit(Decision(4, message)),
                                              lambda message: self._emit(Note(message)))
        self._emit(Decision(4, self.sweep_outcome.reason, verdict=True))
        self.invalidate_after(4)
        self._end(4, began)
        return self.sweep_outcome

    def _trained_rows(self) -> list[TrialRecord]:
        return trained_rows(self.ledger)

    def noise_estimate(self) -> NoiseEstimate:
        """The noise scale and its interval: from the sweep's chosen candidate once the sweep ran (the trial's runs
        then a lower bound beside it), from the trial's runs before; not estimated when no candidate learned."""
        sweep = self.sweep_outcome
        return noise_estimate(self._trained_rows(), self.setup.optimizer,
                              pick=sweep.chosen if sweep is not None and not sweep.failed else None,
                              validated=sweep is None or not sweep.failed)

    # -- the plan -----------------------------------------------------------------------------------------
    def finish(self, global_batch: int | None = None) -> MethodResult:
        """The plan for the target cluster, LR, warmup and launch line, from the steps run so far."""
        if self.sweep_outcome is None:
            raise AdvisorError("Run the comparison sweep (step 4) first.")
        s = self.settings
        if global_batch is not None:
            if global_batch < 1:
                raise SetupError(f"The global batch target must be at least 1, not {global_batch}.")
            s.global_batch = global_batch
        parts = self._plan_parts()
        ran = (self.reports.optimizer_info if self.reports else None) or {}
        hyper = optimizer_hyperparameters(ran, self.setup.optimizer, self.setup.workload)
        steps = StepResults(s, self.info, self.start, self.trial_outcome, self.sweep_outcome, self.ledger,
                            [self.timings[k] for k in sorted(self.timings)])
        launch = launch_line(self.adapter, s, parts, self.runner.env, self.setup.optimizer, hyper[0])
        self.result = assemble(steps, parts, env=self.runner.env, launch=launch,
                               adapter_extras=self.adapter.recipe_extras(self.runner.options), ran=ran,
                               hyperparameters=hyper, tf32=self.precision.tf32, host=self.setup.host,
                               workload_notes=workload_notes(self.reports, self.ceiling_result))
        if self.cluster is not None:  # measured across nodes: which ones, and which set the ceiling
            self.result.cluster = self.runner.cluster_record(self.ceiling_result)
        return self.result

    def _plan_parts(self) -> PlanParts:
        """The plan at the cap that binds (memory, mixed precision, the training runs' own OOMs), its warnings and
        its precision's reason."""
        precision, cap, ceiling, accumulation_note = self._plan_precision_and_cap(self._mixed_cap)
        cap, ran_why = self._cap_by_training_runs(precision, cap)
        estimate = self.noise_estimate()
        plan, lr, warmup, goodput = self._plan_and_goodput(precision, cap, estimate)
        if ran_why:
            plan.warnings.append(Warning_("capped-by-training-oom", f"The per-device batch is capped at {cap}: "
                                          f"{ran_why}. The memory ceiling's probes allowed more; the training runs "
                                          "did not."))
        plan.warnings += [w for w in (heterogeneous_devices_note(ceiling, self.settings.device_memories),) if w]
        plan.warnings += [Warning_(code, w) for code, w in zip(goodput.warning_codes, goodput.warnings)]
        plan.warnings += [w for w in (stream_warning(self.reports),) if w]
        if self.precision.tf32:
            plan.precision_advice += TF32_ADVICE
        return PlanParts(ceiling, plan, lr, warmup, cap, self.cap_reason if cap < ceiling.per_device_max else "",
                         estimate, goodput, precision_reason(self.precision, self.trial_outcome, accumulation_note,
                                                             ran_why, plan.accumulation_steps))

    def _plan_precision_and_cap(self, mixed_cap) -> tuple[str, int, CeilingResult, str]:
        """(precision, per-device cap before the training runs' own OOM cap, the ceiling it came from, what mixed
        precision before accumulation decided): mixed precision is measured with ``mixed_cap`` when the plan
        needs accumulation in the measured precision."""
        s, measured = self.settings, self.precision.measure
        precision = self.trial_outcome.precision if self.trial_outcome else measured
        ceiling, cap, accumulation_note = self.ceiling_result, self.per_device_cap, ""
        if precision == measured:
            target = s.global_batch or self.sweep_outcome.chosen * s.world_size
            precision, cap, accumulation_note = mixed_before_accumulation(target, s.world_size, cap, self.precision,
                                                                          mixed_cap)
            if precision != measured:
                mixed_ceiling = self._mixed_ceilings[precision]
                ceiling = replace(mixed_ceiling, reason=f"In {precision} (re-probed: {measured} needed accumulation). "
                                  + mixed_ceiling.reason)
        return precision, cap, ceiling, accumulation_note

    def _cap_by_training_runs(self, precision: str, cap: int) -> tuple[int, str]:
        return lowered_by_training_runs(cap, self._trained_rows(), precision)

    def _plan_and_goodput(self, precision: str, cap: int, estimate: NoiseEstimate):
        """assembly.plan_at_cap over this session's steps: what finish() and plan_goodput() both read."""
        return plan_at_cap(self.settings, self.info, self.sweep_outcome, cap, precision, estimate, self.ledger,
                           self.amp_available)

    def plan_goodput(self) -> GoodputResult:
        """The goodput finish() will report, computed after the sweep without running anything (the app's Sweep
        screen shows it). When the plan must first re-probe memory in mixed precision (a global target that needs
        accumulation), the value waits for the plan, and says so."""
        if self.sweep_outcome is None:
            raise AdvisorError("Run the comparison sweep (step 4) first.")
        not_probed = object()

        def known_mixed_cap(mixed: str):
            if mixed not in self._mixed_ceilings:
                raise LookupError(not_probed)
            return self._mixed_cap(mixed)

        try:
            precision, cap, _, _ = self._plan_precision_and_cap(known_mixed_cap)
        except LookupError:
            return GoodputResult(None, "Goodput-optimal batch: computed with the plan, which first re-probes the "
                                       "memory ceiling in mixed precision (the global target needs accumulation).")
        cap, _ = self._cap_by_training_runs(precision, cap)
        try:
            return self._plan_and_goodput(precision, cap, self.noise_estimate())[3]
        except AdvisorError as refused:  # the target global batch's LR is refused: finish() says so, as an error
            return GoodputResult(None, f"Goodput-optimal batch: not computed: {refused}")

    def run_all(self) -> MethodResult:
        """All four steps with the defaults, then the plan: what `advisor plan` does."""
        try:
            self.ceiling()
            self.choose_start()
            self.trial()
            self.sweep()
        finally:
            self.close()  # a step that failed leaves no warm server behind
        return self.finish()

