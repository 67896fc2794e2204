"""Planning math and LR rules against DOMAIN's worked examples."""

import math

import pytest

from advisor.errors import AdvisorError
from advisor.method.lr import check_lr_change, plan_warmup, scale_lr
from advisor.method.plan import identical_batch_for, plan_data_parallel


def codes(plan):
    return {w.code for w in plan.warnings}


def test_four_devices_of_32_make_a_global_batch_of_128():
    plan = plan_data_parallel(128, world_size=4, ceiling=64, task="image-classification", num_classes=10)
    assert (plan.per_device, plan.accumulation_steps, plan.global_batch) == (32, 1, 128)
    assert codes(plan) == {"below-task-range"}  # 128 < ImageNet-style 256-1024: a note, nothing else
    assert not codes(plan_data_parallel(256, 4, 64, "image-classification", num_classes=10))


def test_accumulation_keeps_global_batch_and_lr_when_memory_is_short():
    plan = plan_data_parallel(128, world_size=4, ceiling=16, task="image-classification", num_classes=10)
    assert (plan.per_device, plan.accumulation_steps, plan.global_batch) == (16, 2, 128)
    lr = scale_lr(0.1, 128, plan.global_batch, "sgd")
    assert lr.rule == "unchanged" and lr.value == 0.1
    assert "amp-before-shrinking" in codes(plan)  # try AMP before shrinking


def test_accumulation_rounds_up_and_then_shrinks_the_micro_batch_to_the_target():
    plan = plan_data_parallel(1000, world_size=3, ceiling=64, task="image-classification")
    assert plan.accumulation_steps == math.ceil(1000 / (64 * 3)) == 6
    # 56 x 3 x 6 = 1008 is the smallest identical split that reaches 1000 (64 x 3 x 6 = 1152 overshoots).
    assert (plan.per_device, plan.global_batch) == (56, 1008)
    rounded = next(w for w in plan.warnings if w.code == "global-rounded")
    assert "+8 samples" in rounded.message


def test_accumulation_does_not_overshoot_the_target():
    # Regression: target 256 on 2 devices under a ceiling of 100 used to plan 100 x 2 x 2 = 400.
    plan = plan_data_parallel(256, world_size=2, ceiling=100, task="image-classification", num_classes=10)
    assert (plan.per_device, plan.accumulation_steps, plan.global_batch) == (64, 2, 256)
    assert "global-rounded" not in codes(plan)


def test_doubling_the_global_batch_doubles_the_sgd_lr():
    lr = scale_lr(0.1, 64, 128, "sgd")
    assert lr.rule == "linear" and lr.value == pytest.approx(0.2) and lr.scale == 2


def test_adam_uses_square_root_scaling():
    lr = scale_lr(1e-3, 32, 128, "adam")
    assert lr.rule == "sqrt" and lr.value == pytest.approx(2e-3)


