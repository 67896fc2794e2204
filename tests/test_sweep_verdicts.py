"""Step 4's verdicts (issue 36): equal means equal, BatchNorm as a constraint, the advice against your own setting,
and verdict sentences rendered from the verdict's own numbers. Hand-made runs and a stub session: milliseconds."""

from __future__ import annotations

import pytest
from helpers import settings, StubRunner
from helpers import sweep_run

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.method import sweep_candidates
from advisor.method.sweep import (BEST_BY_MARGIN, EQUALS_BATCHNORM_FLOOR, EQUALS_SMALLEST, EQUALS_YOURS, SweepPolicy,
                                  decide_sweep, needs_timing)
from advisor.session import Session, validate_setup


def runs(batch, scores, speeds=None):
    """``batch``'s runs at seeds 0.. with these scores, each at samples/s ``speeds[seed]`` (default 1000)."""
    speeds = speeds or [1000.0] * len(scores)
    return [sweep_run(batch, seed, score, step_seconds=batch / speed) for seed, (score, speed)
            in enumerate(zip(scores, speeds))]


# The issue's BatchNorm CNN (memory ceiling 6 per device): 3 and 6 per device over 3 paired seeds, 0.621 vs 0.873,
# gap 0.252 with a 95% t-interval of +-0.411 (2 d.f.); re-decided with 6 per device at 1.05x the speed of 3.
SIX = [0.873, 0.873, 0.873]
THREE = [0.873 - 0.0866, 0.873 - 0.252, 0.873 - 0.4174]


def issue_case(**kw):
    return decide_sweep(runs(3, THREE) + runs(6, SIX, [1050.0] * 3), 10, **kw)


def test_a_gap_over_the_margin_is_not_a_tie_even_when_its_interval_holds_zero():
    verdict = issue_case()
    (gap,) = verdict.comparisons
    assert gap.mean_gap == pytest.approx(0.252, abs=1e-3) and gap.half_width == pytest.approx(0.411, abs=2e-3)
    assert gap.by == "inconclusive" and not gap.tied and verdict.tied == [6]
    assert verdict.chosen == 6 and verdict.rule == BEST_BY_MARGIN  # never 3 per device, though 6 is only 1.05x as fast
    assert verdict.extra_seeds == [(3, 3), (6, 3)]  # the pair asks for its next paired seed
    assert "tied" not in verdict.reason and "equal (" not in verdict.reason and "Equals" not in verdict.reason
    assert "3: gap 0.252, 95% t-interval ±0.411 (2 d.f.): inconclusive" in verdict.reason
    # The same with BatchNorm: the same pick (no tie for the smaller micro-batch to win on).
    assert issue_case(batchnorm=True).chosen == 6


def test_after_the_extra_seeds_only_the_margin_ties_and_else_the_better_scoring_one_stands():
    # Six seeds, still inconclusive (gap 0.10, the interval holds 0): the budget is spent, 6 stands.
    scattered = [0.873 - g for g in (0.0, 0.35, -0.05, 0.30, -0.04, 0.04)]
    spent = decide_sweep(runs(3, scattered) + runs(6, SIX * 2), 10)
    (gap,) = spent.comparisons
    assert gap.seeds == 6 and gap.by == "inconclusive" and spent.extra_seeds == [] and spent.chosen == 6
    assert "after 6 paired seeds: the better-scoring, 6, stands" in spent.reason
    # Six seeds whose mean gap falls under the margin: a true tie, and the smaller batch at equal speed wins it.
    close = [0.873 - g for g in (0.03, 0.0, -0.01, -0.01, 0.0, -0.005)]
    equal = decide_sweep(runs(3, close) + runs(6, SIX * 2), 10)
    assert equal.comparisons[0].by == "margin" and equal.tied == [3, 6] and equal.chosen == 3
    # The extra seeds can turn the order round: where 3 outscores 6 over their six shared seeds, 3 leads.
    turned = [0.86, 0.85, 0.86, 0.95, 0.96, 0.95]
    flipped = decide_sweep(runs(3, turned) + runs(6, SIX * 2), 10)
    assert flipped.leader == 3 and flipped.chosen == 3


def test_a_candidate_worse_by_more_than_the_margin_is_never_picked_for_its_speed():
    verdict = decide_sweep(runs(8, [0.95, 0.95, 0.95]) + runs(16, [0.93, 0.93, 0.93], [3000.0] * 3), 10)
    assert verdict.comparisons[0].by == "apart" and verdict.chosen == 8


