"""The method's decisions against stub runners: milliseconds, no processes.

The stubs model memory and speed with simple formulas, so every decision (double, halve, mixed
precision before halving, stop, the sweep's tie-break and chance check, tiny budgets) is checked
on known inputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.adapters import load_adapter
from advisor.method.ceiling import MemoryFit, ProbeTrial, search_ceiling
from advisor.device import HostDevices
from advisor.events import Decision, ProbeFinished, StepStarted
from advisor.ledger import TrialRecord
from advisor.method import short_trial, sweep_candidates
from advisor.session import Session, validate_setup
from helpers import (DIVERGED_TRIAL, FLAT_RUN, HEALTHY_RUN, MIB, CurveRunner, LedgerStubRunner, StubRunner,
                     info, settings, swept_session)

def ceiling_for(runner, budget=None, headroom=0.15, max_batch=65536):
    return search_ceiling(runner.probe, budget or runner.budget, headroom, max_batch)


# -- step 3: the short trial ---------------------------------------------------------------------------------

def test_trial_doubles_while_memory_is_low_and_stops_when_doubling_stops_paying():
    runner = StubRunner(saturate=100)  # samples/s stop growing past a global batch of 100
    ceiling = ceiling_for(runner)
    outcome = short_trial(runner, 16, ceiling, 40, info(), "fp32", None)
    tried = [c[1] for c in runner.calls if c[0] == "trial"]
    assert tried == [16, 32, 64, 128]  # 128 x 2 = 256 > 100: no gain over 64, stop
    assert outcome.chosen == 64 and "not worth" in outcome.reason
    assert any("stop doubling" in d for d in outcome.decisions)


def test_the_trial_counts_the_wait_for_data_as_training_will():
    """A loader that delivers 6,400 samples/s (global 64) caps what a bigger batch buys, however fast the step:
    the trial reads samples/s with the wait counted (TrialRecord.samples_per_s), so it stops where the compute
    alone (saturating at 1,000,000 samples/s here) would keep doubling."""
    class SlowLoader(StubRunner):
        def train(self, phase, per_device, steps, lr, *args, **kw):
            record = super().train(phase, per_device, steps, lr, *args, **kw)
            if record.status == "ok":
                record.data_seconds = max(0.0, record.global_batch / 6400 - record.step_seconds)
            return record

    runner = SlowLoader(saturate=None)
    outcome = short_trial(runner, 16, ceiling_for(runner), 40, info(), "fp32", None)
    tried = [c[1] for c in runner.calls if c[0] == "trial"]
    assert tried == [16, 32, 64] and outcome.chosen == 32 and "not worth" in outcome.reason
    assert runner.ledger[-1].throughput > 1.5 * runner.ledger[-2].throughput  # the step alone still scaled


def test_trial_stops_at_high_memory_share():
    runner = StubRunner(saturate=None)
    ceiling = ceiling_for(runner)
    outcome = short_trial(runner, 80, ceiling, 40, info(), "fp32", None)
    assert [c[1] for c in runner.calls if c[0] == "trial"] == [80, 160]
    last = runner.ledger[-1]
    assert last.peak_bytes >= 0.6 * ceiling.estimated_peak_bytes
    assert outcome.chosen == last.per_device and "of the ceiling's memory: stop" in outcome.decisions[-1]


def test_trial_halves_on_oom_when_the_precision_is_fixed():
    runner = StubRunner(budget=100 * MIB, saturate=None)
    ceiling = ceiling_for(runner)
    runner.budget = 60 * MIB  # multi-process training needs more than the single-process probes saw
    outcome = short_trial(runner, 64, ceiling, 40, info(), "fp32", mixed=None)
    assert [c[1] for c in runner.calls if c[0] == "trial"][:2] == [64, 32]
    assert all(c[2] == "fp32" for c in runner.calls if c[0] == "trial")
    assert outcome.precision == "fp32" and "halving" in outcome.decisions[0]


def test_trial_tries_mixed_precision_before_halving():
    runner = StubRunner(budget=100 * MIB, saturate=None)
    ceiling = ceiling_for(runner)
    runner.budget = 60 * MIB
    outcome = short_trial(runner, 64, ceiling, 40, info(), "fp32", mixed="bf16")
    trials = [c for c in runner.calls if c[0] == "trial"]
    assert trials[:2] == [("trial", 64, "fp32"), ("trial", 64, "bf16")]  # same batch, mixed, before any halving
    assert outcome.precision == "bf16" and outcome.chosen == 64
    assert "before halving" in outcome.decisions[0]
    statuses = [(r.per_device, r.precision, r.status) for r in runner.ledger]
    assert (64, "fp32", "oom") in statuses and (64, "bf16", "ok") in statuses  # both in the ledger


def test_trial_respects_its_cap_and_says_why():
    runner = StubRunner(saturate=None)
    ceiling = ceiling_for(runner)
    outcome = short_trial(runner, 16, ceiling, 40, info(), "fp32", None, cap=40, cap_reason="data says so")
    assert max(c[1] for c in runner.calls if c[0] == "trial") == 32
    assert "cap of 40 (data says so)" in outcome.decisions[-1]


def test_the_trial_decides_by_an_ordered_rule_table_whose_codes_the_recipe_records():
    """Step 3 is TRIAL_RULES, in order: each decision names its rule code and the numbers it used; the text is
    rendered from them, and the policy's numbers are the ones applied."""
    from advisor.method.trial import TRIAL_RULES, TRIAL_TEXT, TrialPolicy

    runner = StubRunner(saturate=100)
    outcome = short_trial(runner, 16, ceiling_for(runner), 40, info(), "fp32", None)
    assert [s.rule for s in outcome.steps] == ["double", "double", "double", "not-worth-doubling"]
    assert [s.next_batch for s in outcome.steps] == [32, 64, 128, None]
    assert outcome.summary() == {"pick": 64, "steps": [{"per_device": 16, "rule": "double", "next": 32},
                                                       {"per_device": 32, "rule": "double", "next": 64},
                                                       {"per_device": 64, "rule": "double", "next": 128},
                                                       {"per_device": 128, "rule": "not-worth-doubling"}]}
    assert outcome.decisions == [s.text for s in outcome.steps]
    assert outcome.decisions[0] == "16: 10% of the ceiling's memory (< 60%): doubling to 32"
    # The policy is injected, not read from module constants: a high-water mark of 1% stops at once.
    runner = StubRunner(saturate=100)
    tight = short_trial(runner, 16, ceiling_for(runner), 40, info(), "fp32", None, policy=TrialPolicy(high_water=0.01))
    assert [s.rule for s in tight.steps] == ["memory-high"] and tight.chosen == 16
    # A rule that stops must come before the one that doubles, or a run past the cap / an unstable double would
    # be doubled from; every code a rule can return has its sentence.
    assert TRIAL_RULES[-1].__name__ == "_memory_room"
    assert {"oom-halve", "unstable-halve", "not-worth-doubling", "double-unstable", "double", "memory-high",
            "at-cap", "lr-to-blame", "batch-to-blame"} <= set(TRIAL_TEXT)


