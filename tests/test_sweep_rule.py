"""Step 4's rule (advisor.method.sweep) against hand-made runs and a stub session: milliseconds, no processes.

Each test pins one sentence of the rule: paired seeds scored on their last two checkpoints, the paired
t-interval (k - 1 degrees of freedom) or the practical margin for a tie, the smallest of the tied within the
throughput margin of the fastest, one step past a winning end, and what can never lead or tie.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import DIVERGED_TRIAL, FLAT_RUN, HEALTHY_RUN, MIB, StubRunner, settings, swept_session

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.session import Session, validate_setup

from advisor.ledger import TrialRecord
from advisor.method.sweep import (BEST_BY_MARGIN, EQUALS_BIGGER_FASTER, NONE_LEARNED, NO_RUNS, SweepPolicy, decide_sweep, run_score,
                                  t95)
from helpers import sweep_run


def grid(values: dict, speeds: dict | None = None, **kw) -> list[TrialRecord]:
    """values: batch -> per-seed scores; speeds: batch -> samples/s (default: 100 x batch, bigger is faster)."""
    speeds = speeds or {b: 100.0 * b for b in values}
    return [sweep_run(b, s, v, step_seconds=b / speeds[b], **kw) for b, per_seed in values.items()
            for s, v in enumerate(per_seed)]


def side_by_side(speeds: dict, rounds: int = 6) -> dict:
    """Timing rounds run side by side: batch -> {round: samples/s}, ``rounds`` of each (six all over the bar against
    another show a step: 6 of 6)."""
    return {b: {r: float(v) for r in range(rounds)} for b, v in speeds.items()}


def test_the_t_quantile_is_students_not_the_normals():
    assert t95(1) == pytest.approx(12.706) and t95(2) == pytest.approx(4.303)
    assert t95(60) == pytest.approx(2.000, abs=0.002) and t95(1000) == pytest.approx(1.962, abs=0.001)
    with pytest.raises(ValueError):
        t95(0)


def test_a_clear_leader_wins_alone_and_every_number_is_recorded():
    verdict = decide_sweep(grid({16: [0.90, 0.91, 0.90], 32: [0.95, 0.96, 0.95], 64: [0.80, 0.82, 0.81]}), 10)
    assert verdict.chosen == 32 and verdict.rule == BEST_BY_MARGIN and verdict.tied == [32]
    assert [c.by for c in verdict.comparisons] == ["apart", "apart"]
    summary = verdict.summary()
    assert summary["rule"] == BEST_BY_MARGIN and summary["seeds"] == 3 and summary["margin"] == 0.01
    scored = {c["per_device"]: c for c in summary["candidates_scored"]}
    assert scored[32]["scores"] == [0.95, 0.96, 0.95] and scored[32]["seeds"] == [0, 1, 2]
    gap16 = next(c for c in summary["comparisons"] if c["per_device"] == 16)
    assert gap16["mean_gap"] == pytest.approx(0.05) and len(gap16["interval"]) == 2 and gap16["tied"] is False
    assert "32 per device is best" in verdict.reason and "2 d.f." in verdict.reason


def test_runs_are_paired_by_seed():
    # Seeds move both candidates alike (0.80 .. 0.95); 32 is 0.02 better at every seed. Paired, that is a real
    # difference; compared unpaired (each candidate's own spread) it would drown in the seeds' spread.
    verdict = decide_sweep(grid({16: [0.80, 0.95, 0.88], 32: [0.82, 0.97, 0.90]}), 10,
                           policy=SweepPolicy(accuracy_margin=0.005))
    (comparison,) = verdict.comparisons
    assert comparison.by == "apart" and comparison.half_width == pytest.approx(0.0, abs=1e-9)
    assert verdict.chosen == 32 and verdict.rule == BEST_BY_MARGIN
    # The same scores with 32's seeds shuffled: the per-seed differences now swing, and the interval holds 0.
    shuffled = decide_sweep(grid({16: [0.80, 0.95, 0.88], 32: [0.97, 0.82, 0.90]}), 10,
                            policy=SweepPolicy(accuracy_margin=0.005))
    assert shuffled.comparisons[0].by == "inconclusive" and not shuffled.comparisons[0].tied


def test_a_two_seed_gap_is_judged_with_t_on_one_degree_of_freedom_not_z():
    # Gaps 0.03 and 0.05: mean 0.04, standard error 0.01. z = 1.96 would call it apart (±0.0196); t(1) = 12.7 does
    # not (±0.127): two seeds cannot separate them. Not separated is not equal: over the margin, it is inconclusive,
    # the pair asks for its next paired seed, and until then the better-scoring one stands.
    verdict = decide_sweep(grid({16: [0.90, 0.90], 32: [0.87, 0.85]}), 10, policy=SweepPolicy(seeds=2))
    (comparison,) = verdict.comparisons
    assert comparison.seeds == 2 and comparison.by == "inconclusive" and not comparison.tied
    assert comparison.half_width == pytest.approx(12.706 * 0.01, rel=1e-3)
    assert verdict.tied == [16] and verdict.chosen == 16 and verdict.extra_seeds == [(16, 2), (32, 2)]


def test_one_seed_has_no_interval_and_only_the_margin_ties():
    near = decide_sweep(grid({16: [0.900], 32: [0.895]}), 10, policy=SweepPolicy(seeds=1))
    assert near.comparisons[0].half_width is None and near.comparisons[0].by == "margin" and near.tied == [16, 32]
    far = decide_sweep(grid({16: [0.90], 32: [0.87]}), 10, policy=SweepPolicy(seeds=1))
    assert far.comparisons[0].by == "apart" and far.chosen == 16


def test_the_margin_is_absolute_for_accuracy_and_relative_for_a_loss():
    losses = [sweep_run(b, s, v, metric=False) for b, vals in {16: [0.500, 0.501, 0.499], 32: [0.505, 0.506, 0.504]}.items()
              for s, v in enumerate(vals)]
    verdict = decide_sweep(losses)
    assert "loss" in verdict.metric and verdict.chosen is not None
    assert verdict.margin == pytest.approx(0.02 * 0.5, rel=1e-3)  # 2% of the leader's loss
    assert verdict.comparisons[0].by == "margin" and verdict.tied == [16, 32]


def test_among_the_tied_the_smallest_within_the_throughput_margin_of_the_fastest_wins():
    tied = {16: [0.95, 0.95, 0.95], 32: [0.95, 0.951, 0.949], 64: [0.951, 0.95, 0.95]}
    faster = decide_sweep(grid(tied), 10, timing=side_by_side({16: 1000.0, 32: 1500.0, 64: 1600.0}))
    assert faster.rule == EQUALS_BIGGER_FASTER and faster.tied == [16, 32, 64] and faster.chosen == 32  # 1500 >= 0.9 x 1600
    assert ("1.500x (6 of 6 over the 1.10x bar: shown more than 10% faster); 64 over 32: 1.067x, 1.067x, 1.067x, "
            "1.067x, 1.067x, 1.067x (0 of 6 over the 1.10x bar: not shown more than 10% faster, nor can it be in 12 "
            "rounds)") in faster.reason
    level = decide_sweep(grid(tied), 10, timing=side_by_side({16: 1000.0, 32: 1050.0, 64: 1080.0}))
    assert level.chosen == 16  # within 10% of each other: the same speed, and the smaller batch wins


def test_a_bigger_tied_batch_must_be_faster_at_every_round_in_counts_not_a_mean():
    """The per-round speed ratio (a round's runs shared the machine's load), counted over the bar: not a t-interval
    of the ratios (t = 4.3 at three), which keeps the smaller batch unless the mean ratio is near 1.6, and not a mean
    or a median, which move up on noise where speeds are level (and a tie on the end score can hide the samples a
    bigger batch spends on the way). The sweep runs' own seeds, made at different times, show no step by themselves:
    three all over the bar happen 1 in 8 by chance, and the session times every pair of equals side by side."""
    def runs(batch, speeds):
        return [sweep_run(batch, seed, 0.9, step_seconds=batch / speed) for seed, speed in enumerate(speeds)]

    def twice(speeds):  # six rounds: the measured three, twice
        return dict(enumerate(speeds * 2))

    # Regression (bench, a GRU): 64 per device measured 1.84x, 1.28x and 1.29x of 32; the t-interval kept 32.
    gru_32, gru_64 = [8730, 8828, 8920], [16055, 11296, 11486]
    gru = decide_sweep(runs(32, gru_32) + runs(64, gru_64), 10, timing={32: twice(gru_32), 64: twice(gru_64)})
    assert gru.tied == [32, 64] and gru.chosen == 64
    assert "64 over 32: 1.839x, 1.280x, 1.288x, 1.839x, 1.280x, 1.288x (6 of 6 over the 1.10x bar: shown" in gru.reason
    scored = {c["per_device"]: c for c in gru.summary()["candidates_scored"]}
    assert scored[64]["samples_per_s_by_seed"] == [16055.0, 11296.0, 11486.0]  # the evidence, in the recipe
    assert decide_sweep(runs(32, gru_32) + runs(64, gru_64), 10).chosen == 32  # its three seeds alone show nothing
    # Regression (bench, digits-cnn): 32 per device measured 1.106x, 1.110x and 0.904x of 8 (level speeds, load);
    # a median took 32, which then needed 1.9x 8's time to 0.90 accuracy.
    digits_8, digits_32 = [586, 628, 720], [648, 697, 651]
    digits = decide_sweep(runs(8, digits_8) + runs(32, digits_32), 10, timing={8: twice(digits_8), 32: twice(digits_32)})
    assert digits.tied == [8, 32] and digits.chosen == 8
    # Regression (CI, two plans of digits-cnn): +14% on average, by round 1.15x, 1.00x, 1.27x: a mean took 32.
    noisy = decide_sweep(runs(16, [330] * 3) + runs(32, [380, 330, 420]), 10,
                         timing={16: twice([330] * 3), 32: twice([380, 330, 420])})
    assert noisy.chosen == 16
    steady = decide_sweep(runs(16, [330] * 3) + runs(32, [420] * 3), 10,
                          timing={16: twice([330, 340, 320]), 32: twice([420, 430, 410])})  # +27% at every round
    assert steady.chosen == 32


def test_the_equals_are_timed_side_by_side_and_a_batch_the_range_grew_to_with_its_neighbour(tmp_path):
    """Speeds compare only runs that shared the machine's load, so the tie-break reads timing rounds run side by
    side (k rounds, interleaved, the order reversed every other round), never the sweep's long runs. A candidate the
    range grew to runs later, in its own block: when it ties, it is timed with its neighbour among the equals in
    new rounds (a pair's ratio reads only rounds both ran in; the pairs already timed together keep theirs).
    Regression (the committed digits-cnn recipe): 8 per device, swept last, ran at 430-476 samples/s against 16's
    540-579, so 16 was 'faster at every seed'; an interleaved grid put 16 at 1.04x of 8. And (issue 36) two --fresh
    plans: one read 16 vs 32 from its sweep runs (245 vs 336 samples/s) and took 32, the other timed them and
    took 8."""
    from helpers import settings, StubRunner

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.errors import TrialError
    from advisor.events import Decision
    from advisor.history import HistoryRecorder, read_history, run_context
    from advisor.session import Session, validate_setup

    class DriftingMachine(StubRunner):
        """Every batch runs at the same samples/s, but the machine is 30% slower from the 10th training run on."""

        def train(self, phase, per_device, steps, lr, *args, **kw):
            record = super().train(phase, per_device, steps, lr, *args, **kw)
            slow = 1.3 if len(self.runs) > 9 else 1.0
            record.step_seconds = record.global_batch / 1000.0 * slow
            return record

    class TimingFailsAt16(DriftingMachine):
        def train(self, phase, per_device, *args, **kw):
            if phase == "timing" and per_device == 16:
                raise TrialError("The timing at 16 per device ended without a result.")
            return super().train(phase, per_device, *args, **kw)

    def sweep(extensions, machine=DriftingMachine):
        s = settings(nproc=2, sweep_steps=40, sweep_extensions=extensions, trial_steps=8,
                     base_batch=1000)  # yours past the cap
        runner = machine(saturate=None, val={8: 0.95, 16: 0.95, 32: 0.95, 64: 0.80}.__getitem__)
        setup = validate_setup(s, load_adapter("ddp"), HostDevices("cpu"))
        recorder = HistoryRecorder(tmp_path / f"{machine.__name__}{extensions}.jsonl", run_context(s, setup),
                                   lambda: runner.model_info)
        runner.events = []
        session = Session(load_adapter("ddp"), s, setup, runner.events.append, runner=runner)
        session.ceiling()
        outcome = session.sweep(32)
        for record in runner.ledger:  # what the recorder does with each run's TrialFinished (the stub sends none)
            recorder.record(record)
        return runner, outcome, read_history(recorder.path).rows

    # 16 / 32 / 64 in one block (9 runs), 16 and 32 equal, 64 worse: 16 and 32 are timed side by side (6 runs),
    # 16 leads with 64 worse behind it, so the range grows to 8, whose three seeds run on the slower machine. All
    # four speeds are equal; read from the sweep runs, 16 would be 1.3x faster than 8 at every seed.
    runner, outcome, history = sweep(extensions=1)
    assert outcome.extended == [8] and outcome.verdict.tied == [8, 16, 32]
    first = [(r["phase"], r["per_device"], r["seed"]) for r in runner.runs[9:15]]
    assert first == [("timing", 16, 0), ("timing", 32, 0), ("timing", 32, 1), ("timing", 16, 1),
                     ("timing", 16, 2), ("timing", 32, 2)]
    timing = runner.runs[18:]
    # Each timing run lasts 2 s at its batch's swept speed (8's ran on the slower machine): more than the trial's 8.
    steps = {8: 97, 16: 63}  # ceil(2 s x samples/s / global batch): 769.2/16, 1000/32
    assert [(r["per_device"], r["seed"], r["steps"]) for r in timing] == [
        (b, seed, steps[b]) for b, seed in ((8, 0), (16, 0), (16, 1), (8, 1), (8, 2), (16, 2))]
    assert outcome.chosen == 8  # equal speeds side by side: the smallest of the equals
    assert [r.per_device for r in outcome.rows].count(8) == 3  # timing runs are not a candidate's runs
    assert "by a sign test on the timing rounds run side by side" in outcome.reason
    assert "16 over 8: 1.300x, 1.300x, 1.300x (3 of 3 over the 1.10x bar" not in outcome.reason
    scored = {c["per_device"]: c for c in outcome.verdict.summary()["candidates_scored"]}
    assert scored[16]["samples_per_s_by_seed"] == [1000.0] * 3 and scored[8]["samples_per_s_by_seed"] == [769.2] * 3
    assert scored[8]["samples_per_s_by_timing_round"] == [769.2] * 3  # rounds 4-6, with 16
    assert scored[16]["samples_per_s_by_timing_round"] == [769.2] * 6  # rounds 1-3 with 32, 4-6 with 8
    assert all(r.phase == "timing" and "not a candidate's run: timing round" in r.note for r in runner.ledger[18:])
    decisions = [e for e in runner.events if isinstance(e, Decision) and e.step == 4]
    assert "timing them side by side (3 round(s), interleaved, each run to last 2 s: steps 8: 97, 16: 63)" in \
        decisions[-2].message
    assert [d.verdict for d in decisions][-2:] == [False, True]  # the command line prints the first, not the last
    # Speed only: the history keeps the candidates' runs, never a timing run (a later plan would reuse it).
    assert [r["kind"] for r in history].count("sweep") == 12 and "timing" not in {r["kind"] for r in history}
    # A timing run that fails leaves its batch with no paired speed: it cannot win, and the walk stops there.
    _, failed, _ = sweep(extensions=1, machine=TimingFailsAt16)
    assert failed.chosen == 8 and "16 over 8: none measured" in failed.reason
    # One block: the equals are timed side by side all the same (the sweep's runs are too long to pair speeds).
    runner, outcome, _ = sweep(extensions=0)
    assert outcome.extended == [] and len(runner.runs) == 15 and "by a sign test on the timing rounds run side by side" in outcome.reason


def test_tied_candidates_reused_from_the_history_are_timed_again_side_by_side(tmp_path):
    """A run reused from the history was measured on another day: its samples/s is a stretch of the machine's load of
    its own, so when reused candidates tie, they are timed again side by side before the tie-break reads a speed.
    Here the first plan measured each step up 1.5x as fast (a load that came and went), and today every batch runs at
    the same samples/s; read from the history, 16 would still win."""
    from helpers import settings, StubRunner

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.history import HistoryRecorder, Known, read_history, run_context
    from advisor.session import Session, validate_setup

    class Machine(StubRunner):
        def __init__(self, speed, **kw):
            super().__init__(**kw)
            self.speed = speed  # per_device -> samples/s on this day

        def train(self, phase, per_device, steps, lr, *args, **kw):
            record = super().train(phase, per_device, steps, lr, *args, **kw)
            record.step_seconds = record.global_batch / self.speed[per_device]
            record.warmup_steps = kw.get("warmup_steps", args[0] if args else 0)  # a history row matches on it
            return record

    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, trial_steps=8, base_batch=1000)  # yours past the cap
    setup = validate_setup(s, load_adapter("ddp"), HostDevices("cpu"))
    path = tmp_path / "history.jsonl"

    def sweep(runner, known=None):
        recorder = HistoryRecorder(path, run_context(s, setup), lambda: runner.model_info)
        session = Session(load_adapter("ddp"), s, setup, runner=runner, known=known)
        session.ceiling()
        outcome = session.sweep(8)
        for record in runner.ledger:
            recorder.record(record)
        return outcome

    tied = {4: 0.95, 8: 0.95, 16: 0.95}.__getitem__
    first = sweep(Machine({4: 1000.0, 8: 1500.0, 16: 2250.0}, saturate=None, val=tied))
    assert first.chosen == 16  # one block, each step up 1.5x as fast at every seed: a fair win that day
    context = run_context(s, setup)
    known = Known.select(read_history(path).rows, context.workload, context.device, "ddp")
    today = Machine({4: 1000.0, 8: 1000.0, 16: 1000.0}, saturate=None, val=tied)
    second = sweep(today, known)
    assert all("reused from the history" in r.note for r in second.rows)  # no candidate's run ran again
    timing = [r for r in today.runs if r["phase"] == "timing"]
    assert sorted({r["per_device"] for r in timing}) == [4, 8, 16] and len(timing) == 9
    assert second.chosen == 4  # equal speeds side by side: the smallest of the tied
    assert "timing rounds run side by side" in second.reason


def test_the_pick_walks_up_the_tied_one_step_at_a_time_and_stops_at_the_first_that_does_not_pay():
    """A bigger tied batch is compared with the pick so far, and the walk stops at the first that was not faster:
    throughput saturates, so one past a step that bought no 10% is a jump on noise. Regression (a digits-cnn plan's
    timing rounds): 16 per device at 1.08x, 1.09x and 1.34x of 8, 32 at 1.17x, 1.18x and 1.46x; compared with 8
    directly, 32 won, 4x from the smallest."""
    def runs(batch, speeds):
        return [sweep_run(batch, seed, 0.95, step_seconds=batch / speed) for seed, speed in enumerate(speeds)]

    eight, sixteen, thirtytwo = [500, 505, 534], [539, 552, 717], [587, 594, 777]
    digits = decide_sweep(runs(8, eight) + runs(16, sixteen) + runs(32, thirtytwo), 10)
    assert digits.tied == [8, 16, 32] and digits.chosen == 8
    assert "16 over 8: 1.078x, 1.093x, 1.343x (1 of 3 over the 1.10x bar: not shown more than 10% faster yet)" \
        in digits.reason
    assert "Pick: 8 per device, the smallest of the equals; no bigger one was shown more than 10% faster" in digits.reason
    # Each step paying at six paired seeds, the walk goes on: 16 at 1.2x of 8, 32 at 1.2x of 16.
    paying = decide_sweep(runs(8, [500] * 6) + runs(16, [600] * 6) + runs(32, [720] * 6), 10)
    assert paying.chosen == 32
    # The first step pays, the second does not: 16.
    assert decide_sweep(runs(8, [500] * 6) + runs(16, [600] * 6) + runs(32, [630] * 6), 10).chosen == 16


def test_timing_rounds_decide_only_pairs_timed_together():
    from advisor.method.sweep import needs_timing

    def runs(batch, speeds):
        return [sweep_run(batch, seed, 0.9, step_seconds=batch / speed) for seed, speed in enumerate(speeds)]

    rows = runs(16, [540, 573, 579]) + runs(8, [474, 476, 430])  # 8 swept later: 16 looks 1.14x+ at every seed
    assert decide_sweep(rows, 10).chosen == 8  # the pure rule with no timing rounds: three seeds show no step
    assert needs_timing(decide_sweep(rows, 10)) == [8, 16]  # the session never lets that stand: equals are timed
    level = {8: {0: 700.0, 1: 690.0, 2: 710.0}, 16: {0: 720.0, 1: 760.0, 2: 800.0}}  # 1.03x, 1.10x, 1.13x
    timed = decide_sweep(rows, 10, timing=level)
    # 2 of 3 rounds over the bar settles nothing: the pair is timed again (the sign test's next look), and six
    # more level rounds (2 of 9 over) leave 16 no way to be shown 10% faster: 8 stands, and nothing more is timed.
    assert timed.chosen == 8 and needs_timing(timed) == [8, 16] and timed.walk[0].undecided
    more = {b: {**speeds, **{r: 700.0 for r in range(3, 9)}} for b, speeds in level.items()}
    settled = decide_sweep(rows, 10, timing=more)
    assert settled.chosen == 8 and needs_timing(settled) == [] and settled.walk[0].settled
    faster = {8: more[8], 16: {r: 1.2 * v for r, v in more[8].items()}}  # 9 of 9 over the bar
    assert decide_sweep(rows, 10, timing=faster).chosen == 16
    # Once timed side by side, only those rounds pair: a side with none (its timing failed) has no evidence.
    assert decide_sweep(rows, 10, timing={8: level[8], 16: {}}).chosen == 8


def test_the_score_is_the_mean_of_the_last_two_checkpoints():
    record = sweep_run(16, 0, 0.0, evals=[{"val_metric": 0.5}, {"val_metric": 0.7}, {"val_metric": 0.9},
                                    {"val_metric": 0.8}])
    assert run_score(record, by_loss=False) == pytest.approx(0.85)
    # No validation at all (a script through the door): the mean of its last quarter of training losses.
    bare = TrialRecord("sweep", 16, 1, 1, 16, "ok", 1.0, losses=[1.0] * 12 + [0.5, 0.3, 0.5, 0.3])
    assert run_score(bare, by_loss=True) == pytest.approx(0.4)


def test_the_reason_says_what_each_score_averaged_one_checkpoint_two_or_a_training_tail():
    # A script's runs validate once, at their end (advisor.shim reports one checkpoint): a newcomer's plan said
    # "mean of each run's last two checkpoints" over runs that each had one.
    once = [sweep_run(b, 0, v, evals=[{"step": 10, "val_metric": v}]) for b, v in ((16, 0.84), (32, 0.75))]
    reason = decide_sweep(once, 10).reason
    assert "last two checkpoints" not in reason and "each run's one validation checkpoint" in reason
    twice = decide_sweep(grid({16: [0.84], 32: [0.75]}), 10).reason
    assert "mean of each run's last two checkpoints" in twice
    mixed = decide_sweep(once[:1] + grid({32: [0.75]}), 10).reason
    assert "last two checkpoints (the one checkpoint of a run that validated once)" in mixed
    # No validation at all: the metric already says "mean of each run's last quarter"; no checkpoints are named.
    bare = [TrialRecord("sweep", b, 1, 1, b, "ok", 1.0, seed=0, step_seconds=0.01, losses=[1.0] * 12 + [t] * 4)
            for b, t in ((16, 0.3), (32, 0.6))]
    reason = decide_sweep(bare).reason
    assert "last quarter" in reason and "checkpoint" not in reason
    assert "1-1 paired" not in decide_sweep(once, 10).reason  # one seed each under a 3-seed policy: "1", not "1-1"


def test_a_run_without_validation_is_ranked_by_its_training_tail_not_one_steps_loss():
    def bare(batch, seed, tail):
        return TrialRecord("sweep", batch, 1, 1, batch, "ok", 1.0, seed=seed, step_seconds=0.01,
                           losses=[1.0] * 12 + tail, final_loss=tail[-1])

    # 16's last step is lower, but both tails average 0.40: a tie, not "16 is best" on one mini-batch's loss.
    rows = [bare(16, s, [0.50, 0.30, 0.50, 0.30]) for s in range(3)] + \
           [bare(32, s, [0.30, 0.50, 0.30, 0.50]) for s in range(3)]
    verdict = decide_sweep(rows)
    assert verdict.tied == [16, 32] and "training loss" in verdict.metric


def test_a_candidate_unstable_in_any_seed_never_leads_or_ties_and_is_named():
    """Regression (issue 24, `make run` on digits-cnn): 64 per device diverged to chance in one seed (no NaN: its
    loss gave back its decrease) and learned in the others; its mean tied, and the old tie rule picked it."""
    rows = grid({16: [0.976, 0.975, 0.977], 32: [0.972, 0.973, 0.971]})
    rows += [sweep_run(64, 0, 0.99), sweep_run(64, 1, 0.106, losses=DIVERGED_TRIAL)]
    verdict = decide_sweep(rows, 10)
    assert verdict.chosen in (16, 32) and 64 not in verdict.tied
    unstable = next(c for c in verdict.candidates if c.per_device == 64)
    assert unstable.status == "unstable" and "seed 1" in unstable.why
    assert "Out of the comparison: 64 per device was unstable at seed 1" in verdict.reason
    nan = grid({16: [0.9, 0.9, 0.9]}) + [sweep_run(32, 0, 0.99, losses=[2.0, 1.0, math.nan] + [1.0] * 10)]
    assert decide_sweep(nan, 10).chosen == 16


def test_out_of_memory_and_never_learned_candidates_are_out_and_all_out_is_a_failure():
    rows = grid({16: [0.9, 0.9, 0.9]}) + [sweep_run(32, 0, 0.0, status="oom")]
    verdict = decide_sweep(rows, 10)
    assert verdict.chosen == 16 and "32 per device ran out of memory" in verdict.reason
    at_chance = grid({16: [0.11, 0.10, 0.12], 32: [0.10, 0.11, 0.10]})
    failed = decide_sweep(at_chance, 10)
    assert failed.failed and failed.rule == NONE_LEARNED and failed.chosen is None
    assert "stayed near chance" in failed.reason and "Check that the base LR trains" in failed.reason
    flat = grid({16: [0.5] * 3}, losses=FLAT_RUN)
    assert decide_sweep(flat, None).rule == NONE_LEARNED  # no classes known: the flat loss says it
    diverged = grid({16: [0.9] * 3, 32: [0.9] * 3}, losses=DIVERGED_TRIAL)
    assert decide_sweep(diverged, 10).rule == NONE_LEARNED
    assert decide_sweep([], 10).rule == NO_RUNS


def test_a_winning_end_asks_for_one_more_past_it_within_the_cap():
    smaller = grid({8: [0.95] * 3, 16: [0.90] * 3, 32: [0.85] * 3})
    assert decide_sweep(smaller, 10, cap=64, extensions_left=1).extend_to == 4
    assert decide_sweep(smaller, 10, cap=64, extensions_left=0).extend_to is None
    bigger = grid({8: [0.85] * 3, 16: [0.90] * 3, 32: [0.95] * 3})
    assert decide_sweep(bigger, 10, cap=64, extensions_left=1).extend_to == 64
    # Double passes the cap: the step up stops at it (the GRU bench: 128 won, 256 was past the cap of 150, and
    # 150 was never measured); at the cap itself there is nothing past it to sweep.
    assert decide_sweep(bigger, 10, cap=48, extensions_left=1).extend_to == 48
    assert decide_sweep(bigger, 10, cap=32, extensions_left=1).extend_to is None
    capped = decide_sweep(bigger, 10, cap=32, extensions_left=1)
    assert capped.unexplored == 64 and capped.end == "past-cap"
    middle = grid({8: [0.85] * 3, 16: [0.95] * 3, 32: [0.90] * 3})
    assert decide_sweep(middle, 10, cap=64, extensions_left=1).extend_to is None


def test_the_range_grows_only_where_the_sweep_points():
    """Regression (bench): a winner that only tied, the smallest by default, was walked past, tied again and won
    again by the same default: on flat scores every walk down ended a step smaller (a GRU at 32 per device, half its
    grid's fastest). The range grows past an end when the winner leads with a worse or failed candidate behind it,
    or, at the top, when it won the tie on speed."""
    level = {b: 100.0 * 16 for b in (8, 16, 32)}  # the same samples/s at every batch: the smallest wins the tie
    flat = decide_sweep(grid({8: [0.95] * 3, 16: [0.95] * 3, 32: [0.95] * 3}, level), 10, cap=64, extensions_left=1)
    assert flat.chosen == 8 and flat.extend_to is None
    assert flat.unexplored == 4 and flat.end == "no-trend" and flat.summary()["not_compared_because"] == "no-trend"
    assert "It is the smallest swept, but nothing points past it (no other candidate scored worse or failed), so 4 " \
           "per device was not compared." in flat.reason
    # 8 ties with the leader, 16, and wins on the default: a yet smaller batch is not where the evidence points.
    tied_only = decide_sweep(grid({8: [0.95, 0.94, 0.95], 16: [0.95, 0.95, 0.96], 32: [0.80] * 3}, level), 10,
                             cap=64, extensions_left=1)
    assert tied_only.leader == 16 and tied_only.chosen == 8 and tied_only.extend_to is None
    assert "(it ties with 16, which leads)" in tied_only.reason
    # The smallest leads with a worse candidate behind it: the trend may go on.
    trend = decide_sweep(grid({8: [0.95] * 3, 16: [0.95] * 3, 32: [0.80] * 3}, level), 10, cap=64, extensions_left=1)
    assert trend.chosen == 8 and trend.extend_to == 4
    # ... or a failed one (unstable at its scaled-up LR: bigger went wrong).
    failed = grid({8: [0.95] * 3, 16: [0.95] * 3}, level) + [sweep_run(32, 0, 0.1, losses=DIVERGED_TRIAL)]
    assert decide_sweep(failed, 10, cap=64, extensions_left=1).extend_to == 4
    # At the top, a tie won on speed points up (more batch may be faster still).
    faster = decide_sweep(grid({8: [0.95] * 3, 16: [0.95] * 3, 32: [0.95] * 3}), 10, cap=64, extensions_left=1,
                          timing=side_by_side({8: 800.0, 16: 1600.0, 32: 3200.0}))
    assert faster.chosen == 32 and faster.extend_to == 64


# -- the rule in a session (stub runner) ----------------------------------------------------------------------
def test_every_candidate_runs_the_same_paired_seeds_at_equal_samples_and_the_recipe_records_the_rule():
    from advisor.method import lr_for, warmup_for
    from advisor.report import build_recipe, json_summary

    session, runner, outcome = swept_session({8: 0.80, 16: 0.95, 32: 0.90}.__getitem__, centre=16, extensions=0)
    runs = [r for r in runner.runs if r["phase"] == "sweep"]
    # Seed by seed across the candidates: load on a shared machine falls on each alike.
    assert [(r["per_device"], r["seed"]) for r in runs] == [(b, s) for s in range(3) for b in (8, 16, 32)]
    assert {r["per_device"]: r["steps"] for r in runs} == {8: 80, 16: 40, 32: 20}  # 1280 samples each
    planned = {b: warmup_for(session.info, lr_for(session.info, b * 2)).steps for b in (8, 16, 32)}
    assert all(r["warmup_steps"] == planned[r["per_device"]] for r in runs)
    assert outcome.verdict.leader == outcome.chosen == 16 and outcome.verdict.rule == BEST_BY_MARGIN
    result = session.finish()
    recipe_sweep = build_recipe(result)["method"]["sweep"]
    assert recipe_sweep["pick"] == 16 and recipe_sweep["rule"] == BEST_BY_MARGIN
    assert recipe_sweep["seeds"] == 3 and recipe_sweep["samples_per_run"] == 1280
    assert [len(c["scores"]) for c in recipe_sweep["candidates_scored"]] == [3, 3, 3]
    assert json_summary(result, None)["sweep"] == recipe_sweep


def test_a_seed_that_rules_a_candidate_out_skips_its_other_seeds():
    from helpers import settings, StubRunner

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.session import Session, validate_setup

    class TrainingOutgrowsTheProbe(StubRunner):
        """The probe's two steps fit 32 per device; the 2-process training run does not (its first seed runs out
        of memory)."""
        def train(self, phase, per_device, *args, **kw):
            if per_device == 32:
                self.runs.append(dict(phase=phase, per_device=per_device, seed=kw.get("seed", 0)))
                return TrialRecord(phase, per_device, self.nproc, 1, per_device * self.nproc, "oom", 0.1)
            return super().train(phase, per_device, *args, **kw)

    adapter = load_adapter("ddp")
    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0)
    runner = TrainingOutgrowsTheProbe(saturate=None, val={8: 0.80, 16: 0.95}.__getitem__)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=runner)
    session.ceiling()
    outcome = session.sweep(16)
    assert outcome.candidates == [8, 16, 32] and outcome.chosen == 16
    seeds_at = {b: [r["seed"] for r in runner.runs if r["phase"] == "sweep" and r["per_device"] == b] for b in (8, 16, 32)}
    assert seeds_at == {8: [0, 1, 2], 16: [0, 1, 2], 32: [0]}
    assert "32 per device ran out of memory" in outcome.reason


def test_your_setting_swept_far_from_the_range_leaves_the_gap_to_the_winner_an_end():
    """Regression (bench/time_to_accuracy.py adam-edge, 21:35): your own 16 per device was swept beside 512 / 1024 /
    1500; it failed, 1024 and 1500 never learned, and 512 won "by the margin or more" without 256 being compared:
    with your setting swept, 512 was not the smallest swept, so the range did not grow. An end is where no swept
    batch lies within a factor 2 of the winner on that side."""
    rows = grid({16: [0.20] * 3, 512: [0.64] * 3, 1024: [0.25] * 3})
    far = decide_sweep(rows, 5, cap=1500, extensions_left=1, yours=16)
    assert far.chosen == 512 and far.extend_to == 256
    spent = decide_sweep(rows, 5, cap=1500, extensions_left=0, yours=16)
    assert spent.unexplored == 256 and spent.end == "walk-spent"
    assert "Nothing within a factor 2 below it was swept and the range has grown" in spent.reason
    # Within a factor 2 the neighbour counts, yours or not: 256 swept, so 512 is no end.
    near = decide_sweep(grid({256: [0.20] * 3, 512: [0.64] * 3, 1024: [0.25] * 3}), 5, cap=1500, extensions_left=1,
                        yours=256)
    assert near.chosen == 512 and near.extend_to is None and near.unexplored is None
    # The same above: your 256 far above a winner at 16 whose double was not swept.
    above = decide_sweep(grid({8: [0.30] * 3, 16: [0.64] * 3, 256: [0.20] * 3}), 5, cap=512, extensions_left=1,
                         yours=256)
    assert above.chosen == 16 and above.extend_to == 32


def test_the_range_grows_once_past_a_winning_end_then_says_what_was_not_compared():
    smaller_is_better = {2: 0.99, 4: 0.97, 8: 0.95, 16: 0.90, 32: 0.85, 64: 0.80}.__getitem__
    _, runner, outcome = swept_session(smaller_is_better, centre=16, extensions=1)
    assert outcome.extended == [4] and outcome.candidates == [4, 8, 16, 32] and outcome.chosen == 4
    assert [r["seed"] for r in runner.runs if r["per_device"] == 4 and r["phase"] == "sweep"] == [0, 1, 2]
    assert "It is the smallest swept and the range has grown 1 time(s) (--sweep-extensions 1): 2 per device was not " \
           "compared." in outcome.reason
    assert outcome.verdict.unexplored == 2 and outcome.verdict.summary()["not_compared_because"] == "walk-spent"
    _, _, never = swept_session(smaller_is_better, centre=16, extensions=0)
    assert never.extended == [] and never.chosen == 8


def test_by_default_the_range_grows_twice_so_a_start_4x_off_the_best_still_gets_the_best_compared():
    """The default (no --sweep-extensions) grows the range twice: a start value at 16 whose best lies at 2 (4x below;
    adam-edge's 128 was left unexplored after one step) sweeps 4, then 2, and picks 2."""
    from advisor.method.inputs import MethodSettings

    assert MethodSettings.__dataclass_fields__["sweep_extensions"].default == 2
    smaller_is_better = {1: 0.99, 2: 0.99, 4: 0.97, 8: 0.95, 16: 0.90, 32: 0.85}.__getitem__
    _, _, outcome = swept_session(smaller_is_better, centre=16, extensions=2)
    assert outcome.extended == [4, 2] and outcome.chosen == 2
    assert "It is the smallest swept and the range has grown 2 time(s) (--sweep-extensions 2): 1 per device was not " \
           "compared." in outcome.reason


def test_the_range_steps_up_to_the_cap_not_past_it_and_says_so():
    def bigger_is_better(batch):
        return min(0.99, 0.5 + batch / 640)

    session, runner, outcome = swept_session(bigger_is_better, budget=150 * MIB)
    cap = session.cap.value  # memory's and the steps-per-epoch cap's smaller
    assert 64 < cap < 128
    assert outcome.extended == [cap] and outcome.candidates == [16, 32, 64, cap] and outcome.chosen == cap
    assert [r["seed"] for r in runner.runs if r["per_device"] == cap and r["phase"] == "sweep"] == [0, 1, 2]
    # "per device" on both: the global batch was often the same number (digits-mlp on 2 processes: 71 per device,
    # global 142, "142 is past the cap of 71")
    assert f"It is the largest swept; {2 * cap} per device is past the cap of {cap} per device." in outcome.reason
    assert outcome.verdict.summary()["not_compared"] == 2 * cap and outcome.verdict.end == "past-cap"
    # The verdict owns the end: the same rows decided again with no cap grow the range by doubling instead.
    assert decide_sweep(outcome.rows, 10, cap=None, extensions_left=1).extend_to == 2 * cap


def test_an_unstable_candidate_at_a_scaled_up_lr_is_rerun_at_the_validated_lr_and_the_recipe_says_which_to_blame():
    """Issue 24: an unstable candidate at a scaled-up LR is rerun once at the nearest validated LR before the batch
    is blamed. It stays out of the comparison either way (the plan would give it the LR that failed); the rerun is
    not a candidate's run, and the verdict, the recipe and the live decisions say which was to blame."""
    from helpers import CurveRunner, settings

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.events import Decision
    from advisor.report import build_recipe
    from advisor.session import Session, validate_setup

    def sweep_with(curve):
        """curve(lr, lr at 16 per device) -> 32 per device's loss curve."""
        from advisor.method import lr_for

        adapter = load_adapter("ddp")
        s = settings(nproc=2, sweep_steps=40, sweep_extensions=0)
        runner = CurveRunner({}, saturate=None, val=lambda b: {8: 0.90, 16: 0.95, 32: 0.96}[b])
        events = []
        session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), events.append, runner=runner)
        runner.curves[32] = lambda lr: curve(lr, lr_for(session.info, 32).value)
        session.ceiling()
        return session, runner, session.sweep(16), events

    session, runner, outcome, events = sweep_with(lambda lr, lr16: DIVERGED_TRIAL if lr > lr16 * 1.01 else HEALTHY_RUN)
    sweeps = [r for r in runner.runs if r["phase"] == "sweep"]
    at_32 = [r for r in sweeps if r["per_device"] == 32]
    validated = next(r["lr"] for r in sweeps if r["per_device"] == 16)
    assert len(at_32) == 2 and at_32[0]["lr"] > validated and at_32[1]["lr"] == pytest.approx(validated)  # seed 0, rerun
    assert at_32[1]["seed"] == at_32[0]["seed"] == 0 and at_32[1]["steps"] == at_32[0]["steps"]
    assert [r.per_device for r in outcome.rows].count(32) == 1  # the rerun is not a candidate's run
    scored = {c.per_device: c for c in outcome.verdict.candidates}
    assert scored[32].status == "unstable" and scored[32].blame == "lr" and outcome.chosen == 16
    assert "the LR scale-up, not the batch, is to blame" in outcome.reason
    assert any(isinstance(e, Decision) and "the LR scale-up, not the batch, is to blame" in e.message for e in events)
    recipe = build_recipe(session.finish())["method"]["sweep"]
    assert next(c for c in recipe["candidates_scored"] if c["per_device"] == 32)["blame"] == "lr"

    _, _, outcome, _ = sweep_with(lambda lr, lr16: DIVERGED_TRIAL)  # unstable at any LR: the batch itself
    blamed = next(c for c in outcome.verdict.candidates if c.per_device == 32)
    assert blamed.blame == "batch" and "the batch itself is to blame" in outcome.reason


