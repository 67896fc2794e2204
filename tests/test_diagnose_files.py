"""`advisor diagnose RUN_FOLDER` and the whole-file readers (issue 37), on folders the real libraries write here.

torch's SummaryWriter and Lightning (TensorBoardLogger and CSVLogger) write one shared folder per module; the HF
Trainer's output_dir (report_to="tensorboard", checkpoints) is the slow tier. Bad input: an empty or cut-off event
file, a folder with no logs, 10,000 files, a link loop, an unreadable entry: one paragraph, exit 2, bounded time.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.diagnose import diagnose
from advisor.diagnose.files import iter_tfrecords
from advisor.diagnose.folders import MAX_ENTRIES, discover

pytest.importorskip("tensorboard")
ROOT = Path(__file__).resolve().parent.parent


def _summary_writer_run(folder: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(60):
        writer.add_scalar("Loss/train", 2.0 * math.exp(-step / 20) + 0.1, step)
        if step % 5 == 4:
            writer.add_scalar("Loss/val", 2.1 * math.exp(-step / 20) + 0.15, step)
    writer.close()


def _summary_writer_diverged(folder: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(40):
        loss = 2.3 - 0.01 * step if step < 20 else float("nan")
        writer.add_scalar("train/loss", loss, step)
    writer.close()


def _lightning_runs(root: Path) -> None:
    import lightning as L
    import torch
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 2)

        def training_step(self, batch, index):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, index):
            x, y = batch
            self.log("val_loss", torch.nn.functional.cross_entropy(self.layer(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    x = torch.randn(256, 8)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long()), batch_size=16)
    trainer = L.Trainer(max_epochs=12, logger=[TensorBoardLogger(str(root), name="lightning_logs"),
                                               CSVLogger(str(root), name="csv_logs")],
                        log_every_n_steps=4, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu", devices=1)
    trainer.fit(Model(), data, data)


def _keras_layout(folder: Path) -> None:
    """The layout Keras's TensorBoard callback writes (logs/train, logs/validation, tag epoch_loss, step = epoch),
    written here by SummaryWriter (TensorFlow is not installed): the folder names the stage."""
    from torch.utils.tensorboard import SummaryWriter

    for stage, curve in (("train", lambda e: 1.5 * math.exp(-e / 4) + 0.05),
                         ("validation", lambda e: 0.6 + 0.02 * (e - 5) ** 2)):
        writer = SummaryWriter(str(folder / stage))
        for epoch in range(15):
            writer.add_scalar("epoch_loss", curve(epoch), epoch)
        writer.close()


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """One folder, written once for the module: a SummaryWriter run, a diverged one, Keras's layout (~2 s)."""
    root = tmp_path_factory.mktemp("runs")
    _summary_writer_run(root / "sw")
    _summary_writer_diverged(root / "diverged")
    _keras_layout(root / "keras_logs")
    return root


def test_keras_train_and_validation_folders_are_one_run_and_name_the_stage(written):
    [report] = diagnose([str(written / "keras_logs")]).reports
    assert Path(report.source) == written / "keras_logs"
    assert report.stats.series_lengths == {"train_loss_epoch": 15, "val_loss": 15}
    assert {p.cadence for points in report.series.values() for p in points} == {"epoch"}
    assert "overfitting" in {f.kind for f in report.findings}


@pytest.fixture(scope="module")
def lightning_written(tmp_path_factory) -> Path:
    """A Lightning run logged by TensorBoardLogger and CSVLogger at once (~40 s wall here: the slow tier)."""
    root = tmp_path_factory.mktemp("lightning")
    _lightning_runs(root)
    return root


def _cadences(report) -> dict[str, set]:
    return {name: {p.cadence for p in points} for name, points in report.series.items()}


def test_summary_writer_folder_is_read_and_judged(written):
    [report] = diagnose([str(written / "sw")]).reports
    assert report.stats.series_lengths == {"train_loss": 60, "val_loss": 12}
    assert report.verdict == "healthy"
    assert any(n.startswith("read: events.out.tfevents.") for n in report.stats.notes)


def test_a_nan_in_an_event_file_is_divergence(written):
    [report] = diagnose([str(written / "diverged")]).reports
    assert [f.kind for f in report.findings] == ["diverged"]


