"""The Hugging Face side of Workload v2: a transformers.Trainer as a workload, and the examples under examples/.

Fast tests build tiny configs in this process (no workers); the `distributed` ones run `advisor plan` end to
end on each example with 2 gloo processes and read what the recipe's [workload] says.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from helpers import REPO

transformers = pytest.importorskip("transformers")

EXAMPLES = REPO / "examples"


def example(name: str):
    """An example module, imported from its file as a user's workload file is."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resolve(spec: str):
    from advisor.workload import resolve_workload

    return resolve_workload(spec)


def one_step(workload, batch_size: int = 4):
    """A training step and an evaluation batch as a worker runs them (no processes)."""
    model = workload.build_model()
    optimizer = workload.optimizer_for(model, 1e-3)
    batch = workload.collate_fn([workload.train_data[i] for i in range(batch_size)])
    loss = workload.batch_loss(model, batch)
    loss.backward()
    optimizer.step()
    model.eval()
    val = workload.collate_fn([workload.val_data[i] for i in range(batch_size)])
    with torch.no_grad():
        return model, optimizer, workload.eval_batch(model, val)


def checkpointed_layers(model) -> list:
    return [m for m in model.modules() if getattr(m, "gradient_checkpointing", False)]


# -- the Trainer -> Workload mapping -------------------------------------------------------------------------
def test_a_trainer_carries_its_collator_loss_optimizer_settings_and_todays_run():
    workload = resolve(f"{EXAMPLES / 'hf_text.py'}:trainer")
    args = example("hf_text").make_trainer().args
    # Today's run: 16 per device x 1 accumulation x 2 devices; LR, warmup and epochs from TrainingArguments.
    assert workload.current_batch_size == 32 and workload.current_lr == args.learning_rate == 5e-4
    assert workload.current_warmup_steps == 10 and workload.epochs == 3.0
    assert workload.task == "nlp-classification" and workload.precision == "fp32"
    # The optimizer: TrainingArguments' AdamW, its betas/eps/decay, the Trainer's no-decay group, the LR given.
    assert workload.optimizer == "adamw" and workload.betas == (0.9, 0.98) and workload.weight_decay == 0.01
    model, optimizer, (val_loss, metrics) = one_step(workload)
    assert type(optimizer).__name__ == "AdamW" and optimizer.param_groups[0]["lr"] == 1e-3
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0 and decay["betas"] == (0.9, 0.98)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all("bias" in names[id(p)] or "LayerNorm" in names[id(p)] for p in no_decay["params"])
    # The collator pads to the longest of the batch; the loss is the model's own; compute_metrics ran per batch.
    batch = workload.collate_fn([workload.train_data[i] for i in (0, 1)])
    assert batch["input_ids"].shape == (2, 64) and set(batch) == {"input_ids", "attention_mask", "labels"}
    assert val_loss > 0 and set(metrics) == {"accuracy"} and 0 <= metrics["accuracy"] <= 1
    assert workload.ranking_metric(metrics) == ("accuracy", True, "the workload's metric")


def test_the_trainer_metric_for_best_model_names_the_ranking_and_eval_prefix_is_dropped():
    from advisor.integrations.transformers import from_trainer

    make_trainer = example("hf_tokens").make_trainer
    trainer = make_trainer()
    trainer.args.metric_for_best_model = "eval_token_accuracy"
    workload = from_trainer(trainer, devices_today=2)
    assert workload.metric == "token_accuracy" and workload.higher_is_better is True
    assert workload.current_batch_size == 8 * 2 * 2
    _, _, (_, metrics) = one_step(workload)
    assert set(metrics) == {"token_accuracy"}
    # Unset, the Trainer's own default ranks: the evaluation loss.
    trainer = make_trainer()
    trainer.args.metric_for_best_model = None
    assert from_trainer(trainer).metric == "loss"
    # A run given in max_steps with a warmup ratio: both converted at today's global batch (32 of 1024 samples).
    trainer.args.max_steps, trainer.args.warmup_steps = 40, 0.1
    workload = from_trainer(trainer, devices_today=2)
    assert workload.epochs == 40 / 32 and workload.current_warmup_steps == 4  # ceil(0.1 x 40 steps)