def test_a_doubling_or_more_lengthens_warmup_and_a_scaled_up_lr_never_starts_cold():
    # Regression (issue 24): the x3 stretch needed strictly more than 2x, so a doubling, the sweep's most common
    # step, got none; a digits-cnn trial at 2x the base batch warmed up 10 steps and diverged at step ~14.
    from advisor.method.lr import WARMUP_FLOOR_STEPS

    small = plan_warmup(1.5, train_size=10_000, global_batch=256)
    double = plan_warmup(2.0, train_size=10_000, global_batch=256)
    long = plan_warmup(4.0, train_size=10_000, global_batch=256)
    assert double.epochs == 3 and long.epochs == 3 and long.steps == 3 * (10_000 // 256)  # the sampler drops a partial batch
    assert small.steps == WARMUP_FLOOR_STEPS > 10_000 // 256  # 1 epoch is 39 steps: raised to 50
    assert "floor for a scaled-up LR" in small.reason
    # The floor is 5% of a long stated run, and never past 20% of a short one.
    assert plan_warmup(1.5, 10_000, 256, run_epochs=100).steps == math.ceil(0.05 * 100 * 39)
    assert plan_warmup(1.5, 10_000, 256, run_epochs=5).steps == math.floor(0.2 * 5 * 39)
    # No scale-up: no floor; the user's own (even zero) warmup is kept.
    assert plan_warmup(1.0, 10_000, 256, base_warmup_epochs=0.0).steps == 0
    assert plan_warmup(0.5, 10_000, 256).steps == 39


def test_past_4096_linear_scaling_continues_as_sqrt_and_suggests_lars():
    lr = scale_lr(0.1, 256, 8192, "sgd", max_lr_factor=100)
    # Linear from 256 to 4096 (x16), then square root from 4096 to 8192 (x sqrt 2).
    assert lr.rule == "linear-sqrt" and lr.value == pytest.approx(0.1 * 16 * math.sqrt(2))
    assert lr.suggest_layerwise == "lars"
    assert scale_lr(1e-3, 256, 8192, "adamw").suggest_layerwise == "lamb"


def test_lr_is_continuous_at_the_large_batch_threshold():
    # Regression: SGD 0.1 at 256 gave 1.6 at 4096 but 0.40 at 4104.
    at = scale_lr(0.1, 256, 4096, "sgd", max_lr_factor=100).value
    past = scale_lr(0.1, 256, 4104, "sgd", max_lr_factor=100).value
    assert at == pytest.approx(1.6) and past == pytest.approx(1.6 * math.sqrt(4104 / 4096))
    values = [scale_lr(0.1, 256, b, "sgd", max_lr_factor=100).value for b in range(3800, 4400, 8)]
    assert all(later >= earlier for earlier, later in zip(values, values[1:]))
    assert max(b / a for a, b in zip(values, values[1:])) < 1.01
    # A base batch already past the threshold scales by square root from the base.
    assert scale_lr(0.1, 8192, 16384, "sgd").value == pytest.approx(0.1 * math.sqrt(2))


def test_lr_reason_and_warmup_agree_past_the_threshold():
    lr = scale_lr(0.1, 256, 8192, "sgd", max_lr_factor=100)
    warmup = plan_warmup(lr.scale, train_size=1_000_000, global_batch=8192)
    assert "s = 32" in lr.reason and warmup.epochs == 3  # the reason names the scale plan_warmup stretches on


def test_scaled_lr_is_capped():
    lr = scale_lr(0.1, 32, 4096, "sgd", max_lr_factor=16)
    assert lr.capped and lr.value == pytest.approx(1.6)


def test_changing_lr_while_accumulation_keeps_the_global_batch_is_flagged():
    assert check_lr_change(0.1, 128, 0.05, 128, accumulation_steps=2)
    assert check_lr_change(0.1, 128, 0.1, 128, accumulation_steps=2) is None
    assert check_lr_change(0.1, 64, 0.2, 128, accumulation_steps=1) is None


def test_more_than_eight_accumulation_steps_warns():
    plan = plan_data_parallel(4096, world_size=2, ceiling=16, task="image-classification")
    assert plan.accumulation_steps == 128 and "accumulation-high" in codes(plan)


def test_lower_bounds_for_tiny_global_batches():
    plan = plan_data_parallel(8, world_size=4, ceiling=2, task="image-classification", num_classes=100)
    assert {"global-too-small", "global-below-classes", "tiny-batch"} <= codes(plan)


def test_batchnorm_with_small_micro_batches_recommends_syncbn_on_gpus_and_groupnorm_otherwise():
    gpu = plan_data_parallel(64, world_size=8, ceiling=64, task="object-detection", has_batchnorm=True,
                             device_type="cuda")
    assert gpu.sync_batchnorm and "SyncBatchNorm" in gpu.normalization_advice and "Detection" in gpu.normalization_advice
    cpu = plan_data_parallel(64, world_size=8, ceiling=64, task="image-classification", has_batchnorm=True)
    assert "does not run on CPU" in cpu.normalization_advice and "GroupNorm" in cpu.normalization_advice
    assert cpu.per_device == 8
    single = plan_data_parallel(8, world_size=1, ceiling=64, task="image-classification", has_batchnorm=True)
    assert not single.sync_batchnorm and "GroupNorm" in single.normalization_advice


def test_heterogeneous_devices_share_one_identical_batch():
    batch, note = identical_batch_for([64, 64, 32])
    assert batch == 32 and note.code == "heterogeneous-devices"


def test_contrastive_small_batch_suggests_a_queue():
    plan = plan_data_parallel(512, world_size=2, ceiling=256, task="contrastive")
    assert "contrastive-small-batch" in codes(plan) and "MoCo" in plan.warnings[-1].message


def test_nothing_fits():
    with pytest.raises(AdvisorError, match="mixed precision"):
        plan_data_parallel(128, world_size=2, ceiling=0, task="image-classification")


def test_heterogeneous_gpus_get_identical_batches_and_a_note():
    from advisor.method.ceiling import CeilingResult, MemoryFit
    from advisor.method import heterogeneous_devices_note

    gib = 2**30
    fit = MemoryFit(fixed_bytes=1 * gib, per_sample_bytes=0.1 * gib)
    ceiling = CeilingResult(per_device_max=76, budget_bytes=10 * gib, headroom=0.15, fit=fit, largest_ok=90,
                            smallest_oom=95, usable_bytes=10 * gib)
    note = heterogeneous_devices_note(ceiling, [10 * gib, 10 * gib, 40 * gib])
    assert note.code == "heterogeneous-devices" and "every device uses 75" in note.message
    assert heterogeneous_devices_note(ceiling, [10 * gib, 10 * gib]) is None


def test_syncbn_advice_depends_on_the_micro_batch_not_on_accumulation():
    # Regression: any accumulation > 1 used to trigger the advice, even with 64-sample micro-batches.
    big_micro = plan_data_parallel(512, world_size=2, ceiling=64, task="image-classification", has_batchnorm=True,
                                   device_type="cuda")
    assert big_micro.accumulation_steps == 4 and not big_micro.sync_batchnorm
    assert "batchnorm-small-micro-batch" not in codes(big_micro)
    small_micro = plan_data_parallel(64, world_size=2, ceiling=8, task="image-classification", has_batchnorm=True,
                                     device_type="cuda")
    assert small_micro.sync_batchnorm and "accumulation does not enlarge" in small_micro.normalization_advice
    no_bn = plan_data_parallel(64, world_size=2, ceiling=8, task="image-classification", device_type="cuda")
    assert not no_bn.sync_batchnorm


def test_cpu_advice_never_suggests_fp16():
    plan = plan_data_parallel(256, world_size=2, ceiling=32, task="image-classification", device_type="cpu")
    amp = next(w for w in plan.warnings if w.code == "amp-before-shrinking")
    assert "bf16 autocast" in amp.message and "fp16 needs a CUDA GPU" in amp.message
    assert "bf16" in plan.precision_advice and "fp16 needs a CUDA GPU" in plan.precision_advice


def test_too_few_steps_per_epoch_warns():
    plan = plan_data_parallel(1024, world_size=1, ceiling=2048, task="image-classification", train_size=1438)
    assert "few-steps-per-epoch" in codes(plan)
    assert "few-steps-per-epoch" not in codes(plan_data_parallel(64, 1, 2048, "image-classification",
                                                                 train_size=1438))


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "lamb"])
@pytest.mark.parametrize("base", [256, 4096, 8192, 16384])
def test_scaled_lr_has_no_jump_near_the_threshold_or_the_base_from_any_base(base, optimizer):
    # Regression: from a base of 8192, SGD's LR jumped +41% between targets 4096 and 4097 (linear below the
    # threshold, square root from the base above it).
    def lr_at(target):
        return scale_lr(0.1, base, target, optimizer, max_lr_factor=1e9).value

    for centre in (4096, base):
        values = [lr_at(b) for b in range(max(1, centre - 64), centre + 65)]
        steps = [later / earlier for earlier, later in zip(values, values[1:])]
        assert all(1.0 <= step < 1.01 for step in steps), (centre, max(steps), min(steps))


