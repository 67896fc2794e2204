"""What `advisor diagnose` says, read as a newcomer reads it (dx-review), on world-corpus files of spent batches:
sentences that must not contradict their own evidence, advice that must fit the run. Which findings are produced
is not judged here (bench/diagnose_world.py is)."""

from __future__ import annotations

from pathlib import Path

from advisor.diagnose import diagnose_source

WORLD = Path(__file__).resolve().parent / "corpus" / "world"


def _finding(name: str, kind: str):
    report = diagnose_source(str(WORLD / name))
    return next(f for f in report.findings if f.kind == kind)


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
