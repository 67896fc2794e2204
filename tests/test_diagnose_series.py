"""Issue 37: series kept apart (metric, stage, cadence) and the rules judged on them, the same in every format.

The newcomer's runs are real (tests/corpus/generate/newcomer_runs.py): plain SGD on digits at LR 5 and LR 50
(an explosion by orders of magnitude, then chance) and at a healthy LR, each written as HF Trainer dict lines, as
a plain log mixing per-step and per-epoch lines, and as a Lightning-style metrics.csv.
"""

from pathlib import Path

import pytest

from advisor.diagnose import diagnose_source

LOGS = Path(__file__).parent / "corpus" / "logs"
FORMATS = ("hf.log", "plain.log", "metrics.csv")


def verdict(path):
    report = diagnose_source(str(path))
    return report.verdict, sorted((f.kind, f.severity) for f in report.findings if f.secondary_to is None)


@pytest.mark.parametrize("run,expected", [
    ("lr5", ("findings", [("diverged", "error")])),
    ("lr50", ("findings", [("diverged", "error")])),
    ("healthy", ("healthy", [])),
])
def test_newcomer_run_gets_the_same_right_verdict_in_every_format(run, expected):
    verdicts = {fmt: verdict(LOGS / f"newcomer_{run}_{fmt}") for fmt in FORMATS}
    assert verdicts == {fmt: expected for fmt in FORMATS}


def test_lr5_names_the_explosion_and_the_chance_level_after_it():
    report = diagnose_source(str(LOGS / "newcomer_lr5_plain.log"))
    finding = report.findings[0]
    assert "exploded" in finding.summary and "chance" in finding.summary
    assert finding.evidence["classes"] == 10 and finding.confidence == "high"


def test_plain_log_keeps_epoch_means_out_of_the_step_curve():
    report = diagnose_source(str(LOGS / "newcomer_healthy_plain.log"))
    steps, epochs = report.series["train_loss"], report.series["train_loss_epoch"]
    assert len(steps) == 26 and {p.cadence for p in steps} == {"step"}
    assert len(epochs) == 6 and {p.cadence for p in epochs} == {"epoch"}
    assert [p.epoch for p in epochs] == [1, 2, 3, 4, 5, 6]
    assert len(report.series["val_loss"]) == 6


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_validation_and_test_lines_are_separate_series(tmp_path):
    lines = []
    for epoch in range(1, 13):
        lines += [f"Epoch {epoch} train loss: {2.0 / epoch:.4f} acc: {0.5 + epoch / 40:.3f}",
                  f"Epoch {epoch} val loss: {2.1 / epoch + 0.05:.4f} acc: {0.5 + epoch / 45:.3f}",
                  f"Epoch {epoch} test loss: {2.2 / epoch + 0.07:.4f} acc: {0.5 + epoch / 50:.3f}"]
    report = diagnose_source(str(_write(tmp_path, "three.log", "\n".join(lines) + "\n")))
    lengths = {k: len(v) for k, v in report.series.items()}
    assert lengths["train_loss"] == 12 and lengths["val_loss"] == 12 and lengths["test_loss"] == 12, lengths


def test_a_test_loss_stands_in_for_validation_only_when_none_is_printed(tmp_path):
    lines = [f"Epoch {e}: train_loss={2.0 / e:.4f} test_loss={2.1 / e:.4f}" for e in range(1, 8)]
    report = diagnose_source(str(_write(tmp_path, "t.log", "\n".join(lines) + "\n")))
    assert len(report.series["val_loss"]) == 7 and "test_loss" not in report.series
    assert any("test loss is read as validation" in n for n in report.stats.notes)


def test_curves_keys_each_series_by_metric_stage_and_cadence():
    from advisor.diagnose.curves import curves, finding_start

    report = diagnose_source(str(LOGS / "newcomer_lr5_plain.log"))
    drawn = curves(report.series)
    assert set(drawn) == {("loss", "train", "step"), ("loss", "train", "epoch"), ("loss", "val", "epoch"),
                          ("acc", "val", "epoch")}
    assert len(drawn[("loss", "train", "step")]) == 26 and len(drawn[("loss", "train", "epoch")]) == 6
    start = finding_start(report.findings[0])
    assert start["series"] == "train_loss" and start["step"] == 20  # where the loss exploded


def test_hf_eval_dicts_are_a_per_epoch_curve():
    from advisor.diagnose.curves import curves

    drawn = curves(diagnose_source(str(LOGS / "newcomer_healthy_hf.log")).series)
    assert ("loss", "val", "epoch") in drawn and ("loss", "train", "step") in drawn


@pytest.mark.parametrize("run,expected", [
    ("jitter", ("findings", [("oscillation-jitter", "warning")])),
    ("overfit", ("findings", [("overfitting", "warning")])),
    ("healthy", ("healthy", [])),
])
def test_per_epoch_run_gets_the_same_verdict_from_csv_loggers_and_text(run, expected):
    # Real runs (tests/corpus/generate/epoch_csv_runs.py) as Keras CSVLogger, Lightning CSVLogger and Keras text.
    formats = ("keras.csv", "lightning_metrics.csv", "keras.log")
    verdicts = {fmt: verdict(LOGS / f"epochs_{run}_{fmt}") for fmt in formats}
    assert verdicts == {fmt: expected for fmt in formats}