def test_sgd_from_a_base_past_the_threshold_is_linear_below_it_and_square_root_above():
    lr = scale_lr(0.1, 8192, 2048, "sgd")
    # sqrt from 8192 down to 4096 (x 1/sqrt 2), then linear from 4096 down to 2048 (x 1/2).
    assert lr.rule == "linear-sqrt" and lr.value == pytest.approx(0.1 / math.sqrt(2) / 2)
    assert "linear between 2048 and 4096" in lr.reason
    assert scale_lr(0.1, 8192, 4096, "sgd").value == pytest.approx(0.1 / math.sqrt(2))
    assert scale_lr(0.1, 16384, 8192, "sgd").rule == "sqrt"


def test_a_cpu_plan_never_sets_sync_batchnorm_and_advises_it_for_the_gpus(tmp_path):
    # Regression: sync_batchnorm = true was written for multi-process CPU recipes; a CPU launch that applied it
    # fails in torch's own DDP check (below), so the key stays false and the GPU advice has its own key.
    import torch
    import torch.distributed as dist
    from torch import nn

    cpu = plan_data_parallel(64, world_size=8, ceiling=64, task="image-classification", has_batchnorm=True)
    assert not cpu.sync_batchnorm and cpu.sync_batchnorm_on_gpu
    assert "sync_batchnorm = false" in cpu.normalization_advice and "SyncBatchNorm on the GPUs" in cpu.normalization_advice
    gpu = plan_data_parallel(64, world_size=8, ceiling=64, task="image-classification", has_batchnorm=True,
                             device_type="cuda")
    assert gpu.sync_batchnorm and gpu.sync_batchnorm_on_gpu
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)))
        with pytest.raises(ValueError, match="SyncBatchNorm layers only work with GPU modules"):
            nn.parallel.DistributedDataParallel(model)
        torch.nn.parallel.DistributedDataParallel(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)))  # plain BN runs
    finally:
        dist.destroy_process_group()