@pytest.mark.slow
def test_lightning_tensorboard_and_csv_loggers_give_the_same_series(lightning_written):
    runs = {Path(r.source).relative_to(lightning_written).as_posix(): r for r in
            diagnose([str(lightning_written)]).reports}
    assert set(runs) == {"lightning_logs/version_0", "csv_logs/version_0"}
    board, csv = runs["lightning_logs/version_0"], runs["csv_logs/version_0"]
    assert board.stats.series_lengths == csv.stats.series_lengths == {"train_loss": 48, "train_loss_epoch": 12,
                                                                      "val_loss": 12}
    # Step values per step, validation and the epoch means once an epoch: each its own curve and cadence.
    assert _cadences(board) == _cadences(csv) == {"train_loss": {"step"}, "train_loss_epoch": {"epoch"},
                                                  "val_loss": {"epoch"}}
    for a, b in zip(board.series["val_loss"], csv.series["val_loss"]):
        assert (a.step, a.epoch) == (b.step, b.epoch) and a.value == pytest.approx(b.value, rel=1e-6)
    assert board.verdict == csv.verdict == "healthy"
    # hparams.yaml is named in the section of the run it sits in, not in another run's.
    assert any("hparams.yaml" in s and "not a log file" in s for s in board.stats.skipped)
    assert not csv.stats.skipped


@pytest.mark.slow
def test_the_cli_on_a_lightning_folder(lightning_written, capsys):
    assert main(["diagnose", str(lightning_written)]) == 0
    out = capsys.readouterr().out
    assert f"{lightning_written / 'lightning_logs' / 'version_0'}: " in out and "note: 1 skipped, " in out


def test_the_cli_judges_each_run_of_a_folder_in_text_and_json(written, capsys):
    assert main(["diagnose", str(written)]) == 1  # the diverged run
    out = capsys.readouterr().out
    for run in ("sw", "diverged"):
        assert f"{written / run}: " in out
    assert "diverged" in out and "note: read: " in out
    assert main(["diagnose", "--json", str(written)]) == 1
    import json

    read = json.loads(capsys.readouterr().out)["read"]
    assert {Path(r["source"]).relative_to(written).as_posix() for r in read} == {"sw", "diverged", "keras_logs"}


def test_one_event_file_given_as_a_file(written):
    [event_file] = (written / "sw").glob("events.out.tfevents.*")
    [report] = diagnose([str(event_file)]).reports
    assert report.stats.formats == {"tensorboard": 60} and report.verdict == "healthy"