def test_gradient_checkpointing_and_bf16_from_training_arguments_reach_the_model_and_the_plan():
    from advisor.integrations.transformers import from_trainer

    import dataclasses

    trainer = example("hf_text").make_trainer()
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing (the old name is an alias)
    name = "activation_checkpointing" if hasattr(trainer.args, "activation_checkpointing") else "gradient_checkpointing"
    trainer.args = dataclasses.replace(trainer.args, bf16=True, **{name: True})
    workload = from_trainer(trainer, devices_today=2)
    model = workload.build_model()
    assert workload.precision == "bf16" and checkpointed_layers(model)
    # A second build in the same process never hands out the (possibly trained) first model.
    again = workload.build_model()
    assert again is not model and checkpointed_layers(again)

    # --precision auto measures in what the workload trains in, where this host runs it.
    from advisor.device import HostDevices
    from advisor.method import MethodSettings
    from advisor.session import Setup, workload_precision

    setup = Setup(workload, HostDevices("cpu"), 5e-4, 32, "", "adamw")
    settings = MethodSettings(workload="x", adapter_name="ddp", nproc=2, device="cpu", memory_budget_bytes=2**28)
    chosen = workload_precision(settings, setup, {"bf16"})
    assert chosen.measure == "bf16" and chosen.mixed is None and "as the workload trains" in chosen.reason
    settings.precision = "fp32"
    assert workload_precision(settings, setup, {"bf16"}) is None  # the flag wins
    settings.precision, workload.precision = "auto", "fp16"
    assert workload_precision(settings, setup, {"bf16", "fp16"}) is None  # no fp16 on CPU: the auto rule decides


def test_a_bare_trainer_from_a_workload_function_is_converted_and_asks_for_the_base_batch():
    workload = resolve(f"{EXAMPLES / 'hf_text.py'}:make_trainer")
    assert workload.current_batch_size is None and workload.current_lr == 5e-4  # the GPU count is unknown
    assert workload.description.startswith("transformers.Trainer")


def test_a_trainer_without_eval_data_or_with_an_unknown_head_gets_one_clear_message():
    from transformers import Trainer, TrainingArguments

    from advisor.errors import WorkloadError
    from advisor.integrations.transformers import from_trainer

    text = example("hf_text")
    args = TrainingArguments(output_dir="unused", report_to="none", use_cpu=True)
    bare = Trainer(model=text.build_model().bert, args=args, train_dataset=text.RaggedText(8, 1),
                   data_collator=text.pad)
    with pytest.raises(WorkloadError) as err:
        from_trainer(bare)
    assert "no eval_dataset" in str(err.value) and "task row cannot be told from the model class BertModel" \
        in str(err.value)


def test_importing_advisor_and_its_integrations_imports_no_transformers():
    code = ("import advisor, advisor.workload, advisor.integrations.transformers, sys; "
            "assert 'transformers' not in sys.modules, 'transformers imported'")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr


