"""Method v3 (issue 36, items 4-6): the noise scale from runs of one stage, goodput's throughput with the loader's
wait, validated means validated at the rule's LR, and nothing noise-based on a NOT VALIDATED plan. Stubs only
(milliseconds)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import MIB, settings, StubRunner

from advisor.ledger import TrialRecord
from advisor.method.noise import RUN_DISAGREEMENT, noise_estimate

FALLING = [2.3, 2.1, 1.9, 1.7, 1.5, 1.3, 1.2, 1.1, 1.0, 0.9, 0.85, 0.8]
DIVERGED = [2.31, 1.6, 1.05, 1.5, 7.4, 7.8, 7.6, 7.9, 7.7, 7.8, 7.5, 7.9]


def norms(b_simple: float, steps: int = 120, seed: int = 0, b_small: int = 16, b_big: int = 32,
          true_sq: float = 1.0) -> dict:
    """Per-step squared gradient norms whose unbiased terms average to |G|^2 = ``true_sq`` and tr(Sigma) =
    ``b_simple`` x it, with step-to-step noise (a run's gradient_norms, as the worker writes them)."""
    rng = np.random.default_rng(seed)
    grad_sq = true_sq * (1 + 0.6 * rng.standard_normal(steps))  # each step's unbiased |G|^2, noisy
    trace = b_simple * true_sq * (1 + 0.3 * rng.standard_normal(steps))
    small, big = grad_sq + trace / b_small, grad_sq + trace / b_big
    return dict(small_sq=float(small.mean()), big_sq=float(big.mean()), b_small=b_small, b_big=b_big, steps=steps,
                small_sq_steps=small.tolist(), big_sq_steps=big.tolist())


def run(phase: str, per_device: int, b_simple: float, seed: int = 0, losses=FALLING) -> TrialRecord:
    return TrialRecord(phase, per_device, 2, 1, 2 * per_device, "ok", 1.0, seed=seed, losses=list(losses),
                       gradient_norms=norms(b_simple, seed=1000 * per_device + 10 * seed + len(phase),
                                            b_small=per_device, b_big=2 * per_device))


def test_the_value_comes_from_the_picked_candidates_seeds_and_the_trial_is_only_a_lower_bound():
    """Issue 36: an adam_sqrt-like MLP's trial runs measured 95-336 and its sweep runs 510-796: pooled, the ">3x
    apart" test always fired and the noise scale was unknown in every plan. Seen failing with the old pooling
    (every healthy run in one estimate): unknown, "the runs disagree"."""
    rows = [run("trial", 16, 100), run("trial", 32, 150)]
    rows += [run("sweep", 16, 400, seed) for seed in range(3)]
    rows += [run("sweep", 32, 650, seed) for seed in range(3)]
    estimate = noise_estimate(rows, pick=32)
    assert estimate.known, estimate.reason
    assert estimate.stage == "sweep" and estimate.candidate == 32 and estimate.runs == 3
    assert estimate.value == pytest.approx(650, rel=0.2) and estimate.low < estimate.value < estimate.high
    assert estimate.early_value == pytest.approx(125, rel=0.3)
    assert "chosen 32 per device's 3 sweep seed(s)" in estimate.reason and "lower bound" in estimate.reason
    assert estimate.to_dict()["early_lower_bound"] == estimate.early_value
    # The other candidate's runs never enter it.
    assert noise_estimate(rows, pick=16).value == pytest.approx(400, rel=0.2)
    # Before the sweep (no pick) the trial's early runs give it, and say nothing of the sweep.
    early = noise_estimate(rows[:2])
    assert early.known and early.value == pytest.approx(125, rel=0.3) and early.candidate is None


def test_seeds_of_the_picked_candidate_that_disagree_give_unknown():
    rows = [run("sweep", 32, 100, 0), run("sweep", 32, 800, 1), run("sweep", 32, 120, 2)]
    estimate = noise_estimate(rows, pick=32)
    assert not estimate.known and "the runs disagree" in estimate.reason
    assert max(estimate.per_run) / min(estimate.per_run) > RUN_DISAGREEMENT


def test_two_plans_intervals_overlap_and_are_narrow_enough_to_be_known():
    """Two --fresh plans are two sets of 3 seeds at one stage of training: 12 pairs of plans (each seed 100 noisy
    steps of B_simple 300) all give a known value, and their intervals overlap. A cluster bootstrap over the 3
    seeds was tried first: its extremes are one seed drawn three times, so it gave 'unknown' (over 10x wide) on
    real plans of digits-mlp and a loader-bound MLP; the stratified one pools the seeds' steps."""
    apart = 0
    for pair in range(12):
        plans = []
        for plan in range(2):
            rows = [run("sweep", 32, 300.0, seed) for seed in range(3)]
            for r, seed in zip(rows, range(3)):
                r.gradient_norms = norms(300.0, steps=100, seed=100 * pair + 10 * plan + seed, b_small=32, b_big=64)
            plans.append(noise_estimate(rows, pick=32))
        assert all(p.known for p in plans), [p.reason for p in plans]
        assert all(p.low <= 300 <= p.high for p in plans)
        a, b = plans
        apart += a.high < b.low or b.high < a.low
    assert apart == 0


def test_an_unlearned_pick_is_left_out_and_one_device_falls_back_to_the_trial_said_as_a_lower_bound():
    rows = [run("trial", 16, 100), run("noise", 8, 90)]
    rows[1].accumulation, rows[1].gradient_norms["pair"] = 2, "accumulation"
    rows += [TrialRecord("sweep", 16, 1, 1, 16, "ok", 1.0, losses=FALLING)]  # one device: no norms in the sweep
    estimate = noise_estimate(rows, pick=16)
    assert estimate.known and estimate.stage == "trial" and "lower bound" in estimate.reason
    assert "carry no gradient norms" in estimate.reason


def test_goodputs_step_time_counts_the_loaders_wait():
    """Issue 36: on a loader-bound job (1 ms per sample) the fit to step_seconds alone claimed 23,666 samples/s
    where ~1,500 were measured. Seen failing with timed_points reading step_seconds: 23,666."""
    from advisor.method.goodput import fit_step_time, goodput_optimum, timed_points

    rows = []
    for b in (16, 32, 64):
        compute = 0.0005 + 0.00002 * b  # the model alone: ~23,000+ samples/s at 2 x 64
        rows.append(TrialRecord("sweep", b, 2, 1, 2 * b, "ok", 1.0, step_seconds=compute,
                                data_seconds=0.001 * 2 * b))  # the loader: 1 ms per sample
    model = fit_step_time(timed_points(rows))
    throughput = 128 / model.step_seconds(64, 1)
    measured = rows[-1].samples_per_s
    assert throughput == pytest.approx(measured, rel=0.05) and throughput < 1_100
    result = goodput_optimum(model, 500.0, "", 64, 2, 64, "sgd", rule_of_thumb=(64, 1))
    assert result.choice.throughput < 1_100


def test_a_rerun_at_a_lower_lr_validates_that_lr_only():
    """The committed digits-cnn recipe: 64 per device (global 128) was unstable at LR 0.04 in the trial and in the
    sweep, and a rerun at 0.02 learned; lr.bound_from_global said 128 and `--global-batch 128` got LR 0.04. Seen
    failing before the fix: bound_from_global 128, LR 0.04, no warning."""
    session, runner, outcome = _swept_with_unstable_64()
    result = session.finish(global_batch=128)
    from advisor.method.inputs import lr_for

    rule_lr = lr_for(session.info, 128).value
    bad = [r for r in runner.ledger if r.global_batch == 128 and r.lr == pytest.approx(rule_lr)]
    assert bad, "the stub must run 64 per device at the rule's LR"
    assert result.lr.bounded_from == 64
    assert result.lr.value < rule_lr * (1 - 1e-6)
    codes = [w.code for w in result.plan.warnings]
    assert "lr-seen-unstable" in codes
    warning = next(w for w in result.plan.warnings if w.code == "lr-seen-unstable")
    assert "never advises a setting its runs saw fail" in warning.message
    # The planned LR is one a run at global 128 learned at (the rerun), not the rule's.
    learned_at = {r.lr for r in runner.ledger if r.global_batch == 128 and r.losses == FALLING}
    assert any(result.lr.value == pytest.approx(x) for x in learned_at)
    # The recipe records the lowering, and `advisor check` reads it as the rule's, not as a hand edit.
    from advisor.recipe_check import recipe_warnings
    from advisor.report import build_recipe

    recipe = build_recipe(result)
    assert recipe["lr"]["seen_failing_at"] == pytest.approx(rule_lr)
    assert not [w for w in recipe_warnings(recipe) if "lr.value" in w]


def _swept_with_unstable_64():
    """A stub sweep where 64 per device blows up at its rule LR and learns at any lower one."""
    class Runner(StubRunner):
        def train(self, phase, per_device, steps, lr, warmup_steps=0, accumulation=1, evaluate=False,
                  precision="fp32", eval_points=1, seed=0):
            record = super().train(phase, per_device, steps, lr, warmup_steps, accumulation, evaluate, precision,
                                   eval_points, seed)
            if record.status == "ok":
                from advisor.method.inputs import lr_for

                rule = lr_for(session.info, record.global_batch).value
                record.losses = list(DIVERGED if per_device == 64 and lr >= rule * (1 - 1e-6) else FALLING)
            return record

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.session import Session, validate_setup


    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, memory_budget_bytes=300 * MIB)
    runner = Runner(saturate=None, val={16: 0.9, 32: 0.95, 64: 0.9}.get)
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                      runner=runner)
    session.ceiling()
    outcome = session.sweep(32)
    return session, runner, outcome


