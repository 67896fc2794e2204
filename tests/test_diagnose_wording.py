"""What `advisor diagnose` says, read as a newcomer reads it (dx-review), on world-corpus files of spent batches:
sentences that must not contradict their own evidence, advice that must fit the run. Which findings are produced
is not judged here (bench/diagnose_world.py is)."""

from __future__ import annotations

from pathlib import Path

from advisor.diagnose import diagnose

WORLD = Path(__file__).resolve().parent / "corpus" / "world"


def _finding(name: str, kind: str):
    reports = diagnose([str(WORLD / name)]).reports
    return next(f for report in reports for f in report.findings if f.kind == kind)


def test_an_overfitting_validation_loss_that_rose_is_not_called_flat():
    # "Validation loss is flat (-606.9% over the second half)": a loss that rose 7x read as flat, and a sign the
    # reader must decode (negative = rose). Said as a rise, with the best it has not beaten.
    birds = _finding("gh-ultralytics-birds/results.csv", "overfitting").summary
    assert "flat" not in birds and "rose 606.9%" in birds and "its best is still 3e-05 at epoch 21" in birds
    car = _finding("gh-keras-carcnn/training.log", "overfitting").summary
    assert "rose 0.6%" in car and "its best is still 0.717 at epoch 42" in car


def test_a_slow_run_names_its_target_and_why_a_projection_shorter_than_the_run_is_still_slow():
    # "at that pace it needs ~36 epochs to reach 5.969. It converges slowly." after 40 epochs: 5.969 unexplained
    # (half the start) and 36 < 40 read as a contradiction; the rule called it slow for its straight-line fall.
    balloons = _finding("gh-yolov8-balloons/results.csv", "slow-convergence").summary
    assert "~36 more epochs to reach half its start (5.969)" in balloons
    assert "straight line" in balloons and "R^2 0.98" in balloons
    eurosat = _finding("gh-lightning-eurosat/metrics.csv", "slow-convergence").summary
    assert "~27 more epochs to reach half its start (1.153)" in eurosat and "straight line" not in eurosat


def test_an_unmoved_loss_at_chance_says_which_accuracy_and_which_way_the_loss_moved():
    # "The accuracy sits at chance (0.485, about 1/2) for all 34 evaluations and the loss has not moved (training
    # loss +0.1% over the run)": a training accuracy (an LLM's token accuracy) called evaluations and chance outright,
    # and "+0.1%" for a loss that fell 0.1%.
    phi3 = _finding("gh-hf-phi3-synthetic/trainer_state.json", "not-learning").summary
    assert "The training accuracy stays at 0.485 (about 1/2: chance for a 2-way classifier)" in phi3
    assert "at all 34 logged points" in phi3 and "training loss fell 0.1% over the run" in phi3
    sign = _finding("gh-wandb-mlnsasl-5ksovh3k", "not-learning").summary
    assert "The validation accuracy stays at 0.0631 (about 1/16: chance for a 16-way classifier)" in sign
    assert "at all 30 evaluations" in sign and "training loss fell 0.6%, validation loss moved 0.0%" in sign


def test_what_is_missing_for_overfitting_is_a_validation_loss_not_any_validation_series():
    # "val_map 3 points" in the header, then "the training loss has 15 point(s) and validation 0; needed: a validation
    # series of 4+ points for overfitting (none was read)"; and "val_acc 36 points" beside "not checked: a validation
    # series ... (none was read)": the check wants a validation LOSS, and the sentence must say so.
    detectron = diagnose([str(WORLD / "gh-detectron2-ghailen")]).reports[0]
    assert "the training loss has 15 point(s) and validation loss 0" in detectron.cannot_judge
    assert "a validation-loss series of 4+ points for overfitting (none was read)" in detectron.cannot_judge
    text = diagnose([str(WORLD / "gh-text-cifar10-net/training.log")]).reports[0]
    assert "not checked: a validation-loss series of 4+ points for overfitting (none was read)" in text.stats.notes