def test_when_no_candidate_learned_the_plan_is_the_base_setting_with_a_headline_and_a_warning():
    """Regression (issue 24): every sweep run at chance still got a recipe that doubled the LR, exit code 0."""
    from advisor.report import build_recipe, human_summary, json_summary

    session, _, outcome = swept_session(lambda batch: 0.10, centre=16, extensions=0)  # chance on 10 classes
    assert outcome.failed and outcome.verdict.rule == NONE_LEARNED
    result = session.finish()
    info = session.info
    assert result.plan.global_batch == info.base_global_batch and result.lr.value == pytest.approx(info.base_lr)
    assert result.headline.startswith("No sweep candidate learned: check the base LR")
    assert human_summary(result, None).startswith("NOT VALIDATED. No sweep candidate learned")
    recipe = build_recipe(result)
    assert recipe["warnings"][0]["code"] == "no-candidate-learned"
    assert recipe["warnings"][0]["message"].count("base LR trains at the base batch") == 1  # the fix, said once
    assert json_summary(result, None)["validated"] is False
    learned = swept_session({8: 0.80, 16: 0.95, 32: 0.70}.__getitem__, centre=16, extensions=0)[0].finish()
    assert not learned.headline and json_summary(learned, None)["validated"] is True


class LongRunsRunOutOfMemory(StubRunner):
    """The probes and the trial fit; every sweep run (hundreds of steps) runs out of memory, as bn-small's did under
    an 8 MiB CPU budget (the process's own allocations grew ~2 MiB a rank over 375 steps)."""

    def train(self, phase, per_device, *args, **kw):
        record = super().train(phase, per_device, *args, **kw)
        if phase == "sweep":
            record.status, record.note = "oom", "out of memory"
        return record