def _hf_trainer_run(output_dir: Path) -> None:
    """A tiny config-built GPT-2 (no download) trained 3 epochs by the HF Trainer with report_to tensorboard,
    evaluating and saving a checkpoint each epoch; logging every 5 of its 36 steps, so the end-of-training summary
    sits at a step of its own."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2))

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, count):
            self.ids = torch.randint(0, 8, (count, 16))

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, index):
            return {"input_ids": self.ids[index], "labels": self.ids[index]}

    args = TrainingArguments(str(output_dir), report_to=["tensorboard"], use_cpu=True, per_device_train_batch_size=8,
                             num_train_epochs=3, logging_steps=5, eval_strategy="epoch", save_strategy="epoch",
                             learning_rate=5e-3, disable_tqdm=True, dataloader_num_workers=0)
    Trainer(model=model, args=args, train_dataset=Tokens(96), eval_dataset=Tokens(32)).train()


@pytest.mark.slow
def test_an_hf_trainer_output_dir_is_one_run(tmp_path):
    _hf_trainer_run(tmp_path / "out")
    [report] = diagnose([str(tmp_path / "out")]).reports
    assert Path(report.source) == tmp_path / "out"
    # 36 steps logged every 5: 7 training points; an evaluation at each of the 3 epochs' ends (per-epoch).
    assert report.stats.series_lengths["train_loss"] == 7 and report.stats.series_lengths["val_loss"] == 3
    assert {p.cadence for p in report.series["val_loss"]} == {"epoch"}
    assert {p.cadence for p in report.series["train_loss"]} == {"step"}
    skipped = "\n".join(report.stats.skipped)
    # The latest checkpoint's trainer_state.json holds the same run as runs/: one source, the other named.
    assert "checkpoint-12/trainer_state.json: an older checkpoint's" in skipped
    assert "the same run's metrics are read from" in skipped
    # The end-of-training summary at step 36 (train/train_loss, a mean over the run) is not a point of the curve.
    assert report.series["train_loss"][-1].step == 35

# ---------------------------------------------------------------- bad input

def _run_cli(*args, timeout=60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "advisor.cli", "diagnose", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _one_paragraph(result) -> str:
    err = result.stderr.strip()
    assert result.returncode == 2, (result.stdout, err)
    assert "Traceback" not in err and "\n" not in err, err
    return err


def test_without_the_tensorboard_package_the_install_is_named(written):
    """The package blocked from importing (sys.modules entry None), as on an install without the extra."""
    code = ("import sys; sys.modules['tensorboard'] = None; from advisor.cli import main; "
            f"sys.exit(main(['diagnose', {str(written / 'sw')!r}]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    err = _one_paragraph(result)
    assert "pip install 'batch-advisor[tensorboard]'" in err


def test_an_empty_event_file_is_one_paragraph(tmp_path):
    (tmp_path / "events.out.tfevents.1.host.1.0").write_bytes(b"")
    err = _one_paragraph(_run_cli(str(tmp_path / "events.out.tfevents.1.host.1.0")))
    assert "empty TensorBoard event file" in err
    err = _one_paragraph(_run_cli(str(tmp_path)))
    assert "no training log found" in err and "empty TensorBoard event file" in err


def test_a_cut_off_event_file_reads_up_to_the_cut(written, tmp_path):
    [event_file] = (written / "sw").glob("events.out.tfevents.*")
    data = event_file.read_bytes()
    cut = tmp_path / "run" / event_file.name
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) - 30])  # the last record loses its end
    [report] = diagnose([str(cut.parent)]).reports
    assert report.stats.series_lengths == {"train_loss": 60, "val_loss": 11}  # step 59 wrote train, then val
    assert any("last record is cut off" in n for n in report.stats.notes)
    head_only = tmp_path / "head" / event_file.name
    head_only.parent.mkdir()
    head_only.write_bytes(data[:10])  # not even a whole record header
    err = _one_paragraph(_run_cli(str(head_only)))
    assert "no whole event record" in err or "not a readable TensorBoard event file" in err


def test_a_dangling_link_given_as_the_log(tmp_path):
    (tmp_path / "events.out.tfevents.1.host.1.0").symlink_to(tmp_path / "gone")
    err = _one_paragraph(_run_cli(str(tmp_path / "events.out.tfevents.1.host.1.0")))
    assert "no such log file" in err


def test_a_folder_with_no_logs(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 64)
    (tmp_path / "config.json").write_text("{}")
    err = _one_paragraph(_run_cli(str(tmp_path)))
    assert "no training log found" in err and "not a log file" in err and "lightning_logs/version_0" in err


def test_a_folder_of_ten_thousand_files_is_capped_in_bounded_time(tmp_path):
    for index in range(10_000):
        (tmp_path / f"sample_{index:05d}.png").write_bytes(b"")
    started = time.monotonic()
    result = _run_cli(str(tmp_path))
    elapsed = time.monotonic() - started
    err = _one_paragraph(result)
    assert f"the walk stopped after {MAX_ENTRIES} entries" in err
    assert elapsed < 20, elapsed  # measured ~1 s, interpreter start included, on a loaded 2-core machine


def test_a_link_loop_ends(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "back").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "self.log").symlink_to(tmp_path / "self.log")  # a link to itself
    found = discover(str(tmp_path))
    assert not found.runs
    reasons = {why for _, why in found.skipped}
    assert any("link loop" in why for why in reasons) and any("broken link" in why for why in reasons)
    err = _one_paragraph(_run_cli(str(tmp_path), timeout=30))
    assert "link loop" in err


def test_an_unreadable_entry_is_named_and_the_rest_is_read(written, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    [event_file] = (written / "sw").glob("events.out.tfevents.*")
    (run / event_file.name).write_bytes(event_file.read_bytes())
    (run / "events.out.tfevents.2.host.2.0").symlink_to(tmp_path / "gone")  # a dangling link: cannot be read
    os.mkfifo(run / "train.log")  # a pipe with no writer: reading it would hang
    [report] = diagnose([str(run)]).reports
    assert report.verdict == "healthy"
    assert sum("not a regular file" in s for s in report.stats.skipped) == 2


def test_records_are_framed_as_tensorboard_frames_them(written):
    """The framing (length, CRC, bytes, CRC) against the tensorboard package's own loader, CRCs checked there."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

    [event_file] = (written / "sw").glob("events.out.tfevents.*")
    ours = [bytes(record) for _, record in iter_tfrecords(event_file.read_bytes())]
    assert ours == list(RawEventFileLoader(str(event_file)).Load())