def test_a_missing_transformers_package_says_which_extra_installs_it():
    code = ("import sys; sys.modules['transformers'] = None\n"
            "from advisor.integrations.transformers import from_trainer\n"
            "from advisor.errors import WorkloadError\n"
            "try:\n    from_trainer(object())\nexcept WorkloadError as e:\n    print(e)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert "pip install 'batch-advisor[transformers]'" in run.stdout, run.stdout + run.stderr
    # A workload file that imports transformers itself: the same hint, exit 2, no traceback.
    blocker = ("import sys, runpy; sys.modules['transformers'] = None; sys.argv = ['advisor', 'workloads', "
               f"'--check', {str(EXAMPLES / 'hf_text.py') + ':trainer'!r}]; runpy.run_module('advisor.cli', "
               "run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 2 and "pip install 'batch-advisor[transformers]'" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_the_transformers_template_checks_in_both_shapes(tmp_path, capsys):
    from advisor.cli import main

    path = tmp_path / "workload.py"
    assert main(["init", "--template", "transformers", "--out", str(path)]) == 0
    capsys.readouterr()
    for function in ("workload", "trainer"):
        assert main(["workloads", "--check", f"{path}:{function}"]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert "sweep ranks by      accuracy" in out and "input_ids" in out


def test_the_plain_examples_build_and_step():
    text = resolve(f"{EXAMPLES / 'hf_text.py'}:workload")
    _, _, (_, metrics) = one_step(text)
    assert set(metrics) == {"accuracy"}
    image = resolve(f"{EXAMPLES / 'hf_image.py'}:workload")
    from torch.utils.data import default_collate

    model = image.build_model().eval()
    batch = default_collate([image.val_data[i] for i in range(4)])  # dict samples, default collate
    with torch.no_grad():
        assert set(image.eval_batch(model, batch)[1]) == {"accuracy"}
    tokens = resolve(f"{EXAMPLES / 'hf_tokens.py'}:workload")
    assert set(one_step(tokens)[2][1]) == {"token_accuracy"}


def test_the_timm_example_where_timm_imports():
    pytest.importorskip("timm")  # timm needs torchvision: not installable on a CPU-only torch from the registry
    workload = resolve(f"{EXAMPLES / 'timm_image.py'}:workload")
    assert workload.build_model()(workload.train_data[0][0][None]).shape == (1, 4)


# -- `advisor plan` end to end on each example, 2 gloo processes ---------------------------------------------
# Each worker imports transformers, so each launch costs seconds: the options keep the launches few.
# Budgets of a few MiB meet fixed costs the probes do not see (at 8 MiB the trial ran at 4 per device and both
# sweep runs at 2 and 4 ran out of memory). The plain text Workload and the token Trainer get 64 MiB: a real
# OOM edge inside a transformers model (near 135 per device), through the model's own loss and through
# Trainer.compute_loss, found in 7-8 probes. The text Trainer (the same model as the text Workload) and the
# image model get budgets their probes reach the data's cap of 512 per device under, without an OOM (3 probes;
# the image edge search took 12, as its forked probes die by SIGSEGV at the edge and every later probe is a
# fresh launch). The sweep is capped by the data (51 per device) either way. The text examples learn the first
# token's parity: at their own LR (5e-4) 32 steps stay at chance, and a sweep where no candidate learned ends
# the plan with exit 3, so they plan from a base LR of 1e-2 with 32 sweep steps (at 16, a sweep centred on 16
# per device stayed flat by the health verdict once in four plans). The others learn in 16.
PLANS = {
    "text-workload": ("hf_text.py:workload", "64MiB", "accuracy", "input_ids", 32, ["--base-lr", "1e-2"]),
    "text-trainer": ("hf_text.py:trainer", "512MiB", "accuracy", "input_ids", 32, ["--base-lr", "1e-2"]),
    "image": ("hf_image.py:workload", "128MiB", "accuracy", "pixel_values", 16, []),
    "tokens-trainer": ("hf_tokens.py:trainer", "64MiB", "token_accuracy", "input_ids", 16, []),
}


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.timeout(1800)  # ~6 runs, each importing torch and transformers: minutes on a loaded 2-core host
@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("case", list(PLANS))
def test_plan_end_to_end_on_each_example_says_what_was_probed_and_what_ranked(case, tmp_path):
    # The subject is what was probed and what ranked, not the sweep's rule: --sweep-extensions 0 (extending is tested in
    # test_method_decisions and test_cli_plan; here it doubled the suite's four slowest runs) and one seed per
    # candidate (the paired-seed interval is tested there too; three seeds tripled the sweep's launches). 16 or
    # 32 sweep steps: at 8, runs from random weights often stayed at chance.
    from advisor import load_recipe

    spec, memory, metric, probed_key, sweep_steps, extra = PLANS[case]
    out = tmp_path / "recipe.toml"
    run = subprocess.run([sys.executable, "-m", "advisor.cli", "plan", "--workload", f"{EXAMPLES / spec}",
                          "--adapter", "ddp", "--nproc", "2", "--device-memory", memory, "--trial-steps", "6",
                          "--sweep-steps", str(sweep_steps), "--sweep-extensions", "0", "--sweep-seeds", "1", *extra, "--no-history",
                          "--out", str(out)],
                         capture_output=True, text=True, cwd=REPO, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    recipe = load_recipe(out)
    workload = recipe.data["workload"]
    assert workload["metric"] == metric and workload["higher_is_better"] is True
    sweep_reason = recipe.data["method"]["sweep_reason"]
    # Exit 0: some candidate learned and the sweep ranked them, by the workload's metric on validation.
    assert f"By validation {metric}," in sweep_reason, sweep_reason
    probed = workload["probed"]
    if probed_key == "input_ids":  # ragged text: the longest sequences, padded by the example's collate
        assert "longest training samples" in probed["samples"] and "longest 64, median 16" in probed["samples"]
        assert probed["shapes"]["input_ids"] == [probed["batch"], 64]
    else:  # images all of one shape: random samples, and the recipe says so
        assert "every sample" in probed["samples"]
        assert probed["shapes"]["pixel_values"] == [probed["batch"], 3, 32, 32]
    sweep = [r for r in recipe.data["ledger"] if r["phase"] == "sweep" and r["status"] == "ok"]
    assert sweep and all(r["val_metric_name"] == metric for r in sweep)