ISSUE_VAL = [1.2, 0.9, 0.7, 0.61, 0.96, 0.39, 0.92, 0.55, 0.88, 0.42, 0.97, 0.5, 0.85, 0.45, 0.93]


def _lightning_csv(tmp_path, val, train):
    rows = ["epoch,step,train_loss,val_loss"]
    for epoch, (v, t) in enumerate(zip(val, train)):
        rows += [f"{epoch},{epoch * 100 + 99},,{v}", f"{epoch},{epoch * 100 + 99},{t:.4f},"]
    return _write(tmp_path, "metrics.csv", "\n".join(rows) + "\n")


def test_validation_jumping_on_a_lightning_csv_is_jitter_not_overfitting(tmp_path):
    # The issue's Lightning CSVLogger case: validation 0.61 -> 0.96 -> 0.39 -> 0.92 while training falls smoothly.
    report = diagnose_source(str(_lightning_csv(tmp_path, ISSUE_VAL, [1.5 * 0.85 ** e for e in range(15)])))
    primary = [f for f in report.findings if f.secondary_to is None]
    assert [(f.kind, f.evidence["series"]) for f in primary] == [("oscillation-jitter", "val_loss")]


def test_a_steady_validation_curve_is_no_jitter(tmp_path):
    val = [1.2 * 0.9 ** e + 0.01 * (-1) ** e for e in range(15)]
    report = diagnose_source(str(_lightning_csv(tmp_path, val, [1.5 * 0.85 ** e for e in range(15)])))
    assert not [f for f in report.findings if f.kind == "oscillation-jitter"]


def test_one_finding_start_for_the_plot_and_the_curves():
    # One owner (curves.finding_start): the plot's marks ask it. A place named only under another key (here the
    # last validation point) is still a start: the curves' own lookup used to return None for it, the plot's found it.
    from advisor.diagnose import plot
    from advisor.diagnose.curves import finding_start
    from advisor.diagnose.records import Finding

    finding = Finding("overfitting", "warning", "s", {"series": "val_loss", "val_last_at": {"line": 9, "epoch": 4.0},
                                                     "later": [{"line": 12, "epoch": 5.0}]}, [])
    assert finding_start(finding) == {"series": "val_loss", "line": 9, "epoch": 4.0}
    assert plot.finding_start is finding_start  # the plot asks the same function, it keeps no copy


# ------------------------------------------------------------------ dx-rules5: quality metrics, heads, cadences

@pytest.mark.parametrize("name, stage, expected", [
    ("BLEU-4", "val", ("val_score", 0)),
    ("BLEU-1", "val", ("val_score", 1)),
    ("eval_bleu", None, ("val_score", 0)),
    ("eval_rouge1", None, ("val_score", 1)),
    ("eval_rougeLsum", None, ("val_score", 0)),
    ("eval_f1", None, ("val_score", 0)),
    ("eval_exact_match", None, ("val_score", 0)),
    ("Final Test F1 Score", None, ("test_score", 0)),
    ("chrF", None, ("val_score", 0)),
    ("val_ppl", None, ("val_ppl", 0)),
    ("eval_perplexity", None, ("val_ppl", 0)),
    ("train_perplexity_step", None, ("train_ppl", 0)),
    ("train/box_om", None, ("train_loss", 3)),  # YOLOv10: one-to-many and one-to-one heads' loss components
    ("val/dfl_oo", None, ("val_loss", 3)),
    ("bleu_weight", None, None),
    ("f1_loss", None, ("train_loss", 3)),
    ("val_dice_score", None, ("val_score", 0)),  # segmentation overlap: Keras CSVLogger columns, mIoU in mmseg
    ("val_iou_score", None, ("val_score", 0)),
    ("mIoU", "val", ("val_score", 0)),
    ("train_jaccard", None, ("train_score", 0)),
    ("dice_loss", None, ("train_loss", 3)),
])
def test_quality_metrics_perplexity_and_head_losses_are_named(name, stage, expected):
    from advisor.diagnose.names import classify

    assert classify(name, stage) == expected