# ---------------------------------------------------------------- formats this machine cannot write
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "diagnose_files"  # layouts and sources: its README


def _read(name: str):
    return diagnose([str(FIXTURES / name)]).reports


@pytest.mark.parametrize("name, lengths, cadence", [
    # YOLO prints only loss components: each stage's loss is their sum (box + obj + cls; box + cls + dfl). Its
    # mAP (0.5:0.95 before 0.5) is the validation quality, higher is better.
    ("yolov5_results.csv", {"train_loss": 15, "val_loss": 15, "val_map": 15}, "epoch"),  # x/lr0 is not the LR
    ("ultralytics_v8_results.csv", {"train_loss": 15, "val_loss": 15, "lr": 15, "val_map": 15}, "epoch"),
    ("keras_training.log", {"train_loss": 15, "val_loss": 15, "train_acc": 15, "val_acc": 15}, "epoch"),
    ("timm_summary.csv", {"train_loss": 15, "val_loss": 15, "val_acc": 15, "lr": 15}, "epoch"),
])
def test_per_epoch_csv_files(name, lengths, cadence):
    [report] = _read(name)
    assert report.stats.series_lengths == lengths
    assert {p.cadence for points in report.series.values() for p in points} == {cadence}


def test_yolo_losses_are_the_sums_of_their_components():
    [report] = _read("yolov5_results.csv")
    first = report.series["train_loss"][0]
    assert first.value == pytest.approx(0.09 + 0.05 + 0.025) and first.epoch == 0
    assert report.series["val_loss"][0].value == pytest.approx(0.08 + 0.035 + 0.019)
    assert any("sum of its 3 components" in n for n in report.stats.notes)
    assert report.verdict != "findings" or all(f.severity != "error" for f in report.findings)


def test_keras_overfitting_is_read_from_the_csv_logger():
    [report] = _read("keras_training.log")
    assert "overfitting" in {f.kind for f in report.findings}


def test_detectron2_metrics_json():
    [report] = _read("metrics.json")
    train = report.series["train_loss"]
    assert len(train) == 50 and train[0].step == 19 and train[0].value == pytest.approx(1.5 * math.exp(-19 / 300) + .5)
    assert {p.cadence for p in train} == {"step"}


def test_mmengine_validation_records_count_epochs_not_iterations():
    [report] = _read("mmengine_run")
    assert report.stats.series_lengths["train_loss"] == 60
    assert {p.cadence for p in report.series["train_loss"]} == {"step"}
    assert report.series["train_loss"][0].step == 50 and report.series["train_loss"][0].epoch == 1


def test_mmcv_log_json_mode_says_the_stage():
    [report] = _read("segformer.log.json")
    assert report.stats.series_lengths["train_loss"] == 48  # the env_info header line holds no metric
    assert report.series["train_loss"][0].step == 50


def test_an_mlflow_run_folder():
    [report] = _read("mlruns")
    assert report.source.endswith("3f2a9c1e8b7d4e6fa1b2c3d4e5f60718")
    assert report.stats.series_lengths == {"train_loss": 60, "val_loss": 12}
    assert {p.cadence for p in report.series["val_loss"]} == {"epoch"}  # once an epoch (its epoch metric)
    assert {p.cadence for p in report.series["train_loss"]} == {"step"}


def test_a_wandb_offline_run_folder():
    [report] = _read("wandb")
    assert report.stats.series_lengths == {"train_loss": 15, "val_loss": 15}
    assert any("wandb-history.jsonl" in s for s in report.stats.sources)
    assert any("wandb-summary.json" in s and "not a log file" in s for s in report.stats.skipped)


def test_a_wandb_run_with_only_the_binary_record_says_so():
    err = _one_paragraph(_run_cli(str(FIXTURES / "wandb_binary_only")))
    assert "binary run record" in err and "wandb sync" in err


def test_the_whole_fixture_folder_is_judged_run_by_run():
    sources = {Path(r.source).name for r in diagnose([str(FIXTURES)]).reports}
    assert {"diagnose_files", "vis_data", "3f2a9c1e8b7d4e6fa1b2c3d4e5f60718",
            "offline-run-20240101_120000-abc123"} <= sources


