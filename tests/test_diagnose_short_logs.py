"""`advisor diagnose` on short epoch logs (issue 15), not-learning, framework details, each in its framework's print."""

import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from advisor.diagnose import diagnose_source
from advisor.diagnose.detectors import Context
from advisor.diagnose.scan import read_source
from advisor.diagnose.watch import watch

CORPUS = Path(__file__).parent / "corpus" / "logs"


def diagnose_text(tmp_path, text, name="run.log", **context):
    path = tmp_path / name
    path.write_text(text)
    return diagnose_source(str(path), context=Context(**context) if context else None)


def primary(report):
    return [f for f in report.findings if f.secondary_to is None]


# ------------------------------------------------------------------ judge from the points a log has

def test_five_keras_epochs_with_validation_rising_are_overfitting_with_a_confidence():
    report = diagnose_source(str(CORPUS / "real_keras_overfit_5ep.log"))  # keras-team/keras#1563
    [finding] = primary(report)
    assert finding.kind == "overfitting" and finding.confidence in ("low", "medium", "high")
    assert finding.evidence["rising_points"] == 4 and report.verdict == "findings"
    assert '"confidence"' in json.dumps(finding.to_dict())


def test_a_jump_that_stays_is_a_blow_up_in_a_short_log(tmp_path):
    values = [1.9, 1.8, 1.75, 1.7] + [11.5, 11.6, 11.4, 11.5, 11.5, 11.6, 11.5, 11.4, 11.5]
    text = "".join(f"Epoch {i + 1}/13 - loss: {v:.4f}\n" for i, v in enumerate(values))
    [finding] = primary(diagnose_text(tmp_path, text))
    assert finding.kind == "diverged" and finding.evidence["points_after"] == 9 and finding.confidence == "high"


def test_a_short_healthy_log_still_says_too_few_points(tmp_path):
    report = diagnose_text(tmp_path, "Epoch 1 loss: 0.9\nEpoch 2 loss: 0.7\nEpoch 3 loss: 0.6\n")
    assert report.verdict == "nothing-conclusive" and not report.findings


# ------------------------------------------------------------------ not-learning

def test_loss_at_ln_k_with_chance_accuracy_is_not_learning(tmp_path):
    # PyTorch MNIST-example lines: the loss differs in the 4th decimal, the accuracy says K = 10.
    lines = []
    for epoch in range(1, 5):
        for batch, loss in enumerate((2.3031, 2.3019, 2.3027, 2.3024)):
            lines.append(f"Train Epoch: {epoch} [{batch * 12800}/50000 ({batch * 26}%)]\tLoss: {loss:.6f}")
        lines.append("Test set: Average loss: 2.3026, Accuracy: 1000/10000 (10.00%)")
    [finding] = primary(diagnose_text(tmp_path, "\n".join(lines) + "\n"))
    assert finding.kind == "not-learning" and finding.severity == "error"
    assert finding.evidence["classes"] == 10 and finding.confidence == "high"


def _chance_csv(val_losses, train_losses, train_accs):
    rows = ["epoch,step,train_acc,train_loss,val_acc,val_loss"]
    for epoch, (val, loss, acc) in enumerate(zip(val_losses, train_losses, train_accs)):
        rows.append(f"{epoch},{epoch * 10 + 9},{acc:.3f},{loss:.4f},,")
        rows.append(f"{epoch},{epoch * 10 + 9},,,{0.33 + 0.01 * (epoch % 3 - 1):.3f},{val:.4f}")
    return "\n".join(rows) + "\n"


