"""`advisor diagnose` on each class of log people paste (issue 9), from real or faithfully reproduced lines."""

import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from advisor.diagnose import diagnose_source
from advisor.diagnose.detectors import Finding, apply_cofinding_rules
from advisor.diagnose.names import classify
from advisor.diagnose.scan import OOM_WORDS, Scanner, must_read, read_source
from advisor.oom import OOM_MARKERS

CORPUS = Path(__file__).parent / "corpus" / "logs"


def read(text):
    return read_source(io.BufferedReader(io.BytesIO(text.encode())), "x")


def series(text, name):
    return [p.value for p in read(text).series.get(name, [])]


# ------------------------------------------------------------------ names by meaning

@pytest.mark.parametrize("name, stage, expected", [
    ("loss", None, "train_loss"), ("Loss", None, "train_loss"), ("train_loss", None, "train_loss"),
    ("Training Loss", None, "train_loss"), ("train/loss", None, "train_loss"), ("trainLoss", None, "train_loss"),
    ("lm loss", None, "train_loss"), ("step_loss", None, "train_loss"), ("loss train", None, "train_loss"),
    ("val loss", None, "val_loss"), ("Val_Loss", None, "val_loss"), ("validation/loss", None, "val_loss"),
    ("eval_loss", None, "val_loss"), ("valid_loss", None, "val_loss"), ("Vali Loss", None, "val_loss"),
    ("test loss", None, "test_loss"), ("valLoss", None, "val_loss"), ("val_loss_epoch", None, "val_loss"),
    ("Loss", "val", "val_loss"), ("lm loss value", "val", "val_loss"),
    ("val acc", None, "val_acc"), ("val_accuracy", None, "val_acc"), ("Acc@1", "val", "val_acc"),
    ("train_loss_epoch", None, "train_loss_epoch"), ("learning_rate", None, "lr"), ("LR", None, "lr"),
    ("lr-Adam", None, "lr"), ("grad_norm", None, "grad_norm"), ("grad norm", None, "grad_norm"),
    ("gnorm", None, "grad_norm"), ("loss_scale", None, "loss_scale"), ("loss scale", None, "loss_scale"),
    ("Validation loss decreased", "val", None), ("number of skipped iterations", None, None),
    ("lm loss PPL", None, None), ("eval_runtime", None, None), ("v_num", None, None),
])
def test_name_table(name, stage, expected):
    found = classify(name, stage)
    assert (found[0] if found else None) == expected


def test_the_plain_loss_beats_components_and_averages_on_one_line():
    line = ("2023-10-24 08:06:41,294 - mmdet - INFO - Epoch [7][5850/32025]\tlr: 7.146e-04, loss_cls: 0.4233, "
            "d0.loss_bbox: 2.3103, loss: 31.4201, grad_norm: 3637.0292\n"
            "DLL 2023-03-22 09:00:01.123456 - (0, 7) average_loss : 7.5  step_loss : 7.1  learning_rate : 0.006\n")
    assert series(line, "train_loss") == [31.4201, 7.1]


# ------------------------------------------------------------------ the classes

def test_hf_lines_with_one_rounded_epoch_stay_distinct_points():
    text = "".join(f"{{'loss': {2.0 - i / 100:.4f}, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.01}}\n"
                   for i in range(13))
    assert len(series(text, "train_loss")) == 13


def test_grad_norm_nan_that_persists_is_divergence_and_a_lone_one_is_not():
    report = diagnose_source(str(CORPUS / "repro_hf_gradnorm_nan.log"))
    finding = next(f for f in report.findings if f.kind == "diverged")
    assert finding.evidence["series"] == "grad_norm" and finding.evidence["non_finite_run"] >= 3
    assert [f.kind for f in diagnose_source(str(CORPUS / "repro_mmengine_transient_nan.log")).findings] == []


@pytest.mark.parametrize("value", ["nan", "NaN", "NAN", "inf", "Inf", "-inf", "Infinity"])
def test_non_finite_in_any_case_is_divergence(tmp_path, value):
    lines = [f"2023-03-22 09:32:{i % 60:02d} iter {i}: loss {3.0 - i / 100:.4f}, time 31.2ms" for i in range(30)]
    lines.append(f"2023-03-22 09:33:00 iter 30: loss {value}, time 31.2ms")
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    finding = diagnose_source(str(path)).findings[0]
    assert finding.kind == "diverged" and finding.evidence["first_non_finite"]["line"] == 31