def test_a_long_series_is_sampled_evenly_keeping_its_nans_and_its_end():
    from advisor.diagnose.files import SERIES_KEEP, SeriesSink

    sink = SeriesSink()
    for step in range(20_001):
        sink.offer(step, "train_loss", float("nan") if step == 15_001 else 1.0 / (step + 1), float(step), None, "step")
    points = sink.points()
    steps = [p.step for p in points]
    assert len(points) <= SERIES_KEEP + 2 and steps[-1] == 20_000 and 15_001 in steps
    gaps = {b - a for a, b in zip(steps, steps[1:]) if a != 15_001 and b != 15_001 and b != 20_000}
    assert gaps == {8.0}  # 1 in 8 of 20,001: even
    assert "1 in 8 of 20001" in sink.thinned_note()


@pytest.mark.parametrize("index_column", [True, False], ids=["pandas-index", "no-index"])
def test_a_history_csv_without_a_step_column_is_one_row_per_log(tmp_path, index_column):
    """Keras's History saved with pandas (`pd.DataFrame(history.history).to_csv(path)`: an unnamed index column, or
    none with index=False) has no epoch column: each row is one evaluation, in order."""
    rows = []
    for epoch in range(30):
        train = math.exp(-epoch / 6) + 0.05
        val = math.exp(-epoch / 6) + 0.55 if epoch <= 10 else 0.6 + 0.002 * (epoch - 10) ** 2
        rows.append([epoch, f"{train:.4f}", f"{val:.4f}"])
    header, body = (",loss,val_loss", rows) if index_column else ("loss,val_loss", [r[1:] for r in rows])
    path = tmp_path / "history.csv"
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in body) + "\n")
    [report] = diagnose([str(path)]).reports
    assert [f.kind for f in report.findings] == ["overfitting"]


def _keras_session(rng, epochs=50):
    rows = []
    for epoch in range(epochs):
        loss = 0.44 + 0.13 * 0.8 ** epoch + rng.gauss(0, 0.001)
        val = 0.45 + 0.14 * 0.8 ** epoch + rng.gauss(0, 0.004)
        rows.append(f"{epoch},{0.78 - 0.11 * 0.8 ** epoch:.4f},{loss:.4f},{0.77 - 0.1 * 0.8 ** epoch:.4f},{val:.4f}")
    return rows


def test_a_csv_logger_appended_by_two_sessions_judges_the_last_one(tmp_path):
    """Keras's CSVLogger(append=True) run twice writes epochs 0-49 and then 0-49 again into one file (world batch 6,
    spent: a sleep-apnea CNN). Joined, the second session's start reads as the first curve jumping back up, and the
    whole as a loss that 'fell only 12% over 100 points': slow convergence. Each session is its own run."""
    import random

    rng = random.Random(6)
    path = tmp_path / "training_log.csv"
    path.write_text("\n".join(["epoch,accuracy,loss,val_accuracy,val_loss"] + _keras_session(rng) + _keras_session(rng))
                    + "\n")
    [report] = diagnose([str(path)]).reports
    assert report.stats.series_lengths["train_loss"] == 50 and report.series["train_loss"][0].line == 52
    assert any("2 training sessions" in n for n in report.stats.notes)
    assert not report.findings, [f.evidence for f in report.findings]


@pytest.mark.parametrize("delimiter, decimal", [(";", ","), (";", "."), ("\t", ".")])
def test_a_csv_with_semicolons_or_tabs_reads_as_a_csv(tmp_path, delimiter, decimal):
    """A Keras CSVLogger file written with `;` between fields (world batch 21, after its scoring: unreadable, "none of
    its 5 lines is in a known format"), as Excel and pandas write CSV where the comma is the decimal mark, and a
    tab-separated table: each column is a series, decimal commas included."""
    from advisor.diagnose import diagnose_source

    rows = [delimiter.join(["epoch", "accuracy", "loss", "val_accuracy", "val_loss"])]
    for epoch in range(12):
        values = [0.6 + 0.02 * epoch, 0.9 - 0.05 * epoch, 0.62 + 0.02 * epoch, 0.92 - 0.05 * epoch]
        rows.append(delimiter.join([str(epoch)] + [f"{v:.4f}".replace(".", decimal) for v in values]))
    path = tmp_path / "log.csv"
    path.write_text("\n".join(rows) + "\n")
    report = diagnose_source(str(path))
    assert report.stats.formats == {"csv": 12}, report.stats.formats
    assert [p.value for p in report.series["val_loss"]][:2] == [0.92, 0.87]
    assert [p.value for p in report.series["train_acc"]][-1] == pytest.approx(0.82)