def test_validation_at_chance_and_at_ln_k_throughout_with_a_noisy_batch_accuracy_is_not_learning(tmp_path):
    # batch 10's 3-class Lightning run: val_loss 1.097-1.111 (within 2% of ln 3 at each of 10 epochs), val_acc
    # 0.31-0.35, the training loss 1.10 -> 1.00 (9.7%), 32-sample batch accuracies up to 0.53: read as "training
    # improves" (overfitting). A model learning its training set only grows confident and its validation loss rises
    # above ln K; one at ln K throughout gives every class alike: not learning.
    val = [1.0970, 1.0977, 1.0990, 1.1015, 1.0987, 1.0998, 1.1070, 1.1110, 1.1062, 1.0974]
    train = [1.10, 1.099, 1.10, 1.098, 1.097, 1.099, 1.096, 1.05, 1.02, 1.00]
    accs = [0.30, 0.41, 0.34, 0.28, 0.44, 0.36, 0.33, 0.53, 0.47, 0.50]
    [finding] = primary(diagnose_text(tmp_path, _chance_csv(val, train, accs), name="metrics.csv"))
    assert finding.kind == "not-learning", finding.evidence
    # The same at chance with the validation loss climbing above ln K while training falls: overfitting still.
    climbing = [1.0990 + 0.04 * e for e in range(10)]
    falling = [1.10 - 0.05 * e for e in range(10)]
    [finding] = primary(diagnose_text(tmp_path, _chance_csv(climbing, falling, accs), name="metrics.csv"))
    assert finding.kind == "overfitting", finding.evidence


def _gap_log(val_losses):
    # CS230 template's text log: train accuracy 0.45 -> 0.92, eval accuracy 0.22 -> 0.71 (a gap of 0.21 at the end)
    lines = []
    for epoch, val in enumerate(val_losses):
        at = f"2018-07-27 17:{epoch + 10}:07,821:INFO: "
        lines.append(f"{at}Epoch {epoch + 1}/10")
        lines.append(f"{at}- Train metrics: accuracy: {0.45 + 0.052 * epoch:.3f} ; loss: {1.54 - 0.145 * epoch:.3f}")
        lines.append(f"{at}- Eval metrics: accuracy: {0.22 + 0.054 * epoch:.3f} ; loss: {val:.3f}")
    return "\n".join(lines) + "\n"


def test_an_accuracy_gap_while_the_validation_loss_is_at_its_best_is_not_overfitting(tmp_path):
    # batch 10's currency classifier: a train/eval accuracy gap of 0.21 at the end, its eval loss 2.69 -> 0.751 (its
    # best, epoch 9) -> 0.754: still gaining on new data. A gap with a validation loss that came down 30%+ and is
    # within 1% of its best over its last two points is no overfitting; the same gap with it rising is.
    report = diagnose_text(tmp_path, _gap_log([2.692, 1.680, 1.217, 1.246, 1.101, 0.965, 0.969, 0.825, 0.751, 0.754]))
    assert "overfitting" not in [f.kind for f in primary(report)], [f.evidence for f in report.findings]
    report = diagnose_text(tmp_path, _gap_log([2.692, 1.680, 1.217, 1.046, 0.901, 0.865, 0.869, 0.925, 0.951, 0.994]))
    assert "overfitting" in [f.kind for f in primary(report)], [f.evidence for f in report.findings]


def test_a_jittery_validation_loss_that_ends_far_above_its_best_is_overfitting(tmp_path):
    # batch 10's river-discharge forecaster: val_loss 0.226, 0.191 (best), 0.245, 0.384, 0.297, 0.221, 0.316, 0.456,
    # 0.523 while train_loss falls at every epoch 0.745 -> 0.279. The bounce on the way made the stale-best rule read
    # the curve as jitter; its last three points (median 0.456, 2.4x the best, far above the noise) say it turned.
    val = [0.2257, 0.1915, 0.2452, 0.3842, 0.2974, 0.2207, 0.3164, 0.4564, 0.5227]
    train = [0.7448, 0.5896, 0.5270, 0.4829, 0.4239, 0.3954, 0.3338, 0.3009, 0.2793]
    rows = ["epoch,step,train_loss,val_loss"]
    for epoch, (t, v) in enumerate(zip(train, val)):
        rows += [f"{epoch},{55 + 56 * epoch},,{v}", f"{epoch},{55 + 56 * epoch},{t},"]
    [finding] = primary(diagnose_text(tmp_path, "\n".join(rows) + "\n", name="metrics.csv"))
    assert finding.kind == "overfitting", finding.evidence