def test_when_every_sweep_candidate_ran_out_of_memory_the_text_blames_memory_not_the_lr():
    """Regression: a plan whose sweep runs all ran out of memory was told "No sweep candidate learned: check the
    base LR", and its precision reason said "Nothing ran out of memory in fp32 and no accumulation was needed" beside
    a plan with 4 accumulation steps."""
    from advisor.report import build_recipe

    adapter = load_adapter("ddp")
    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, precision="auto")
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=LongRunsRunOutOfMemory(
        saturate=None))
    session.ceiling()
    outcome = session.sweep(16)
    assert outcome.failed and outcome.verdict.out_of_memory_only
    result = session.finish()
    assert result.headline.startswith("No sweep candidate learned: every sweep candidate ran out of memory")
    assert "base LR" not in result.headline and "base LR" not in outcome.verdict.reason
    assert "--headroom" in outcome.verdict.reason
    recipe = build_recipe(result)
    assert recipe["warnings"][0]["code"] == "no-candidate-learned"
    # What to do is said once: the verdict's reason, which the fallback's warning carries.
    assert recipe["warnings"][0]["message"].count("--headroom") == 1
    assert "Nothing ran out of memory" not in result.precision_reason
    assert "ran out of memory in fp32" in result.precision_reason
    # The other reason (runs at chance) still blames the LR.
    chance = swept_session(lambda batch: 0.10, centre=16, extensions=0)[2]
    assert not chance.verdict.out_of_memory_only and "Check that the base LR trains" in chance.verdict.reason