# -- step 4: the sweep -----------------------------------------------------------------------------------------

def test_subset_sweep_with_a_ceiling_below_eight_falls_back_to_half_chosen_double():
    # Regression: ran nothing and reported "every sweep run ran out of memory".
    candidates, note = sweep_candidates(4, cap=6, subset=True)
    assert candidates == [2, 4, 6] and "needs a ceiling of at least 16" in note  # double stops at the cap
    assert sweep_candidates(32, cap=200, subset=True)[0] == [8, 16, 32, 64, 128]


# -- step 1: tiny budgets ----------------------------------------------------------------------------------------

def test_tiny_budget_probes_between_one_and_eight_and_fits_only_what_it_measured():
    runner = StubRunner(fixed=1 * MIB, per_sample=1 * MIB, budget=6 * MIB)  # 5 fits, 6 does not
    result = ceiling_for(runner)
    probed = [c[1] for c in runner.calls]
    assert 8 in probed and set(probed) <= {1, 2, 3, 4, 5, 6, 7, 8}
    assert result.largest_ok == 5 and result.smallest_oom == 6
    assert result.fit is not None and result.fit.per_sample_bytes == pytest.approx(MIB)
    assert result.per_device_max <= 5  # headroom kept: 0.85 x 6 MiB


def test_when_only_batch_one_fits_no_fit_is_invented():
    runner = StubRunner(fixed=1 * MIB, per_sample=1 * MIB, budget=2.5 * MIB)
    result = ceiling_for(runner)
    assert result.per_device_max == 1 and result.fit is None and result.estimated_peak_bytes is None
    assert "no memory line" in result.reason


def test_ceiling_stops_at_the_cap_it_is_given():
    runner = StubRunner(fixed=MIB, per_sample=1024, budget=10_000 * MIB)
    result = search_ceiling(runner.probe, runner.budget, 0.15, max_batch=719, cap_reason="data")
    assert result.largest_ok == 719 and result.smallest_oom is None and "cap of 719 (data)" in result.reason


# -- the session, driven step by step ------------------------------------------------------------------------------

def test_session_runs_step_by_step_redoes_and_invalidates():
    adapter = load_adapter("ddp")
    s = settings()
    setup = validate_setup(s, adapter, HostDevices("cpu"))
    events = []
    runner = StubRunner(saturate=None)
    session = Session(adapter, s, setup, events.append, runner=runner)
    ceiling = session.ceiling()
    assert any(isinstance(e, ProbeFinished) for e in events) is False  # the stub does not emit; the session does
    assert [e.step for e in events if isinstance(e, StepStarted)] == [1]
    # digits has 1438 training samples: 2 processes get at most 719 each, whatever memory allows.
    assert session.per_device_cap == min(ceiling.per_device_max, 719)
    start = session.choose_start(32)
    assert start.per_device == 32 and "Your starting value" in start.reason
    trial = session.trial()
    assert trial.chosen >= 32 and any(isinstance(e, Decision) and e.step == 3 for e in events)
    sweep = session.sweep()
    result = session.finish()
    assert result.plan.per_device == sweep.chosen and result.launch_command[:2] == ["env", "MALLOC_MMAP_THRESHOLD_=65536"] \
        or result.launch_command[0] == "torchrun"
    from advisor.report import build_recipe
    recipe_trial = build_recipe(result)["method"]["trial"]  # the trial's rule codes, as it decided them
    assert recipe_trial == trial.summary() and recipe_trial["pick"] == trial.chosen
    assert [step["rule"] for step in recipe_trial["steps"]] == [step.rule for step in trial.steps]
    # Redoing step 2 invalidates steps 3 and 4.
    session.choose_start(16)
    assert session.trial_outcome is None and session.sweep_outcome is None and session.result is None
    with pytest.raises(Exception, match="sweep"):
        session.finish()


def test_a_redo_drops_the_superseded_walk_from_the_ledger_and_the_noise_scale():
    adapter = load_adapter("ddp")
    s = settings()
    runner = LedgerStubRunner(saturate=None)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=runner)
    session.ceiling()
    probes = [r for r in runner.ledger if r.phase == "ceiling"]
    session.choose_start(32)
    session.trial()
    first_sweep = session.sweep()
    second_sweep = session.sweep()  # redone: the first sweep's rows no longer count
    result = session.finish()
    sweep_rows = [r for r in result.ledger if r.phase == "sweep"]
    assert len(sweep_rows) == len(second_sweep.rows) == len(first_sweep.rows)  # a tie's second seed included
    assert not any(r is old for r in sweep_rows for old in first_sweep.rows)
    current = [r for r in result.ledger if r.phase in ("trial", "sweep")]
    # The value comes from the chosen candidate's current sweep seeds (one stage of training), no superseded run's.
    healthy = [r for r in current if r.losses and r.losses[-1] < r.losses[0] and r.phase == "sweep"
               and r.per_device == result.sweep_choice]
    assert healthy and result.noise.steps == LedgerStubRunner.STEPS * len(healthy)
    assert (f"over {result.noise.steps} steps of the chosen {result.sweep_choice} per device's {len(healthy)} sweep "
            "seed(s)") in result.noise_reason
    assert len(runner.ledger) > len(result.ledger)  # the runner keeps every run; the recipe the current walk
    # A new headroom that reuses the probes keeps their rows; the trial and sweep rows all go.
    session.ceiling(headroom=0.3, reuse_probes=True)
    assert all(r is p for r, p in zip(session.ledger, probes))  # kept, in order; a new edge may add probes
    assert all(r.phase == "ceiling" for r in session.ledger)
    session.ceiling()  # probed again: only the new probes count
    assert not any(r is old for r in session.ledger for old in probes) and session.ledger


def test_setup_is_validated_before_anything_runs():
    from advisor.errors import SetupError

    adapter = load_adapter("ddp")
    with pytest.raises(SetupError) as err:
        validate_setup(settings(nproc=-1, trial_steps=0, headroom=1.5, workload="no-such"), adapter,
                       HostDevices("cpu"))
    text = str(err.value)
    for part in ("--nproc must be at least 1", "--trial-steps must be at least", "--headroom", "Unknown workload",
                 "Nothing was run"):
        assert part in text
    with pytest.raises(SetupError, match="more processes than the 2 GPU"):
        validate_setup(settings(nproc=4), adapter, HostDevices("cuda", ["H200", "H200"], [140 * 2**30] * 2))
    with pytest.raises(SetupError, match="fp16 mixed precision needs a CUDA GPU"):
        validate_setup(settings(precision="fp16"), adapter, HostDevices("cpu"))
    with pytest.raises(SetupError, match="more than the smallest GPU"):
        validate_setup(settings(memory_budget_bytes=200 * 2**30), adapter,
                       HostDevices("cuda", ["H200", "H200"], [140 * 2**30] * 2))