def test_a_loss_non_finite_from_its_first_value_did_not_become_non_finite():
    # "val_loss became nan at line 1151 (then train_loss)" with last_finite None: it never was finite. And the
    # series' own key (val_loss) where the other findings say "validation loss".
    reclor = _finding("gh-wandb-reclor-nanloss", "diverged").summary
    assert reclor.startswith("The validation loss was nan from its first value, at line 1151 (then the training loss)")
    pinn = _finding("gh-lightning-pinn14/metrics.csv", "diverged").summary
    assert pinn.startswith("The training loss became nan at step 218 (line 220), after 1.043:")


def test_the_perplexity_note_says_its_logarithm_is_read_as_the_loss():
    # "the log prints a train perplexity and no train loss: its log is read as the loss": "its log" reads as the
    # log file.
    notes = diagnose([str(WORLD / "gh-yolo-da-oom/finetune_da.log")]).reports[0].stats.notes
    assert ("the log prints a train perplexity and no train loss: its natural logarithm (the cross-entropy loss "
            "it comes from) is read as the loss") in notes


def test_an_oom_on_a_gpu_other_processes_fill_says_so_before_the_training_changes():
    # "Tried to allocate 128.00 MiB. GPU 0 has a total capacity of 23.69 GiB of which 11.31 MiB is free. Process
    # 574341 has 18.41 GiB memory in use. Including non-PyTorch memory, this process has 5.24 GiB": the advice began
    # with mixed precision for a run that held a fifth of the card.
    crowded = _finding("gh-yolo-da-oom/finetune_da.log", "oom").actions
    first = next(a for a in crowded if not a.startswith("The run survived"))
    assert first.startswith("Other processes hold 18.4 GiB of this 23.7 GiB GPU (this run: 5.2 GiB)")
    assert crowded[crowded.index(first) + 1].startswith("Then, in the training, enable mixed precision")
    # A message that does not say what this process holds is left as it was.
    alone = _finding("gh-wandb-nanogpt-oom/wandb/latest-run", "oom").actions
    assert alone[0].startswith("Enable mixed precision first") and not any("Other processes" in a for a in alone)


def test_a_slow_climb_says_where_the_loss_went_in_plain_numbers():
    # "climbs steadily from its best 0.0022 (smoothed, step 750 (line 75)) by 0.008007, 3.6x that best and 15x its
    # noise": nested brackets, seven digits, and no end point.
    t5 = _finding("gh-hf-t5-simplify/trainer_state.json", "diverged").summary
    assert t5.startswith("The training loss climbs steadily from its best, 0.0022 (smoothed) at step 750 (line 75), "
                         "to about 0.0102 by step 3330 (line 333), a rise of 0.008 (3.6x that best, 15x its noise): training is "
                         "diverging slowly.")


def test_an_exception_that_names_nccl_or_cudnn_gets_advice_for_it():
    # "RuntimeError: NCCL Error 2: unhandled system error" was told "the run stopped on a Python exception that is
    # not a memory or distributed failure"; "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR" (often a hidden OOM) was told
    # "This is not an out-of-memory error."
    nccl = _finding("gh-dual-d-nccl/train_all_weather.log", "crash")
    assert "from NCCL" in nccl.summary and nccl.actions[0].startswith("The exception comes from NCCL")
    assert not any("not a memory or distributed failure" in a for a in nccl.actions)
    cudnn = _finding("gh-text-supcon-cudnn/pipeline_20260124_231614.log", "crash")
    assert "This is not an out-of-memory error" not in cudnn.summary and "often hide one" in cudnn.summary
    assert "out of memory in disguise" in cudnn.actions[0]
    plain = _finding("gh-text-codeclone-crash/train.log", "crash")  # a KeyError: as before
    assert plain.summary.endswith("This is not an out-of-memory error.") and plain.actions[0].startswith("Read the")


def test_a_period_in_whole_steps_is_said_without_a_decimal_and_one_point_is_not_points(capsys):
    # "every ~50.0 steps"; and the header's "val_loss 1 points".
    periodic = _finding("gen-sw-06", "oscillation-periodic").summary
    assert "every ~50 steps," in periodic
    from advisor.cli import main

    main(["diagnose", str(WORLD / "gh-lightning-tb-mnist/lightning_logs/mnist_cnn/version_0")])
    out = capsys.readouterr().out
    assert "val_loss_step 1 point, " in out and "train_loss 5 points" in out and "1 points" not in out


