"""`advisor diagnose` on logs nobody here wrote (issue 26). Each rule is tested on a real excerpt pasted in a public
issue (its source URL is on its line in tests/corpus/labels.toml). Rules were tuned on `v4-tune` and `real-tune`
excerpts; `v4-holdout-1` was scored once (24/28), its misses fixed and tested here; `v4-holdout-2` is never read
here (scored once, tests/corpus/README.md)."""

import tomllib
from pathlib import Path

import pytest

from advisor.diagnose import KINDS, diagnose_source
from advisor.diagnose import shortlog
from advisor.diagnose.detectors import Context, _finite
from advisor.diagnose.scan import read_source

CORPUS = Path(__file__).parent / "corpus"
LOGS = CORPUS / "logs"
LABELS = tomllib.loads((CORPUS / "labels.toml").read_text())


def report(name, **context):
    return diagnose_source(str(LOGS / name), context=Context(**context) if context else None)


def primary(rep):
    return [f for f in rep.findings if f.secondary_to is None]


def kinds(name):
    return {f.kind for f in primary(report(name))}


def collected(name):
    with open(LOGS / name, "rb") as stream:
        return read_source(stream, name)


# ------------------------------------------------------------------ formats


def test_xla_resource_exhausted_is_an_oom_on_the_tpu_not_a_crash():
    for name in ("real4_xla_resnet_resource_exhausted.log", "real4_colab_tpu_allocate.log"):
        [finding] = primary(report(name))
        assert finding.kind == "oom" and finding.severity == "error", name
    [finding] = primary(report("real4_xla_resnet_resource_exhausted.log"))
    assert finding.evidence["tried_bytes"] == int(6.48 * 2 ** 30) and "TPU" in finding.summary


def test_loss_is_infinity_with_a_sentence_final_period_is_divergence():
    # BigDL: "... Loss is Infinity. Current learning rate is 0.046..." (intel/ipex-llm#1486)
    [finding] = primary(report("real4_bigdl_loss_infinity_once.log"))
    assert finding.kind == "diverged" and finding.evidence["value"] == "inf"
    assert finding.evidence["last_finite"] == pytest.approx(1.308916)  # "Loss is 1.308916." was read


def test_a_json_object_behind_a_log_prefix_with_string_values_is_read():
    # fairseq: '... | INFO | train | {"epoch": 73, "train_loss": "nan", ...', wrapped over lines as pasted
    [finding] = primary(report("real4_fairseq_json_train_loss_nan.log"))
    assert finding.kind == "diverged" and finding.evidence["series"] == "train_loss"


@pytest.mark.parametrize("name, columns, rows", [
    ("real4_chainer_table_stuck_ln10.log", ("train_loss", "val_loss", "train_acc", "val_acc"), 10),  # 2+ spaces
    ("real4_physai_tab_table_val_flat.log", ("train_loss", "val_loss"), 6),  # tabs, bold cells, annotations
    ("real4_tsai_fastai_table_nan_traceback.log", ("train_loss", "val_loss"), 4),  # fastai, tabs
])
def test_tables_with_a_header_row_are_read(name, columns, rows):
    c = collected(name)
    assert all(len(c.series.get(col, [])) == rows for col in columns), c.stats.series_lengths
    assert c.stats.formats.get("table") == rows + 1


def test_table_columns_with_nan_are_divergence():
    [finding] = primary(report("real4_tsai_fastai_table_nan_traceback.log"))
    assert finding.kind == "diverged" and finding.evidence["series"] == "train_loss"


def test_traceback_source_lines_are_never_metrics():
    # "----> 1 learn.fit_one_cycle(25, lr_max=1e-3)" inside an IPython traceback (timeseriesAI/tsai#639)
    c = collected("real4_tsai_fastai_table_nan_traceback.log")
    assert "lr" not in c.series


def test_a_bare_list_of_numbers_is_read_as_a_loss_series_and_says_so():
    rep = report("real4_lmedr_bare_numbers_oscillate.log")
    assert rep.stats.series_lengths == {"train_loss": 15}
    assert any("assumed" in note and "15 bare number" in note for note in rep.stats.notes)