@pytest.mark.parametrize("name", ["repro_nanogpt_timestamp_nan.log", "repro_dllogger_nan.log",
                                  "v2_fp16_cascade_megatron.log"])
def test_timestamped_litgpt_dllogger_megatron_lines_are_read(name):
    report = diagnose_source(str(CORPUS / name))
    assert report.stats.series_lengths["train_loss"] >= 30
    assert [f.kind for f in report.findings] == ["diverged"]


def test_litgpt_iter_step_lines():
    text = "iter 20 step 10: loss 2.2000, iter time: 212.40ms (optimizer.step)\n"
    point = read(text).series["train_loss"][0]
    assert point.value == 2.2 and point.step in (10.0, 20.0)


@pytest.mark.parametrize("line, train, val", [
    ("Epoch 5/50 - Training Loss: 0.1700  Validation Loss: 0.0700  Val Acc: 0.91", 0.17, 0.07),
    ("Epoch: 5, Steps: 30 | Train Loss: 0.1234567 Vali Loss: 0.2345678 Test Loss: 0.2456789", 0.1234567, 0.2345678),
    ("> [rank0]: step 3000: train loss 4.0312, val loss 4.0421", 4.0312, 4.0421),
    ("10/10 - 1s - 5ms/step - loss: 0.2345 - accuracy: 0.9000 - val_loss: 0.3456 - val_accuracy: 0.9", 0.2345, 0.3456),
])
def test_capitalised_labels_on_one_line_keep_validation_apart(line, train, val):
    collected = read(line + "\n")
    assert [p.value for p in collected.series["train_loss"]] == [train]
    assert [p.value for p in collected.series["val_loss"]] == [val]


@pytest.mark.parametrize("line, val", [
    ("Test: [  11/11]  Time: 0.100 (0.120)  Loss:  1.2345 (1.3456)  Acc@1: 75.0 (75.0)", 1.2345),
    ("2026-11-30 05:00:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 8.765 | ppl 435.1", 8.765),
    (" validation loss at iteration 100 | lm loss value: 7.000000E+00 | lm loss PPL: 1.1E+03 |", 7.0),
    ("Test set: Average loss: 0.0335, Accuracy: 9890/10000 (99%)", 0.0335),
])
def test_lines_that_say_they_are_validation(line, val):
    collected = read(line + "\n")
    assert [p.value for p in collected.series["val_loss"]] == [val] and "train_loss" not in collected.series


def test_early_stopping_message_with_inf_is_not_a_value():
    assert read("Validation loss decreased (inf --> 0.345000).  Saving model ...\n").series == {}


def test_other_ranks_do_not_mix_into_the_curve():
    text = "".join(f"[rank{r}]: step={s} loss={1.0 + r + s / 100}\n" for s in range(5) for r in (0, 1))
    assert series(text, "train_loss") == [1.0 + s / 100 for s in range(5)]


def test_overflow_cascade_64_to_2_is_divergence():
    finding = diagnose_source(str(CORPUS / "repro_deepspeed_overflow_64_to_2.log")).findings[0]
    assert finding.kind == "diverged" and finding.evidence["halvings_in_a_row"] == 5
    assert finding.evidence["scale_before"] == 64 and finding.evidence["scale_after"] == 2


def test_a_breathing_loss_scale_is_not_divergence():
    assert diagnose_source(str(CORPUS / "v2_fp16_healthy_fairseq.log")).findings == []


def test_scale_at_its_floor_with_nan_grad_norm():
    finding = diagnose_source(str(CORPUS / "repro_megatron_scale_floor.log")).findings[0]
    assert finding.kind == "diverged"


def test_a_stuck_loss_is_not_learning():
    finding = diagnose_source(str(CORPUS / "v2_stuck_zero_grad_bug.log")).findings[0]
    assert finding.kind == "not-learning" and finding.evidence["stuck_points"] >= 100
    assert "zero_grad" in finding.actions[0]