def test_memory_fit_helpers():
    fit = MemoryFit(fixed_bytes=10, per_sample_bytes=2)
    assert fit.bytes_at(5) == 20 and fit.batch_for(21) == 5


def test_the_plan_never_goes_past_its_noise_scale_without_saying_why():
    from advisor.method import make_plan

    s = settings(nproc=2)
    plan, lr, _ = make_plan(s, info(train_size=100_000), 512, 256, "By validation accuracy, 256 is best.", "fp32",
                            noise=30.0, amp_available=True)
    warning = next(w for w in plan.warnings if w.code == "beyond-noise-scale")
    assert "It stands because the comparison sweep chose it on validation" in warning.message
    forced = make_plan(settings(nproc=2, global_batch=512), info(train_size=100_000), 512, 256, "", "fp32",
                       noise=30.0, amp_available=True)[0]
    assert "--global-batch" in next(w for w in forced.warnings if w.code == "beyond-noise-scale").message


def test_a_tiny_budget_writes_no_fit_it_did_not_measure_into_the_recipe():
    from advisor.report import build_recipe

    adapter = load_adapter("ddp")
    s = settings(nproc=1, memory_budget_bytes=int(2.5 * MIB))
    runner = StubRunner(nproc=1, fixed=1 * MIB, per_sample=1 * MIB, budget=2.5 * MIB, saturate=None)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=runner)
    session.run_all()
    recipe = build_recipe(session.result)
    assert recipe["ceiling"]["per_device_max"] == 1
    assert "fixed_bytes" not in recipe["ceiling"] and "per_sample_bytes" not in recipe["ceiling"]
    assert "no memory line" in recipe["ceiling"]["estimate_note"]


def test_one_oom_classifier_for_probes_and_logs():
    from advisor.oom import is_oom_exception, is_oom_message

    for line in ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                 "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes",
                 "RuntimeError: could not create a primitive",
                 "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
                 "[enforce fail at alloc_cpu.cpp:127] err == 0"):
        assert is_oom_message(line), line
    assert not is_oom_message("RuntimeError: shape '[-1, 3]' is invalid for input of size 16")
    assert is_oom_exception(RuntimeError("could not create a primitive")) and is_oom_exception(MemoryError())
    assert not is_oom_exception(ValueError("out of memory"))  # only allocator errors count


def test_a_task_override_replaces_the_workloads_task_and_is_checked():
    from advisor.errors import SetupError

    adapter = load_adapter("ddp")
    setup = validate_setup(settings(task="object-detection"), adapter, HostDevices("cpu"))
    assert setup.workload.task == "object-detection"
    with pytest.raises(SetupError, match="--task 'poetry'"):
        validate_setup(settings(task="poetry"), adapter, HostDevices("cpu"))


class SlowLoaderRunner(StubRunner):
    """The stub's runs, each step waiting ``data_share`` of its wall time for its batches."""

    def __init__(self, data_share, **kw):
        super().__init__(**kw)
        self.data_share = data_share

    def train(self, *args, **kwargs):
        record = super().train(*args, **kwargs)
        if record.status == "ok":
            record.data_seconds = record.step_seconds * self.data_share / (1 - self.data_share)
        return record


def test_the_recipe_says_when_the_loader_not_the_model_sets_the_pace():
    from advisor.report import build_recipe, human_summary

    adapter = load_adapter("ddp")
    recipes = {}
    for share in (0.4, 0.1):
        s = settings(nproc=2)
        session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")),
                          runner=SlowLoaderRunner(share, saturate=None))
        session.run_all()
        recipes[share] = (build_recipe(session.result), human_summary(session.result, None, explain=True))
    recipe, explained = recipes[0.4]
    note = next(w["message"] for w in recipe["warnings"] if w["code"] == "loader-bottleneck")
    assert "data loader, not the model, is the bottleneck" in note and "40% of the step" in note
    assert note in explained
    trained = [row for row in recipe["ledger"] if row["phase"] in ("trial", "sweep")]
    assert trained and all(row["data_seconds"] > 0 for row in trained)  # the ledger carries the wait
    assert "loader-bottleneck" not in {w["code"] for w in recipes[0.1][0]["warnings"]}


# -- precision: what auto measures, mixed precision before accumulation, unsupported configurations --------------

GIB = 2**30


def run_session(s, host, runner):
    adapter = load_adapter("ddp")
    session = Session(adapter, s, validate_setup(s, adapter, host), runner=runner)
    return session, session.run_all()


def test_auto_on_a_bf16_gpu_measures_ceiling_trial_and_sweep_in_bf16_with_tf32():
    """Regression: auto measured everything in fp32 on a GPU, so the recipe described a job nobody runs."""
    from advisor.report import build_recipe

    h100 = HostDevices("cuda", ["H100", "H100"], [80 * GIB] * 2, bf16=True, capabilities=[(9, 0)] * 2)
    runner = StubRunner(saturate=None)
    session, result = run_session(settings(device="cuda"), h100, runner)
    assert {c[2] for c in runner.calls if c[0] == "probe"} == {"bf16"}  # the ceiling too
    assert {c[2] for c in runner.calls if c[0] in ("trial", "sweep")} == {"bf16"}
    assert result.plan.precision == "bf16" and result.tf32
    assert "bf16 Tensor Cores" in result.precision_reason and "TF32" in result.precision_reason
    assert "allow_tf32" in result.plan.precision_advice
    recipe = build_recipe(result)
    assert recipe["precision"]["mode"] == "bf16" and recipe["precision"]["tf32"] is True
    assert recipe["provenance"]["hardware"]["gpu"] == "H100"  # from detect(), not torch.cuda in this process
    # The ceiling was found in bf16: half the activation memory of fp32 fits about twice the batch.
    fp32_runner = StubRunner(saturate=None)
    _, fp32 = run_session(settings(device="cuda", precision="fp32"), h100, fp32_runner)
    assert {c[2] for c in fp32_runner.calls if c[0] != "probe"} == {"fp32"} and not fp32.tf32
    assert result.ceiling.per_device_max > 1.8 * fp32.ceiling.per_device_max
    assert "TF32 stays off" in fp32.precision_reason


def test_auto_on_cpu_measures_fp32_and_keeps_it_when_nothing_is_short():
    runner = StubRunner(saturate=None)
    _, result = run_session(settings(), HostDevices("cpu"), runner)
    assert {c[2] for c in runner.calls} == {"fp32"} and result.plan.precision == "fp32" and not result.tf32
    assert "slow without AMX" in result.precision_reason and "no accumulation was needed" in result.precision_reason