def test_the_extra_seeds_run_only_for_the_inconclusive_pair_and_stop_at_the_budget():
    """The real session asks its runner for more paired seeds of the two candidates (the stub stands in for the
    launcher; the seed goes to runner.train as every sweep run's does), and only where a comparison is
    inconclusive: a plan whose comparisons are all conclusive runs k seeds and no more. Here 32 per device is
    twice 16's samples/s side by side, so were it an equal the walk would take it: its seeds matter to the pick
    (where they cannot, none run: tests/test_sweep_walk_and_seeds.py)."""
    scores = {16: [0.95] * 6, 32: [0.95 - g for g in (0.0, 0.35, -0.05, 0.30, -0.04, 0.04)], 64: [0.80] * 6}

    def plan(table, **kw):
        return seeded_plan(table, speed=lambda batch: 100.0 * batch, **kw)

    runner, outcome = plan(scores)
    seeds = {b: [r["seed"] for r in runner.runs if r["phase"] == "sweep" and r["per_device"] == b] for b in scores}
    assert seeds == {16: [0, 1, 2, 3, 4, 5], 32: [0, 1, 2, 3, 4, 5], 64: [0, 1, 2]}
    assert outcome.chosen == 16 and outcome.verdict.comparisons[0].seeds == 6
    said = " ".join(getattr(e, "message", "") for e in runner.events)
    assert "16 and 32 per device: the gap is over the margin of 0.010 but its interval holds 0" in said
    conclusive = {16: [0.95] * 3, 32: [0.95, 0.951, 0.949], 64: [0.80] * 3}
    runner, outcome = plan(conclusive)
    assert max(r["seed"] for r in runner.runs if r["phase"] == "sweep") == 2  # no extra seed anywhere


class Machine(StubRunner):
    """The stub at a samples/s per per-device batch (``speed``), in every phase."""

    def __init__(self, speed, **kw):
        super().__init__(**kw)
        self.speed = speed

    def train(self, phase, per_device, steps, lr, *args, **kwargs):
        record = super().train(phase, per_device, steps, lr, *args, **kwargs)
        if self.speed and record.status == "ok":
            record.step_seconds = record.global_batch / self.speed(per_device)
        return record


def seeded_plan(table, speed=None, centre=32, **kw):
    """A stub sweep around ``centre`` whose run at (batch, seed) scores ``table[batch][seed]``: (runner, outcome)."""
    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, base_batch=1000, **kw)  # your setting past the cap
    runner = Machine(speed, saturate=None, seeded_val=lambda batch, seed: table[batch][seed])
    runner.events = []
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                      runner.events.append, runner=runner)
    session.ceiling()
    return runner, session.sweep(centre)


def test_equals_are_always_timed_side_by_side_before_a_speed_is_read():
    rows = runs(8, [0.95] * 3, [500.0] * 3) + runs(16, [0.95] * 3, [800.0] * 3)  # one block, 1.6x at every seed
    verdict = decide_sweep(rows, 10)
    assert needs_timing(verdict) == [8, 16]  # the session times them before this verdict can stand
    level = {8: {0: 700.0, 1: 700.0, 2: 700.0}, 16: {0: 735.0, 1: 735.0, 2: 735.0}}
    timed = decide_sweep(rows, 10, timing=level)
    assert timed.chosen == 8 and needs_timing(timed) == [] and timed.walk[0].rounds


def test_batchnorm_ties_go_to_the_larger_micro_batch_under_the_threshold():
    level = [0.95] * 3
    tied = runs(4, level) + runs(8, level) + runs(16, level) + runs(32, level)
    assert decide_sweep(tied, 10).chosen == 4  # no BatchNorm: the smallest of the equals
    bn = decide_sweep(tied, 10, batchnorm=True)
    assert bn.chosen == 16 and bn.walk_from == 16 and bn.walk_start_why == "batchnorm"
    # The rule code says what decided (not "the fastest of the tied": 16 was not shown faster than anything).
    assert bn.rule == EQUALS_BATCHNORM_FLOOR and bn.summary()["rule"] == "equals-batchnorm-floor"
    assert "starts at 16 per device, the largest of them under 16 (the model has BatchNorm" in bn.reason
    # Under the threshold only: 16 and 32 level stay a tie that the smaller wins.
    assert decide_sweep(runs(16, level) + runs(32, level), 10, batchnorm=True).chosen == 16
    # The memory-capped BatchNorm CNN: equal scores at 3 and 6 per device keep 6 ...
    assert decide_sweep(runs(3, level) + runs(6, level), 10, batchnorm=True).chosen == 6
    # ... and the half of it wins only by the margin.
    assert decide_sweep(runs(3, [0.97] * 3) + runs(6, level), 10, batchnorm=True).chosen == 3


