"""Step 4's walk among the equals in both directions from your setting, and extra seeds only where they can change
the pick (issue 36: the plan's cost). Hand-made runs and a stub session: milliseconds, no processes."""

from __future__ import annotations

import math
import random

from helpers import StubRunner, settings, sweep_run

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.method.sweep import (DEFAULT_POLICY, EQUALS_BIGGER_FASTER, EQUALS_SMALLER_AS_FAST, EQUALS_YOURS, decide_sweep,
                                  needs_timing)
from advisor.session import Session, validate_setup

LEVEL = [0.95] * 3


def runs(batch, scores):
    return [sweep_run(batch, seed, score, step_seconds=batch / 1000.0) for seed, score in enumerate(scores)]


def rounds(*speeds):
    return dict(enumerate(speeds))


def steady(speed, count=6):
    """``count`` timing rounds at one speed: six all over the bar against another show a step (6 of 6)."""
    return rounds(*[speed] * count)


def test_from_your_setting_the_walk_steps_down_to_a_smaller_equal_yours_was_not_faster_than():
    """digits-cnn on a CPU: 16 and 32 per device equal at the sweep's end, samples/s level; yours is 32. In a plain
    loop 16 reached 0.90 in 3.3 s and 32 in 4.3 s (bench/grids/digits.grid.json): a bigger batch needs at least as
    many samples to every score, so keeping it must pay in speed, as moving up to it must."""
    rows = runs(16, LEVEL) + runs(32, LEVEL)
    level = {16: rounds(700.0, 690.0, 710.0), 32: rounds(720.0, 700.0, 780.0)}  # 1.03x, 1.01x, 1.10x
    verdict = decide_sweep(rows, 10, timing=level, yours=32)
    assert verdict.chosen == 16 and verdict.walk_from == 32 and verdict.rule == EQUALS_SMALLER_AS_FAST
    assert verdict.walk[0].down and verdict.walk[0].taken and not verdict.walk[0].paid
    assert "Pick: 16 per device, walked down from 32 (your own setting of the equals)" in verdict.reason
    assert ("32 over 16: 1.029x, 1.014x, 1.099x (0 of 3 over the 1.10x bar: not shown more than 10% faster, nor can it "
            "be in 12 rounds)") in verdict.reason
    assert ("Against your setting (32 per device at the base LR): as good as yours (score gap +0.000 ±0.000 over 3 "
            "paired seed(s)), 0.96x the samples/s of yours (3 timing round(s) side by side") in verdict.reason
    assert ("; smaller, and the paired measurements could not show yours more than 10% faster, so it needs no more "
            "samples to any score.") in verdict.reason
    # Yours faster by more than the bar at every round of six: shown, it pays for itself, and stays. At three rounds
    # all over the bar it is not shown yet (1 in 8 by chance at a ratio at the bar): more rounds are asked for.
    paying = {16: rounds(*[700.0] * 6), 32: rounds(*[800.0] * 6)}
    kept = decide_sweep(rows, 10, timing=paying, yours=32)
    assert kept.chosen == 32 and kept.rule == EQUALS_YOURS and not kept.walk[0].taken
    assert ("Pick: 32 per device, your own setting of the equals, shown more than 10% faster than 16 (6 of 6 rounds "
            "over the bar)") in kept.reason
    three = decide_sweep(rows, 10, timing={b: dict(list(r.items())[:3]) for b, r in paying.items()}, yours=32)
    assert three.walk[0].undecided and needs_timing(three) == [16, 32]
    # Rounds that could still show yours faster (1.20x, 1.05x, 1.20x: one under the bar) settle nothing yet: the
    # pair is timed again, and until then the walk stands.
    mixed = {16: rounds(700.0, 700.0, 700.0), 32: rounds(840.0, 735.0, 840.0)}
    stood = decide_sweep(rows, 10, timing=mixed, yours=32)
    assert stood.chosen == 32 and stood.rule == EQUALS_YOURS and needs_timing(stood) == [16, 32]
    assert ("32 over 16: 1.200x, 1.050x, 1.200x (2 of 3 over the 1.10x bar: not shown more than 10% faster yet)"
            in stood.reason)
    assert "your own setting of the equals, not settled against 16 (2 of 3 rounds over the bar), and none is bigger" \
        in stood.reason
    # Without your setting among them the walk starts at the smallest, as before.
    assert decide_sweep(rows, 10, timing=level).chosen == 16


