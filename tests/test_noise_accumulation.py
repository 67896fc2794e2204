"""The gradient noise scale on one device (issue 16): the first micro-batch's gradient against the accumulated one.

The meter runs inside the real strategies' ``train_cycle`` here, in this process, on a one-rank gloo group:
real DDP (its ``no_sync`` at world size 1), a real GradScaler, real Accelerate wrappers. What the meter relies on
in their code is pinned by these tests rather than by reading it.
"""

from __future__ import annotations

import runpy

import pytest
import torch
from torch import nn

from advisor.job import TrialJob
from advisor.method.noise import estimate_noise
from helpers import analytic_linear_regression_b_simple, TEST_WORKLOADS


KNOWN_ANSWERS = TEST_WORKLOADS / "known_answers.py"


class _MSE:
    """The workload surface ``train_cycle`` uses."""

    @staticmethod
    def batch_loss(model, batch):
        x, y = batch
        return nn.functional.mse_loss(model(x), y)


def _ddp_strategy(model, optimizer, job, scaler=None):
    from advisor.process_group import GradNoiseMeter
    from advisor_adapters.ddp_worker import DDPStrategy

    strategy = DDPStrategy()  # set up by hand: the one-rank group is this test's, not setup()'s
    strategy.device, strategy.noise = torch.device("cpu"), GradNoiseMeter()
    wrapped, optimizer = strategy.prepare(model, optimizer, job)
    strategy.scaler = scaler
    return strategy, wrapped, optimizer


def _reference(model, batches):
    """|g|^2 of the first micro-batch's own gradient and of the mean over every micro-batch, computed here."""
    grads = []
    for x, y in batches:
        model.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        grads.append([p.grad.detach().clone() for p in model.parameters()])
    model.zero_grad()
    first = sum(float(g.double().pow(2).sum()) for g in grads[0])
    mean = sum(float(torch.stack([g[i] for g in grads]).double().mean(0).pow(2).sum()) for i in range(len(grads[0])))
    return first, mean


@pytest.mark.parametrize("accumulation", [2, 4])
def test_one_device_accumulation_meter_reads_the_first_micro_batch_and_the_accumulated_gradient(one_rank_group,
                                                                                                  accumulation):
    """DDP at world size 1 under no_sync, the base train_cycle, SGD with a real LR: each step's two norms equal
    the ones computed here from each micro-batch's own gradient at that step's weights."""
    torch.manual_seed(0)
    model = nn.Linear(6, 2)
    job = TrialJob(kind="train", workload="-", per_device_batch=8, accumulation_steps=accumulation)
    strategy, ddp, optimizer = _ddp_strategy(model, torch.optim.SGD(model.parameters(), lr=0.1), job)
    assert strategy.noise.measuring and strategy.noise.pair == "accumulation"
    expected = []
    for step in range(4):
        strategy.sample_noise(step >= 1)  # the first step is the warm-up: not measured
        batches = [(torch.randn(8, 6), torch.randn(8, 2)) for _ in range(accumulation)]
        if step >= 1:
            expected.append(_reference(model, batches))
        strategy.train_cycle(ddp, optimizer, iter(batches).__next__, _MSE, job, strategy.between_micro_batches)
        # The sums are device tensors until the run ends: no host read inside the timed step.
        assert all(isinstance(v, torch.Tensor) for row in strategy.noise.per_step for v in row[:2])
    sample = strategy.gradient_norms()
    assert (sample.b_small, sample.b_big, sample.steps, sample.pair) == (8, 8 * accumulation, 3, "accumulation")
    assert sample.small_sq_steps == pytest.approx([e[0] for e in expected], rel=1e-5)
    assert sample.big_sq_steps == pytest.approx([e[1] for e in expected], rel=1e-5)
    assert sample.small_sq_steps != pytest.approx(sample.big_sq_steps, rel=1e-3)  # two different gradients


def test_under_a_grad_scaler_the_loss_scale_is_divided_out_and_a_skipped_step_is_dropped(one_rank_group):
    """GradScaler (CPU, scale 2^10) scales every micro-loss; its step unscales before optimizer.step and skips
    optimizer.step on an overflow. Same norms as without the scaler; the overflowed step counts as skipped."""
    torch.manual_seed(0)
    batches = [(torch.randn(8, 6), torch.randn(8, 2)) for _ in range(2)]
    job = TrialJob(kind="train", workload="-", per_device_batch=8, accumulation_steps=2)
    model = nn.Linear(6, 2)
    first, mean = _reference(model, batches)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    strategy, ddp, optimizer = _ddp_strategy(model, torch.optim.SGD(model.parameters(), lr=0.0), job, scaler)
    strategy.sample_noise(True)
    assert strategy.loss_scale() == 1024.0
    strategy.train_cycle(ddp, optimizer, iter(batches).__next__, _MSE, job, strategy.between_micro_batches)
    overflow = [(batches[0][0], batches[0][1]), (batches[1][0] * float("inf"), batches[1][1])]
    strategy.sample_noise(True)
    strategy.train_cycle(ddp, optimizer, iter(overflow).__next__, _MSE, job, strategy.between_micro_batches)
    sample = strategy.gradient_norms()  # the run's last step overflowed: counted too
    assert sample.steps == 1 and sample.skipped == 1
    assert sample.small_sq_steps == pytest.approx([first], rel=1e-5)
    assert sample.big_sq_steps == pytest.approx([mean], rel=1e-5)