def test_a_validation_curve_logged_per_epoch_beside_one_step_value_is_judged_by_its_epochs():
    """A Lightning TensorBoard run (world batch 1, read by a newcomer's review) logs val_loss at one step and 5 times
    per epoch: the rules judged the 1-point per-step series ("a validation-loss series of 4+ points for overfitting
    (has 1)"). The evaluations that outnumber the others are the validation curve; the other stays apart."""
    import contextlib
    import io
    import json

    run = Path(__file__).parent / "corpus" / "world" / "gh-lightning-tb-mnist" / "lightning_logs" / "mnist_cnn" / "version_0"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["diagnose", "--json", str(run)])
    (read,) = json.loads(out.getvalue())["read"]
    assert read["series_lengths"]["val_loss"] == 5 and read["series_lengths"]["val_loss_step"] == 1
    assert "overfitting (5 validation points)" in read["checks_ran"]


def test_a_keras_history_saved_as_json_reads_per_epoch_alone_in_a_report_and_in_a_folder(tmp_path, capsys):
    """json.dump(history.history): each metric's list, one value an epoch (world batches 7 and 18: a history.json a
    folder skipped as "not a log file", and a training report read as 679 bare numbers). Also under a "history" key
    beside a config and test results; in a run folder, wandb's summary (which may hold lists too) stays skipped."""
    import json

    from advisor.diagnose import diagnose_source

    history = {"loss": [2.0 - 0.1 * e for e in range(12)], "accuracy": [0.3 + 0.05 * e for e in range(12)],
               "val_loss": [2.1 - 0.1 * e for e in range(12)], "val_accuracy": [0.3 + 0.05 * e for e in range(12)]}
    alone = tmp_path / "history.json"
    alone.write_text(json.dumps(history))
    report = diagnose_source(str(alone))
    assert report.stats.formats == {"keras-history": 12}
    assert {p.cadence for p in report.series["val_loss"]} == {"epoch"} and len(report.series["train_acc"]) == 12
    nested = tmp_path / "train_report.json"
    nested.write_text(json.dumps({"config": {"layers": [64, 64], "lr": 1e-3}, "history": history, "test": {"loss": 0.1}}))
    assert len(diagnose_source(str(nested)).series["val_loss"]) == 12
    run = tmp_path / "run"
    (run / "files").mkdir(parents=True)
    (run / "output").mkdir()
    (run / "output" / "history.json").write_text(json.dumps(history))
    (run / "files" / "wandb-summary.json").write_text(json.dumps({"table": {"val_loss": [1.0, 0.9]}}))
    assert main(["diagnose", str(run)]) == 0
    out = capsys.readouterr().out
    assert "read as keras-history (12)" in out and "not a log file: files/wandb-summary.json" in out
    broken = tmp_path / "cut.json"
    broken.write_text(json.dumps(history)[:200])
    assert main(["diagnose", str(broken)]) == 2
    assert "does not parse" in capsys.readouterr().err


@pytest.mark.parametrize("order", ["value step", "step value", "two metrics"])
def test_lines_of_a_loss_and_its_step_read_as_a_training_loss_whichever_column_counts_up(tmp_path, order):
    """A text file of 'loss step' lines (world batch 22, after its scoring: "none of its 55 lines is in a known
    format"), as np.savetxt writes two columns: the column that counts up in whole numbers is the step. Two columns
    of which neither counts up are no loss curve."""
    from advisor.diagnose import diagnose_source

    losses = [2.0 * 0.97 ** i + 0.05 * (i % 3) for i in range(40)]
    lines = {"value step": [f"{v:.6f} {100 * i}" for i, v in enumerate(losses)],
             "step value": [f"{100 * i} {v:.6f}" for i, v in enumerate(losses)],
             "two metrics": [f"{v:.6f} {1 - v / 3:.6f}" for v in losses]}[order]
    path = tmp_path / "loss.log"
    path.write_text("\n".join(lines) + "\n")
    if order == "two metrics":
        assert main(["diagnose", str(path)]) == 2
        return
    report = diagnose_source(str(path))
    series = report.series["train_loss"]
    assert [p.value for p in series[:2]] == [pytest.approx(losses[0], abs=1e-6), pytest.approx(losses[1], abs=1e-6)]
    assert [p.step for p in series[:2]] == [0, 100]