def test_elided_stretches_are_gaps_and_said():
    # "..." lines around the epochs pasted (golbin/TensorFlow-Tutorials#42)
    c = collected("real4_golbin_gan_nan_elided.log")
    assert c.elisions == [2, 11]
    rep = report("real4_golbin_gan_nan_elided.log")
    assert any("elided" in note for note in rep.stats.notes)


def test_the_adjacency_of_points_stops_at_an_elision():
    c = collected("real4_golbin_gan_nan_elided.log")
    points = c.series["train_loss"]
    assert shortlog.adjacent(points, c.elisions) == [True] * (len(points) - 1)
    assert shortlog.adjacent(points, [points[2].line + 0.5]) == [True, True, False] + [True] * (len(points) - 4)


@pytest.mark.parametrize("name", [
    "real4_radar_mean_training_loss_nan.log",  # Mean Training loss : nan
    "real4_gaze_loss_nan_escape_codes.log",  # Loss nan (nan), a line starting with terminal escape codes
    "real4_keras_rpn_loss_nan_bold.log",  # - loss: nan - ...** (markdown bold)
    "real4_verse_loss_net_nan_scale.log",  # loss_net: nan
    "real4_sid_loss_eq_nan.log",  # Loss=nan
    "real4_diffusionad_train_loss_nan.log",  # Epoch:0, Train loss: nan:
])
def test_non_finite_in_any_loss_key_form_is_divergence(name):
    [finding] = primary(report(name))
    assert finding.kind == "diverged" and finding.severity == "error"
    assert finding.evidence["series"] == "train_loss" and "first_non_finite" in finding.evidence


def test_a_non_finite_value_outside_a_loss_field_is_not_divergence():
    # Caffe: "Iteration 0 (-nan iter/s, 26.7698s/20 iters), loss = 6.91161" (jixing0415/caffe-mobilenet-v3#1):
    # the nan is a throughput; the loss is finite and stuck (not learning), nothing diverged
    rep = report("real_caffe_stuck_6_9078.log")
    assert {f.kind for f in primary(rep)} == {"not-learning"}
    c = collected("real_caffe_stuck_6_9078.log")
    assert not c.non_finite and all(s in ("train_loss", "lr") for s in c.series)


def test_a_loss_identifier_with_another_last_word_is_a_loss_and_a_setting_is_not():
    # "loss_net: nan" (christianpayer/MedicalDataAugmentationTool-VerSe#31)
    c = collected("real4_verse_loss_net_nan_scale.log")
    assert len(c.series["train_loss"]) == 3 and "train_loss" in c.non_finite
    from advisor.diagnose.names import classify
    assert classify("loss_weight") is None and classify("Validation loss decreased") is None


def test_bash_job_control_killed_line_is_a_killed_crash():
    # "jac-crun: line 6:  3305 Killed                  $JACROOT/bin/jac-run" (vacancy/NSCL-PyTorch-Release#23)
    [finding] = primary(report("real4_nscl_killed_validation.log"))
    assert finding.kind == "crash" and finding.evidence["class"] == "killed"


def test_an_exception_line_in_markdown_bold_is_a_crash():
    # "**RuntimeError: CUDA error: device-side assert triggered**" (xhw205/GPLinker_torch#14)
    [finding] = primary(report("real4_gplinker_index_assert.log"))
    assert finding.kind == "crash" and finding.evidence["exception"] == "RuntimeError"


# ------------------------------------------------------------------ out of memory that the run survived


def test_a_skipped_batch_followed_by_training_is_a_warning_with_the_count():
    # fairseq: "WARNING: ran out of memory on GPU #2, skipping batch", then more training (facebookresearch/fairseq#103)
    [finding] = primary(report("real4_fairseq_oom_skip_recovered.log"))
    assert finding.kind == "oom" and finding.severity == "warning"
    assert finding.evidence["batches_skipped"] == 2 and "2 batch(es) were skipped" in finding.summary


def test_a_skipped_batch_followed_by_a_crash_stays_an_error():
    [finding] = primary(report("real4_fairseq_oom_skip_then_attributeerror.log"))
    assert finding.kind == "oom" and finding.severity == "error"


# ------------------------------------------------------------------ divergence with few points


