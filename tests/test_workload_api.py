"""The Workload API in one process: batches of any nesting, the model's own loss, metrics of the user's own
that rank the sweep (never one not computed), an optimizer factory, and the longest samples for probes."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from advisor.batches import select_probe_samples, shapes
from advisor.errors import WorkloadError
from advisor.job import TrialJob
from advisor.ledger import TrialRecord
from advisor.method.sweep import decide_sweep
from advisor.worker import _evaluate, probe_batches, to_device
from advisor.workload import Workload, resolve_workload
from helpers import plain_strategy, TEST_WORKLOADS, train_in_process


def tokens(function: str) -> Workload:
    return resolve_workload(f"{TEST_WORKLOADS / 'tokens.py'}:{function}")


def test_a_hugging_face_style_workload_trains_on_its_own_loss_and_reports_its_own_metric(capsys):
    # Dict samples of ragged length, a padding collate, model(**batch).loss, no loss_fn: it used to fail.
    result = train_in_process(tokens("tagger"), capsys, per_device_batch=8, steps=6, evaluate=True, lr=3e-3)
    assert result["val_loss"] > 0
    assert result["val_metric_name"] == "token_accuracy" and result["higher_is_better"] is True
    assert 0 <= result["val_metric"] <= 1 and set(result["val_metrics"]) == {"token_accuracy"}
    # num_classes is set but outputs are (N, L, C): no argmax "accuracy" of the wrong shape is reported.
    assert "accuracy" not in result["val_metrics"]
    assert result["ranking"] == {"metric": "token_accuracy", "higher_is_better": True,
                                 "reason": "the workload's metric"}


def test_validation_metrics_are_each_batchs_value_weighted_by_its_samples():
    workload = tokens("tagger")
    job = TrialJob(kind="train", workload=workload.name, per_device_batch=10)  # 96 samples: 9 chunks of 10, one of 6
    model = workload.build_model()
    result = _evaluate(job, workload, plain_strategy(job), model)
    data = workload.val_data
    with torch.no_grad():
        chunks = [workload.collate_fn([data[i] for i in range(s, min(s + 10, len(data)))]) for s in range(0, 96, 10)]
        weighted = sum(float(workload.evaluate(model, c)["token_accuracy"]) * len(c["input_ids"]) for c in chunks)
        loss = sum(float(model(**c).loss) * len(c["input_ids"]) for c in chunks)
    assert result["val_metric"] == pytest.approx(weighted / 96, rel=1e-5)
    assert result["val_loss"] == pytest.approx(loss / 96, rel=1e-5)


class TupleOutputModel(nn.Module):
    """Returns a (logits, features) tuple: ``outputs.float()`` used to crash validation."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x), x


class OwnLossWorkload(Workload):
    def batch_loss(self, model, batch):
        inputs, targets = batch
        logits, _ = model(inputs)
        return nn.functional.cross_entropy(logits, targets)


def _tuple_output_workload(cls=OwnLossWorkload, **kw):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 4, generator=g), torch.randint(0, 3, (64,), generator=g)
    return cls(name="own-loss", build_model=TupleOutputModel, train_data=TensorDataset(x, y),
               val_data=TensorDataset(x[:20], y[:20]), task="regression", num_classes=3,
               current_batch_size=8, current_lr=0.1, **kw).validate("test")


def test_a_workload_that_overrides_batch_loss_validates_with_it():
    workload = _tuple_output_workload()
    job = TrialJob(kind="train", workload=workload.name, per_device_batch=8)
    model = workload.build_model()
    result = _evaluate(job, workload, plain_strategy(job), model)
    with torch.no_grad():
        expected = float(workload.batch_loss(model, workload.val_data.tensors))
    assert result == {"val_loss": pytest.approx(expected, rel=1e-5)}  # a loss, and no metric it did not compute


def test_compute_loss_and_evaluate_replace_the_defaults():
    def compute_loss(model, batch):
        return nn.functional.cross_entropy(model(batch[0])[0], batch[1])

    def evaluate(model, batch):
        logits, _ = model(batch[0])
        return {"accuracy": (logits.argmax(-1) == batch[1]).float().mean(), "top2": torch.tensor(1.0)}

    workload = _tuple_output_workload(Workload, compute_loss=compute_loss, evaluate=evaluate)
    job = TrialJob(kind="train", workload=workload.name, per_device_batch=8)
    result = _evaluate(job, workload, plain_strategy(job), workload.build_model())
    assert set(result["val_metrics"]) == {"accuracy", "top2"} and result["val_metrics"]["top2"] == 1.0
    assert result["val_metric_name"] == "accuracy" and result["val_metric"] == result["val_metrics"]["accuracy"]