@pytest.mark.parametrize("name, cls, first_action", [
    ("repro_nccl_watchdog_lightning.log", "collective-timeout", "One rank stopped"),
    ("v2_timeout_gloo_torchrun.log", "collective-timeout", "One rank stopped"),
    ("repro_illegal_memory_access.log", "illegal-memory-access", "Re-run with CUDA_LAUNCH_BLOCKING=1"),
    ("plain_crash_shape_not_oom.log", "shape-mismatch", "Read the shapes"),
])
def test_crashes_are_named_by_class_with_their_first_action(name, cls, first_action):
    report = diagnose_source(str(CORPUS / name))
    crash = next(f for f in report.findings if f.kind == "crash")
    assert crash.evidence["class"] == cls and crash.actions[0].startswith(first_action)
    assert report.verdict == "findings"


def test_killed_is_named_killed_not_assumed_an_oom():
    finding = diagnose_source(str(CORPUS / "torchrun_killed_sigkill.log")).findings[0]
    assert finding.kind == "crash" and finding.evidence["class"] == "killed" and finding.evidence["signal"] == "SIGKILL"
    assert finding.summary.startswith("killed:") and "scheduler" in finding.summary and "dmesg" in finding.summary


def test_too_few_points_is_said_never_healthy(tmp_path):
    path = tmp_path / "one.log"
    path.write_text("{'loss': 2.3, 'learning_rate': 5e-05, 'epoch': 0.01}\n")
    report = diagnose_source(str(path))
    assert report.verdict == "nothing-conclusive" and "1 point" in report.cannot_judge
    cli = subprocess.run([sys.executable, "-m", "advisor.cli", "diagnose", str(path)], capture_output=True, text=True)
    assert "Nothing conclusive, too few points to judge the curves" in cli.stdout and "healthy" not in cli.stdout \
        and cli.returncode == 0
    crashed = diagnose_source(str(CORPUS / "repro_illegal_memory_access.log"))
    assert crashed.verdict == "findings"


# ------------------------------------------------------------------ co-findings

def _f(kind):
    return Finding(kind, "warning", kind, {}, [])


@pytest.mark.parametrize("found, primary, secondary", [
    (["diverged", "oscillation-jitter", "slow-convergence"], ["diverged"], []),
    (["oscillation-jitter", "slow-convergence"], ["oscillation-jitter"], []),
    # dx-rules16: a periodic swing (the data order) is a cause of its own beside overfitting, as beside not learning;
    # jitter stays secondary to overfitting (its remedy, a larger batch, pulls against overfitting's)
    (["overfitting", "oscillation-periodic"], ["overfitting", "oscillation-periodic"], []),
    (["overfitting", "oscillation-jitter"], ["overfitting"], ["oscillation-jitter"]),
    (["overfitting", "oscillation-periodic", "oscillation-jitter"], ["overfitting", "oscillation-periodic"], []),
    (["crash", "overfitting"], ["crash", "overfitting"], []),
    # dx-rules9: not learning explains jitter, not a periodic swing (the data order, a cause of its own)
    (["not-learning", "oscillation-periodic", "oscillation-jitter"], ["not-learning", "oscillation-periodic"], []),
])
def test_cofinding_rules(found, primary, secondary):
    out = apply_cofinding_rules([_f(k) for k in found])
    assert [f.kind for f in out if f.secondary_to is None] == primary
    assert [f.kind for f in out if f.secondary_to] == secondary
    assert all(f.severity == "info" and "secondary_because" in f.evidence for f in out if f.secondary_to)


# ------------------------------------------------------------------ sampling

def test_every_oom_marker_is_a_must_read_word():
    for marker in OOM_MARKERS:
        assert any(word.decode() in marker for word in OOM_WORDS), marker
        for variant in (marker, marker.upper(), marker.title(), "RuntimeError: " + marker):
            assert must_read(variant.encode()), variant


@pytest.mark.parametrize("line", ["step 5 loss NaN", "grad_norm: Inf", "loss -INF", "[deepspeed] OVERFLOW! x",
                                  "Vali Loss: 0.3", "Test set: Average loss: 0.1", "CUDA out of memory",
                                  "DefaultCPUAllocator: can't allocate memory"])
def test_decisive_lines_are_must_read(line):
    assert must_read(line.encode())


def test_info_lines_are_not_must_read():
    assert not must_read(b"2026-01-01 INFO train.py:88 Epoch [1/5] Step [10/100] Loss: 0.5 lr: 0.1")