def test_one_apex_overflow_at_scale_2_to_the_minus_5_is_a_collapse_from_its_start():
    # "reducing loss scale to 0.03125": 2^21 below apex's initial 2^16 (whai362/PVT#94)
    [finding] = primary(report("real4_pvt_apex_scale_0_03125.log"))
    assert finding.kind == "diverged" and finding.evidence["start_assumed"]
    assert finding.evidence["fall"] == 2 ** 21


def test_apex_calibrating_down_from_2_to_the_32_is_not_a_collapse():
    # the start of a healthy tacotron2 run: apex halves from 2^32 to 2^18 before training (NVIDIA/tacotron2#112)
    assert kinds("real_tacotron_scale_calibration.log") == set()


def test_a_loss_that_explodes_by_orders_of_magnitude_in_four_points_diverged():
    # mmdetection: loss 0.85, 2.44, 63118, 1.1e13 (sandipan211/ZSD-SC-Resolver#24)
    [finding] = primary(report("real4_mmdet_loss_explodes.log"))
    assert finding.kind == "diverged" and finding.evidence["max_before"] == pytest.approx(2.4435)


def test_a_jump_with_one_point_before_it_that_stays_is_divergence(tmp_path):
    # Issue 26's description: a loss that jumps from 1.7 to 11.5 and stays, one point before the jump. No real
    # excerpt of this shape is in the corpus (the tune parts were searched for a 2x+ jump after 1-2 points: only
    # explosions, caught by the 100x rule), so the curve is the issue's, in Keras' epoch-summary form.
    values = [1.7, 11.5, 11.6, 11.4, 11.5, 11.5, 11.6, 11.5, 11.4, 11.5]
    path = tmp_path / "jump.log"
    path.write_text("".join(f"Epoch {i + 1}/10\n100/100 [==============================] - 3s - loss: {v:.4f}\n"
                            for i, v in enumerate(values)))
    [finding] = primary(diagnose_source(str(path)))
    assert finding.kind == "diverged" and finding.evidence["level_before"] == 1.7
    assert finding.evidence["points_after"] == 9
    # Not a blow-up: a second point twice the first (a partial first-epoch average), or a jump that does not hold.
    for calm in ([0.9, 1.9, 1.8, 1.7, 1.7, 1.6, 1.6, 1.5, 1.5, 1.4], [1.7, 11.5, 11.6, 2.4, 2.0, 1.9, 1.8, 1.7, 1.6, 1.5]):
        path.write_text("".join(f"Epoch {i + 1}/10 - loss: {v:.4f}\n" for i, v in enumerate(calm)))
        assert "diverged" not in {f.kind for f in primary(diagnose_source(str(path)))}, calm


# ------------------------------------------------------------------ short logs with validation


def short_rule(rule, name, **context):
    c = collected(name)
    train = _finite(c.series.get("train_loss", []))
    val = _finite(c.series.get("val_loss", []))
    return rule(train, val, c.series, Context(**context))


def test_train_accuracy_far_above_validation_is_overfitting():
    # train accuracy 0.99 against validation 0.35 with noisy validation (deepconvolution/LipNet#1, a CSV)
    assert kinds("real4_lipnet_csv_gap.log") == {"overfitting"}
    finding = short_rule(shortlog._accuracy_gap, "real4_alexnet_repeated_fit_gap.log")
    assert finding.kind == "overfitting" and finding.evidence["gap"] > 0.3


def test_a_validation_loss_gap_wider_than_the_run_came_is_overfitting():
    # keras-team/keras#1971: training loss 5e-4, validation 0.13, epochs 13-94 cut from the paste
    [finding] = primary(report("real4_keras_1971_gap_elided.log"))
    assert finding.kind == "overfitting" and "289" in finding.summary
    assert short_rule(shortlog._loss_gap, "real4_keras_1971_gap_elided.log") is not None


def test_validation_flat_while_training_halves_is_overfitting():
    finding = short_rule(shortlog._flat_validation, "real4_physai_tab_table_val_flat.log")
    assert finding.kind == "overfitting" and finding.evidence["train_drop"] > 0.5