def test_stated_classes_pick_k(tmp_path):
    text = "".join(f"iter {i}: loss {1.3863 + (0.0004 if i % 2 else -0.0003):.4f}\n" for i in range(6))
    [finding] = primary(diagnose_text(tmp_path, text, classes=4))
    assert finding.kind == "not-learning" and finding.evidence["classes_from"] == "stated (--classes)"


def test_an_identical_loss_is_not_learning_not_diverged():
    [finding] = primary(diagnose_source(str(CORPUS / "real_litgpt_stuck_10_8259.log")))  # litgpt#689
    assert finding.kind == "not-learning" and finding.evidence["stuck_points"] == 23


def test_a_converged_plateau_far_below_its_start_is_not_not_learning(tmp_path):
    values = [2.3 * 0.9 ** i for i in range(40)] + [0.0415] * 30
    text = "".join(f"step {i}: loss {v:.4f}\n" for i, v in enumerate(values))
    assert not any(f.kind == "not-learning" for f in diagnose_text(tmp_path, text).findings)


# ------------------------------------------------------------------ framework-aware loss scale

def test_deepspeed_one_overflow_an_epoch_at_scale_1_is_healthy(tmp_path):
    lines = []
    for epoch in range(6):
        for step in range(10):
            lines.append(f"[Rank 0] step={epoch * 10 + step}, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]")
            lines.append(f"epoch {epoch} step {epoch * 10 + step} loss {0.31 + 0.01 * ((step * 7) % 3):.4f}")
        lines.append("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1")
    report = diagnose_text(tmp_path, "\n".join(lines) + "\n")
    assert not any(f.kind == "diverged" for f in report.findings)


def test_rounded_fairseq_loss_scale_zero_is_not_read_as_zero(tmp_path):
    lines = [f"2020-03-23 11:39:44 | INFO | train_inner | epoch 003:  {i} / 356 loss={5.0 - i * 0.01:.3f}, "
             f"num_updates={700 + i}, gnorm=0.6, loss_scale=0, wall=9877" for i in range(30)]
    findings = diagnose_text(tmp_path, "\n".join(lines) + "\n").findings
    assert not any("from 0 to 0" in f.summary for f in findings)
    assert not any(f.kind == "diverged" for f in findings)


def test_dllogger_parameter_loss_scale_halving_to_1e_minus_44_is_diverged(tmp_path):
    lines = []
    scale = 65536.0
    for it in range(60):
        lines.append(f"DLL 2020-06-03 16:09:11.{it:06d} - PARAMETER loss_scale : {scale}")
        lines.append(f"DLL 2020-06-03 16:09:11.{it:06d} - Training Epoch: 0 Training Iteration: {it}  "
                     f"average_loss : nan  step_loss : nan  learning_rate : 0.0035")
        scale /= 2
    [finding] = primary(diagnose_text(tmp_path, "\n".join(lines) + "\n"))
    assert finding.kind == "diverged"
    assert read_source(io.BufferedReader(io.BytesIO("\n".join(lines).encode())), "x").series["loss_scale"][-1].value < 1e-10


def test_the_earliest_non_finite_line_is_cited(tmp_path):
    lines = [f"{{'loss': {2.0 - i / 100:.4f}, 'grad_norm': 1.5, 'epoch': 0.{i:02d}}}" for i in range(25)]
    lines.append("{'loss': 1.7, 'grad_norm': nan, 'epoch': 0.25}")  # line 26
    lines += [f"{{'loss': 1.7, 'grad_norm': 1.4, 'epoch': 0.{26 + i}}}" for i in range(3)]
    lines.append("{'eval_loss': nan, 'epoch': 0.3}")  # line 30
    [finding] = primary(diagnose_text(tmp_path, "\n".join(lines) + "\n"))
    assert finding.kind == "diverged" and finding.evidence["first_non_finite"]["line"] == 26