def test_batchnorm_never_sweeps_one_per_device():
    assert sweep_candidates(2, cap=6, subset=False, smallest=2)[0] == [2, 4]
    assert sweep_candidates(2, cap=6, subset=False)[0] == [1, 2, 4]
    assert sweep_candidates(2, cap=2, subset=False, smallest=2)[0] == [2]
    # 2 per device leads with a worse one behind it: the range would grow down to 1, but not for BatchNorm.
    rows = runs(2, [0.95] * 3) + runs(4, [0.90] * 3)
    assert decide_sweep(rows, 10, extensions_left=1).extend_to == 1
    with_bn = decide_sweep(rows, 10, extensions_left=1, batchnorm=True)
    assert with_bn.extend_to is None and with_bn.unexplored is None


class BatchNormStub(StubRunner):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.model_info = {"parameters": 1000, "has_batchnorm": True}


def test_a_batchnorm_session_never_trains_one_per_device():
    s = settings(nproc=2, sweep_steps=40, sweep_extensions=1)
    runner = BatchNormStub(saturate=None, val={2: 0.95, 4: 0.90}.get)
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                      runner=runner)
    session.ceiling()
    assert session.info.has_batchnorm
    outcome = session.sweep(2)
    assert 1 not in {r["per_device"] for r in runner.runs} and outcome.chosen == 2


def yours_plan(val, centre, base_batch, speed=None, **kw):
    """A stub plan on 2 processes whose base global batch is ``base_batch`` (your setting: half of it per device)."""
    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, base_batch=base_batch, trial_steps=8, **kw)

    class Machine(StubRunner):
        def train(self, phase, per_device, steps, lr, *args, **kwargs):
            record = super().train(phase, per_device, steps, lr, *args, **kwargs)
            if speed:
                record.step_seconds = record.global_batch / speed(per_device)
            return record

    runner = Machine(saturate=None, val=val)
    session = Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")),
                      runner=runner)
    session.ceiling()
    return runner, session.sweep(centre)


def test_your_own_setting_is_always_swept_and_the_advice_says_how_it_compares():
    """Regression (issue 36, tried as a new user would): a text CNN trained today at 16 per device got 32 advised,
    where both reached 0.88 at the same samples/s, and 16 was never swept."""
    level = {8: 0.88, 16: 0.88, 32: 0.88, 64: 0.88, 128: 0.88}.get
    runner, outcome = yours_plan(level, centre=64, base_batch=32, speed=lambda b: 1000.0)
    assert 16 in outcome.candidates and "Sweeping your own setting too (16 per device" in outcome.reason
    assert [r["lr"] for r in runner.runs if r["phase"] == "sweep" and r["per_device"] == 16][0] == \
        pytest.approx(1e-3)  # your setting runs at the base LR (digits-mlp: 1e-3 at global 32)
    assert outcome.chosen == 16 and outcome.verdict.walk_start_why == "yours"
    assert outcome.verdict.rule == EQUALS_YOURS
    assert "Against your setting (16 per device at the base LR): no better than yours: keep it" in outcome.reason
    against = outcome.verdict.summary()["against_yours"]
    assert against["per_device"] == 16 and "keep it" in against["sentence"]