def test_a_segmentation_model_with_num_classes_ranks_by_loss_not_by_a_zero_accuracy():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 3, 8, 8, generator=g), torch.randint(0, 5, (16, 8, 8), generator=g)
    workload = Workload(name="seg", build_model=lambda: nn.Conv2d(3, 5, 1), train_data=TensorDataset(x, y),
                        val_data=TensorDataset(x, y), loss_fn=nn.functional.cross_entropy,
                        task="semantic-segmentation", num_classes=5).validate("seg")
    job = TrialJob(kind="train", workload="seg", per_device_batch=4)
    result = _evaluate(job, workload, plain_strategy(job), workload.build_model())
    assert set(result) == {"val_loss"}
    assert workload.ranking_metric([])[:2] == ("loss", False)


def test_a_named_metric_that_evaluate_does_not_return_is_an_error_not_a_zero():
    workload = tokens("tagger")
    workload.metric = "f1"
    job = TrialJob(kind="train", workload=workload.name, per_device_batch=32)
    with pytest.raises(WorkloadError, match=r"ranks by metric 'f1'.*computed token_accuracy"):
        _evaluate(job, workload, plain_strategy(job), workload.build_model())


@pytest.mark.parametrize("fields, expected", [
    ({"metric": "zorb", "evaluate": lambda m, b: {}}, "set higher_is_better"),
    ({"metric": "f1"}, "metric 'f1' is not computed"),
    ({"task": ""}, "task is not set"),
    ({"compute_loss": 3}, "compute_loss must be None or a callable"),
    ({"train_data": [1, 2, 3].__iter__()}, "train_data must be a dataset"),
])
def test_bad_fields_are_named_with_their_fix(fields, expected):
    base = dict(name="w", build_model=lambda: nn.Linear(2, 2), train_data=TensorDataset(torch.zeros(4, 2)),
                val_data=TensorDataset(torch.zeros(4, 2)), task="regression")
    with pytest.raises(WorkloadError, match=expected):
        Workload(**{**base, **fields}).validate("w")


def test_a_lower_is_better_metric_picks_the_lowest():
    rows = [TrialRecord("sweep", b, 2, 1, 2 * b, "ok", 1.0, val_loss=1.0, val_metric=ppl,
                        val_metric_name="perplexity", higher_is_better=False, train_seconds=1.0,
                        losses=[2.0, 1.0])
            for b, ppl in ((8, 9.0), (16, 4.0), (32, 6.0))]
    verdict = decide_sweep(rows, num_classes=4)
    pick, reason = verdict.chosen, verdict.reason
    assert pick == 16 and "validation perplexity (lower is better)" in reason


def test_the_sweep_never_ranks_by_a_metric_some_runs_did_not_compute():
    rows = [TrialRecord("sweep", 8, 2, 1, 16, "ok", 1.0, val_loss=0.5, val_metric=0.9, val_metric_name="f1",
                        higher_is_better=True),
            TrialRecord("sweep", 16, 2, 1, 32, "ok", 1.0, val_loss=0.4)]
    verdict = decide_sweep(rows, num_classes=None)
    pick, reason = verdict.chosen, verdict.reason
    assert pick == 16 and "validation loss" in reason


def test_the_optimizer_factory_builds_what_trains_with_its_param_groups(capsys):
    workload = tokens("tagger_with_param_groups")
    job = TrialJob(kind="train", workload=workload.name, per_device_batch=4, lr=2e-3)
    strategy = plain_strategy(job)
    optimizer = strategy.make_optimizer(workload, workload.build_model(), job)
    assert isinstance(optimizer, torch.optim.AdamW) and [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0]
    assert all(g["lr"] == 2e-3 and g["betas"] == (0.9, 0.95) for g in optimizer.param_groups)
    assert "optimizer_factory" in strategy.optimizer_implementation(optimizer)
    bad = tokens("tagger")
    bad.optimizer_factory = lambda model, lr: "adamw"
    with pytest.raises(WorkloadError, match="returned str, not a torch.optim.Optimizer"):
        bad.optimizer_for(bad.build_model(), 1e-3)


Pair = namedtuple("Pair", "inputs targets")


@dataclasses.dataclass
class Features:
    pixels: torch.Tensor
    meta: dict


def test_batches_of_any_nesting_move_to_the_device_whole(monkeypatch):
    moved = []
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: moved.append(tuple(self.shape)) or self)
    batch = {"a": Pair(torch.zeros(2, 3), [torch.zeros(2), torch.zeros(2, 1)]),
             "b": Features(torch.zeros(2, 4, 4), {"ids": torch.zeros(2, 7)}), "n": 3}
    out = to_device(batch, torch.device("cpu"))
    assert isinstance(out["a"], Pair) and isinstance(out["b"], Features) and out["n"] == 3
    assert sorted(moved) == sorted([(2, 3), (2,), (2, 1), (2, 4, 4), (2, 7)])
    assert shapes(out) == {"a.inputs": [2, 3], "a.targets.0": [2], "a.targets.1": [2, 1], "b.pixels": [2, 4, 4],
                           "b.meta.ids": [2, 7]}


