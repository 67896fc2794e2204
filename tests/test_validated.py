"""Issue 36 item 5, "validated means validated at the rule's LR": a (global batch, LR) is validated only when a run of
the plan learned there and none at that batch failed at that LR or below (advisor.method.validated, the one owner);
the sweep, the LR bound, `--global-batch` in plan and replan, and `advisor check` read it. Stubs only
(milliseconds), plus the committed digits-cnn recipe's real ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import MIB, StubRunner, settings

from advisor.errors import AdvisorError
from advisor.ledger import TrialRecord
from advisor.method.inputs import WorkloadInfo, lr_for
from advisor.method.validated import (is_validated, largest_validated_global, lr_at_global, nearest_validated_lr,
                                      seen_failing)

FALLING = [2.3, 2.1, 1.9, 1.7, 1.5, 1.3, 1.2, 1.1, 1.0, 0.9, 0.85, 0.8]
DIVERGED = [2.31, 1.6, 1.05, 1.5, 7.4, 7.8, 7.6, 7.9, 7.7, 7.8, 7.5, 7.9]
REPO = Path(__file__).resolve().parents[1]
INFO = WorkloadInfo("m", "image-classification", 10, "sgd", 1000, 100, 1, False, 0.1, 32, "base")  # 0.1 at 32


def row(phase: str, per_device: int, lr: float, seed: int = 0, losses=FALLING) -> TrialRecord:
    return TrialRecord(phase, per_device, 2, 1, 2 * per_device, "ok", 1.0, lr=lr, seed=seed, losses=list(losses))


def test_a_trial_failure_unvalidates_the_setting_whatever_the_sweeps_seeds_did():
    """The committed digits-cnn recipe: 64 per device x 2 unstable at LR 0.04 in both trial seeds, learned in its 3
    sweep seeds; `replan --global-batch 128` gave 0.04 under 'trial-unstable-sweep-learned'. Seen failing before
    the fix (the sweep's seeds outweighed the trial): validated, and the LR stood at 0.2."""
    trial = [row("trial", 16, 0.2, seed, DIVERGED) for seed in (0, 1)]
    sweep = [row("sweep", 16, 0.2, seed) for seed in range(3)]
    assert not is_validated(trial + sweep, 32, 0.2)
    refused = lr_at_global(INFO, 32, 0.2, trial + sweep)
    assert refused.refused and refused.code == "lr-not-validated"
    assert ("Global batch 32 is not validated at any LR: at the rules' LR 0.2 the trial's 2 runs at 16 per device x 2 "
            "(seeds 0, 1) at LR 0.2 were unstable") in refused.message
    # A rerun at a lower LR that learned validates that LR, and only that one: it is the advice, said with its numbers.
    rerun = row("trial", 16, 0.1)
    lowered = lr_at_global(INFO, 32, 0.2, trial + sweep + [rerun])
    assert lowered.lr == pytest.approx(0.1) and lowered.code == "lr-seen-unstable"
    assert "so the LR is 0.1, the highest LR a run at global batch 32 learned at" in lowered.message
    assert "the trial's run at 16 per device x 2 (seed 0) at LR 0.1 learned" in lowered.message
    assert lr_at_global(INFO, 32, 0.2, sweep) is None  # nothing failed there: the rules' LR stands


def test_a_failure_at_a_lower_lr_unvalidates_the_higher_ones_and_one_learned_run_is_needed():
    rows = [row("sweep", 16, 0.1, losses=DIVERGED), row("sweep", 16, 0.2)]
    assert not is_validated(rows, 32, 0.2)  # unstable at 0.1: 0.2 at the same batch is not trusted either
    assert is_validated(rows[1:], 32, 0.2)
    assert not is_validated(rows[1:], 32, 0.1)  # no run learned at 0.1
    flat = row("sweep", 16, 0.2, losses=[2.3] * 12)
    assert not is_validated([flat], 32, 0.2)  # a flat run validates nothing


def test_the_bound_and_the_blame_rerun_read_the_largest_batch_validated_at_its_rules_lr():
    """A rerun at a lower LR validates that LR only: the bound starts below it. Seen failing before the fix with the
    trial's failure ignored (validated_at_rule_lr took the sweep's learned seeds): 128."""
    at = {g: lr_for(INFO, g).value for g in (32, 64, 128)}
    rows = [row("trial", 16, at[32]), row("trial", 32, at[64]), row("trial", 64, at[128], losses=DIVERGED),
            row("trial", 64, at[64]), *[row("sweep", 64, at[128], seed) for seed in range(3)]]
    assert largest_validated_global(INFO, rows) == 64
    assert nearest_validated_lr(INFO, 256, rows) == (pytest.approx(at[64]), "64 per device's")
    assert nearest_validated_lr(INFO, 128, rows) == (pytest.approx(at[64]), "32 per device's")
    assert nearest_validated_lr(INFO, 64, rows[2:]) == (0.1, "the base")  # nothing validated below 64
    assert seen_failing(rows, 128, at[128]) == (f"the trial's run at 64 per device x 2 (seed 0) at LR {at[128]:.4g} "
                                                "was unstable")
    assert seen_failing(rows, 64, at[64]) is None


def _session(runner):
    from advisor.adapters import load_adapter
    from advisor.device import HostDevices
    from advisor.session import Session, validate_setup

    s = settings(nproc=2, sweep_steps=40, sweep_extensions=0, memory_budget_bytes=300 * MIB)
    return Session(load_adapter("ddp"), s, validate_setup(s, load_adapter("ddp"), HostDevices("cpu")), runner=runner)


class DivergingRunner(StubRunner):
    """64 per device blows up at its rules' LR in the phases named (``at_lower``: at any LR)."""

    def __init__(self, phases=("trial", "sweep"), at_lower=False, **kw):
        super().__init__(saturate=None, **kw)
        self.phases, self.at_lower, self.info = phases, at_lower, None

    def train(self, phase, per_device, steps, lr, warmup_steps=0, accumulation=1, evaluate=False, precision="fp32",
              eval_points=1, seed=0):
        record = super().train(phase, per_device, steps, lr, warmup_steps, accumulation, evaluate, precision,
                               eval_points, seed)
        if record.status == "ok":
            rule = lr_for(self.info, record.global_batch).value
            bad = per_device == 64 and phase in self.phases and (self.at_lower or lr >= rule * (1 - 1e-6))
            record.losses = list(DIVERGED if bad else FALLING)
        return record


def test_the_sweep_never_picks_a_setting_the_trial_saw_fail():
    """The trial's two seeds at 64 per device diverge at its rules' LR; the sweep's three seeds there learn and score
    best. Seen failing before the fix (the sweep read only its own runs): 64 picked at the LR the trial saw fail."""
    runner = DivergingRunner(phases=("trial",), val={16: 0.90, 32: 0.95, 64: 0.99}.get)
    session = _session(runner)
    runner.info = session.info
    session.ceiling()
    session.choose_start(32)
    session.trial()
    assert [r.per_device for r in runner.ledger if r.phase == "trial" and r.losses == DIVERGED] == [64, 64]
    outcome = session.sweep(32)
    assert outcome.chosen != 64
    out = outcome.verdict.candidate(64)
    assert out.status == "unstable" and "is a setting the plan's runs saw fail (the trial's 2 runs" in out.why
    result = session.finish()
    assert result.plan.per_device == outcome.chosen
    assert result.lr.bounded_from == 2 * outcome.chosen  # 128 is not validated: the bound starts at the pick


def test_plan_global_batch_gets_the_validated_lr_or_is_refused():
    """`advisor plan --global-batch 128` where 64 per device x 2 failed at the rules' LR: the LR a rerun there learned
    at, with the warning rendered from the runs; refused (exit 2) when it failed at every LR tried there."""
    runner = DivergingRunner(val={16: 0.9, 32: 0.95, 64: 0.9}.get)
    session = _session(runner)
    runner.info = session.info
    session.ceiling()
    session.sweep(32)
    rule_lr = lr_for(session.info, 128).value
    result = session.finish(global_batch=128)
    assert result.lr.value < rule_lr * (1 - 1e-6) and result.lr.seen_failing_at == pytest.approx(rule_lr)
    warning = next(w for w in result.plan.warnings if w.code == "lr-seen-unstable")
    assert f"the sweep's run at 64 per device x 2 (seed 0) at LR {rule_lr:.4g} was unstable" in warning.message
    runner = DivergingRunner(at_lower=True, val={16: 0.9, 32: 0.95, 64: 0.9}.get)
    session = _session(runner)
    runner.info = session.info
    session.ceiling()
    session.sweep(32)
    with pytest.raises(AdvisorError, match="Global batch 128 is not validated at any LR"):
        session.finish(global_batch=128)


def _committed() -> dict:
    from advisor.recipe import check_recipe

    return check_recipe(REPO / "recipes" / "digits-cnn.toml")


def test_replan_of_the_committed_recipe_never_advises_the_lr_its_trial_saw_fail():
    """recipes/digits-cnn.toml's ledger: 64 per device x 2 unstable at LR 0.04 in both trial seeds, learned at 0.02
    when rerun, learned at 0.04 in its 3 sweep seeds. Seen failing before the fix: LR 0.04 with the warning
    trial-unstable-sweep-learned."""
    from advisor.replan import ReplanTarget, replan

    data = _committed()
    cpu = ReplanTarget(2**30, "--device-memory", None, "cpu", 2, global_batch=128)
    result = replan(data, "digits-cnn.toml", cpu)
    assert result.lr.value == pytest.approx(0.02)
    warning = next(w for w in result.plan.warnings if w.code == "lr-seen-unstable")
    assert "the trial's 2 runs at 64 per device x 2 (seeds 0, 1) at LR 0.04 were unstable" in warning.message
    assert "the trial's run at 64 per device x 2 (seed 0) at LR 0.02 learned" in warning.message
    assert not [w for w in result.plan.warnings if w.code == "trial-unstable-sweep-learned"]
    # Its own setting (global 64 at 0.02) was validated; a global batch no run reached is bounded past 64.
    assert replan(data, "digits-cnn.toml", ReplanTarget(2**30, "--device-memory", None, "cpu", 2,
                                                        global_batch=64)).lr.value == pytest.approx(0.02)
    assert replan(data, "digits-cnn.toml", ReplanTarget(2**30, "--device-memory", None, "cpu", 2,
                                                        global_batch=140)).lr.bounded_from == 64


def test_replan_refuses_a_global_batch_whose_runs_failed_at_every_lr(tmp_path, capsys):
    from advisor.replan import ReplanTarget, replan
    from advisor.recipe_check import recipe_warnings

    data = _committed()
    data["ledger"] = [r for r in data["ledger"] if not (r.get("global_batch") == 128 and r.get("lr") == 0.02)]
    with pytest.raises(AdvisorError, match="Global batch 128 is not validated at any LR") as refused:
        replan(data, "digits-cnn.toml", ReplanTarget(2**30, "--device-memory", None, "cpu", 2, global_batch=128))
    assert refused.value.exit_code == 2 and "\n" not in str(refused.value)
    # `advisor replan` says it as one paragraph and exits 2, writing nothing.
    from advisor.cli import main
    from advisor.recipe import dumps_recipe

    path = tmp_path / "r.toml"
    data.pop("measurements", None)
    path.write_text(dumps_recipe(data))
    out = tmp_path / "new.toml"
    assert main(["replan", str(path), "--device-memory", "1GiB", "--nproc", "2", "--global-batch", "128",
                 "--no-confirm", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Global batch 128 is not validated at any LR" in err and "Traceback" not in err and not out.exists()
    # `advisor check` of a recipe edited to that setting says the same.
    data["batch"].update(per_device=64, **{"global": 128}, validated_global=128)
    data["lr"].update(value=0.04, scale=2.0, rule="linear")
    data["warmup"]["steps"] = 0
    assert any("is not validated at any LR" in w for w in recipe_warnings(data))