def test_the_advice_against_yours_gives_the_score_gap_and_the_speed_ratio_side_by_side():
    level = {8: 0.88, 16: 0.88, 32: 0.88, 64: 0.88}.get
    speed = {8: 700.0, 16: 1000.0, 32: 1400.0, 64: 1450.0}.get
    runner, outcome = yours_plan(level, centre=32, base_batch=16, speed=speed)
    assert outcome.chosen == 32 and outcome.verdict.walk_from == 8  # your 8 is the walk's start; 16, 32 each pay
    against = outcome.verdict.against_yours
    assert against.by == "leader" and against.speed_side_by_side and against.speed_pairs == 3
    assert against.speed_ratio == pytest.approx(2.0)
    assert ("Against your setting (8 per device at the base LR): as good as yours (score gap +0.000 ±0.000 over 3 "
            "paired seed(s)), 2.00x the samples/s of yours (3 timing round(s) side by side") in outcome.reason
    # Yours worse by the margin or more: the advice is better, and its speed against yours is timed side by side.
    worse = {8: 0.80, 16: 0.88, 32: 0.86, 64: 0.86}.get
    runner, outcome = yours_plan(worse, centre=32, base_batch=16, speed=speed)
    assert outcome.chosen == 16 and outcome.verdict.rule == BEST_BY_MARGIN
    timed = sorted({r["per_device"] for r in runner.runs if r["phase"] == "timing"})
    assert timed == [8, 16]
    assert "better than yours (score gap +0.080" in outcome.reason and "1.43x the samples/s of yours" in outcome.reason


def test_verdict_sentences_say_what_the_numbers_say():
    level = [0.95] * 3
    rounds = {8: {0: 1000.0, 1: 1000.0, 2: 1000.0}, 16: {0: 1099.0, 1: 1099.0, 2: 1200.0}}
    verdict = decide_sweep(runs(8, level) + runs(16, level), 10, timing=rounds)
    assert verdict.chosen == 8 and verdict.rule == EQUALS_SMALLEST
    # A miss reads as one: 1.099 under a 1.10 bar is not "+10%".
    assert "16 over 8: 1.099x, 1.099x, 1.200x (1 of 3 over the 1.10x bar: not shown more than 10% faster yet)" \
        in verdict.reason
    assert verdict.headline == ("an equal of the best; the smallest of the equals; no bigger one was shown more "
                                "than 10% faster")
    assert "fastest" not in verdict.reason and "fastest" not in verdict.headline
    # A walk that paid says where it started and that each step paid.
    paid = decide_sweep(runs(8, level) + runs(16, level), 10,
                        timing={8: {r: 1000.0 for r in range(6)}, 16: {r: 1200.0 + 20 * r for r in range(6)}})
    assert paid.chosen == 16 and paid.headline.endswith(
        "walked up from 8 (the smallest of the equals), the rounds showing each step more than 10% faster")
    # "equal" only for a true tie; a worse candidate is called worse.
    apart = decide_sweep(runs(8, level) + runs(16, [0.90] * 3), 10)
    assert "16: gap 0.050" in apart.reason and "worse by the margin or more" in apart.reason
    assert "equal (" not in apart.reason and apart.headline == "best, by the margin or more"


def test_a_seeds_budget_no_larger_than_k_asks_for_no_extra_seeds():
    verdict = issue_case(policy=SweepPolicy(seeds=3, max_seeds=3))
    assert verdict.comparisons[0].by == "inconclusive" and verdict.extra_seeds == [] and verdict.chosen == 6


def test_the_summary_says_how_the_advice_compares_with_yours():
    from types import SimpleNamespace

    from advisor.explain import _why_line
    from dataclasses import replace

    from advisor.recipe import MethodTable, RecipeDocument, SweepTable

    _, outcome = yours_plan({8: 0.88, 16: 0.88, 32: 0.88, 64: 0.88, 128: 0.88}.get, centre=64, base_batch=32,
                            speed=lambda b: 1000.0)
    # _why_line reads only the typed [method] table (carve-data's RecipeDocument); the rest of a recipe is not needed.
    sweep = {**outcome.summary(), "pick": outcome.chosen}
    method = replace(RecipeDocument.table_of(MethodTable, {"method": {}}, "method"),
                     sweep=RecipeDocument.table_of(SweepTable, {"method.sweep": sweep}, "method.sweep"))
    line = _why_line(SimpleNamespace(method=method))
    assert line.startswith("Sweep: 16 per device, an equal of the best; your own setting of the equals")
    assert "equal: 16, 32, 64;" in line and "tied" not in line
    assert line.endswith("Against your setting (16 per device at the base LR): no better than yours: keep it (no "
                         "equal of it was shown more than 10% faster in paired measurements).")