def test_validation_that_never_beats_its_early_best_is_overfitting():
    # keras-team/keras#1563: validation best at epoch 1 of 5, training falls (the rising rule also names it)
    finding = short_rule(shortlog._stale_validation, "real_keras_overfit_5ep.log")
    assert finding.kind == "overfitting" and finding.evidence["points_since_best"] >= 3


def test_validation_at_chance_with_training_at_chance_is_not_learning():
    # chainer/chainer#4424: validation accuracy 0.10004 = 1/10 every epoch, training stuck at 2.30256
    finding = short_rule(shortlog._at_chance, "real4_chainer_table_stuck_ln10.log")
    assert finding.kind == "not-learning" and finding.evidence["classes"] == 10


# ------------------------------------------------------------------ jitter from 10 points


@pytest.mark.parametrize("name", ["real4_lmedr_bare_numbers_oscillate.log", "real4_east_step_loss_oscillate.log"])
def test_short_jitter_from_ten_points(name):
    [finding] = primary(report(name))
    assert finding.kind == "oscillation-jitter" and finding.evidence["points"] == 15


def test_short_jitter_rule_leaves_a_converged_noisy_loss_alone():
    # DeepDanbooru: 11 step values around 0.0096, +-4% (KichangKim/DeepDanbooru#42)
    assert kinds("real4_deepdanbooru_converged_noise.log") == set()


def test_a_loss_below_1e_minus_4_everywhere_is_converged_not_jittering():
    # 48 epochs around 5e-6 (fangyuanmao/PID#22)
    rep = report("real4_pid_tiny_loss_converged.log")
    assert rep.findings == [] and rep.verdict == "healthy"


def test_three_clear_cycles_in_17_points_are_periodic_and_noise_is_not(tmp_path):
    # Issue 26: "a periodic pattern with three clear cycles in 17 points" was "too few points". No real excerpt with
    # such a curve was found (issues searched: periodic / sawtooth / loss up and down each epoch; the hits show plots,
    # not numbers), so the curve is built from the description: a slow fall, swings of +-0.4 every ~5.6 epochs.
    import math
    import random

    values = [2.0 - 0.01 * i + 0.4 * math.sin(2 * math.pi * i / 5.6) for i in range(17)]
    path = tmp_path / "periodic.log"
    path.write_text("".join(f"epoch {i + 1} loss {v:.4f}\n" for i, v in enumerate(values)))
    [finding] = primary(diagnose_source(str(path)))
    assert finding.kind == "oscillation-periodic" and finding.evidence["period_points"] in (5, 6)
    assert finding.evidence["cycles"] >= 2.8
    # Noise around a falling trend is jitter or nothing, not periodic (white noise passes the rule ~1% of the time).
    rng = random.Random(3)
    for _ in range(5):
        noisy = [2.0 - 0.03 * i + rng.gauss(0, 0.15) for i in range(17)]
        path.write_text("".join(f"epoch {i + 1} loss {v:.4f}\n" for i, v in enumerate(noisy)))
        assert "oscillation-periodic" not in kinds_of(path)
    # The real LMEDR list (labelled jitter) stays jitter.
    assert kinds("real4_lmedr_bare_numbers_oscillate.log") == {"oscillation-jitter"}


def test_real_per_epoch_sawtooth_is_periodic(tmp_path):
    # luopeixiang/named_entity_recognition#24 (labels.toml): the step loss falls 6.0 -> 0.51 over epoch 11's 12 points,
    # then starts over at 5.1 in epoch 12 (data in a fixed order). Labelled oscillation-periodic from the text; it was
    # read as healthy (24 points: above the short-log rule's 19, below the autocorrelation rule's 60) until the
    # sawtooth rule: restarts each a large share of the range and of the noise, regularly spaced, each falling again.
    [finding] = primary(report("real6_ner_per_epoch_sawtooth.log"))
    assert finding.kind == "oscillation-periodic" and finding.severity == "warning"
    assert finding.evidence["period_points"] == 12 and finding.evidence["at_epoch_start"] is True
    assert [r["line"] for r in finding.evidence["restarts"]] == [7, 21]
    assert "restarts high at each epoch start" in finding.summary
    assert "shuffle every epoch" in finding.actions[0] and "per-epoch reset" in finding.actions[1]
    # One restart is not a cycle: the same excerpt cut before epoch 12 (a jump, then one fall) is not periodic.
    lines = (LOGS / "real6_ner_per_epoch_sawtooth.log").read_text().splitlines(keepends=True)
    path = tmp_path / "one_epoch.log"
    path.write_text("".join(lines[:19]))
    assert "oscillation-periodic" not in kinds_of(path)