def test_probes_feed_the_longest_samples_through_the_collate():
    workload = tokens("tagger")
    selection = select_probe_samples(workload)
    lengths = [len(workload.train_data[i]["input_ids"]) for i in range(len(workload.train_data))]
    assert selection.kind == "longest" and selection.longest == max(lengths) == 64
    assert [lengths[i] for i in selection.indices[:4]] == [64] * 4 and "median" in selection.reason
    job = TrialJob(kind="probe", workload="t", per_device_batch=6, extra={"probe_indices": selection.indices})
    batches, _ = probe_batches(job, workload, plain_strategy(job)).take(2)
    # The 4 longest samples and the next longest 2, padded by the workload's own collate to 64.
    assert batches[0]["input_ids"].shape == (6, 64) and batches[1] is batches[0]
    assert int(batches[0]["attention_mask"].sum(dim=1).min()) == sorted(lengths)[-6]


def test_uniform_data_keeps_random_probe_batches_and_a_stated_worst_case_wins():
    uniform = Workload(name="u", build_model=lambda: nn.Linear(2, 2), train_data=TensorDataset(torch.zeros(8, 2)),
                       val_data=TensorDataset(torch.zeros(8, 2)), task="regression")
    assert select_probe_samples(uniform).kind == "uniform"
    stated = tokens("tagger")
    stated.probe_batch = lambda n: {"input_ids": torch.ones(n, 128, dtype=torch.long)}
    assert select_probe_samples(stated).kind == "probe_batch"
    job = TrialJob(kind="probe", workload="t", per_device_batch=3)
    batches, _ = probe_batches(job, stated, plain_strategy(job)).take(1)
    assert batches[0]["input_ids"].shape == (3, 128)


class ListSamples(Dataset):
    """Token ids as plain lists, as a tokenizer returns them before any collate."""

    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"input_ids": list(range(i + 1)), "label": 0}


def test_sample_length_counts_token_lists_and_can_be_stated():
    workload = Workload(name="l", build_model=lambda: nn.Linear(2, 2), train_data=ListSamples(),
                        val_data=ListSamples(), task="regression", collate_fn=lambda s: s)
    assert select_probe_samples(workload).indices[0] == 4
    workload.sample_length = lambda sample: -len(sample["input_ids"])  # the user's own measure wins
    assert select_probe_samples(workload).indices[0] == 0


def bad(function: str) -> str:
    return f"{TEST_WORKLOADS / 'mistakes.py'}:{function}"


@pytest.mark.parametrize("function, expected", [
    ("wrong_return_type", "returned dict, not advisor.Workload"),
    ("model_not_a_module", r"build_model\(\) returned str, not a torch.nn.Module"),
    ("dataset_of_the_wrong_shape", r"train_data\[0\] is a Tensor: the default loss needs \(input, target\) pairs"),
    ("loss_not_a_scalar", r"loss has shape \(2,\), not a scalar: reduce it"),
    ("nan_at_step_one", "loss is nan at step 1"),
    ("collate_error", "Collating 2 samples .* default_collate raised RuntimeError: stack expects .* collate_fn that pads them"),
    ("metric_missing", "ranks by metric 'f1', but validation computed acc"),
])
def test_each_bad_workload_gets_its_own_message(function, expected):
    from advisor.workload_check import check_workload

    with pytest.raises(WorkloadError, match=expected) as caught:
        check_workload(bad(function))
    assert "\n" not in str(caught.value)  # one paragraph


def test_workloads_check_reports_what_it_found_and_exits_2_without_a_traceback(capsys):
    from advisor.cli import main

    assert main(["workloads", "--check", f"{TEST_WORKLOADS / 'tokens.py'}:tagger"]) == 0
    out = capsys.readouterr().out
    for text in ("parameters          14,884", "BatchNorm           no", "input_ids: int64[2,",
                 "longest 64, median 16", "training step       loss", "token_accuracy (higher is better"):
        assert text in out
    assert main(["workloads", "--check", bad("nan_at_step_one")]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("advisor: The workload 'bad'") and "Traceback" not in captured.err


def test_init_writes_a_template_that_passes_the_check_and_never_overwrites(tmp_path, capsys):
    from advisor.cli import main

    path = tmp_path / "workload.py"
    assert main(["init", "--out", str(path)]) == 0
    text = path.read_text()
    assert f"advisor workloads --check {path}:workload" in text and "TODO" in text
    assert "#   semantic-segmentation      start    8 per device" in text  # the task table, with its rows
    assert main(["workloads", "--check", f"{path}:workload"]) == 0
    assert "sweep ranks by      accuracy" in capsys.readouterr().out
    assert main(["init", "--out", str(path), "--template", "timm"]) == 2
    assert "already exists" in capsys.readouterr().err and path.read_text() == text
    for template in ("transformers", "timm", "lightning"):  # their frameworks are not installed here: compile only
        other = tmp_path / f"{template}.py"
        assert main(["init", "--template", template, "--out", str(other)]) == 0
        compile(other.read_text(), str(other), "exec")