def test_advisor_plan_exits_with_code_3_and_still_writes_the_base_setting_when_nothing_learned(
        tmp_path, monkeypatch, capsys):
    """The CLI's end of the rule: the recipe is written (its runs are not lost), its first warning and the
    summary's first line say it is not validated, and the exit code is NOT_VALIDATED, documented in the README."""
    from helpers import StubRunner

    from advisor import cli
    from advisor.recipe import load_recipe
    from advisor.session import Session

    def stubbed_run_all(self):
        self.runner = StubRunner(saturate=None, val=lambda batch: 0.10)  # every run at chance on 10 classes
        self.ceiling(), self.choose_start(), self.trial(), self.sweep()
        return self.finish()

    monkeypatch.setattr(Session, "run_all", stubbed_run_all)
    out = tmp_path / "r.toml"
    code = cli.main(["plan", "--workload", "digits-mlp", "--device-memory", "300MiB", "--trial-steps", "8",
                     "--sweep-steps", "8", "--no-history", "--out", str(out)])
    said = capsys.readouterr()
    assert code == cli.NOT_VALIDATED == 3
    assert said.out.startswith("NOT VALIDATED. No sweep candidate learned: check the base LR")
    assert "advisor: No sweep candidate learned" in said.err
    recipe = load_recipe(out).data
    assert recipe["warnings"][0]["code"] == "no-candidate-learned"
    assert "exits with code 3" in (Path(__file__).parents[1] / "README.md").read_text()


