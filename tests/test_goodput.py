"""Goodput's optimum against a hand-worked example; the step-time fit; what it says when it cannot tell."""

from __future__ import annotations

import pytest

from advisor.method.goodput import StepTimeModel, fit_step_time, goodput_optimum

# The hand-worked example: T_iter(b, s) = s (0.010 + 0.001 b) + 0.020 s, 2 devices, noise scale phi = 100,
# base batch M0 = 32. Goodput(b, s) = M / T_iter x (phi + M0) / (phi + M), M = 2 b s.
MODEL = StepTimeModel(micro_fixed_s=0.010, per_sample_s=0.001, per_step_s=0.020, points=4, note="hand-set")


def test_goodput_optimum_matches_the_hand_worked_example():
    # s = 1: goodput ~ b / ((30 + b)(100 + 2b)); d/db log = 1/b - 1/(30+b) - 2/(100+2b) = 0 gives
    # (30+b)(100+2b) - b(100+2b) - 2b(30+b) = 3000 - 2b^2 = 0, b = sqrt(1500) = 38.73. On integers:
    # b=38: 38/(68 x 176) = 0.0031751, b=39: 39/(69 x 178) = 0.0031754, so b = 39, M = 78,
    # goodput = 78 / 0.069 x 132/178 = 838.3 samples/s.
    # s = 2: T = 0.04 + 0.002 b, goodput ~ b / ((20 + b)(100 + 4b)), best b = sqrt(500) = 22.4; at b = 22
    # 44 / 0.042 x 132/188 = 735.6 < 838.3, and more accumulation is worse still: no accumulation.
    found = goodput_optimum(MODEL, 100.0, "", base_batch=32, world_size=2, per_device_cap=64, optimizer="sgd")
    best = found.choice
    assert (best.per_device, best.accumulation, best.global_batch) == (39, 1, 78)
    assert best.goodput == pytest.approx(78 / 0.069 * 132 / 178, rel=1e-9)
    # S/S_min = 1 + phi/M = 1 + 100/78 = 2.282; E/E_min = 1 + M/phi = 1.78.
    assert best.steps_ratio == pytest.approx(2.2821, abs=1e-4) and best.examples_ratio == pytest.approx(1.78)
    # AdaScale's LR gain for SGD: M/M0 x (phi + M0)/(phi + M) = 78/32 x 132/178 = 1.8076; Adam: its root, 1.3445.
    assert best.lr_gain == pytest.approx(1.8076, abs=1e-4)
    adam = goodput_optimum(MODEL, 100.0, "", 32, 2, 64, "adamw").choice
    assert adam.lr_gain == pytest.approx(1.3445, abs=1e-4)
    assert not best.past_critical and not found.warnings


def test_accumulation_wins_when_the_cap_is_small_and_the_optimizer_step_costs():
    # Cap 16: s=1, b=16: M=32, 32/0.046 x 132/132 = 695.7; s=2, b=16: M=64, T=0.072, 64/0.072 x 132/164 = 715.4;
    # s=2, b=15: 60/0.070 x 132/160 = 707.1; s=3, b=16: 96/0.098 x 132/196 = 659.7. So (16, 2), M = 64.
    found = goodput_optimum(MODEL, 100.0, "", 32, 2, 16, "sgd", rule_of_thumb=(16, 1))
    assert (found.choice.per_device, found.choice.accumulation) == (16, 2)
    assert found.choice.goodput == pytest.approx(64 / 0.072 * 132 / 164, rel=1e-9)
    # The plan's 16 x 2 x 1 gets 695.7 / 715.4 = 97% of it, and the report says where they disagree and why.
    assert found.rule_of_thumb_share == pytest.approx((32 / 0.046) / (64 / 0.072 * 132 / 164), rel=1e-9)
    assert "differs" in found.reason and "97%" in found.reason and "throughput still rises" in found.reason


def test_goodput_warns_past_the_critical_batch_and_says_why_it_could_not_compute():
    # phi = 10: the per-step cost still pays for a batch past it (s=1, b=20: M=40 > 10).
    found = goodput_optimum(MODEL, 10.0, "", 32, 2, 64, "sgd")
    assert found.choice.past_critical and "critical batch" in found.warnings[0]
    unknown = goodput_optimum(MODEL, None, "Gradient noise scale: unknown (over 20 steps, interval 3 to 90)", 32, 2,
                              64, "sgd")
    assert unknown.choice is None and "not computed" in unknown.reason and "interval 3 to 90" in unknown.reason
    assert unknown.reason.endswith("the gradient noise scale is unknown (over 20 steps, interval 3 to 90)")
    unmeasured = goodput_optimum(MODEL, None, "Gradient noise scale: unknown, 0 measured step(s) (needs 4+)", 32, 2,
                                 64, "sgd")
    assert unmeasured.reason == ("Goodput-optimal batch: not computed, the gradient noise scale is unknown: 0 measured "
                                 "step(s) (needs 4+)")
    assert unknown.to_dict()["computed"] is False
    assert "two batch sizes" in goodput_optimum(None, 50.0, "", 32, 2, 64, "sgd").reason