def test_under_accelerate_the_inner_optimizer_steps_once_per_accumulation_cycle(one_rank_group, monkeypatch):
    """Accelerate's AcceleratedOptimizer.step calls the inner optimizer only at the sync boundary, so the
    pre-hook on the inner one sees the accumulated gradient once per cycle (its zero_grad skips the others)."""
    from accelerate.state import AcceleratorState, GradientState

    from advisor_adapters.accelerate_worker import AccelerateStrategy

    monkeypatch.setenv("ACCELERATE_USE_CPU", "1")
    torch.manual_seed(0)
    job = TrialJob(kind="train", workload="-", per_device_batch=8, accumulation_steps=2)
    strategy = AccelerateStrategy()
    try:
        strategy.setup(job)
        model = nn.Linear(6, 2)
        wrapped, optimizer = strategy.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), job)
        assert strategy.world_size == 1 and strategy.noise.pair == "accumulation"
        expected = []
        for step in range(3):
            strategy.sample_noise(True)
            batches = [(torch.randn(8, 6), torch.randn(8, 2)) for _ in range(2)]
            expected.append(_reference(model, batches))
            strategy.train_cycle(wrapped, optimizer, iter(batches).__next__, _MSE, job, strategy.between_micro_batches)
        sample = strategy.gradient_norms()
    finally:
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
    assert (sample.steps, sample.b_small, sample.b_big) == (3, 8, 16)
    assert sample.small_sq_steps == pytest.approx([e[0] for e in expected], rel=1e-5)
    assert sample.big_sq_steps == pytest.approx([e[1] for e in expected], rel=1e-5)


def test_one_device_accumulation_measures_the_known_noise_scale_of_least_squares(one_rank_group):
    """Least squares at a fixed point (lr 0), B_simple = 33 in closed form, through the real meter in the real
    DDP strategy's cycle: 8 per micro-batch, accumulation 4, 600 steps. Within 20%, and its interval holds it."""
    known = runpy.run_path(str(KNOWN_ANSWERS))
    truth = analytic_linear_regression_b_simple(known["DIM"], known["DISTANCE_SQ"], known["NOISE_VAR"])
    workload = known["least_squares"]()
    x, y = workload.train_data.tensors
    job = TrialJob(kind="train", workload="-", per_device_batch=8, accumulation_steps=4)
    model = workload.build_model()
    strategy, ddp, optimizer = _ddp_strategy(model, torch.optim.SGD(model.parameters(), lr=0.0), job)
    batches = iter((x[i:i + 8], y[i:i + 8]) for i in range(0, len(x), 8))
    for _ in range(600):
        strategy.sample_noise(True)
        strategy.train_cycle(ddp, optimizer, batches.__next__, workload, job, strategy.between_micro_batches)
    sample = strategy.gradient_norms()
    estimate = estimate_noise([sample])
    print(f"\nB_simple truth {truth:.1f}, one-device accumulation estimate {estimate.value:.1f} "
          f"({estimate.low:.1f}-{estimate.high:.1f})")
    assert estimate.value == pytest.approx(truth, rel=0.2)
    assert estimate.low <= truth <= estimate.high
    assert "micro-batch vs accumulated gradient norms" in estimate.reason
    assert "per-replica" not in estimate.reason


# -- the session: when the accumulation run happens, and what it feeds ----------------------------------------------

def _stub_session(nproc=1, adapter=None, events=None):
    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.session import Session, validate_setup
    from helpers import settings, StubRunner

    adapter = adapter or load_adapter("ddp")
    s = settings(nproc=nproc)
    runner = StubRunner(nproc=nproc, saturate=None)
    session = Session(adapter, s, validate_setup(s, adapter, HostDevices("cpu")),
                      (events.append if events is not None else None), runner=runner)
    session.ceiling()
    session.choose_start(32)
    return session, runner