def test_overfitting_beside_an_accuracy_still_at_its_best_says_so_at_any_confidence():
    # A bird classifier at 100% validation accuracy at every epoch but one: "overfitting (confidence: high)" with
    # nothing in the sentence about the accuracy ("val_acc_at_best: True" only in the evidence).
    birds = _finding("gh-ultralytics-birds/results.csv", "overfitting").summary
    assert birds.endswith("Validation accuracy is still at its best: so far only the loss shows it.")
    car = _finding("gh-keras-carcnn/training.log", "overfitting").summary  # accuracy past its best: nothing added
    assert "Validation accuracy" not in car


def test_jitter_kept_secondary_to_overfitting_claims_no_gap_the_evidence_does_not_show():
    # "secondary_because: with a clear train/validation gap the gap is what to fix first" beside an overfitting whose
    # train_val_gap is -0.00494 (validation below training: a bird classifier; its jitter is gone since a calm
    # validation accuracy withdraws validation jitter, so another run's jitter secondary to overfitting is read).
    jitter = _finding("gh-keras-moodmate/training_log.csv", "oscillation-jitter")
    because = jitter.evidence["secondary_because"]
    assert "clear train/validation gap" not in because and because.startswith("overfitting is what to fix first")


def test_a_wandb_run_folder_is_one_report_its_debug_logs_named_not_read():
    # A crashed wandb run printed the crash, then a second block for logs/debug.log (wandb's own log, whose config
    # line gave "lr 1 point"): "Nothing conclusive ... no training loss was read (lr 1)".
    folder = WORLD / "gh-wandb-epilepsy-crash/run-20250531_235508-x944f4eo"
    reports = diagnose([str(folder)]).reports
    assert len(reports) == 1 and [f.kind for f in reports[0].findings] == ["crash"]
    skipped = "\n".join(reports[0].stats.notes)
    assert "wandb's own log" in skipped and "logs/debug.log" in skipped and "logs/debug-internal.log" in skipped


def test_an_hf_output_dir_with_its_events_in_logs_is_one_run():
    # trainer_state.json and logs/events.out.tfevents.* (TrainingArguments(logging_dir="logs")) were two reports of
    # the same run, each with its own verdict; as with runs/<name>, one run, the fuller source read.
    reports = diagnose([str(WORLD / "gh-hf-hatespeech")]).reports
    assert len(reports) == 1 and reports[0].verdict == "healthy"
    assert any("the same run's metrics are read from" in note and "trainer_state.json" in note
               for note in reports[0].stats.notes)


def test_a_skipped_file_note_says_skipped_once():
    # "note: skipped: 1 skipped, not a log file: 0/meta.yaml"
    notes = diagnose([str(WORLD.parent.parent / "fixtures" / "diagnose_files" / "mlruns")]).reports[0].stats.notes
    assert "1 skipped, not a log file: 0/meta.yaml" in notes and not any("skipped: " in n for n in notes)


def test_every_unmoved_loss_says_which_way_it_moved_in_words():
    # "(training loss -1.1%, validation loss -1.3%)" for losses that fell, and "(+0.2%)" for one that fell too:
    # two sign conventions in one report; words say it.
    btc = _finding("gh-csv-btc-lstm/lstm_BTC_1d_metrics.csv", "not-learning").summary
    assert "(training loss fell 1.1%, validation loss fell 1.3%)" in btc
    ghost = _finding("gh-yolo-ghost-coco8/results.csv", "not-learning").summary
    assert "has not moved since the run's start (it fell 0.2%)" in ghost


def test_overfitting_read_from_a_quality_without_a_validation_loss_checkpoints_on_that_quality():
    # "...: overfitting (the log prints no validation loss)." then "Stop early at the best validation step
    # (checkpoint on val loss)".
    t5 = _finding("gh-text-t5-finetune/train.log", "overfitting")
    assert "the log prints no validation loss" in t5.summary
    assert t5.actions[-1] == "Stop early at the best validation step (checkpoint on the validation score)."
    wheat = _finding("gh-yolov8-wheatweed/results.csv", "overfitting")  # a validation loss printed: as before
    assert wheat.actions[-1] == "Stop early at the best validation step (checkpoint on val loss)."