def kinds_of(path):
    return {f.kind for f in primary(diagnose_source(str(path)))}


# ------------------------------------------------------------------ three verdicts


def test_a_short_log_is_nothing_conclusive_and_says_what_is_needed():
    # four epochs of falling ssd_keras losses (pierluigiferrari/ssd_keras#55): fine so far, not "healthy"
    rep = report("real4_ssd_keras_first_epochs.log")
    assert rep.findings == [] and rep.verdict == "nothing-conclusive"
    assert "4 point(s)" in rep.cannot_judge and "10+ training-loss points" in rep.cannot_judge
    assert any(note.startswith("checks run:") for note in rep.stats.notes)


def test_only_a_validation_accuracy_is_nothing_conclusive():
    rep = report("real4_kraken_val_accuracy_only.log")
    assert rep.verdict == "nothing-conclusive" and "no training loss" in rep.cannot_judge


def test_a_long_healthy_curve_is_healthy_and_says_which_checks_ran():
    rep = diagnose_source(str(LOGS / "plain_healthy_brackets.log"))
    assert rep.verdict == "healthy" and rep.cannot_judge is None
    assert any("oscillation" in check for check in rep.checks_ran)


# ------------------------------------------------------------------ the v4 corpus


def test_v4_tune_excerpts_all_right_and_no_error_on_a_healthy_one():
    """v4-tune all right; v4-holdout-1 (scored once at 24/28 before its misses were fixed) all right but the two
    left as known misses: a 2x loss jump after a flat stretch, and a step loss 2.4% above ln 2."""
    known = {"real4_deepj_loss_jump_stays.log", "real4_snorkel_bilstm_ln2.log"}
    wrong, false_errors = [], []
    for name, entry in LABELS.items():
        if entry["split"] not in ("v4-tune", "v4-holdout-1") or name in known:
            continue
        found = primary(report(name))
        if {f.kind for f in found} != set(entry["kinds"]):
            wrong.append((name, entry["kinds"], sorted(f.kind for f in found)))
        if not entry["kinds"]:
            false_errors += [(name, f.kind) for f in found if f.severity == "error"]
    assert not wrong and not false_errors
    assert {k for e in LABELS.values() if e["split"] == "v4-tune" for k in e["kinds"]} <= set(KINDS)


def test_loguru_bracketed_keys(tmp_path):
    # No real pasted excerpt of this form was found in the issue corpus (searched "[Loss] nan", loguru, "| INFO |" with
    # nan, "[loss]: nan", YOLOX's loguru lines; the one "[loss]: 4.99" key form found, CoupletAI#2, has no nan): the
    # line is written here in loguru's default format, the key in brackets as issue 26 quotes it. Real bracketed
    # prefixes with a nan loss are tested below (they do not go through _BRACKET_KEY).
    path = tmp_path / "loguru.log"
    path.write_text("".join(f"2024-05-01 10:00:0{i}.123 | INFO     | __main__:train:42 - [Epoch] {i} [Loss] {v}\n"
                            for i, v in enumerate(("2.31", "1.20", "nan"))))
    rep = diagnose_source(str(path))
    [finding] = primary(rep)
    assert rep.stats.series_lengths == {"train_loss": 3} and finding.kind == "diverged"
    assert finding.evidence["first_non_finite"]["epoch"] == 2


def test_real_bracketed_losses_group_with_nan_is_divergence():
    # eriklindernoren/PyTorch-YOLOv3#13 (labels.toml): "[Epoch 0/30, Batch 323/1313] [Losses: x nan, y nan, w nan,
    # h nan, conf 0.755184, cls nan, total nan]", every line; keys and values space-separated inside one bracket group.
    # The group's total is the loss; the place is epoch 0 + batch 323 of 1313.
    rep = report("real6_pytorch_yolov3_bracketed_losses_nan.log")
    [finding] = primary(rep)
    assert finding.kind == "diverged" and rep.stats.series_lengths == {"train_loss": 4}
    assert finding.evidence["first_non_finite"] == {"line": 1, "epoch": round(323 / 1313, 3)}