def test_a_bleu_line_is_a_validation_quality_curve(tmp_path):
    lines = []
    for epoch in range(1, 7):
        lines.append(f"2025-03-02 05:24:38,655 - INFO - Epoch {epoch} - Average Train Loss: {1.6 / epoch:.4f}")
        lines.append(f"2025-03-02 05:34:00,482 - INFO - Epoch {epoch} - Validation BLEU: BLEU-1 71.65, BLEU-2 65.76, "
                     f"BLEU-3 46.57, BLEU-4 {30 + epoch / 10:.2f}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    report = diagnose_source(str(path))
    assert [p.value for p in report.series["val_score"]] == [30 + e / 10 for e in range(1, 7)]


def test_a_perplexity_without_a_loss_is_read_as_its_log(tmp_path):
    import math

    path = tmp_path / "run.log"
    path.write_text("".join(f"epoch {e} train_ppl {200 / e:.3f} val_ppl {250 / e:.3f}\n" for e in range(1, 6)))
    report = diagnose_source(str(path))
    assert [round(p.value, 4) for p in report.series["val_loss"]] == [round(math.log(250 / e), 4) for e in range(1, 6)]
    assert [round(p.value, 4) for p in report.series["train_loss"]] == [round(math.log(200 / e), 4) for e in range(1, 6)]
    assert any("perplexity" in n for n in report.stats.notes)


def test_batch_losses_stamped_with_their_epoch_stay_apart_from_the_epoch_average(tmp_path):
    # Python logging of a T5 fine-tune: 'Epoch 3 - Batch loss: X' lines (no step) and one 'Epoch 3 - Average Train
    # Loss: Y' line an epoch. The batch losses are the per-step curve; the averages are the per-epoch one.
    lines = []
    for epoch in range(1, 5):
        lines += [f"2025-03-02 05:16:20,962 - INFO - Epoch {epoch} - Batch loss: {2.0 / epoch + 0.01 * (i % 3):.4f}"
                  for i in range(20)]
        lines.append(f"2025-03-02 05:24:38,655 - INFO - Epoch {epoch} - Average Train Loss: {2.0 / epoch:.4f}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    report = diagnose_source(str(path))
    assert len(report.series["train_loss"]) == 80
    assert [p.value for p in report.series["train_loss_epoch"]] == [round(2.0 / e, 4) for e in range(1, 5)]


def test_a_lightning_epoch_column_with_a_dataloader_index_stays_apart_from_the_step_curve(tmp_path):
    # Lightning CSVLogger: train_loss logged per step, train_loss_0 (dataloader 0) logged once an epoch on the
    # epoch's last row: the epoch means are not points of the step curve.
    rows = ["epoch,step,train_accuracy,train_loss,train_loss_0,valid_accuracy,valid_loss,valid_loss_0"]
    for epoch in range(6):
        for i in range(1, 7):
            rows.append(f"{epoch},{epoch * 340 + i * 50 - 1},,{0.9 - 0.01 * epoch + 0.005 * (i % 2):.4f},,,,")
        end = epoch * 340 + 340
        rows.append(f"{epoch},{end},,,,0.57,{0.87 - 0.002 * epoch:.4f},{0.87 - 0.002 * epoch:.4f}")
        rows.append(f"{epoch},{end},0.55,,{0.94 - 0.01 * epoch:.4f},,,")
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    report = diagnose_source(str(path))
    assert len(report.series["train_loss"]) == 36
    assert [p.value for p in report.series["train_loss_epoch"]] == [round(0.94 - 0.01 * e, 4) for e in range(6)]


# ------------------------------------------------------------------ dx-rules18: header words in other languages

@pytest.mark.parametrize("name, expected", [
    ("Perdua", ("train_loss", 0)),  # Catalan
    ("Pérdida", ("train_loss", 0)),  # Spanish, the accent dropped
    ("perda_validacao", ("val_loss", 0)),  # Portuguese
    ("Verlust", ("train_loss", 0)),
    ("val_perte", ("val_loss", 0)),
    ("Genauigkeit", ("train_acc", 0)),
])
def test_loss_and_accuracy_words_in_other_languages_are_named(name, expected):
    from advisor.diagnose.names import classify

    assert classify(name) == expected


def test_a_csv_with_catalan_headers_is_read(tmp_path):
    # World batch 16's two audio-classifier CSVs ("Epoca,Perdua,Accuracy,Items") were unreadable: no column was a
    # position or a loss by its English name.
    rows = ["Època,Pèrdua,Accuracy,Items"] + [f"{e},{2.3 * 0.9 ** e:.4f},{0.1 + 0.02 * e:.4f},6986" for e in range(1, 21)]
    path = tmp_path / "training_log.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    report = diagnose_source(str(path))
    assert [round(p.value, 4) for p in report.series["train_loss"]][:2] == [2.07, 1.863]
    assert [p.epoch for p in report.series["train_loss"]][:2] == [1, 2]
    assert len(report.series["train_acc"]) == 20


def test_a_metric_named_at_an_epoch_then_its_value_reads_the_epoch_as_the_counter(tmp_path):
    # World batch 16's NumPy MLP (wandb output.log): "The cross entropy loss at epoch N is X". Read as written, the
    # epoch number was the loss (0, 1, 2, ...) and a loss frozen to 13 digits went unseen.
    lines = ["The evaluation accuracy at epoch 0 is 0.0604"]
    lines += [f"The cross entropy loss at epoch {e} is {60.945 if e == 0 else 60.9427988282928}" for e in range(10)]
    path = tmp_path / "output.log"
    path.write_text("\n".join(lines) + "\n")
    report = diagnose_source(str(path))
    loss = report.series.get("train_loss") or report.series["train_loss_epoch"]
    assert [p.epoch for p in loss] == list(range(10)) and loss[-1].value == 60.9427988282928
    assert [f.kind for f in report.findings] == ["not-learning"]