def test_a_timing_run_lasts_long_enough_that_a_scheduler_stall_cannot_decide_it():
    """Regression (session m-v3, a held-out MLP at 1-4 ms a step, load ~16 on 2 cores): 40-step timing rounds lasted
    0.04-0.16 s and read 32 per device against 16 at 1.966x, 0.408x and 4.292x (the bench's 12-epoch runs: 2.3x), so
    the walk stayed at 16. A timing run now lasts MIN_TIMING_SECONDS at the batch's swept speed."""
    from advisor.method.speed import MAX_TIMING_STRETCH, MIN_TIMING_SECONDS, MIN_TIMING_STEPS, timing_steps

    assert timing_steps(40, None, 32) == 40  # speed unknown: the trial's length stands
    # Slow: 2 s is 7 steps, and a median wants MIN_TIMING_STEPS (session m-v3b: the trial's 40-step floor made
    # digits-cnn's 64-per-device timing runs last 4-8 s, 5,120 samples each).
    assert timing_steps(40, 100.0, 32) == MIN_TIMING_STEPS == 10 and timing_steps(8, 100.0, 32) == 8
    assert timing_steps(40, 3200.0, 32) == 200  # 100 steps a second: 2 s
    assert timing_steps(40, 1e9, 32) == MAX_TIMING_STRETCH * 40
    speed = {8: 700.0, 16: 1000.0, 32: 1400.0, 64: 1450.0}
    runner, outcome = yours_plan({8: 0.88, 16: 0.88, 32: 0.88, 64: 0.88}.get, centre=32, base_batch=16,
                                 speed=speed.get)
    timed = {(r["per_device"], r["steps"]) for r in runner.runs if r["phase"] == "timing"}
    assert timed and all(steps * b * 2 / speed[b] >= MIN_TIMING_SECONDS for b, steps in timed)
    assert all(steps > 8 for _, steps in timed)  # longer than the trial's 8 steps


def test_the_speed_ratio_against_yours_is_a_ratio_with_a_ratios_interval():
    """Regression (session m-v3, held-out adam-edge under load ~15): timing rounds of 4.44x, 4.02x and 2.20x (and a
    walk on to 128) printed "9.87x the samples/s of yours (..., 95% interval -11.69-31.43x)": a mean of ratios with
    a symmetric interval. The ratio is the geometric mean of the paired ratios, its interval taken on their logs
    (the three rounds twice: six all over the bar show the step)."""
    import math

    level = [0.95] * 3
    rounds = {16: {r: 1000.0 for r in range(6)}, 32: dict(enumerate([4440.0, 4020.0, 2200.0] * 2))}
    verdict = decide_sweep(runs(16, level) + runs(32, level), 10, timing=rounds, yours=16)
    against = verdict.against_yours
    assert verdict.chosen == 32 and against.speed_side_by_side
    logs = [math.log(4.44), math.log(4.02), math.log(2.2)]
    assert against.speed_ratio == pytest.approx(math.exp(sum(logs) / 3))
    assert 0 < against.speed_low < against.speed_ratio < against.speed_high
    low, high = verdict.summary()["against_yours"]["samples_per_s_ratio_interval"]
    assert low == pytest.approx(against.speed_low, abs=1e-4) and high == pytest.approx(against.speed_high, abs=1e-4)
    assert f"{against.speed_ratio:.2f}x the samples/s of yours (6 timing round(s) side by side, 95% interval " \
           f"{against.speed_low:.2f}-{against.speed_high:.2f}x)" in verdict.reason


def test_a_comparison_with_yours_under_the_default_warmup_says_so_in_a_warning():
    """A newcomer's script used no warmup; the plan ran yours and every candidate with the advisor's default one, and
    yours lost the pick to a smaller equal (with --base-warmup 0: "keep yours"). The recipe says the comparison
    assumed that warmup; with a warmup you gave, nothing is said."""
    from helpers import swept_session

    from advisor.report import build_recipe

    for base_warmup, warned in ((None, True), ((0.0, "steps"), False)):
        session, _, outcome = swept_session({8: 0.95, 16: 0.95, 32: 0.95}.__getitem__, centre=16, extensions=0,
                                            base_batch=64, base_warmup=base_warmup)
        assert outcome.verdict.against_yours is not None
        codes = [w["code"] for w in build_recipe(session.finish())["warnings"]]
        assert ("yours-ran-with-default-warmup" in codes) is warned, codes