def test_a_bracketed_losses_group_reads_its_total_and_a_nan_outside_it_is_not_divergence(tmp_path):
    # The same group with finite values (written here in PyTorch-YOLOv3's format): the total is the loss series,
    # the components are not separate series; a nan in a bracketed throughput beside it is not divergence evidence.
    path = tmp_path / "yolo.log"
    path.write_text("".join(
        f"[Epoch {i // 10}/30, Batch {i % 10}/10] [Losses: x 0.{90 - i:02d}, y 0.2, w 0.1, h 0.1, conf 0.5, cls 0.3, "
        f"total {2.0 - 0.02 * i:.4f}] [Speed: fps nan]\n" for i in range(40)))
    c = collected(str(path))
    assert set(c.series) == {"train_loss"} and not c.non_finite
    assert [p.value for p in c.series["train_loss"]][:2] == [2.0, 1.98]
    assert "diverged" not in {f.kind for f in primary(diagnose_source(str(path)))}


def test_a_nan_component_of_a_losses_group_without_a_total_is_divergence(tmp_path):
    # No total printed: the components are the loss; the first stands in while finite, a nan in any is divergence.
    path = tmp_path / "yolo.log"
    path.write_text("".join(f"[Epoch 1/30, Batch {i}/40] [Losses: x 0.{90 - i}, y {'nan' if i >= 30 else '0.2'}, "
                            f"conf 0.5]\n" for i in range(40)))
    c = collected(str(path))
    assert [p.value for p in c.series["train_loss"]][:2] == [0.9, 0.89]
    [finding] = primary(diagnose_source(str(path)))
    assert finding.kind == "diverged" and finding.evidence["first_non_finite"]["line"] == 31


@pytest.mark.parametrize("name, line, last_finite", [
    ("real6_3d2d_distill_bracketed_prefix_loss_nan.log", 1, None),  # [2021-08-16 13:52:56,765 INFO train.py line 404 N]
    ("real6_ppasr_bracketed_timestamp_loss_nan.log", 9, 6.61592),  # [2021-07-14 02:12:37.086634] Train epoch: 0, ...
    ("real6_pccai_bracketed_timestamp_loss_nan.log", 12, 0.090984),  # [2023-03-10 20:01:44,570]     batch count: ...
])
def test_real_bracketed_prefixes_with_a_nan_loss_are_divergence(name, line, last_finite):
    # Real excerpts (labels.toml, real6_*) for the bracketed forms around a nan loss: a whole "[date level file line]"
    # block, a bare "[timestamp]" with Chinese save lines between, a "[timestamp]" before indented batch lines. No
    # real "[Loss] nan" with the key itself in brackets was found (see test_loguru_bracketed_keys); PyTorch-YOLOv3's
    # "[Losses: x nan, ..., total nan]" has its own test above.
    [finding] = primary(report(name))
    assert finding.kind == "diverged" and finding.evidence["first_non_finite"]["line"] == line
    assert finding.evidence["last_finite"] == last_finite


# ------------------------------------------------------------------ bad input: ends within seconds, bounded memory

# The peak is this process's own, VmHWM (reset by exec): ru_maxrss keeps the forking parent's peak across exec,
# so inside the whole suite (a pytest holding torch) it read 581 MiB for a 40 MiB run.
PEAK = """
import re, sys, time
from advisor.diagnose import diagnose_source
start = time.perf_counter()
report = diagnose_source(sys.argv[1])
peak_kib = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
print(round(time.perf_counter() - start, 2), peak_kib // 1024,
      report.readable, report.verdict, report.stats.lines, report.stats.skipped_binary_lines, sep="\\t")
"""


def measured(path):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, check=True,
                         timeout=60).stdout.split("\t")
    return float(out[0]), int(out[1]), out[2] == "True", out[3], int(out[4]), int(out[5])