def test_a_not_validated_plan_has_nothing_noise_based():
    """Issue 36: NOT VALIDATED plans recorded a noise scale and goodput advice from runs that never learned, and
    `validated_global`. Seen failing before the fix: the noise estimate known, goodput computed."""
    class Runner(StubRunner):
        def train(self, *args, **kwargs):
            record = super().train(*args, **kwargs)
            if record.status == "ok":
                record.losses = list(FALLING)
                record.gradient_norms = norms(50, seed=record.per_device, b_small=record.per_device,
                                              b_big=2 * record.per_device)
            return record

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.report import build_recipe
    from advisor.session import Session, validate_setup


    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, memory_budget_bytes=300 * MIB)
    runner = Runner(saturate=None, val=lambda batch: 0.10)  # chance on 10 classes
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                      runner=runner)
    session.ceiling()
    session.choose_start(16)
    session.trial()  # its runs learned and carry norms: the old estimate took them
    assert session.sweep(16).failed
    result = session.finish()
    assert result.headline
    assert not result.noise.known and "NOT VALIDATED" in result.noise.reason
    assert result.goodput.choice is None and "NOT VALIDATED" in result.goodput.reason
    assert result.lr.bound_noise_low is None and result.plan.validated_global is None
    assert not [w for w in result.plan.warnings if w.code in ("beyond-noise-scale", "goodput-past-critical-batch",
                                                               "goodput-extrapolated")]
    recipe = build_recipe(result)
    assert "validated_global" not in recipe["batch"] or recipe["batch"]["validated_global"] is None
    # The same runs with a candidate that learned: the estimate is made.
    learned = Runner(saturate=None, val={8: 0.8, 16: 0.95, 32: 0.7}.get)
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                      runner=learned)
    session.ceiling()
    session.sweep(16)
    assert session.finish().noise.known