def test_mixed_precision_comes_before_accumulation():
    """Regression: a plan that needed accumulation in fp32 only warned 'try mixed precision'; now the ceiling is
    re-probed in bf16 and the plan takes it when it needs fewer accumulation steps."""
    runner = StubRunner(saturate=None)  # fp32 ceiling ~245 per device; bf16 halves activations: ~490
    session, result = run_session(settings(global_batch=800, allow_few_steps=True), HostDevices("cpu"), runner)
    assert result.plan.precision == "bf16" and result.plan.accumulation_steps == 1 and result.plan.per_device == 400
    assert {c[1] for c in runner.calls if c[0] == "probe" and c[2] == "bf16"}  # really re-probed in bf16
    assert "mixed precision before accumulation" in result.precision_reason
    assert result.ceiling.per_device_max >= 400 and "In bf16" in result.ceiling.reason
    assert not any(w.code == "amp-before-shrinking" for w in result.plan.warnings)


def test_mixed_before_accumulation_keeps_fp32_with_the_reason_when_bf16_cannot_run(monkeypatch):
    # A CPU without bf16 (the device boundary patched: this machine's own CPU may well run bf16).
    monkeypatch.setattr("advisor.device.cpu_runs_precision", lambda precision: (False, "no native bf16 CPU flag"))
    runner = StubRunner(saturate=None, unsupported={"bf16"})
    _, result = run_session(settings(global_batch=800, allow_few_steps=True), HostDevices("cpu"), runner)
    assert result.plan.precision == "fp32" and result.plan.accumulation_steps == 2
    assert "cannot run" in result.precision_reason and "not supported by this CPU's oneDNN" in result.precision_reason


def test_mixed_before_accumulation_is_a_pure_decision():
    from advisor.method import PrecisionChoice, mixed_before_accumulation

    auto = PrecisionChoice("fp32", "bf16", False, "")
    asked = []
    assert mixed_before_accumulation(400, 2, 250, auto, lambda m: asked.append(m))[:2] == ("fp32", 250)
    assert asked == []  # no accumulation needed: nothing re-probed
    assert mixed_before_accumulation(2000, 2, 250, auto, lambda m: (260, ""))[:2] == ("fp32", 250)  # 4 either way
    assert mixed_before_accumulation(2000, 2, 250, auto, lambda m: (500, ""))[:2] == ("bf16", 500)
    fixed = PrecisionChoice("fp32", None, False, "")
    assert mixed_before_accumulation(2000, 2, 250, fixed, lambda m: 1 / 0)[:2] == ("fp32", 250)


def test_a_primitive_error_that_persists_at_batch_one_is_an_unsupported_configuration(monkeypatch):
    """Regression: oneDNN's 'could not create a primitive' at every batch read as 'even a batch of 1 runs out
    of memory'; a smaller batch that still fails is not memory."""
    from advisor.method.ceiling import UnsupportedConfiguration

    monkeypatch.setattr("advisor.device.cpu_runs_precision", lambda precision: (False, "no native bf16 CPU flag"))

    runner = StubRunner(unsupported={"bf16"})
    with pytest.raises(UnsupportedConfiguration, match=r"bf16 is not supported by this CPU's oneDNN.*--precision fp32"):
        search_ceiling(lambda b, p: runner.probe(b, p, "bf16"), runner.budget, precision="bf16")
    adapter = load_adapter("ddp")
    s = settings(precision="bf16")
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=StubRunner(unsupported={"bf16"}))
    with pytest.raises(UnsupportedConfiguration, match="batch 1 and 2"):
        session.ceiling()
    # A real memory limit also says it at large batches only: that stays an OOM edge.
    tiny = StubRunner(fixed=1 * MIB, per_sample=1 * MIB, budget=3.5 * MIB)
    oom_at_3 = lambda b, p: (ProbeTrial(b, "oom", None, 0.0, p, "could not create a primitive") if b > 2
                             else tiny.probe(b, p))
    assert search_ceiling(oom_at_3, tiny.budget).largest_ok == 2
    with pytest.raises(Exception, match="Even a batch of 1 runs out of memory"):
        search_ceiling(StubRunner(fixed=10 * MIB, budget=5 * MIB).probe, 5 * MIB)


def test_a_primitive_error_on_a_cpu_that_runs_bf16_is_the_budget_not_the_hardware(monkeypatch):
    """Regression (issue 25): on a CPU with AVX512-BF16 (bf16 trains fine on it) a 16 MiB budget's 'could not
    create a primitive' was reported as "this CPU cannot run bf16: use --precision fp32". The CPU's flags and a
    tiny bf16 matmul outside the budget are asked first; when they say it runs, the budget is named."""
    from advisor.method.ceiling import UnsupportedConfiguration

    asked = []

    def runs(precision):
        asked.append(precision)
        return True, "CPU flags avx512_bf16, a bf16 matmul outside the budget ran"

    monkeypatch.setattr("advisor.device.cpu_runs_precision", runs)
    adapter = load_adapter("ddp")
    s = settings(precision="bf16", memory_budget_bytes=16 * MIB)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=StubRunner(unsupported={"bf16"}))
    with pytest.raises(Exception, match=r"it is the budget, not the hardware.*raise --device-memory") as raised:
        session.ceiling()
    assert not isinstance(raised.value, UnsupportedConfiguration) and "avx512_bf16" in str(raised.value)
    assert asked == ["bf16"]  # asked once, only when the probes failed at the smallest batches


def test_primitive_failures_are_told_apart_by_the_classifier():
    from advisor.oom import is_oom_message, is_primitive_failure, unsupported_configuration_message

    assert is_primitive_failure("RuntimeError: could not create a primitive") and is_oom_message("could not create a primitive")
    assert not is_primitive_failure("DefaultCPUAllocator: can't allocate memory")
    text = unsupported_configuration_message("fp32", [1, 2], "could not create a primitive")
    assert "no kernel for this model's configuration in fp32" in text and "not out of memory" in text


def test_a_trial_whose_mixed_retry_meets_a_primitive_error_says_so_and_halves_in_fp32():
    runner = StubRunner(budget=100 * MIB, saturate=None, unsupported={"bf16"})
    ceiling = ceiling_for(runner)
    runner.budget = 60 * MIB
    outcome = short_trial(runner, 64, ceiling, 40, info(), "fp32", mixed="bf16")
    assert outcome.precision == "fp32" and any("could not create a primitive" in d for d in outcome.decisions)
    assert [c for c in runner.calls if c[0] == "trial"][:3] == [("trial", 64, "fp32"), ("trial", 64, "bf16"),
                                                                   ("trial", 32, "fp32")]


# -- the base the LR and the warmup are scaled from ------------------------------------------------------------

SMALL_DATA = Path(__file__).resolve().parent / "workloads" / "small_data.py"