def test_the_walk_down_goes_one_step_at_a_time_and_never_under_batchnorms_threshold():
    rows = runs(8, LEVEL) + runs(16, LEVEL) + runs(32, LEVEL) + runs(64, LEVEL)
    # 64 (yours) is level with 32, 32 with 16, but 16 is 1.3x 8 at every round: the walk stops at 16.
    timing = {8: steady(500.0), 16: steady(650.0), 32: rounds(660.0, 650.0, 640.0), 64: rounds(650.0, 660.0, 655.0)}
    verdict = decide_sweep(rows, 10, timing=timing, yours=64)
    assert verdict.chosen == 16 and [(s.bigger, s.smaller, s.taken) for s in verdict.walk] == [
        (64, 32, True), (32, 16, True), (16, 8, False)]
    # 6 of 6 over the bar shows 16 faster than 8, and the summary says so.
    assert "; 16 against 8: shown more than 10% faster (6 of 6 rounds over the bar)" in verdict.reason
    # A step down the rounds have not settled yet stops the walk, said as such.
    neither = decide_sweep(rows, 10, yours=64, timing={**timing, 16: rounds(*[600.0] * 3), 32: rounds(720.0, 600.0,
                                                                                                      720.0)})
    assert neither.chosen == 32 and "; 32 against 16: not shown more than 10% faster yet (2 of 3 rounds over the bar)" \
        in neither.reason
    # With BatchNorm a tie never moves the model to a micro-batch under 16: all level, the walk stops at 16.
    flat = {b: rounds(650.0, 650.0, 650.0) for b in (8, 16, 32, 64)}
    bn = decide_sweep(rows, 10, timing=flat, yours=64, batchnorm=True)
    assert bn.chosen == 16 and all(s.smaller >= 16 for s in bn.walk)
    assert decide_sweep(rows, 10, timing=flat, yours=64).chosen == 8  # without BatchNorm, down to the smallest
    # Having stepped down, the walk does not turn round: a bigger one above yours is never compared.
    up = decide_sweep(runs(16, LEVEL) + runs(32, LEVEL) + runs(64, LEVEL), 10, yours=32,
                      timing={16: rounds(650.0, 650.0, 650.0), 32: rounds(650.0, 650.0, 650.0),
                              64: rounds(900.0, 900.0, 900.0)})
    assert up.chosen == 16 and all(s.down for s in up.walk)
    # A yours that paid against the smaller still walks up when the bigger pays too.
    both = decide_sweep(runs(16, LEVEL) + runs(32, LEVEL) + runs(64, LEVEL), 10, yours=32,
                        timing={16: steady(500.0), 32: steady(650.0), 64: steady(900.0)})
    assert both.chosen == 64 and both.rule == EQUALS_BIGGER_FASTER
    # Up from the smallest, the step refused is named with its count (it said only "64 was not").
    stopped = decide_sweep(runs(16, LEVEL) + runs(32, LEVEL) + runs(64, LEVEL), 10,
                           timing={16: steady(500.0), 32: steady(650.0), 64: rounds(650.0, 660.0, 640.0)})
    assert stopped.chosen == 32 and ("walked up from 16 (the smallest of the equals), the rounds showing each step "
                                     "more than 10% faster; 64 against 32: not shown more than 10% faster, nor can "
                                     "it be in 12 rounds (0 of 3 rounds over the bar)") in stopped.reason


SCATTERED = [0.95 - g for g in (0.0, 0.35, -0.05, 0.30, -0.04, 0.04)]  # against 0.95: over the margin, interval holds 0