# ------------------------------------------------------------------ OOMs: recovered, device, framework

def test_fairseq_oom_recovered_then_healthy_steps_is_a_warning(tmp_path):
    lines = [f"2020-11-05 19:29:{i:02d} | INFO | train_inner | epoch 001:  {i} / 500 loss={9 - i * 0.05:.3f}, "
             f"num_updates={i}" for i in range(10)]
    lines += ["2020-11-05 19:30:05 | WARNING | fairseq.trainer | OOM: Ran out of memory with exception: CUDA out of "
              "memory. Tried to allocate 20.00 MiB (GPU 3; 7.93 GiB total capacity; 7.20 GiB already allocated; "
              "17.56 MiB free; 46.25 MiB cached)",
              "2020-11-05 19:30:05 | WARNING | fairseq.trainer | attempting to recover from OOM in forward/backward pass",
              " Skipping batch"]
    lines += [f"2020-11-05 19:31:{i:02d} | INFO | train_inner | epoch 001:  {10 + i} / 500 loss={8.5 - i * 0.05:.3f},"
              f" num_updates={10 + i}" for i in range(10)]
    [finding] = primary(diagnose_text(tmp_path, "\n".join(lines) + "\n"))
    assert finding.kind == "oom" and finding.severity == "warning" and "recovered" in finding.summary
    assert finding.evidence["batches_skipped"] == 1 and "GPU 3" in finding.summary


def test_hf_auto_find_batch_size_lowered_batch_is_a_warning(tmp_path):
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
            "23.64 GiB of which 1.02 GiB is free.\n"
            "Currently training with a batch size of: 16\n"
            + "".join(f"{{'loss': '{2.0 - i / 50:.3f}', 'grad_norm': '1.2', 'epoch': '0.{i:02d}'}}\n" for i in range(8)))
    [finding] = primary(diagnose_text(tmp_path, text))
    assert finding.severity == "warning" and finding.evidence["batch_lowered_to"] == 16 and "GPU 1" in finding.summary


def test_an_oom_that_ended_the_run_stays_an_error():
    [finding] = primary(diagnose_source(str(CORPUS / "real_oom_fairseq_fatal.log")))  # fairseq#869
    assert finding.kind == "oom" and finding.severity == "error"


@pytest.mark.parametrize("log, device_text, advice", [
    ("real_oom_tf_azure.log", "GPU 0", "tf.config.experimental.set_memory_growth"),
    ("real_oom_hip.log", "GPU 0", "PYTORCH_HIP_ALLOC_CONF"),
])
def test_oom_advice_fits_the_framework(log, device_text, advice):
    [finding] = primary(diagnose_source(str(CORPUS / log)))
    assert finding.kind == "oom" and device_text in finding.summary and "GPU ?" not in finding.summary
    if advice == "PYTORCH_HIP_ALLOC_CONF":
        assert finding.evidence["framework"] == "rocm"
    else:
        assert any(advice in a for a in finding.actions)


def test_mps_oom_gets_mps_advice(tmp_path):
    text = ("RuntimeError: MPS backend out of memory (MPS allocated: 12.74 GB, other allocations: 4.39 GB, max "
            "allowed: 18.13 GB). Tried to allocate 1.02 GB on private pool.\n")
    [finding] = primary(diagnose_text(tmp_path, text))
    assert "Apple MPS" in finding.summary and any("torch.mps.empty_cache" in a for a in finding.actions)
    assert not any("torch.cuda.empty_cache" in a for a in finding.actions)


# ------------------------------------------------------------------ readers

def test_a_watchdog_line_cut_mid_word_is_a_collective_timeout(tmp_path):
    text = "[rank0]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operati\n"
    [finding] = primary(diagnose_text(tmp_path, text))
    assert finding.kind == "crash" and finding.evidence["class"] == "collective-timeout"