def test_the_lr_past_the_largest_healthy_batch_is_bounded_by_2x_or_the_adascale_gain_at_the_noise_low_end():
    """Regression (issue 24): the LR was scaled past what was validated with no guard but a 16x cap (SGD 0.2 at
    global 32 became 1.6 at 256 and sat at chance, while 128 at LR 0.4 trained)."""
    from advisor.method.lr import bound_past_validated

    rules = scale_lr(0.2, 32, 256, "sgd")
    assert rules.value == pytest.approx(1.6)
    bounded = bound_past_validated(rules, 64, "sgd")  # 64 trained healthily at 0.4: at most the 2x step, 0.8
    assert bounded.value == pytest.approx(0.8) and bounded.capped
    assert "past the largest that trained healthily here (64, at LR 0.4)" in bounded.warnings[-1]
    # A small noise scale's low end bounds it harder: AdaScale's gain from 64 to 256 at phi = 32 is 1.8 < 2.
    gain_bound = bound_past_validated(rules, 64, "sgd", noise_low=32)
    assert gain_bound.value == pytest.approx(0.4 * (32 / 64 + 1) / (32 / 256 + 1)) and "AdaScale" in gain_bound.reason
    assert "(its low end, 32, not the estimate)" in gain_bound.reason  # never a bare "~32" beside the estimate
    # Adam: the square-root rule's own 2x factor, sqrt 2.
    adam = bound_past_validated(scale_lr(1e-3, 32, 512, "adam"), 64, "adam")
    assert adam.value == pytest.approx(scale_lr(1e-3, 32, 128, "adam").value)
    # At or below the validated point, or within 2x of it, nothing changes.
    assert bound_past_validated(scale_lr(0.2, 32, 128, "sgd"), 64, "sgd").value == pytest.approx(0.8)
    assert bound_past_validated(scale_lr(0.2, 32, 64, "sgd"), 64, "sgd").capped is False
    assert bound_past_validated(rules, None, "sgd") is rules


def test_a_global_batch_asked_for_past_the_sweep_gets_the_bounded_lr_in_the_plan():
    from helpers import swept_session

    session, _, outcome = swept_session({8: 0.80, 16: 0.95, 32: 0.70}.__getitem__, centre=16, extensions=0)
    result = session.finish(global_batch=1024)
    info = session.info
    healthy = max(r.global_batch for r in result.ledger if r.phase in ("trial", "sweep") and r.status == "ok")
    assert healthy == 64 and result.plan.global_batch == 1024
    at_healthy = scale_lr(info.base_lr, info.base_global_batch, 64, info.optimizer).value
    doubled = scale_lr(info.base_lr, info.base_global_batch, 128, info.optimizer).value
    assert result.lr.value == pytest.approx(doubled) and doubled > at_healthy
    assert any("past the largest that trained healthily" in w for w in result.lr.warnings)