def test_base_lr_without_any_base_batch_stops_with_a_clear_error():
    # Regression: --base-lr alone took the task's per-device starting value (32) as the global base batch.
    from advisor.errors import SetupError

    adapter = load_adapter("ddp")
    with pytest.raises(SetupError) as err:
        validate_setup(settings(workload=f"{SMALL_DATA}:tiny_without_base_batch", base_lr=0.1), adapter,
                       HostDevices("cpu"))
    assert "pass --base-batch N" in str(err.value) and "current_batch_size" in str(err.value)
    # With the workload's current_batch_size, --base-lr is scaled from it, and the recipe says so.
    setup = validate_setup(settings(workload=f"{SMALL_DATA}:tiny_142", base_lr=0.1), adapter, HostDevices("cpu"))
    assert (setup.base_lr, setup.base_global_batch) == (0.1, 16)
    assert setup.base_source == "--base-lr at the workload's current_batch_size"


def test_the_warmup_starts_from_the_users_own_and_keeps_its_samples():
    adapter = load_adapter("ddp")
    workload = f"{SMALL_DATA}:tiny_142"
    setup = validate_setup(settings(workload=workload), adapter, HostDevices("cpu"))
    # 20 steps at global 16 over 142 samples: 320 samples, 2.25 epochs.
    assert setup.base_warmup_epochs == pytest.approx(20 * 16 / 142)
    assert "current_warmup_steps: 20 steps" in setup.base_warmup_source
    flag = validate_setup(settings(workload=workload, base_warmup=(0.5, "epochs")), adapter, HostDevices("cpu"))
    assert flag.base_warmup_epochs == 0.5 and flag.base_warmup_source.startswith("--base-warmup")
    default = validate_setup(settings(), adapter, HostDevices("cpu"))  # digits-mlp sets no warmup
    assert default.base_warmup_epochs == 1.0 and "advisor's default" in default.base_warmup_source


def test_the_planned_warmup_is_stretched_past_2x_and_capped_by_the_stated_run():
    from advisor.method import make_plan

    base = dict(train_size=1000, base_global_batch=100, base_warmup_epochs=0.5, base_warmup_source="yours")
    # Same global batch: the user's 0.5 epoch (5 steps of 100) stays 0.5 epoch.
    _, _, same = make_plan(settings(nproc=2), info(**base), 512, 50, "", "fp32", None, True)
    assert (same.epochs, same.steps, same.capped) == (0.5, 5, False)
    # Global 400 (s = 4 >= 2): 3 x 0.5 = 1.5 epochs at 2 steps per epoch (1000 // 400: the sampler drops the partial
    # batch, never rounds it up); a scaled-up LR's floor (50 steps, with no stated run at most 3 epochs) raises it to
    # 6 steps; a stated 4-epoch run caps it at 20%, 0.8 epochs.
    _, _, stretched = make_plan(settings(nproc=2), info(**base), 512, 200, "", "fp32", None, True)
    assert stretched.steps_per_epoch == 2
    assert stretched.steps == 6 and stretched.epochs == 3 and not stretched.capped
    assert "lengthened from 0.5 epoch(s) (yours) to 1.5 epochs" in stretched.reason
    _, _, capped = make_plan(settings(nproc=2), info(**base, run_epochs=4, run_source="--epochs"), 512, 200, "",
                             "fp32", None, True)
    assert capped.capped and capped.epochs == pytest.approx(0.8) and capped.steps <= 0.2 * 4 * capped.steps_per_epoch
    assert "Capped at 20% of the 4-epoch run (--epochs)" in capped.reason


def test_base_warmup_flag_parses_steps_and_epochs_and_rejects_the_rest(capsys):
    from advisor.cli import main
    from advisor.method.lr import parse_warmup

    assert parse_warmup("500") == (500, "steps") and parse_warmup("500 steps") == (500, "steps")
    assert parse_warmup("2epochs") == (2, "epochs") and parse_warmup("0.5epoch") == (0.5, "epochs")
    assert main(["plan", "--device-memory", "1GiB", "--workload", "digits-mlp", "--base-warmup", "soon"]) == 2
    assert "--base-warmup 'soon' is not a warmup length" in capsys.readouterr().err
    from advisor.cli import build_parser, settings_from_args

    args = build_parser().parse_args(["plan", "--device-memory", "1GiB", "--base-warmup", "300", "--epochs", "5"])
    parsed = settings_from_args(args, HostDevices("cpu"))
    assert parsed.base_warmup == (300, "steps") and parsed.run_epochs == 5


# -- plans that keep their own rules -----------------------------------------------------------------------------

def test_the_steps_per_epoch_cap_bounds_the_start_every_trial_and_sweep_point_and_the_plan():
    # Regression: 142 samples on 2 processes: "at most 7 per device keeps 10 steps per epoch", yet the trial
    # started at 32, the sweep ran 16 and 32, and the plan advised global 32 with 4 steps an epoch.
    adapter = load_adapter("ddp")
    s = settings(workload=f"{SMALL_DATA}:tiny_142", nproc=2)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=StubRunner(nproc=2))
    result = session.run_all()
    assert session.cap.value == 7 and session.cap.by == "steps" and "only up to 7 per device" in session.cap.why
    assert result.start_value == 7 and "capped at 7" in result.start_reason
    ran = [c[1] for c in session.runner.calls if c[0] in ("trial", "sweep")]
    assert ran and max(ran) <= 7
    assert result.plan.global_batch <= 14 and 142 // result.plan.global_batch >= 10
    assert "few-steps-per-epoch" not in {w.code for w in result.plan.warnings}
    # A global batch the user insists on may break the rule, but the warning says who asked for it.
    session.finish(global_batch=32)
    few = next(w for w in session.result.plan.warnings if w.code == "few-steps-per-epoch")
    assert "you asked for a global batch of 32 (--global-batch)" in few.message


def test_a_trial_start_above_its_cap_starts_at_the_cap():
    runner = StubRunner(saturate=None)
    outcome = short_trial(runner, 32, ceiling_for(runner), 40, info(), "fp32", None, cap=7, cap_reason="data")
    assert [c[1] for c in runner.calls if c[0] == "trial"] == [7]
    assert "32: above the cap of 7 (data): starting at 7" == outcome.decisions[0]