def _committed_digits_cnn() -> dict:
    """The digits-cnn recipe committed on 2026-12-06 (a real plan's ledger, kept as a fixture: the committed recipe
    was regenerated since, and its ledger holds other runs)."""
    from pathlib import Path

    from advisor.recipe import check_recipe

    return check_recipe(Path(__file__).resolve().parent / "fixtures" / "digits-cnn-2026-12-06" / "digits-cnn.toml")


def test_replan_never_gives_an_lr_the_recipes_own_runs_saw_fail():
    """The committed digits-cnn recipe's ledger: 64 per device x 2 (global 128) was unstable at LR 0.04 in its trial
    and at sweep seed 2, and learned at 0.02 when rerun. Were 64 validated (a sweep pick of 32 per device), the
    bound would allow 2x, LR 0.04 at global 128: the re-plan must give 0.02 and say why. Seen failing before the
    fix: LR 0.04, no lr-seen-unstable warning."""
    from advisor.replan import ReplanTarget, render_table, replan

    data = _committed_digits_cnn()
    data["batch"]["validated_global"] = 64
    cpu = ReplanTarget(2**30, "--device-memory", None, "cpu", 2, global_batch=128)
    result = replan(data, "digits-cnn.toml", cpu)
    assert result.lr.value == pytest.approx(0.02)
    assert any(w.code == "lr-seen-unstable" for w in result.plan.warnings)
    assert "lowered from the rule's value" in render_table(result)
    # The summary never prints a lowered LR under the bare rule's name ("0.02 (linear; base 0.02 at 64)" read as
    # the rule's value). Seen failing before the fix.
    from advisor.explain import summary_text
    from advisor.replan import replanned_recipe

    written = replanned_recipe(result)
    assert "learning rate       0.02  (linear, then lowered: see the LR reason; base 0.02 at 64)" in summary_text(
        written, None)
    # `advisor check`'s redo of the rule reads the same ledger: the lowered LR is the rule's, not a hand edit. Seen
    # failing before recipe._rules_lr read it: "lr.value 0.02 is not what the recipe's rule gives ... 0.04".
    from advisor.recipe_check import recipe_warnings

    assert not [w for w in recipe_warnings(written) if "lr.value" in w]
    # Global 64 at its rule LR 0.02 trained healthily: nothing to lower.
    assert replan(data, "digits-cnn.toml", ReplanTarget(2**30, "--device-memory", None, "cpu", 2,
                                                        global_batch=64)).lr.value == pytest.approx(0.02)