def test_step_time_fit_recovers_the_model_and_stays_conservative_without_accumulated_runs():
    timed = [(b, s, MODEL.step_seconds(b, s)) for b, s in [(16, 1), (32, 1), (64, 1), (16, 2)]]
    fitted = fit_step_time(timed)
    assert (fitted.micro_fixed_s, fitted.per_sample_s, fitted.per_step_s) == pytest.approx((0.010, 0.001, 0.020))
    # Runs at s = 1 only: the 0.030 s fixed cost is all charged to the micro-step, so accumulation gains nothing.
    flat = fit_step_time(timed[:3])
    assert (flat.micro_fixed_s, flat.per_sample_s, flat.per_step_s) == pytest.approx((0.030, 0.001, 0.0))
    assert "without accumulation" in flat.note
    assert fit_step_time(timed[:1]) is None


def test_an_optimum_outside_the_timed_batches_is_called_an_extrapolation():
    timed = [(b, 1, MODEL.step_seconds(b, 1)) for b in (8, 16)]
    fitted = fit_step_time(timed)
    assert fitted.timed_batches == (8, 16)
    found = goodput_optimum(fitted, 100.0, "", 32, 2, 64, "sgd")  # the flat model's optimum lies near 39
    assert found.choice.per_device > 16
    assert any("outside the batches timed (8-16 per device)" in w and "extrapolation" in w for w in found.warnings)
    inside = goodput_optimum(fit_step_time(timed + [(64, 1, MODEL.step_seconds(64, 1))]), 100.0, "", 32, 2, 64, "sgd")
    assert not any("extrapolation" in w for w in inside.warnings)


def test_goodput_respects_the_steps_per_epoch_cap_and_stays_within_2x_of_the_timed_batches():
    """Regression (issue 24): goodput advised global 1438 (the whole training set in one step) in one plan while
    the app showed 142. Its search now stops at the steps-per-epoch cap and at 2x past the batches timed."""
    from advisor.method.plan import largest_learnable_global

    free = goodput_optimum(MODEL, 100.0, "", 32, 2, 64, "sgd")
    assert free.choice.global_batch == 78
    capped = goodput_optimum(MODEL, 100.0, "", 32, 2, 64, "sgd", max_global=largest_learnable_global(500))
    assert capped.choice.global_batch <= 50 < free.choice.global_batch
    timed = [(b, 1, MODEL.step_seconds(b, 1)) for b in (8, 16)]
    within = goodput_optimum(fit_step_time(timed), 100.0, "", 32, 2, 64, "sgd")
    assert 4 <= within.choice.per_device <= 32  # the optimum near 39 is past 2 x 16: not searched


def test_the_app_sweep_screen_and_the_recipe_show_one_goodput_value_on_a_larger_target():
    """Regression (issue 24): the app's Sweep screen computed goodput on this host's processes and the probes' cap
    (142) while the recipe used the target's devices (1438). Both now read Session._plan_and_goodput: the same
    world size, cap (the training runs' OOM cap included) and precision."""
    from helpers import LedgerStubRunner, MIB, settings

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.session import Session, validate_setup

    adapter = load_adapter("ddp")
    s = settings(nproc=2, nodes=4, sweep_steps=40, sweep_extensions=0)  # the target: 4 nodes x 2 = 8 processes
    runner = LedgerStubRunner(saturate=400)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=runner)
    session.ceiling()
    session.choose_start(32)
    session.trial()
    runner.budget = 60 * MIB  # the sweep's 64 per device runs out of memory: the runs cap the plan below the probes
    session.sweep(32)
    preview = session.plan_goodput()
    result = session.finish()
    assert result.plan.world_size == 8 and result.goodput.choice is not None
    assert preview.choice == result.goodput.choice and preview.reason == result.goodput.reason
    assert preview.choice.per_device <= result.per_device_cap < session.ceiling_result.per_device_max