def test_one_owner_of_the_steps_per_epoch_cap_and_a_global_batch_past_it_needs_force(capsys):
    """§8.5 everywhere (issue 24): --global-batch past what the data can train was accepted with a warning."""
    from advisor import cli
    from advisor.device import HostDevices
    from advisor.method.plan import largest_learnable_global
    from helpers import settings

    from advisor.adapters import load_adapter
    from advisor.errors import SetupError
    from advisor.session import validate_setup

    assert largest_learnable_global(1438) == 143 and largest_learnable_global(5) == 1
    adapter = load_adapter("ddp")
    with pytest.raises(SetupError, match=r"--global-batch 800 is past what the data can train: 1438 training "
                                         r"samples / global batch 800 = 1 optimizer step\(s\) per epoch.*--force"):
        validate_setup(settings(global_batch=800), adapter, HostDevices("cpu"))
    validate_setup(settings(global_batch=800, allow_few_steps=True), adapter, HostDevices("cpu"))
    validate_setup(settings(global_batch=143), adapter, HostDevices("cpu"))
    assert cli.main(["plan", "--workload", "digits-mlp", "--device-memory", "64MiB", "--global-batch", "800"]) == 2
    assert "add --force to plan it anyway" in capsys.readouterr().err
    args = cli.build_parser().parse_args(["plan", "--device-memory", "64MiB", "--global-batch", "800", "--force"])
    assert cli.settings_from_args(args, HostDevices("cpu")).allow_few_steps