def _not_validated_result():
    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.session import Session, validate_setup

    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, memory_budget_bytes=300 * MIB)
    runner = StubRunner(saturate=None, val=lambda batch: 0.10)  # chance on 10 classes
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                      runner=runner)
    session.ceiling()
    session.sweep(2)  # far below the base global batch: the old bound from this "pick" lowered the base LR
    return session, session.finish()


def test_a_not_validated_plan_tells_one_story_in_the_recipe_summary_explain_app_and_replan():
    """Issue 36: NOT VALIDATED plans recorded validated_global and a sweep pick, and the summary said 'LR 0.025
    (unchanged; base 0.1)'. Seen failing before the fix: validated_global 16, sweep pick 8, LR bounded below the
    base with rule 'unchanged'."""
    from advisor.explain import explain_text, summary_text
    from advisor.replan import ReplanTarget, render_table, replan, replanned_recipe
    from advisor.report import build_recipe
    from advisor.tui.screens.recipe import recipe_numbers

    session, result = _not_validated_result()
    info = session.info
    assert result.headline
    assert result.lr.value == pytest.approx(info.base_lr) and result.lr.rule == "unchanged"
    data = build_recipe(result)
    assert data["batch"].get("validated_global") is None and data["batch"].get("extrapolation") is None
    assert data["method"].get("sweep_choice") is None and data["method"]["sweep"].get("pick") is None
    summary = summary_text(data, None)
    assert summary.startswith("NOT VALIDATED.") and "no candidate learned" in summary
    assert f"learning rate       {info.base_lr:.4g}  (unchanged; base {info.base_lr:g}" in summary
    explained = explain_text(data)
    assert explained.startswith("NOT VALIDATED.") and "4. Sweep: no pick, NOT VALIDATED." in explained
    assert "NOT VALIDATED" in explained.split("4. Sweep")[1]  # the noise scale and goodput say why they are absent
    assert ("Validated", "NOT VALIDATED", result.headline) == recipe_numbers(result)[0]
    cpu = ReplanTarget(2**30, "--device-memory", None, "cpu", 4)
    again = replan(data, "r.toml", cpu)
    assert again.plan.validated_global is None and again.plan.warnings[0].code == "no-candidate-learned"
    table = render_table(again)
    assert table.startswith("NOT VALIDATED.") and "kept: the recipe's base setting, NOT VALIDATED" in table
    written = replanned_recipe(again)
    assert "validated_global" not in written["batch"] and written["method"]["headline"] == result.headline


def test_runs_that_carry_no_gradient_norms_say_so_not_that_more_processes_are_needed():
    """A newcomer's 2-process plan of a plain DDP script (advisor plan -- train.py): the shim meters no gradient
    norms at any process count, and the reason read "it needs 2+ processes (or one process and ...), an adapter that
    reports the gradient norms, and steps past the warm-up", a list the plan seemed to meet."""
    rows = [TrialRecord(phase, b, 2, 1, 2 * b, "ok", 1.0, seed=0, losses=list(FALLING))
            for phase, b in (("trial", 32), ("sweep", 16), ("sweep", 32))]
    for pick in (None, 16):
        estimate = noise_estimate(rows, pick=pick)
        assert not estimate.known
        assert "no run of this plan reported gradient norms" in estimate.reason, estimate.reason
        assert "advisor plan -- SCRIPT" in estimate.reason and "it needs 2+ processes" not in estimate.reason
    # Runs that did meter, too few steps past the warm-up: the old list of what it needs still stands.
    short = [run("trial", 16, 100)]
    short[0].gradient_norms.update(small_sq_steps=[1.0], big_sq_steps=[0.9])
    assert "no run of this plan reported" not in noise_estimate(short).reason