def test_a_cluster_plan_keeps_the_global_batch_the_sweep_validated():
    # Regression: 2 local processes swept 64 per device (global 128); the 32-GPU plan multiplied it to 2048.
    from advisor.method import make_plan
    from advisor.report import build_recipe

    s = settings(nproc=2, nodes=4, target_world_size=32)
    plan, lr, _ = make_plan(s, info(train_size=100_000), 512, 64, "", "fp32", None, True)
    assert (plan.global_batch, plan.per_device, plan.world_size, plan.validated_global) == (128, 4, 32, 128)
    assert lr.global_batch == 128 and "64 per device x 2 process(es) = global 128" in plan.reason
    unused = next(w for w in plan.warnings if w.code == "target-memory-unused")
    assert "up to 16384" in unused.message and "not validated" in unused.message
    # Forced past what was validated: the recipe says by how much.
    forced, _, _ = make_plan(settings(nproc=2, nodes=4, target_world_size=32, global_batch=1024),
                             info(train_size=100_000), 512, 64, "", "fp32", None, True)
    note = next(w for w in forced.warnings if w.code == "global-not-validated")
    assert "8x the 128 the comparison sweep ran" in note.message and "--global-batch" in note.message
    # Rounding to identical batches on 48 devices is an extrapolation too (128 / 48 -> 3 x 48 = 144).
    rounded, _, _ = make_plan(settings(nproc=2, target_world_size=48), info(train_size=100_000), 512, 64, "",
                              "fp32", None, True)
    assert rounded.global_batch == 144 and "1.12x" in next(
        w for w in rounded.warnings if w.code == "global-not-validated").message
    adapter = load_adapter("ddp")
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=StubRunner(nproc=2))
    recipe = build_recipe(session.run_all())
    batch = recipe["batch"]
    assert batch["validated_global"] == recipe["method"]["sweep_choice"] * 2
    assert batch["extrapolation"] == round(batch["global"] / batch["validated_global"], 4)


def test_a_ceiling_the_data_cap_sets_says_so_and_not_that_memory_or_headroom_did():
    # Regression: "Keeping 15% headroom below 128 MiB that really fits gives 719" when the peak was 4.6 MiB.
    runner = StubRunner(fixed=MIB, per_sample=1024, budget=128 * MIB)
    result = search_ceiling(runner.probe, runner.budget, 0.15, max_batch=719, cap_reason="data")
    assert result.per_device_max == 719
    assert "The cap bounds the ceiling, not memory: at 719 the peak was 1.7 MiB of the 128.0 MiB budget (1%)" \
        in result.reason
    assert "headroom played no part" in result.reason and "that really fits" not in result.reason
    small = search_ceiling(runner.probe, runner.budget, 0.15, max_batch=5, cap_reason="data")
    assert small.per_device_max == 5 and "The cap bounds the ceiling, not memory" in small.reason
    # Memory that binds keeps its headroom text.
    bound = ceiling_for(StubRunner(budget=100 * MIB))
    assert "headroom below" in bound.reason and "cap bounds" not in bound.reason


def test_cpu_processes_times_memory_must_fit_the_hosts_ram():
    # Regression: 99 processes x 100 GiB on a small machine was "Ready".
    from advisor.errors import SetupError

    adapter = load_adapter("ddp")
    with pytest.raises(SetupError) as err:
        validate_setup(settings(nproc=99, memory_budget_bytes=100 * 2**30), adapter, HostDevices("cpu"))
    assert "--nproc 99 x --device-memory 100.0 GiB = 9.7 TiB is more than this host's" in str(err.value)
    assert "or --nproc" not in str(err.value)  # one process of 100 GiB does not fit either
    small = HostDevices("cpu", physical_memory=8 * 2**30)
    with pytest.raises(SetupError, match=r"use --device-memory 2.0 GiB or less, or --nproc 2 or fewer"):
        validate_setup(settings(nproc=4, memory_budget_bytes=3 * 2**30), adapter, small)
    validate_setup(settings(nproc=2, memory_budget_bytes=3 * 2**30), adapter, small)  # 6 GiB of 8 fits
    assert HostDevices("cpu").physical_memory > 0  # the real host says


def test_the_sweep_says_where_the_planned_warmup_outlasts_its_runs():
    # A warmup as long as the run compares only the start of training; the reason must say so and name the fix.
    from advisor.method import sweep_run_settings

    session, _, outcome = swept_session({8: 0.80, 16: 0.95, 32: 0.70}.__getitem__, centre=16, sweep_steps=10)
    warm = [b for b in outcome.candidates
            if (run := sweep_run_settings(session.info, b * 2, outcome.samples))[2] >= run[0]]
    assert warm, "this setting should leave some candidate's warmup as long as its run"
    assert (f"At {', '.join(map(str, warm))} per device the planned warmup outlasts the sweep run "
            f"({outcome.samples} samples each)") in outcome.reason
    assert "a longer --sweep-steps covers more of it" in outcome.reason


def test_the_plans_text_says_an_unknown_noise_scale_once():
    # Seen on a real plan: the goodput line repeated the noise scale's whole reason inside its own parentheses
    # ("unknown (unknown (over 220 steps ...))") right under the noise scale's line.
    from advisor.report import human_summary, json_summary

    session, _, _ = swept_session({8: 0.80, 16: 0.95, 32: 0.70}.__getitem__, centre=16)
    result = session.finish()
    assert result.noise_scale is None
    text = human_summary(result, None, explain=True)
    assert text.count(result.noise_reason) == 1 and "unknown (unknown" not in text
    assert "Goodput-optimal batch: not computed, it needs the gradient noise scale, unknown here (above)." in text
    assert "warmup              44 steps (1 epoch)" in text  # 1438 // 32: the sampler drops the partial batch
    assert len([r for r in result.ledger if r.phase == "sweep"]) == 9  # 3 candidates x 3 paired seeds
    # The recipe's and --json's reason stands alone, so it keeps the noise scale's reason.
    assert json_summary(result, None)["goodput_reason"] == (
        "Goodput-optimal batch: not computed, the gradient noise scale is unknown: "
        + result.noise_reason.removeprefix("Gradient noise scale: unknown, "))


# -- every run judged (advisor.method.health) ------------------------------------------------------------------------

def _record(losses, status="ok", **kw):
    return TrialRecord("trial", 64, 2, 1, 128, status, 1.0, losses=list(losses), final_loss=losses[-1] if losses
                       else None, **kw)


def test_every_run_gets_one_health_verdict_from_its_curve():
    from advisor.method.health import FLAT, LEARNED, OOM, UNSTABLE, judge

    diverged = judge(_record(DIVERGED_TRIAL))
    assert diverged.verdict == UNSTABLE and diverged.gave_back > 0.5 and "gave back" in diverged.reason
    assert judge(_record(HEALTHY_RUN)).verdict == LEARNED  # a spike early is not instability
    assert judge(_record(FLAT_RUN)).verdict == FLAT
    assert judge(_record([2.3, 1.0, float("nan")] + [1.0] * 10)).verdict == UNSTABLE
    assert judge(_record([], status="oom")).verdict == OOM
    assert judge(_record([2.0, 1.0])).verdict == LEARNED  # too short for a shape: it fell
    assert judge(_record([2.3, 2.4, 2.8, 3.5, 4.9, 6.0, 7.7, 9.1])).verdict == UNSTABLE  # rose above its start
    assert judge(_record(HEALTHY_RUN, val_loss=float("inf"))).verdict == UNSTABLE
    # Regression (CI): a 40-step digits-cnn sweep run still falling steeply when it stopped was called unstable
    # ("gave back 68%": the last quarter's median sat on the slope above its best); it gave nothing back.
    still_falling = [2.31, 2.3, 2.31, 2.31, 2.3, 2.3, 2.3, 2.31, 2.3, 2.29, 2.3, 2.29, 2.31, 2.31, 2.29, 2.27, 2.3,
                     2.29, 2.26, 2.27, 2.26, 2.27, 2.26, 2.21, 2.2, 2.22, 2.25, 2.19, 2.17, 2.13, 2.19, 2.13, 2.11,
                     2.02, 2.11, 1.77, 1.64, 1.53, 1.02, 0.66]
    falling = judge(_record(still_falling))
    assert falling.verdict == LEARNED and falling.gave_back == 0.0