def test_extra_seeds_run_only_where_they_could_change_the_pick():
    rows = runs(16, [0.95] * 3) + runs(32, SCATTERED[:3])
    untimed = decide_sweep(rows, 10)
    assert untimed.comparisons[0].by == "inconclusive" and not untimed.comparisons[0].pick_unchanged
    assert needs_timing(untimed) == [16, 32]  # timed first: short runs, before any 200-step seed
    # Level side by side: were 32 an equal, the walk would still keep 16 (32 is not 10% faster at every round).
    level = decide_sweep(rows, 10, timing={16: rounds(700.0, 700.0, 700.0), 32: rounds(720.0, 700.0, 690.0)})
    assert level.comparisons[0].pick_unchanged and level.extra_seeds == [] and level.chosen == 16
    assert ("inconclusive (over the margin, the interval holds 0) after 3 paired seeds: the better-scoring, 16, "
            "stands; no more seeds: as an equal 32 would not change the pick (timed side by side)") in level.reason
    assert level.summary()["comparisons"][0]["pick_unchanged"] is True
    # 32 twice as fast at every round: as an equal it would be the pick, so the pair runs its next seed.
    fast = decide_sweep(rows, 10, timing={16: steady(700.0), 32: steady(1400.0)})
    # At three such rounds the walk with 32 as an equal is not settled yet (3 of 3 shows nothing): the pair is timed
    # again before any seed is skipped or run for it.
    early = decide_sweep(rows, 10, timing={16: steady(700.0, 3), 32: steady(1400.0, 3)})
    assert not early.comparisons[0].pick_unchanged and needs_timing(early) == [16, 32]
    assert not fast.comparisons[0].pick_unchanged and fast.extra_seeds == [(16, 3), (32, 3)]
    # Your setting inconclusive: as an equal the walk would start there, so its seeds always matter.
    yours = decide_sweep(rows, 10, yours=32, timing={16: steady(700.0), 32: steady(800.0)})
    assert yours.extra_seeds == [(16, 3), (32, 3)]
    # A smaller inconclusive candidate the walk down from your setting would reach matters too.
    down = decide_sweep(runs(8, SCATTERED[:3]) + runs(16, [0.95] * 3) + runs(32, [0.95] * 3), 10, yours=32,
                        timing={b: rounds(700.0, 700.0, 700.0) for b in (8, 16, 32)})
    assert down.chosen == 16 and down.extra_seeds == [(8, 3), (16, 3)]


def test_a_plan_times_the_inconclusive_candidate_and_skips_seeds_that_cannot_change_the_pick():
    """digits-cnn's plans ran 64 per device (inconclusive against 16) for two more paired seeds each, 4 of a plan's
    14 sweep runs, though 64 was never faster per sample than 32: as an equal it could not have been picked."""
    from test_sweep_verdicts import seeded_plan

    scores = {16: [0.95] * 6, 32: SCATTERED, 64: [0.80] * 6}
    runner, outcome = seeded_plan(scores, speed=lambda batch: 1000.0)
    seeds = {b: [r["seed"] for r in runner.runs if r["phase"] == "sweep" and r["per_device"] == b] for b in scores}
    assert seeds == {16: [0, 1, 2], 32: [0, 1, 2], 64: [0, 1, 2]}
    assert sorted({r["per_device"] for r in runner.runs if r["phase"] == "timing"}) == [16, 32]
    assert outcome.chosen == 16 and outcome.verdict.comparisons[0].pick_unchanged
    said = " ".join(getattr(e, "message", "") for e in runner.events)
    assert "the gap is over the margin" not in said  # no extra seeds announced


def test_a_digits_like_plan_runs_twelve_sweep_runs_and_times_only_what_it_reads():
    """make run's shape: yours 32 per device, 16 and 32 equal, 64 inconclusive, samples/s level everywhere. The sweep
    times 16 / 32 / 64 together, runs no extra seed for 64 (as an equal it would not change the pick), walks down
    from yours to 16, grows the range to 8 (16 leads with 64 worse behind it), times 8 with its neighbour 16 and
    your setting only, and walks on down to 8. Before: 64 and 16 ran three more seeds each, and the grown set was
    timed again whole."""
    from test_sweep_verdicts import Machine  # the stub at a samples/s per batch

    scores = {8: [0.95] * 6, 16: [0.95] * 6, 32: [0.95] * 6, 64: SCATTERED}
    s = settings(nproc=2, sweep_steps=40, sweep_extensions=1, base_batch=64)
    runner = Machine(lambda batch: 1000.0, saturate=None, seeded_val=lambda batch, seed: scores[batch][seed])
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                      runner=runner)
    session.ceiling()
    outcome = session.sweep(32)
    sweep = [(r["per_device"], r["seed"]) for r in runner.runs if r["phase"] == "sweep"]
    timing = [(r["per_device"], r["seed"]) for r in runner.runs if r["phase"] == "timing"]
    assert sorted(sweep) == [(b, seed) for b in (8, 16, 32, 64) for seed in range(3)]
    assert timing == [(16, 0), (32, 0), (64, 0), (64, 1), (32, 1), (16, 1), (16, 2), (32, 2), (64, 2),
                      (8, 0), (16, 0), (32, 0), (32, 1), (16, 1), (8, 1), (8, 2), (16, 2), (32, 2)]
    assert outcome.extended == [8] and outcome.chosen == 8 and outcome.verdict.rule == EQUALS_SMALLER_AS_FAST
    assert [(step.bigger, step.smaller) for step in outcome.verdict.walk] == [(32, 16), (16, 8)]