def test_headerless_yolo_results_rows_are_read(tmp_path):
    rows = "".join(f"     {e}/299      7.1G    {0.1 - e * 0.002:.4f}     0.143         0    {0.25 - e * 0.003:.4f}"
                   f"       106       640         0         0 2.5e-05 4.9e-06    {0.118 - e * 0.001:.4f}    0.1189"
                   f"         0\n" for e in range(6))
    report = diagnose_text(tmp_path, rows, name="results.txt")
    assert report.readable and report.stats.series_lengths == {"train_loss": 6, "val_loss": 6}


def test_torchvision_bracketed_epochs_start_at_zero(tmp_path):
    text = ("Epoch: [0]  [   0/1504]  eta: 0:50:00  lr: 0.02  loss: 2.1  time: 1.9\n"
            "Epoch: [0]  [ 752/1504]  eta: 0:25:00  lr: 0.02  loss: 1.5  time: 1.9\n"
            "Epoch: [1]  [   0/1504]  eta: 0:50:00  lr: 0.02  loss: 1.2  time: 1.9\n")
    points = read_source(io.BufferedReader(io.BytesIO(text.encode())), "x").series["train_loss"]
    assert [p.epoch for p in points] == [0.0, 0.5, 1.0]


def test_transformers_5_string_values_are_read(tmp_path):
    text = "".join(f"{{'loss': '{1.215 - i / 100:.3f}', 'grad_norm': '0.5', 'learning_rate': '5e-05', 'epoch': "
                   f"'0.{i:02d}'}}\n" for i in range(5))
    points = read_source(io.BufferedReader(io.BytesIO(text.encode())), "x").series["train_loss"]
    assert [p.value for p in points][:2] == [1.215, 1.205]


# ------------------------------------------------------------------ slow convergence by shape

def test_a_fine_tuning_log_near_its_floor_is_not_slow(tmp_path):
    # A resumed run: it starts near its floor, so it falls < 25%, but its decay has flattened into noise.
    values = [0.52 - 0.1 * (1 - 0.9 ** i) + 0.01 * ((i * 7919) % 5 - 2) / 2 for i in range(120)]
    text = "".join(f"step {i}: loss {v:.4f}\n" for i, v in enumerate(values))
    assert not any(f.kind == "slow-convergence" for f in diagnose_text(tmp_path, text).findings)


def test_a_steady_slow_decline_is_slow(tmp_path):
    values = [2.0 - 0.002 * i + 0.004 * ((i * 7919) % 5 - 2) / 2 for i in range(150)]
    text = "".join(f"step {i}: loss {v:.4f}\n" for i, v in enumerate(values))
    assert any(f.kind == "slow-convergence" for f in diagnose_text(tmp_path, text).findings)


# ------------------------------------------------------------------ --watch revises

def test_watch_withdraws_a_finding_that_no_longer_holds(tmp_path):
    path = tmp_path / "train.log"
    plateau = "".join(f"step {i}: loss {2.3026 if i % 2 else 2.3027:.4f}\n" for i in range(30))
    path.write_text(plateau)
    out = io.StringIO()
    thread = threading.Thread(target=watch, args=(str(path),), kwargs={"interval": 0.05, "seconds": 1.5, "out": out})
    thread.start()
    time.sleep(0.5)
    with path.open("a") as log:  # warmup over: the loss falls
        log.write("".join(f"step {30 + i}: loss {2.3 * 0.93 ** i:.4f}\n" for i in range(80)))
    thread.join()
    text = out.getvalue()
    assert "not-learning" in text and "withdrawn: not-learning no longer holds" in text


def test_cli_prints_confidence_and_takes_classes(tmp_path):
    path = tmp_path / "run.log"
    path.write_text("".join(f"iter {i}: loss {1.3863 + (0.0004 if i % 2 else -0.0003):.4f}\n" for i in range(6)))
    result = subprocess.run([str(Path(sys.executable).parent / "advisor"), "diagnose", str(path), "--classes", "4"],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "not-learning (confidence:" in result.stdout
    bad = subprocess.run([str(Path(sys.executable).parent / "advisor"), "diagnose", str(path), "--classes", "1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--classes" in bad.stderr