# CI (session 13): a 48-step LAMB sweep of digits-mlp at 8 per device; one-batch training loss 2.31 -> 2.19 (5%)
SLOW_START = [2.31, 2.31, 2.30, 2.31, 2.30, 2.29, 2.30, 2.29, 2.29, 2.28, 2.29, 2.28, 2.26, 2.27, 2.25, 2.24, 2.23,
              2.22, 2.21, 2.19]


def _evals(accuracies=None, losses=None):
    n = len(accuracies or losses)
    return [{"step": 12 * (i + 1), **({"val_metric": accuracies[i]} if accuracies else {}),
             **({"val_loss": losses[i]} if losses else {})} for i in range(n)]


def test_validation_overrules_a_flat_training_loss_only_when_it_improved_by_the_same_tenth():
    from advisor.method.health import FLAT, LEARNED, judge

    # Its validation accuracy rose 0.148 -> 0.719 over the four checkpoints (the same run, the validation set whole).
    learned = judge(_record(SLOW_START, evals=_evals([0.148, 0.323, 0.652, 0.719]), higher_is_better=True,
                            val_metric_name="accuracy"))
    assert learned.verdict == LEARNED and "validation accuracy short of 1 0.852 -> 0.281" in learned.reason
    assert judge(_record(SLOW_START)).verdict == FLAT  # no validation: the training loss decides
    # Stuck on the majority class, or at chance with the validation set's noise: under a tenth of the error moves.
    for accuracies in ([0.57, 0.57, 0.57, 0.57], [0.10, 0.09, 0.12, 0.115]):
        assert judge(_record(FLAT_RUN, evals=_evals(accuracies), higher_is_better=True)).verdict == FLAT
    assert judge(_record(FLAT_RUN, evals=_evals(losses=[2.30, 2.20, 2.05, 1.93]))).verdict == LEARNED
    assert judge(_record(FLAT_RUN, evals=_evals(losses=[2.30, 2.29, 2.27, 2.25]))).verdict == FLAT
    lower = _evals([40.0, 31.0, 25.0, 20.0])  # a lower-is-better metric (perplexity) that fell by half
    assert judge(_record(FLAT_RUN, evals=lower, higher_is_better=False)).verdict == LEARNED
    assert judge(_record([2.3, 2.31], evals=_evals([0.1, 0.5]), higher_is_better=True)).verdict == LEARNED
    assert judge(_record([2.3, 2.31], evals=_evals([0.5]), higher_is_better=True)).verdict == FLAT  # one checkpoint


def test_the_trial_never_doubles_from_a_run_that_did_not_learn_and_halves_from_an_unstable_one():
    """Regression (issue 24): the trial chose 256 per device on memory and throughput while its loss blew up there
    (LR scaled 8x), and the recipe kept it. Unstable: halve (a smaller scaled LR), never double, never choose it."""
    runner = CurveRunner({64: DIVERGED_TRIAL})
    ceiling = ceiling_for(runner)
    decisions = []
    outcome = short_trial(runner, 64, ceiling, 40, info(), "fp32", None, decisions.append)
    assert outcome.chosen == 32 and 64 in outcome.unhealthy and outcome.unhealthy[64].verdict == "unstable"
    # 64 unstable at seed 0 and at the confirming seed 1; 32 learned: not doubled back to 64.
    assert [call[1] for call in runner.calls if call[0] == "trial"] == [64, 64, 32]
    assert any("halving to 32" in d for d in decisions) and any("64 did not (unstable)" in d for d in decisions)
    assert "unstable" in runner.ledger[0].note  # the ledger row says why it was left out

    # Doubling from a healthy run into an unstable one: stop there, keep the healthy one. The unstable run was at a
    # scaled-up LR (0.025, twice 16's 0.0125), so the LR is blamed before the batch: 32 runs once more at 16's LR.
    runner = CurveRunner({32: DIVERGED_TRIAL}, saturate=None)
    decisions = []
    outcome = short_trial(runner, 16, ceiling_for(runner), 40, info(), "fp32", None, decisions.append)
    assert outcome.chosen == 16 and [call[1] for call in runner.calls if call[0] == "trial"] == [16, 32, 32, 32]
    assert [r.lr for r in runner.ledger] == pytest.approx([0.0125, 0.025, 0.025, 0.0125])  # seed 1, then 16's LR
    assert any("unstable at 16 per device's LR 0.0125 too: the batch itself is to blame" in d for d in decisions)
    by_lr = CurveRunner({32: lambda lr: DIVERGED_TRIAL if lr > 0.02 else HEALTHY_RUN}, saturate=None)
    outcome = short_trial(by_lr, 16, ceiling_for(by_lr), 40, info(), "fp32", None)
    assert "32: learned at 16 per device's LR 0.0125 but not at the scaled 0.025: the LR scale-up, not the batch, " \
           "is to blame" in outcome.reason
    assert outcome.chosen == 16 and by_lr.ledger[-1].note.endswith("rerun at 16 per device's LR 0.0125: learned")

    # A flat run (a short trial in its warmup often is) is noted, not dropped: the trial goes on as before.
    runner = CurveRunner({16: FLAT_RUN}, saturate=None)
    outcome = short_trial(runner, 16, ceiling_for(runner), 40, info(), "fp32", None)
    assert [call[1] for call in runner.calls if call[0] == "trial"][:2] == [16, 32] and not outcome.unhealthy
    assert runner.ledger[0].note.startswith("flat:")

    # Unstable at 16 and at 8: it halves until a run learns, and keeps that one.
    runner = CurveRunner({b: DIVERGED_TRIAL for b in (8, 16)})
    outcome = short_trial(runner, 16, ceiling_for(runner), 40, info(), "fp32", None)
    assert [call[1] for call in runner.calls if call[0] == "trial"] == [16, 16, 8, 8, 4]
    assert outcome.chosen == 4