def test_the_bigger_batch_carries_the_burden_of_proof():
    """A bigger batch is shown faster by 6 of 6 rounds over the bar, 8 of 9 or 10 of 12 (at most 1 in 40 by chance
    at a ratio at the bar); the pair is settled for the smaller as soon as no further rounds up to 12 could show it
    (3 rounds under the bar), and until then it is timed again. 3 of 3 over the bar (1 in 8 by chance) shows nothing."""
    from advisor.method.speed import SHOWN_FASTER_LEVEL, cannot_be_shown_faster, rounds_needed, shown_faster

    def pair(over, total):
        return {r: 1.2 if r < over else 1.0 for r in range(total)}, {r: 1.0 for r in range(total)}

    for over, total, faster, settled in [(3, 3, False, False), (2, 3, False, False), (0, 3, False, True),
                                         (6, 6, True, False), (5, 6, False, False), (4, 6, False, False),
                                         (3, 6, False, True), (8, 9, True, False), (7, 9, False, False),
                                         (6, 9, False, True), (10, 12, True, False), (9, 12, False, True),
                                         (0, 0, False, False)]:
        big, small = pair(over, total)
        assert (shown_faster(big, small), cannot_be_shown_faster(big, small)) == (faster, settled), (over, total)
    for total in (6, 9, 12):  # the counts are the fewest a ratio at the bar gives at most 1 in 40 of the time
        needed = rounds_needed(total)
        at_least = sum(math.comb(total, k) for k in range(needed, total + 1)) / 2 ** total
        one_fewer = sum(math.comb(total, k) for k in range(needed - 1, total + 1)) / 2 ** total
        assert at_least <= SHOWN_FASTER_LEVEL < one_fewer, total


# 16 over 8 per device in two fresh quiet plans of make run's command (2026-12-07 17:40-17:53, load ~2, the plans'
# own processes): the median of 12 rounds, 1.065x and 1.127x, picked 8 in one and 16 in the other.
PLAN_16_OVER_8 = {"picked 8": [1.046, 1.027, 1.279, 0.946, 1.059, 1.152, 1.263, 1.200, 0.864, 0.978, 1.070, 1.101],
                  "picked 16": [0.990, 1.300, 1.068, 1.024, 1.179, 1.083, 1.255, 0.838, 1.134, 1.236, 1.120, 1.167]}


def test_a_pair_near_the_bar_goes_to_the_smaller_in_every_plan():
    """Where the ratio sits near the bar, a test that decides either way (3 of 3 at 1 in 8, or the median of 12
    rounds) split fresh plans of one command between 8 and 16 per device; with the burden on the bigger, both plans'
    own rounds, read in the order they ran, settle for 8 within six rounds. A level pair with a burst of load or two
    in six rounds settles the same way, and a bigger batch that is faster at 10 of 12 rounds is shown."""
    rows = runs(8, LEVEL) + runs(16, LEVEL)
    for plan, ratios in PLAN_16_OVER_8.items():
        for seen in (3, 6):
            timing = {8: steady(1000.0, seen), 16: rounds(*[1000.0 * r for r in ratios[:seen]])}
            verdict = decide_sweep(rows, 10, timing=timing)
            assert verdict.chosen == 8, plan
            assert (needs_timing(verdict) == [8, 16]) == (seen == 3), (plan, seen)  # settled at six
    rows = runs(16, LEVEL) + runs(32, LEVEL)
    for burst in ([1011.0, 1031.0, 1027.0, 1217.0, 1016.0, 1059.0], [989.0, 1008.0, 1035.0, 1217.0, 1157.0, 1052.0]):
        verdict = decide_sweep(rows, 10, timing={16: steady(1000.0), 32: rounds(*burst)}, yours=32)
        assert verdict.chosen == 16 and verdict.rule == EQUALS_SMALLER_AS_FAST and needs_timing(verdict) == []
        assert "over the 1.10x bar: not shown more than 10% faster, nor can it be in 12 rounds)" in verdict.reason
    shown = {16: steady(1000.0, 12), 32: rounds(*([1200.0] * 10 + [1000.0] * 2))}
    stood = decide_sweep(rows, 10, timing=shown, yours=32)
    assert stood.chosen == 32 and stood.walk[0].paid and needs_timing(stood) == []
    assert "(10 of 12 over the 1.10x bar: shown more than 10% faster)" in stood.reason
    up = decide_sweep(rows, 10, timing={16: steady(1000.0), 32: steady(1300.0)})
    assert up.chosen == 32 and up.rule == EQUALS_BIGGER_FASTER