def test_one_process_runs_one_accumulation_2_run_after_the_trial_and_the_plan_keeps_it_in_the_ledger():
    from advisor.events import Decision
    from advisor.method import lr_and_warmup
    from advisor.report import build_recipe

    events = []
    session, runner = _stub_session(events=events)
    trial = session.trial()
    noise = [r for r in runner.ledger if r.phase == "noise"]
    assert len(noise) == 1 and trial.noise_run is noise[0] and noise[0] not in trial.rows
    # Half the trial's choice per micro-batch: the trial's own global batch, so the LR the trial showed to train.
    half = trial.chosen // 2
    assert (noise[0].per_device, noise[0].accumulation, noise[0].precision) == (half, 2, trial.precision)
    lr, warmup = lr_and_warmup(session.info, trial.chosen, session.settings.trial_steps)
    assert lr == trial.rows[-1].lr
    assert runner.runs[-1] == dict(phase="noise", per_device=half, steps=session.settings.trial_steps, lr=lr,
                                   warmup_steps=warmup, seed=0)
    said = [e.message for e in events if isinstance(e, Decision) and e.step == 3]
    assert f"One device: a short run of {half} per device x 2 accumulation" in said[-1]
    assert "micro-batch vs accumulated" in said[-1]
    # The stub reports no gradient norms: unknown, and the sentence names the run, not "2+ processes".
    estimate = session.noise_estimate()
    assert not estimate.known and "accumulation 2" in estimate.reason and "2+ processes" not in estimate.reason
    session.sweep()
    recipe = build_recipe(session.finish())
    assert [row["accumulation"] for row in recipe["ledger"] if row["phase"] == "noise"] == [2]


def test_no_accumulation_run_with_two_processes_or_an_adapter_whose_worker_has_no_meter():
    from dataclasses import replace

    from advisor.adapters import load_adapter
    from advisor.door import ScriptAdapter

    session, runner = _stub_session(nproc=2)
    session.trial()
    assert not [r for r in runner.ledger if r.phase == "noise"]
    assert "2+ processes" in _stub_session(nproc=2)[0].noise_estimate().reason  # nothing measured, nothing run
    plain = load_adapter("ddp")
    plain.capabilities = replace(plain.capabilities, noise_by_accumulation=False)  # as DeepSpeed's worker
    session, runner = _stub_session(adapter=plain)
    assert session.trial().noise_run is None and not [r for r in runner.ledger if r.phase == "noise"]
    assert load_adapter("ddp").capabilities.noise_by_accumulation
    assert load_adapter("accelerate").capabilities.noise_by_accumulation
    assert not load_adapter("deepspeed").capabilities.noise_by_accumulation
    assert not ScriptAdapter(load_adapter("ddp")).capabilities.noise_by_accumulation  # the user's own loop


def test_the_accumulation_runs_step_time_gives_the_goodput_fit_its_second_accumulation_count():
    """T_iter = s x (a + c b) + T_opt: with only s = 1 runs timed, T_opt cannot be told from a; the noise run's
    s = 2 separates it."""
    from advisor.method.goodput import fit_step_time, timed_points
    from advisor.ledger import TrialRecord

    def step(b, s):
        return s * (0.01 + 0.001 * b) + 0.005

    rows = [TrialRecord(phase, b, 1, s, b * s, "ok", 1.0, step_seconds=step(b, s))
            for phase, b, s in (("trial", 16, 1), ("trial", 32, 1), ("noise", 32, 2), ("sweep", 64, 1))]
    assert (32, 2, step(32, 2)) in timed_points(rows)
    model = fit_step_time(timed_points(rows))
    assert model.per_step_s == pytest.approx(0.005) and model.micro_fixed_s == pytest.approx(0.01)
    assert "accumulated ones among them" in model.note


@pytest.mark.slow
@pytest.mark.distributed
def test_a_real_one_process_ddp_session_measures_the_noise_scale_with_an_accumulation_run(no_leftover_processes):
    """Real torchrun workers (DDP adapter, 1 gloo process, digits-mlp): ceiling, one trial run at the cap, then
    the accumulation run. Its row is in the ledger with the worker's per-step norms (micro-batch b vs accumulated
    2b), and the estimate, known or not, says which pair it rests on."""
    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.method import MethodSettings
    from advisor.session import Session, validate_setup
    from helpers import REPO

    ddp = load_adapter("ddp")
    settings = MethodSettings(workload="digits-mlp", adapter_name="ddp", nproc=1, device="cpu",
                              memory_budget_bytes=256 * 2**20, trial_steps=12, workdir=str(REPO))
    with Session(ddp, settings, validate_setup(settings, ddp, HostDevices("cpu"))) as session:
        session.ceiling()
        session.choose_start(session.cap.value)  # at the cap: one trial run, no doubling
        trial = session.trial()
    row = trial.noise_run
    assert row is not None and row.status == "ok" and row in session.ledger
    half = trial.chosen // 2
    assert (row.phase, row.per_device, row.accumulation, row.global_batch) == ("noise", half, 2, 2 * half)
    norms = row.gradient_norms
    assert (norms["pair"], norms["b_small"], norms["b_big"]) == ("accumulation", half, 2 * half)
    assert norms["steps"] == len(norms["small_sq_steps"]) == 6 and norms["skipped"] == 0  # the run's second half
    # The first micro-batch alone is noisier than the two together, on average.
    assert norms["small_sq"] > norms["big_sq"] > 0
    estimate = session.noise_estimate()
    print(f"\n{estimate.reason}")
    assert "micro-batch vs accumulated gradient norms on one device" in estimate.reason
    assert "2+ processes" not in estimate.reason


