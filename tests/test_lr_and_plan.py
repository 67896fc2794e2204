"""Planning math and LR rules against DOMAIN's worked examples."""

import math

import pytest

from advisor.errors import AdvisorError
from advisor.lr import check_lr_change, plan_warmup, scale_lr
from advisor.plan import check_uneven_batches, identical_batch_for, plan_data_parallel


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


def test_accumulation_rounds_up():
    plan = plan_data_parallel(1000, world_size=3, ceiling=64, task="image-classification")
    assert plan.accumulation_steps == math.ceil(1000 / (64 * 3)) == 6
    assert plan.global_batch == 64 * 3 * 6
    assert "global-rounded" in codes(plan)


def test_doubling_the_global_batch_doubles_the_sgd_lr():
    lr = scale_lr(0.1, 64, 128, "sgd")
    assert lr.rule == "linear" and lr.value == pytest.approx(0.2) and lr.scale == 2


def test_adam_uses_square_root_scaling():
    lr = scale_lr(1e-3, 32, 128, "adam")
    assert lr.rule == "sqrt" and lr.value == pytest.approx(2e-3)


def test_scale_above_two_lengthens_warmup():
    short = plan_warmup(2.0, train_size=10_000, global_batch=256)
    long = plan_warmup(4.0, train_size=10_000, global_batch=256)
    assert short.epochs == 1 and long.epochs == 3
    assert long.steps == 3 * math.ceil(10_000 / 256)


def test_past_4096_linear_scaling_switches_to_sqrt_and_suggests_lars():
    lr = scale_lr(0.1, 256, 8192, "sgd", max_lr_factor=100)
    assert lr.rule == "sqrt" and lr.value == pytest.approx(0.1 * math.sqrt(32))
    assert lr.suggest_layerwise == "lars"
    assert scale_lr(1e-3, 256, 8192, "adamw").suggest_layerwise == "lamb"


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
    single = plan_data_parallel(8, world_size=1, ceiling=64, task="image-classification", has_batchnorm=True)
    assert not single.sync_batchnorm and "GroupNorm" in single.normalization_advice


def test_uneven_and_heterogeneous_batches():
    assert check_uneven_batches([32] * 7 + [16]).code == "uneven-batches"
    assert check_uneven_batches([32, 31]) is None
    batch, note = identical_batch_for([64, 64, 32])
    assert batch == 32 and note.code == "heterogeneous-devices"


def test_contrastive_small_batch_suggests_a_queue():
    plan = plan_data_parallel(512, world_size=2, ceiling=256, task="contrastive")
    assert "contrastive-small-batch" in codes(plan) and "MoCo" in plan.warnings[-1].message


def test_nothing_fits():
    with pytest.raises(AdvisorError, match="mixed precision"):
        plan_data_parallel(128, world_size=2, ceiling=0, task="image-classification")


def test_heterogeneous_gpus_get_identical_batches_and_a_note():
    from advisor.ceiling import CeilingResult, MemoryFit
    from advisor.method import heterogeneous_devices_note

    gib = 2**30
    fit = MemoryFit(fixed_bytes=1 * gib, per_sample_bytes=0.1 * gib)
    ceiling = CeilingResult(per_device_max=76, budget_bytes=10 * gib, headroom=0.15, fit=fit, largest_ok=90,
                            smallest_oom=95, usable_bytes=10 * gib)
    note = heterogeneous_devices_note(ceiling, [10 * gib, 10 * gib, 40 * gib])
    assert note.code == "heterogeneous-devices" and "every device uses 75" in note.message
    assert heterogeneous_devices_note(ceiling, [10 * gib, 10 * gib]) is None