def test_sampling_keeps_every_decisive_line_and_exact_counts(tmp_path):
    path = tmp_path / "long.log"
    with open(path, "w") as log:
        for step in range(1, 300_001):
            log.write(f"2026-01-01 12:00:00 INFO Epoch [1/1] Step [{step}/300000] Loss: {1 + (step % 7) / 100:.4f}\n")
            if step % 50_000 == 0:
                log.write(f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {step}, reducing to "
                          f"{step // 2}\n")
            if step == 123_457:
                log.write("WARNING: CUDA out of memory while caching, retrying\n")  # no "Error" on the line
            if step == 222_222:
                log.write("Epoch [1/1] Step [222222/300000] Loss: 1.0 grad_norm: Inf\n")
    collected = read_source(open(path, "rb"), "long")
    assert collected.stats.sampling_stride > 1
    assert collected.event_counts["overflow"] == 6 and collected.event_counts["oom"] == 1
    assert [p.value for p in collected.series["grad_norm"] if p.value != p.value or abs(p.value) == float("inf")]


@pytest.mark.parametrize("block", [997, 20_000, 1 << 20])
def test_pattern_skipping_never_hides_a_decisive_line(monkeypatch, block):
    """Lines that repeat the log's pattern are skipped whole; anything else in them is read, exactly."""
    import random

    from advisor.diagnose import scan

    rng = random.Random(7)
    decisive = ["step {i} loss NaN", "RuntimeError: CUDA error: out of memory", "[deepspeed] OVERFLOW! Rank 0",
                "CUBLAS_STATUS_ALLOC_FAILED", "Epoch [1/1] Step [{i}/9] Loss: inf", "val loss {i}.5",
                "Test set: Average loss: 0.{i}"]
    lines, expected = [], []
    for i in range(60_000):
        if rng.random() < 0.002:
            text = rng.choice(decisive).format(i=i)
            lines.append(text)
            expected.append(len(lines))
        lines.append(f"2026-01-01 12:{i % 60:02d}:00 INFO train.py:88 step {i} loss {rng.random():.4f} lr 0.1")
        if i % 3 == 0:  # a two-line cycle part of the time: the pattern learner must cope
            lines.append(f"2026-01-01 12:{i % 60:02d}:00 INFO timer.py:12 samples/s {rng.randint(90, 999)}")
    monkeypatch.setattr(scan, "BLOCK_BYTES", block)
    monkeypatch.setattr(scan, "HEAD_BYTES", block)
    scanner = scan.Scanner()
    parsed = []
    original = scanner._parse_raw
    texts = {}
    monkeypatch.setattr(scanner, "_parse_raw", lambda raw, line: (parsed.append(line), texts.__setitem__(line, raw),
                                                                  original(raw, line)))
    walks = []
    walk = scanner._template._walk
    monkeypatch.setattr(scanner._template, "_walk", lambda *a: walks.append(walk(*a)) or walks[-1])
    scanner.scan_stream(io.BytesIO("\n".join(lines).encode()), 50_000_000)
    assert scanner.stride > 1
    if block >= 20_000:  # blocks big enough to learn the pattern from
        assert any(w is not None for w in walks), "the pattern path was never taken"
    assert set(expected) <= set(parsed), sorted(set(expected) - set(parsed))[:5]
    assert all(lines[number - 1].encode() == raw for number, raw in texts.items() if raw), "a line misnumbered"
    assert scanner.collected.stats.lines == len(lines)


# ------------------------------------------------------------------ --watch

def test_watch_reports_a_finding_when_it_appears(tmp_path):
    path = tmp_path / "growing.log"
    path.write_text("")
    proc = subprocess.Popen([sys.executable, "-m", "advisor.cli", "diagnose", "--watch", "--interval", "0.2",
                             "--watch-seconds", "20", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    seen = []

    def reader():
        for line in proc.stdout:
            seen.append((time.monotonic(), line))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        with open(path, "a") as log:
            for i in range(30):
                log.write(f"iter {i}: loss {3.0 - i / 50:.4f}, time 30ms\n")
                log.flush()
                time.sleep(0.02)
            time.sleep(1.0)
            assert not seen, seen  # healthy so far: nothing reported
            written = time.monotonic()
            log.write("iter 30: loss nan, time 30ms\n")
            log.flush()
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.1)
        assert seen, "no finding reported within 10 s of the nan line"
        assert "diverged" in seen[0][1] and seen[0][0] - written < 10
    finally:
        proc.terminate()
        proc.wait(timeout=10)