async def test_the_trial_screen_shows_the_noise_run_as_its_own_row():
    """One process: the Trial screen's table keeps the accumulation run apart from the trial's candidates, and
    its row fits at 80 columns."""
    from tui_stub import cut_cells
    from tui_stub import run_step, stub_app, walk_to

    app = stub_app(nproc=1)
    async with app.run_test(size=(80, 24)) as pilot:
        await walk_to(pilot, "trial")
        await run_step(pilot, "trial")
        outcome = app.session.trial_outcome
        table = app.screen.query_one("#runs")
        assert outcome.noise_run is not None and table.row_count == len(outcome.rows) + 1
        last = [str(cell) for cell in table.get_row_at(table.row_count - 1)]
        assert last[-1].endswith("noise") and last[0] == str(outcome.chosen // 2) and last[1] == str(outcome.chosen)
        assert cut_cells(table) == []
        numbers = app.screen.query_one("#numbers DataTable")
        assert any(str(numbers.get_row_at(i)[0]) == "Noise run" for i in range(numbers.row_count))
        assert cut_cells(numbers) == []


def test_a_last_step_spike_does_not_throw_a_run_out_of_the_estimate_and_a_run_left_out_is_named():
    # Seen on one CPU process: the noise run's loss went 2.3 -> 0.6 and its last step read 6.7; first-vs-last
    # step called it a rising loss, dropped its 20 measured steps, and the plan said only "gave too few".
    from advisor.ledger import TrialRecord
    from advisor.method.health import judge
    from advisor.method import noise_estimate

    def loss_fell(record):
        return judge(record).verdict != "unstable"

    rng = __import__("random").Random(0)
    small = tuple(2.0 + rng.random() for _ in range(20))
    big = tuple(1.2 + rng.random() * 0.2 for _ in range(20))
    norms = dict(small_sq=sum(small) / 20, big_sq=sum(big) / 20, b_small=32, b_big=64, steps=20,
                 small_sq_steps=small, big_sq_steps=big, pair="accumulation")

    def run(losses):
        return TrialRecord("noise", 32, 1, 2, 64, "ok", 1.0, losses=losses, gradient_norms=norms)

    spiked = run([2.3, 2.2, 2.0, 1.6, 1.2, 0.9, 0.7, 0.6, 0.5, 0.6, 0.5, 6.7])
    assert loss_fell(spiked) and noise_estimate([spiked]).steps == 20
    rose = run([2.3, 2.4, 2.8, 3.5, 4.9, 6.0, 7.7, 9.1])
    assert not loss_fell(rose) and not loss_fell(run([2.3, float("nan"), 0.5, 0.4]))
    estimate = noise_estimate([rose])
    assert not estimate.known and estimate.steps == 0
    assert ("Left out: the noise run at 32 per device x 2 accumulation (unstable), whose training loss did not fall"
            in estimate.reason)
    # A confirmation seed repeats its setting: the two runs alike are named once, with their count.
    twice = noise_estimate([rose, run([2.3, 2.5, 2.9, 3.8, 5.0, 6.4, 8.0, 9.9])])
    assert "Left out: the 2 noise runs at 32 per device x 2 accumulation (unstable), whose" in twice.reason


def test_a_wide_interval_on_one_device_asks_for_longer_runs_not_more_processes():
    from advisor.method.noise import GradNormSample, estimate_noise

    small, big = (3.0, 9.0, 2.1, 7.5, 2.2, 12.0), (3.0, 3.5, 2.9, 3.6, 3.0, 3.3)  # |G|^2 swings around 0.5
    for pair, said, unsaid in (("accumulation", "a longer --trial-steps would narrow it", "more processes"),
                               ("replicas", "longer runs or more processes would narrow it", "--trial-steps")):
        sample = GradNormSample(sum(small) / 6, sum(big) / 6, 8, 16, 6, small, big, pair=pair)
        estimate = estimate_noise([sample])
        assert not estimate.known and said in estimate.reason and unsaid not in estimate.reason, estimate.reason