def test_a_2_gb_sparse_file_ends_at_once_as_binary(tmp_path):
    path = tmp_path / "huge.log"
    with open(path, "wb") as f:
        f.truncate(2 * 2**30)  # 2 GiB of zeros, sparse: nothing is written to disk
    seconds, peak_mib, readable, verdict, lines, binary = measured(path)
    assert seconds < 2 and peak_mib < 150 and not readable and binary == 1


def test_random_binary_bytes_are_said_binary(tmp_path):
    import random
    path = tmp_path / "core.bin"
    path.write_bytes(random.Random(0).randbytes(1 << 20))
    seconds, peak_mib, readable, verdict, lines, binary = measured(path)
    assert seconds < 2 and not readable and binary == 1
    import subprocess
    import sys
    cli = subprocess.run([sys.executable, "-m", "advisor.cli", "diagnose", str(path)], capture_output=True, text=True)
    assert cli.returncode == 2 and "looks binary" in cli.stderr


def test_an_empty_file_is_said_empty(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "empty.log"
    path.write_bytes(b"")
    cli = subprocess.run([sys.executable, "-m", "advisor.cli", "diagnose", str(path)], capture_output=True, text=True)
    assert cli.returncode == 2 and "it is empty" in cli.stderr


def test_a_million_identical_lines_end_in_seconds_in_bounded_memory(tmp_path):
    path = tmp_path / "same.log"
    path.write_bytes(b"epoch 1 loss 0.5\n" * 10**6)
    seconds, peak_mib, readable, verdict, lines, binary = measured(path)
    assert seconds < 5 and peak_mib < 150 and lines == 10**6 and verdict == "findings"  # stuck: not learning


def test_invalid_utf8_lines_are_read_around_and_counted(tmp_path):
    path = tmp_path / "mixed.log"
    good = b"".join(b"epoch %d loss %.3f \xff\xfe\xc3\x28\n" % (i, 2 / i) for i in range(1, 41))  # stray bad bytes
    path.write_bytes(good + b"\x80\x81\x82" * 100 + b"\n")  # and one line of nothing but
    rep = diagnose_source(str(path))
    assert rep.stats.series_lengths == {"train_loss": 40} and rep.stats.skipped_binary_lines == 1
    assert any("undecodable" in note for note in rep.stats.notes)


# ------------------------------------------------------------------ speed: per-line regex work cached by line shape


def test_line_shape_cache_reads_every_corpus_line_as_the_regexes_do(monkeypatch):
    """The text reader caches _PREFIX's end, _PAIR's spans and the loss groups by the line's shape (digits mapped to
    0). That is exact only while those patterns treat all digits alike: no digit literal in them; and every line of
    the corpus must give the same prefix, pairs and groups as the uncached regexes."""
    import re

    from advisor.diagnose import readers

    for pattern in (readers._PREFIX, readers._PAIR, readers._BRACKET_KEY, readers._LOSS_GROUP):
        # A digit outside a quantifier's braces or an escape (\d) would tell digits apart.
        assert not re.search(r"(?<![\\{,])(?<!\{\d)[0-9](?![0-9]*[,}])", pattern.pattern), pattern.pattern
    checked = 0
    for path in sorted(LOGS.iterdir()):
        for text in path.read_text(errors="replace").splitlines():
            for variant in (text, text.replace("0", "7"), text.replace("1", "9")):  # same shape, other digits
                uncached = readers._PREFIX.match(variant)
                body = variant[uncached.end():] if uncached else variant.strip()
                assert readers.strip_prefix(variant) == body, variant
                assert readers._pairs(body) == readers._PAIR.findall(body), variant
                assert readers._spans(body)[1] == readers._loss_groups(body), variant
                checked += 1
    assert checked > 10_000
    monkeypatch.setattr(readers, "SHAPE_CACHE_MAX", 2)  # a full cache is emptied, never grows past its bound
    for number in range(10):
        readers._pairs(f"loss{'x' * number} 1.0")
    assert len(readers._pair_spans) <= 2


def test_a_csv_log_whose_lines_end_in_carriage_returns_only_is_read(tmp_path):
    """Keras's CSVLogger on a file opened in text mode on Windows, copied byte for byte, can end its rows in "\\r\\r"
    (or a classic Mac editor in "\\r") with no "\\n" in the whole file: the carriage returns are its line breaks."""
    rows = ["epoch,acc,loss,val_acc,val_loss"] + [
        f"{e},{0.5 + 0.04 * e:.4f},{1.0 / (e + 1):.4f},{0.6 + 0.01 * min(e, 5):.4f},{0.5 + 0.05 * abs(e - 5):.4f}"
        for e in range(20)]
    for ending, name in ((b"\r\r", "train.log"), (b"\r", "history.csv"), (b"\r\r\n", "train2.log")):
        path = tmp_path / name
        path.write_bytes(ending.join(r.encode() for r in rows) + ending)
        rep = diagnose_source(str(path))
        assert rep.stats.series_lengths.get("val_loss") == 20, (ending, rep.stats)
        assert "overfitting" in {f.kind for f in rep.findings}, ending


def test_a_text_log_with_a_stretch_of_nul_bytes_is_read_around_it(tmp_path):
    """A console log whose writer was restarted while the file was open (nohup, a copied or truncated log) holds a
    block of NUL bytes where the old end was: the text around it is still a log, not a binary file."""
    lines = [b" %d: %.6f, %.6f avg loss, 0.001000 rate, 8.4 seconds, %d images\nLoaded: 0.00005 seconds\n"
             % (i, 5 / i, 5 / i, 64 * i) for i in range(1, 201)]
    path = tmp_path / "train.log"
    path.write_bytes(b"yolov3_training\n" + b"".join(lines[:3]) + b"\0" * 4000 + b"".join(lines[3:]))
    rep = diagnose_source(str(path))
    assert rep.readable and rep.stats.series_lengths.get("train_loss", 0) >= 190, rep.stats


@pytest.mark.parametrize("encoding, mark", [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"), ("utf-8", b"\xef\xbb\xbf")])
def test_a_log_with_a_byte_order_mark_is_read_as_text(tmp_path, encoding, mark):
    """PowerShell's `python train.py > train.log` writes UTF-16 with a byte-order mark; Notepad saves UTF-8 with one.
    Both are text logs: a console log (streamed), a CSV (a whole file) and a CSV in a run folder are read as text,
    with the same series and findings as their UTF-8 copies, never as binary. Lines long enough to cross a read
    block's boundary mid-character are read whole."""
    from advisor.diagnose import diagnose_folder

    console = [f"Epoch {e}/30 - loss: {1.0 / (e + 1):.4f} - val_loss: {0.5 + 0.05 * abs(e - 5):.4f} - lr: 0.001"
               for e in range(1, 31)] + ["Traceback (most recent call last):", "  File \"train.py\", line 9",
                                         "KeyError: 'image' " + "é" * 5000]
    rows = ["epoch,acc,loss,val_acc,val_loss"] + [
        f"{e},{0.5 + 0.04 * e:.4f},{1.0 / (e + 1):.4f},{0.6 + 0.01 * min(e, 5):.4f},{0.5 + 0.05 * abs(e - 5):.4f}"
        for e in range(20)]
    for name, lines in (("train.log", console), ("history.csv", rows)):
        plain, marked = tmp_path / f"plain-{name}", tmp_path / name
        plain.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
        marked.write_bytes(mark + ("\r\n".join(lines) + "\r\n").encode(encoding))
        want, got = diagnose_source(str(plain)), diagnose_source(str(marked))
        assert got.readable and got.stats.series_lengths == want.stats.series_lengths, (name, got.stats)
        assert got.stats.series_lengths.get("val_loss", 0) >= 20, (name, got.stats)
        assert [f.kind for f in got.findings] == [f.kind for f in want.findings], name
    assert "crash" in {f.kind for f in diagnose_source(str(tmp_path / "train.log")).findings}
    run = tmp_path / "run" / "version_0"
    run.mkdir(parents=True)
    (run / "metrics.csv").write_bytes(mark + ("\n".join(rows) + "\n").encode(encoding))
    reps = diagnose_folder(str(tmp_path / "run"))
    assert any(r.stats.series_lengths.get("val_loss") == 20 for r in reps), [r.stats for r in reps]