def test_step_two_fixes_the_global_batch_first_then_divides_by_the_processes():
    """Regression (issue 24): step 2 took the task table's per-device value x the world size (64 x 2 = 128, twice
    the validated base of 64) instead of the base global batch over the devices."""
    from helpers import settings, StubRunner

    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.method import start_value
    from advisor.session import Session, validate_setup

    assert start_value("image-classification", 500, base_global=64, nproc=2)[0] == 32
    assert start_value("image-classification", 20, base_global=64, nproc=2)[0] == 20  # capped
    assert start_value("image-classification", 500, base_global=1, nproc=4)[0] == 1
    assert start_value("image-classification", 500)[0] == 64  # no base: the task table's per-device value
    adapter = load_adapter("ddp")
    s = settings(nproc=2)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")), runner=StubRunner())
    session.ceiling()
    start = session.choose_start()
    base = session.info.base_global_batch
    assert start.per_device == min(base // 2, session.cap.value)
    assert start.reason.startswith(f"Global batch first: your base global batch {base}")


def test_a_script_through_the_door_gets_one_seed_per_candidate_and_is_told_why(monkeypatch):
    """The engine cannot seed a user's script: paired seeds there are the same run or unpaired ones."""
    import types

    from helpers import settings

    from advisor import door as door_module
    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.workload import resolve_workload

    fake = types.SimpleNamespace(spec=types.SimpleNamespace(path="train.py", to_dict=lambda: {}),
                                 workload=resolve_workload("digits-mlp"), base_notes=[])
    monkeypatch.setattr(door_module, "open_door", lambda *a, **k: fake)  # the look run needs a real script
    s = settings(sweep_seeds=3)
    session, _ = door_module.script_session(["train.py"], load_adapter("ddp"), s, HostDevices("cpu"))
    assert session.settings.sweep_seeds == 1
    assert any("cannot pair seeds: it runs one seed per candidate (not 3)" in n for n in session.setup.notes)
    session.close()


def test_the_command_line_shows_step_4s_decisions_on_the_way_and_leaves_the_verdict_to_the_summary():
    """`advisor plan` prints why a sweep runs more than its three candidates (the range grew, the tied are timed
    again side by side, an unstable one is rerun); the step's closing reason is the summary's and the recipe's."""
    import io

    from advisor.cli import StderrProgress
    from advisor.events import Decision

    stream = io.StringIO()
    progress = StderrProgress(stream)
    progress(Decision(4, "8, 16, 32 per device tie, and were swept at different times as the range grew: timing them "
                         "again side by side (3 round(s) of 40 steps) before the faster is read."))
    progress(Decision(4, "By validation accuracy, ... 16 per device.", verdict=True))
    assert stream.getvalue() == ("   -> 8, 16, 32 per device tie, and were swept at different times as the range grew: "
                                 "timing them again side by side (3 round(s) of 40 steps) before the faster is read.\n")


def test_one_seed_is_said_as_one_seed_not_as_paired_seeds():
    """A script plan runs one seed per candidate, and its first look says the advisor cannot seed the script; the
    reason, the comparison with yours and `advisor explain` then said "1 paired seed(s)"."""
    from dataclasses import replace
    from types import SimpleNamespace

    from advisor.explain import _why_line
    from advisor.recipe import MethodTable, RecipeDocument, SweepTable

    verdict = decide_sweep(grid({16: [0.84], 32: [0.75]}), 10, yours=32, policy=SweepPolicy(seeds=1))  # as a script plan
    assert "over 1 seed at equal training samples" in verdict.reason
    assert "(score gap +0.090 over 1 seed)" in verdict.reason and "paired seed" not in verdict.reason
    sweep = {**verdict.summary(), "pick": verdict.chosen}
    method = replace(RecipeDocument.table_of(MethodTable, {"method": {}}, "method"),
                     sweep=RecipeDocument.table_of(SweepTable, {"method.sweep": sweep}, "method.sweep"))
    line = _why_line(SimpleNamespace(method=method))
    assert "(1 seed; by validation accuracy)" in line and "paired seed" not in line, line
    # Three seeds are still paired seeds.
    assert "over 3 paired seed(s)" in decide_sweep(grid({16: [0.84] * 3, 32: [0.75] * 3}), 10).reason