def test_an_unstable_trial_verdict_moves_the_trial_only_when_a_second_seed_confirms_it():
    """Regression (session m-v3, a held-out Adam model at a quarter of its edge LR): the trial judged the user's own
    setting unstable from one 40-step curve (55% of its decrease given back) and halved, though the sweep's 6 seeds at
    that setting learned; the sweep then compared at half the batch and half the samples, and the advice took 9x the
    grid's best time to its target. A second seed at the same setting now confirms the verdict before the trial acts."""

    class SeedCurves(StubRunner):
        def train(self, phase, per_device, steps, lr, *args, **kw):
            record = super().train(phase, per_device, steps, lr, *args, **kw)
            if record.status == "ok" and per_device == 16 and phase == "trial":
                record.losses = list(DIVERGED_TRIAL if kw.get("seed", 0) == 0 else HEALTHY_RUN)
            return record

    runner = SeedCurves(saturate=None)
    decisions = []
    outcome = short_trial(runner, 16, ceiling_for(runner), 40, info(), "fp32", None, decisions.append)
    trials = [(r.per_device, r.seed or 0) for r in runner.ledger if r.phase == "trial"]
    assert trials[:3] == [(16, 0), (16, 1), (32, 0)]  # not halved to 8: the second seed learned, so it doubles
    assert 16 not in outcome.unhealthy and outcome.chosen >= 16
    assert decisions[0].startswith("16: unstable at LR 0.0125 at seed 0 (the last quarter gave back")
    assert decisions[0].endswith("but a second seed at the same setting learned: one short run's curve, not "
                                 "instability; going on from the second")
    assert runner.ledger[0].note.startswith("unstable:")  # the first run keeps its verdict in the ledger
    assert runner.ledger[1].note.endswith("second seed, to confirm an unstable verdict: learned")


def test_a_batch_that_ran_out_of_memory_in_training_is_never_planned():
    """Regression (issue 24): with --global-batch the recipe said 15 per device x 9 accumulation while its own
    trial at 15 had run out of memory. Training runs that ran out of memory cap the plan at the largest batch
    that trained, and the recipe says so."""
    from advisor.method import trained_cap

    adapter = load_adapter("ddp")
    s = settings(global_batch=1024, precision="fp32", allow_few_steps=True)
    runner = StubRunner(saturate=None)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=runner)
    session.ceiling()
    runner.budget = 60 * MIB  # N-process training holds more than the probes did: runs above 50 per device OOM
    session.choose_start(64)
    session.trial()
    session.sweep()
    result = session.finish()
    trained = [r for r in runner.ledger if r.phase in ("trial", "sweep")]
    ooms = [r.per_device for r in trained if r.status == "oom"]
    assert ooms and result.plan.per_device < min(ooms)
    assert result.plan.per_device <= max(r.per_device for r in trained if r.status == "ok")
    assert result.plan.global_batch >= 1024 and result.plan.accumulation_steps > 1  # the target kept, by accumulating
    warning = next(w for w in result.plan.warnings if w.code == "capped-by-training-oom")
    assert f"run at {min(ooms)} per device ran out of memory in fp32" in warning.message
    # The rule itself: fp32 runs that trained count for a mixed-precision plan, not the other way round.
    rows = [TrialRecord("trial", 15, 2, 1, 30, "oom", 1.0, precision="bf16"),
            TrialRecord("trial", 7, 2, 1, 14, "ok", 1.0, precision="fp32")]
    assert trained_cap(rows, "bf16")[0] == 7
    assert trained_cap(rows, "fp32") == (None, "")
    assert trained_cap(rows[:1], "bf16")[0] == 14 and "unmeasured" in trained_cap(rows[:1], "bf16")[1]


def test_an_oom_under_a_batch_that_trained_caps_nothing():
    """Regression (bench bn-small, 8 MiB on CPU, 21:55): the sweep's run at 6 per device (400 steps) ran out of memory
    while 12 per device (200 steps, equal samples) trained at all three seeds; the OOM at 6 capped the plan at 5,
    unmeasured, and the recipe advised 4 per device x 3 accumulation (BatchNorm on 4) where 12 had trained. An OOM
    under a batch that trained is the run's length, not the batch's memory. One at the batch itself still counts."""
    from advisor.method import trained_cap

    longer = TrialRecord("sweep", 6, 2, 1, 12, "oom", 1.0, precision="fp32", steps=400)
    held = [TrialRecord("sweep", 12, 2, 1, 24, "ok", 1.0, precision="fp32", steps=200)] * 3
    assert trained_cap([longer, *held], "fp32") == (None, "")
    # An OOM at 12 itself (a fourth seed) caps just under 12; one above every trained batch caps at the largest trained.
    at_twelve = TrialRecord("sweep", 12, 2, 1, 24, "oom", 1.0, precision="fp32")
    assert trained_cap([longer, *held, at_twelve], "fp32")[0] == 11
    above = TrialRecord("sweep", 24, 2, 1, 48, "oom", 1.0, precision="fp32")
    assert trained_cap([longer, *held, above], "fp32")[0] == 12


def test_the_trial_never_halves_a_batchnorm_model_to_one_per_device():
    """DOMAIN 2: BatchNorm cannot train on 1 sample per device. Seen on a held-out BatchNorm CNN under a tiny budget
    (session m-v3): the trial halved on OOM to 1 per device and the sweep then trained 1 per device."""
    from advisor.errors import AdvisorError

    runner = StubRunner(budget=100 * MIB, saturate=None)
    ceiling = ceiling_for(runner)
    runner.budget = 11 * MIB  # training holds more than the probes did: only 1 per device would fit
    decisions = []
    with pytest.raises(AdvisorError, match="down to 2 .*BatchNorm"):
        short_trial(runner, 8, ceiling, 40, info(has_batchnorm=True), "fp32", None, decisions.append)
    assert [c[1] for c in runner.calls if c[0] == "trial"] == [8, 4, 2]
    assert decisions[-1] == ("2: out of memory in fp32: nothing smaller to try (the model has BatchNorm, which cannot "
                             "train on fewer than 2 samples per device)")
    runner = StubRunner(budget=100 * MIB, saturate=None)
    runner.budget = 11 * MIB
    short_trial(runner, 8, ceiling, 40, info(), "fp32", None)  # without BatchNorm 1 per device is a batch
    assert [c[1] for c in runner.calls if c[0] == "trial"] == [8, 4, 2, 1]
    # Unstable at 2 per device: stop there rather than halve to 1.
    runner = CurveRunner({2: DIVERGED_TRIAL, 4: DIVERGED_TRIAL})
    outcome = short_trial(runner, 4, ceiling_for(runner), 40, info(has_batchnorm=True), "fp32", None)
    assert [c[1] for c in runner.calls if c[0] == "trial"] == [4, 4, 2, 2] and outcome.steps[-1].rule == "unstable-stop"
    # A cap under 2 per device: a one-paragraph refusal, no run.
    runner = StubRunner(saturate=None)
    ceiling = ceiling_for(runner)
    with pytest.raises(AdvisorError, match="cap is 1 .*cannot train on fewer than 2 samples per device"):
        short_trial(runner, 8, ceiling, 40, info(has_batchnorm=True), "fp32", None, cap=1)
    assert not [c for c in runner.calls if c[0] == "trial"]
