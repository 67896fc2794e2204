"""`advisor replan`: a recipe's memory fit re-planned for another card, in milliseconds (no processes).

The arithmetic is checked against numbers worked out by hand from the rules (headroom, plan, LR, warmup), for a
recipe measured on a 24 GB card re-planned for an 80 GB A100, a 32 GB and a 16 GB V100; the precision for a
V100 vs an A100; and the clear refusals (no fit, another precision, another torch major version).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.errors import SetupError
from advisor.gpus import lookup_gpu
from advisor.recipe import check_recipe, dumps_recipe
from advisor.replan import (ReplanError, ReplanTarget, confirm, render_table, replan, replanned_recipe,
                            with_confirmation)

MIB, GIB = 2**20, 2**30
REPO = Path(__file__).resolve().parents[1]
TORCH = "2.13.0"


def rtx3090_recipe(precision: str = "fp32", **ceiling) -> dict:
    """A recipe as `advisor plan --precision fp32` writes it on 4 x RTX 3090 (24 GiB): ImageNet-size data, a
    fit of 3 GiB fixed + 150 MiB per sample, a real OOM edge met, 600 MiB held by CUDA/NCCL outside the
    allocator; SGD 0.1 tuned at 256, global 1024 = 128 x 4 x 2."""
    c = {"per_device_max": 120, "budget_bytes": 24 * GIB, "headroom": 0.15, "largest_ok": 140, "smallest_oom": 141,
         "usable_bytes": 3 * GIB + 140 * 150 * MIB, "fixed_bytes": 3 * GIB, "per_sample_bytes": 150 * MIB,
         "outside_allocator_bytes": 600 * MIB, "allocator_budget_bytes": 24 * GIB - 600 * MIB, "trials": 9}
    c.update(ceiling)
    c = {k: v for k, v in c.items() if v is not None}
    return {
        "schema_version": 1,
        "batch": {"per_device": 128, "world_size": 4, "accumulation_steps": 2, "global": 1024,
                  "validated_global": 1024},
        "lr": {"value": 0.4, "base": 0.1, "base_global_batch": 256, "rule": "linear", "optimizer": "sgd"},
        "warmup": {"steps": 1251, "epochs": 1.0, "base_epochs": 1.0, "base_source": "the advisor's default"},
        "precision": {"mode": precision},
        "normalization": {"has_batchnorm": True},
        "ceiling": c,
        "workload": {"spec": "resnet:workload", "name": "resnet50", "task": "image-classification",
                     "num_classes": 1000, "optimizer": "sgd", "train_size": 1_281_167, "parameters": 25_557_032},
        "adapter": {"name": "ddp"},
        "inputs": {"adapter": "ddp", "nproc": 4, "device": "cuda", "precision": precision},
        "provenance": {"torch_version": TORCH + "+cu126", "hardware": {"device": "cuda", "gpu": "NVIDIA GeForce RTX 3090"}},
        "ledger": [{"phase": "ceiling", "per_device": 140, "world_size": 1, "accumulation": 1, "global_batch": 140,
                    "status": "ok", "seconds": 3.0, "precision": precision}],
    }


def target(gpu: str, nproc: int = 8, **kw) -> ReplanTarget:
    spec = lookup_gpu(gpu)
    return ReplanTarget(spec.memory_bytes, "the GPU table (nominal)", spec, "cuda", nproc, **kw)


def test_24gb_to_80gb_a100_table_by_hand():
    result = replan(rtx3090_recipe(), "r.toml", target("a100-80gb"), torch_version=TORCH)
    # usable: 80 GiB less the 600 MiB the CUDA context and NCCL held (CUDA -> CUDA): 81320 MiB.
    assert result.usable_bytes == 80 * GIB - 600 * MIB
    # ceiling: floor((0.85 x 81320 MiB - 3072 MiB) / 150 MiB) = floor(440.33) = 440 (the 3090 held 120).
    assert result.per_device_max == 440
    # The validated global batch 1024 on 8 A100s: 128 per device, no accumulation (the 3090s needed 2).
    plan = result.plan
    assert (plan.per_device, plan.world_size, plan.accumulation_steps, plan.global_batch) == (128, 8, 1, 1024)
    # Global unchanged -> LR by the rule from the base: 0.1 x 1024/256 = 0.4 (linear, SGD), warmup 3 epochs (s=4).
    assert result.lr.value == pytest.approx(0.4) and result.lr.rule == "linear"
    assert result.warmup.epochs == pytest.approx(3.0)
    assert result.warmup.steps == 3 * (1_281_167 // 1024)  # the sampler drops the partial batch
    # A100: bf16 Tensor Cores; the fp32 fit is a safe lower bound for bf16, and the table says so.
    assert result.precision == "bf16"
    text = render_table(result)
    assert "ceiling per device  120" in text and "440" in text and "estimate" in text
    assert "safe lower bound for bf16" in text and "advisor plan" in text
    assert "up to 440 per device, 3520 global without accumulation" in text  # bigger card, bigger batch possible


def test_the_bigger_card_takes_triple_the_batch_with_the_lr_bounded_past_what_the_recipe_validated():
    result = replan(rtx3090_recipe(), "r.toml", target("a100-80gb", global_batch=3072), torch_version=TORCH)
    plan = result.plan
    assert (plan.per_device, plan.accumulation_steps, plan.global_batch) == (384, 1, 3072)
    # The recipe validated global 1024 (LR 0.4 by the linear rule from 0.1 at 256): 3x past it, the LR grows by
    # the rule's 2x step at most (0.8), not to the rule's 1.2, and says so.
    assert plan.validated_global == 1024 and result.lr.rule == "linear"
    assert result.lr.value == pytest.approx(0.1 * 2048 / 256) and result.lr.capped
    assert "past the largest that trained healthily here (1024" in result.lr.warnings[-1]
    assert any(w.code == "global-not-validated" for w in plan.warnings)


def test_v100_vs_a100_precision_and_the_16gb_v100_accumulates():
    recipe = rtx3090_recipe()
    v100 = replan(recipe, "r.toml", target("v100-32gb"), torch_version=TORCH)
    # No bf16 on compute capability 7.0: fp32 measured, fp16 AMP advised before accumulation.
    assert v100.precision == "fp32" and "fp16 AMP" in v100.precision_reason
    # floor((0.85 x (32768 - 600) MiB - 3072 MiB) / 150 MiB) = floor(161.8) = 161
    assert v100.per_device_max == 161
    small = replan(recipe, "r.toml", target("v100-16gb", nproc=4), torch_version=TORCH)
    # floor((0.85 x 15784 - 3072) / 150) = 68; 1024 on 4 devices: acc = ceil(1024 / 272) = 4, 64 per device.
    assert small.per_device_max == 68
    assert (small.plan.per_device, small.plan.accumulation_steps, small.plan.global_batch) == (64, 4, 1024)
    assert any(w.code == "amp-before-shrinking" for w in small.plan.warnings)
    a100 = replan(recipe, "r.toml", target("a100-40gb"), torch_version=TORCH)
    assert a100.precision == "bf16"
    # A bf16 recipe (measured on an Ampere card) cannot be re-planned for a V100: its line under-estimates fp32.
    with pytest.raises(ReplanError, match=r"measured in bf16.*V100.*advisor plan .*--precision fp32"):
        replan(rtx3090_recipe("bf16"), "r.toml", target("v100-32gb"), torch_version=TORCH)


def test_refusals_name_the_command_that_measures_instead():
    no_fit = rtx3090_recipe(fixed_bytes=None, per_sample_bytes=None)
    with pytest.raises(ReplanError, match=r"no memory fit.*advisor plan --workload resnet:workload"):
        replan(no_fit, "r.toml", target("a100-80gb"), torch_version=TORCH)
    with pytest.raises(ReplanError, match=r"torch 2\.13\.0\+cu126, and this is torch 3\.0\.0.*advisor plan"):
        replan(rtx3090_recipe(), "r.toml", target("a100-80gb"), torch_version="3.0.0")
    with pytest.raises(ReplanError, match=r"measured in fp32; --precision bf16 .*--precision bf16"):
        replan(rtx3090_recipe(), "r.toml", target("a100-80gb", precision="bf16"), torch_version=TORCH)
    with pytest.raises(SetupError, match="more than one size"):
        lookup_gpu("a100")
    with pytest.raises(SetupError, match="--device-memory"):
        lookup_gpu("b200")


def test_a_cpu_edge_share_carries_over_and_the_document_marks_estimates():
    recipe = rtx3090_recipe(outside_allocator_bytes=None)
    recipe["inputs"]["device"] = "cpu"
    recipe["provenance"]["hardware"] = {"device": "cpu"}
    cpu = ReplanTarget(48 * GIB, "--device-memory", None, "cpu", 2)
    result = replan(recipe, "r.toml", cpu, torch_version=TORCH)
    share = (3 * GIB + 140 * 150 * MIB) / (24 * GIB)  # the recipe's real edge sat at this share of its budget
    assert result.usable_bytes == pytest.approx(share * 48 * GIB)
    document = replanned_recipe(result, ["advisor", "replan"])
    dumps_recipe(document)  # a valid recipe
    assert document["ceiling"]["estimated"] is True and "estimate" in document["ceiling"]["estimate_note"]
    assert document["replan"]["source_recipe"] == "r.toml" and document["ledger"] == []


def test_gpu_names_as_torch_reports_them():
    assert lookup_gpu("NVIDIA A100-SXM4-80GB").key == "a100-80gb"
    assert lookup_gpu("Tesla V100-SXM2-16GB").key == "v100-16gb"
    assert lookup_gpu("NVIDIA A10").key == "a10" and lookup_gpu("NVIDIA A10G").key == "a10g"
    assert lookup_gpu("NVIDIA H100 80GB HBM3").key == "h100-80gb"
    assert not lookup_gpu("t4").bf16 and lookup_gpu("t4").mixed_precision == "fp16"
    assert lookup_gpu("p100-16gb").mixed_precision is None and lookup_gpu("l4").bf16


def test_cli_replan_table_and_a_no_clobber_atomic_write(tmp_path, capsys):
    source = REPO / "recipes" / "digits-cnn.toml"
    assert main(["replan", str(source), "--gpu", "a100-80gb", "--nproc", "8", "--no-confirm"]) == 0
    out = capsys.readouterr().out
    assert "Estimates:" in out and "estimate" in out and "A100 80GB" in out
    new = tmp_path / "a100.toml"
    new.write_text("keep me\n")
    assert main(["replan", str(source), "--gpu", "a100-80gb", "--no-confirm", "--out", str(new)]) == 2
    assert "already exists" in capsys.readouterr().err and new.read_text() == "keep me\n"
    assert main(["replan", str(source), "--gpu", "a100-80gb", "--no-confirm", "--out", str(source)]) == 2
    assert "the recipe being re-planned" in capsys.readouterr().err
    assert main(["replan", str(source), "--gpu", "a100-80gb", "--no-confirm", "--out", str(new), "--force"]) == 0
    written = check_recipe(new)
    assert written["ceiling"]["estimated"] is True and written["precision"]["mode"] == "bf16"
    from advisor.recipe_check import recipe_warnings

    assert recipe_warnings(written) == []  # a re-plan's LR and warmup are what its rule gives: check finds no edit
    assert (tmp_path / "a100.toml.bak").read_text() == "keep me\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert main(["replan", str(source)]) == 2
    assert "--gpu NAME" in capsys.readouterr().err
    assert main(["replan", str(source), "--gpu", "b200"]) == 2
    assert main(["replan", str(source), "--gpu", "b200", "--device-memory", "180GiB", "--no-confirm"]) == 0


def test_a_confirming_probe_that_runs_out_steps_down_and_keeps_the_headroom_below_what_ran():
    from helpers import WarmupStubRunner

    recipe = rtx3090_recipe(outside_allocator_bytes=None, smallest_oom=None)
    recipe["inputs"]["device"] = "cpu"
    cpu = ReplanTarget(48 * GIB, "--device-memory", None, "cpu", 2)
    estimate = replan(recipe, "r.toml", cpu, torch_version=TORCH)
    # floor((0.85 x 48 GiB - 3 GiB) / 150 MiB) = 258; the device really holds 3 GiB + 200 x 150 MiB.
    assert estimate.per_device_max == 258
    stub = WarmupStubRunner(fixed=3 * GIB, per_sample=150 * MIB, budget=3 * GIB + 200 * 150 * MIB)
    stub.close = lambda: stub.calls.append(("close",))  # the real runner ends its probe server there
    outcome = confirm(estimate, ".", runner=stub, trial_steps=8)
    kinds = [c[0] for c in stub.calls]
    assert kinds.count("close") == 1 and kinds.index("close") == len([k for k in kinds if k == "probe"])
    # 258 OOM, 232 OOM, 208 OOM, 187 ran (10% steps); then 15% headroom below 187's memory: floor(0.85 x (3072 +
    # 187 x 150) MiB - 3072 MiB) / 150 MiB) = floor(155.9) = 155.
    assert [c[1] for c in stub.calls if c[0] == "probe"] == [258, 232, 208, 187]
    assert outcome["largest_ran"] == 187 and outcome["confirmed_ceiling"] == 155 and not outcome["probe_fits"]
    result = with_confirmation(recipe, "r.toml", cpu, estimate, outcome, torch_version=TORCH)
    assert result.per_device_max == 155 and result.plan.per_device <= 155
    assert result.plan.accumulation_steps == 4  # 1024 on 2 devices under 155: ceil(1024 / 310) = 4
    assert "ran out of memory" in render_table(result) and outcome["trial_status"] == "ok"
    assert any("found the edge lower, so the ceiling is 155" in note for note in result.notes)
    assert "found the edge lower" in replanned_recipe(result)["ceiling"]["estimate_note"]


def test_a_replan_global_batch_past_the_steps_per_epoch_cap_needs_force():
    """§8.5 everywhere (issue 24): replan took any --global-batch, one step an epoch included."""
    from advisor.errors import AdvisorError

    recipe = rtx3090_recipe()
    recipe["workload"]["train_size"] = 20_000  # the cap: 2000 global
    with pytest.raises(AdvisorError, match=r"--global-batch 3072 is past what the data can train: 20000 training "
                                           r"samples / global batch 3072 = 6 optimizer step\(s\) per epoch"):
        replan(recipe, "r.toml", target("a100-80gb", global_batch=3072), torch_version=TORCH)
    forced = replan(recipe, "r.toml", target("a100-80gb", global_batch=3072, allow_few_steps=True),
                    torch_version=TORCH)
    assert any(w.code == "few-steps-per-epoch" for w in forced.plan.warnings)
    assert replan(recipe, "r.toml", target("a100-80gb", global_batch=2000), torch_version=TORCH).plan.global_batch == 2000


def test_the_table_says_what_set_the_ceiling_and_which_global_batch_was_kept():
    """Issue 25: the ceiling row said "85% of usable memory" when the training set's share set it, and the global
    batch row "kept: the recipe's validated global batch" for a global batch the sweep had not validated."""
    from advisor.recipe import read_recipe_data

    data, _ = read_recipe_data(REPO / "recipes" / "digits-cnn.toml")  # 1438 samples: the data caps any big card
    result = replan(data, "digits-cnn.toml", target("a100-80gb", nproc=2))
    assert result.ceiling_by == "data" and result.per_device_max == 719 < result.by_memory
    rows = {row.name: row for row in result.rows}
    assert "training set's share" in rows["ceiling per device"].how
    assert "of usable memory" not in rows["ceiling per device"].how
    assert rows["global batch"].how == "kept: the recipe's validated global batch"
    data["batch"]["validated_global"] = data["batch"]["global"] // 2  # a recipe planned past what it validated
    moved = {row.name: row for row in replan(data, "digits-cnn.toml", target("a100-80gb", nproc=2)).rows}
    assert moved["global batch"].how == (f"kept: the recipe's global batch (its sweep validated "
                                            f"{data['batch']['global'] // 2})")


def test_a_cpu_recipe_replanned_for_a_gpu_uses_the_gpus_memory_model_not_the_cpu_budgets_share():
    """Issue 25: `replan` to an 80 GB A100 from a CPU recipe carried the CPU budget's edge share over."""
    from advisor.recipe import read_recipe_data
    from advisor.replan import CUDA_OUTSIDE_ALLOCATOR_ESTIMATE

    data, _ = read_recipe_data(REPO / "recipes" / "digits-cnn.toml")
    assert data["inputs"]["device"] == "cpu"
    data["ceiling"]["smallest_oom"] = 800  # as if the CPU probes had met an edge at some share of the budget
    data["ceiling"]["usable_bytes"] = int(0.6 * data["ceiling"]["budget_bytes"])
    result = replan(data, "digits-cnn.toml", target("a100-80gb", nproc=2))
    memory = result.target.memory_bytes
    assert result.usable_bytes == memory - CUDA_OUTSIDE_ALLOCATOR_ESTIMATE
    assert "CUDA context" in result.usable_reason and "60%" not in result.usable_reason