def test_a_pair_is_timed_again_only_while_the_bigger_could_still_be_shown():
    """The session's side: three rounds at a time while the bigger could still be shown faster, at most 12. Here
    32 alternates 1.25x and 1.0x of 16: the third round under the bar comes at round six, where no six more could
    make 10 of 12, so the pair is settled for the smaller; 32 at 1.25x in every round is shown at six."""
    class Alternating(StubRunner):
        timings = 0
        every = 2

        def train(self, phase, per_device, *args, **kw):
            record = super().train(phase, per_device, *args, **kw)
            speed = 1000.0
            if phase == "timing" and per_device == 32:
                self.timings += 1
                speed = 1250.0 if self.timings % self.every else 1000.0
            record.step_seconds = record.global_batch / speed
            return record

    class AlwaysFaster(Alternating):
        every = 10 ** 6

    for runner_class, chosen in ((Alternating, 16), (AlwaysFaster, 32)):
        s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, trial_steps=8, base_batch=64)  # yours: 32 per device
        runner = runner_class(saturate=None, val={8: 0.95, 16: 0.95, 32: 0.95, 64: 0.80}.__getitem__)
        session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                          runner=runner)
        session.ceiling()
        outcome = session.sweep(32)
        timing = [r for r in runner.runs if r["phase"] == "timing"]
        assert {r["per_device"] for r in timing} == {16, 32} and len(timing) == 2 * 6, runner_class
        assert outcome.chosen == chosen and not outcome.verdict.walk[0].undecided


def test_timing_rounds_come_three_at_a_time_with_one_seed_too():
    """A script plan runs one seed (the advisor cannot seed the script); its timing rounds still come three at a
    time: a newcomer's plan said 1.34x the samples/s of yours from one round where its own sweep runs measured 0.36x."""
    class Level(StubRunner):
        def train(self, phase, per_device, *args, **kw):
            record = super().train(phase, per_device, *args, **kw)
            jitter = random.Random(len(self.runs)).uniform(0.8, 1.25)  # every batch ~1000 samples/s, a noisy host
            record.step_seconds = record.global_batch / (1000.0 * jitter)
            return record

    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, trial_steps=8, base_batch=64, sweep_seeds=1)
    runner = Level(saturate=None, val={8: 0.95, 16: 0.95, 32: 0.95, 64: 0.80}.__getitem__)
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")), runner=runner)
    session.ceiling()
    outcome = session.sweep(32)
    timing = [r for r in runner.runs if r["phase"] == "timing"]
    assert timing and all(sum(r["per_device"] == b for r in timing) % 3 == 0 for b in {r["per_device"] for r in timing})
    assert outcome.chosen == 16 and "(9 timing round(s) side by side" in outcome.reason  # one round at a time: 5


def test_the_walk_sentence_names_the_counts_the_sign_test_uses_for_any_number_of_seeds():
    """The counts the reason prints ("6 of 6, 8 of 9 or 10 of 12") are derived, not written: for every number of
    rounds a look adds (the policy's seeds), each named "k of n" is the fewest that shows a step, and a look too
    short to show one (under 6 rounds: even all over the bar happens by chance more than 1 in 40) is left out."""
    from dataclasses import replace

    from advisor.method.speed import shown_faster, shown_faster_counts

    for per_look in range(1, 14):
        named = shown_faster_counts(per_look)
        assert named, per_look
        for count in named:
            needed, total = (int(part) for part in count.split(" of "))
            small = {r: 1.0 for r in range(total)}
            assert shown_faster({r: 1.2 if r < needed else 1.0 for r in range(total)}, small), count
            assert not shown_faster({r: 1.2 if r < needed - 1 else 1.0 for r in range(total)}, small), count
    assert shown_faster_counts(3) == ["6 of 6", "8 of 9", "10 of 12"]
    assert shown_faster_counts(1)[0] == "6 of 6" and shown_faster_counts(2)[0] == "6 of 6"
    for seeds in (1, 2, 3):
        policy = replace(DEFAULT_POLICY, seeds=seeds)
        rows = [sweep_run(batch, seed, 0.95, step_seconds=batch / 1000.0) for batch in (16, 32)
                for seed in range(seeds)]
        verdict = decide_sweep(rows, 10, policy=policy, yours=32)
        counts = shown_faster_counts(seeds)
        assert f"Shown means by a sign test on the paired seeds: {counts[0]}, " in verdict.reason
        assert f"or {counts[-1]} over the 1.10x bar (at most 1 in 40 by chance at a ratio at the bar)" in verdict.reason
