"""The gradient noise scale against a value known in closed form; the recipe's launch env; saving safely."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from advisor.method.noise import MAX_SPREAD, GradNormSample, estimate_noise, noise_scale
from helpers import analytic_linear_regression_b_simple, REPO


def _linear_regression_norms(dim=16, distance_sq=1.0, noise_var=1.0, b_small=8, replicas=4, steps=6000, seed=0):
    """Per-replica and all-reduced squared gradient norms, as DDP sees them, for least squares at fixed w."""
    g = torch.Generator().manual_seed(seed)
    w_star = torch.randn(dim, generator=g, dtype=torch.float64)
    d = torch.randn(dim, generator=g, dtype=torch.float64)
    d *= (distance_sq / d.pow(2).sum()).sqrt()
    w = w_star + d
    x = torch.randn(steps, replicas, b_small, dim, generator=g, dtype=torch.float64)
    y = x @ w_star + noise_var ** 0.5 * torch.randn(steps, replicas, b_small, generator=g, dtype=torch.float64)
    residual = x @ w - y  # steps x replicas x b
    grads = (residual.unsqueeze(-1) * x).mean(dim=2)  # mean per-sample gradient per replica: steps x replicas x dim
    small_steps = grads.pow(2).sum(-1).mean(dim=1)  # each step: |g_b|^2 averaged over the replicas
    big_steps = grads.mean(dim=1).pow(2).sum(-1)  # each step: |g_B|^2 of the all-reduced gradient
    return GradNormSample(float(small_steps.mean()), float(big_steps.mean()), b_small, b_small * replicas, steps,
                          tuple(small_steps.tolist()), tuple(big_steps.tolist()))


def test_noise_scale_matches_linear_regression_with_gaussian_noise_within_20_percent():
    expected = analytic_linear_regression_b_simple(dim=16, distance_sq=1.0, noise_var=1.0)
    assert expected == pytest.approx(33.0)  # (16 x (1 + 1) + 1) / 1
    estimate = noise_scale(_linear_regression_norms())
    assert estimate.b_simple == pytest.approx(expected, rel=0.2)
    assert estimate.true_grad_sq == pytest.approx(1.0, rel=0.2)
    # A noisier problem has a proportionally larger noise scale.
    noisier = noise_scale(_linear_regression_norms(noise_var=4.0, seed=1))
    assert noisier.b_simple == pytest.approx(analytic_linear_regression_b_simple(16, 1.0, 4.0), rel=0.2)


def test_noise_scale_needs_two_batch_sizes():
    with pytest.raises(ValueError):
        noise_scale(GradNormSample(1.0, 1.0, 8, 8, 10))
    assert noise_scale(GradNormSample(1.0, 1.2, 8, 16, 10)).b_simple is None  # noise swamped the signal


def test_noise_interval_covers_the_known_noise_scale_in_at_least_18_of_20_seeded_short_runs():
    """Least squares with a closed-form B_simple = 33 (dim 16, |d|^2 = 1, noise 1), 20 seeds, each a run as
    short as a trial's measured half: 150 steps of 4 replicas x 8. Every point estimate lands within 20%, and
    the 99% bootstrap interval over steps holds the truth in >= 90% of the repeats (18 of 20)."""
    truth = analytic_linear_regression_b_simple(dim=16, distance_sq=1.0, noise_var=1.0)
    estimates = [estimate_noise([_linear_regression_norms(steps=150, seed=seed)], seed=seed) for seed in range(20)]
    assert all(e.known for e in estimates), [e.reason for e in estimates if not e.known]
    errors = [abs(e.value / truth - 1) for e in estimates]
    covered = sum(e.low <= truth <= e.high for e in estimates)
    print(f"\nB_simple truth {truth:.1f}: worst error {max(errors):.1%}, interval covers {covered}/20, "
          f"mean width x{sum(e.high / e.low for e in estimates) / 20:.2f}")
    assert max(errors) <= 0.2
    assert covered >= 18
    # Two runs at different batch sizes pool their steps (each step's terms use its own b_small, b_big).
    pooled = estimate_noise([_linear_regression_norms(steps=100, seed=40),
                             _linear_regression_norms(steps=100, b_small=16, replicas=2, seed=41)])
    assert pooled.runs == 2 and pooled.steps == 200 and pooled.value == pytest.approx(truth, rel=0.2)


def test_noise_scale_is_unknown_when_its_interval_spans_an_order_of_magnitude():
    # A weak signal (|d|^2 = 0.3: B_simple = 70) seen for only 40 steps of 2 x 8: the point estimate is positive
    # but its interval runs from ~33 to ~1250, so no number is reported.
    vague = estimate_noise([_linear_regression_norms(distance_sq=0.3, replicas=2, steps=40, seed=2)])
    assert not vague.known and vague.value is None and vague.true_grad_sq > 0 and vague.trace_sigma > 0
    assert vague.high / vague.low > MAX_SPREAD and f"wider than {MAX_SPREAD:g}x" in vague.reason
    # Weaker still (|d|^2 = 0.01): resampled steps give a non-positive |G|^2, the interval has no upper end.
    unbounded = estimate_noise([_linear_regression_norms(distance_sq=0.01, replicas=2, steps=20, seed=0)])
    assert not unbounded.known and unbounded.high is None and "unbounded" in unbounded.reason
    assert "unknown" in estimate_noise([]).reason  # nothing measured (one process, an adapter without norms)
    # Non-finite steps (an fp16 overflow) are left out and counted, not averaged in.
    sample = _linear_regression_norms(steps=150, seed=5)
    spoiled = GradNormSample(sample.small_sq, sample.big_sq, 8, 32, 152, sample.small_sq_steps + (float("inf"), 1.0),
                             sample.big_sq_steps + (1.0, float("nan")))
    assert estimate_noise([spoiled]).value == pytest.approx(estimate_noise([sample]).value)
    assert estimate_noise([spoiled]).skipped == 2
    # Adam-family optimizers get the estimate with a note that it is a proxy.
    assert "proxy" in estimate_noise([sample], optimizer="adamw").reason


def test_runs_that_disagree_by_more_than_3x_give_unknown_not_a_pooled_number():
    """Regression (issue 24): two plans of digits-cnn gave pooled 99% intervals of 6-21 and 56-117, which do not
    overlap: pooling every step of every run hid that the runs measured different things."""
    from advisor.method.noise import RUN_DISAGREEMENT

    agree = estimate_noise([_linear_regression_norms(steps=150, seed=s) for s in (10, 11)])
    assert agree.known and len(agree.per_run) == 2 and max(agree.per_run) / min(agree.per_run) < RUN_DISAGREEMENT
    assert "the runs' own estimates" in agree.reason
    # One run at noise 1 (B_simple 33), one at noise 16 (B_simple ~ 257): 8x apart, each run's own interval narrow.
    apart = estimate_noise([_linear_regression_norms(steps=400, seed=12),
                            _linear_regression_norms(steps=400, noise_var=16.0, seed=13)])
    assert not apart.known and apart.value is None and len(apart.per_run) == 2
    assert "the runs disagree" in apart.reason and f"more than {RUN_DISAGREEMENT:g}x apart" in apart.reason
    # A run too short to say anything on its own (its interval spans an order of magnitude) is not counted as a
    # disagreement: 150 steps of the noisier one.
    vague = estimate_noise([_linear_regression_norms(steps=150, seed=12),
                            _linear_regression_norms(steps=150, noise_var=16.0, seed=13)])
    assert len(vague.per_run) == 1


RECIPE = REPO / "recipes" / "digits-cnn.toml"


def test_load_recipe_reads_only_and_apply_env_sets_the_launch_env(tmp_path):
    text = RECIPE.read_text().replace("[launch.env]\n", "[launch.env]\nADVISOR_TEST_VAR = \"on\"\n", 1)
    path = tmp_path / "r.toml"
    path.write_text(text)
    # Reading a recipe changes neither the environment nor the allocator (no libc is loaded for mallopt);
    # apply_env() is the explicit call that does both.
    code = ("import ctypes, os, advisor\n"
            "loaded = []\n"
            "real_cdll = ctypes.CDLL\n"
            "ctypes.CDLL = lambda name, *a, **k: loaded.append(name) or real_cdll(name, *a, **k)\n"
            "before = dict(os.environ)\n"
            "r = advisor.load_recipe(%r)\n"
            "print(dict(os.environ) == before, loaded == [], r.launch_env['ADVISOR_TEST_VAR'])\n"
            "missed = r.apply_env()\n"
            "print(os.environ.get('ADVISOR_TEST_VAR'), os.environ.get('MALLOC_MMAP_THRESHOLD_'), missed, loaded)"
            % str(path))
    env = {k: v for k, v in os.environ.items() if k not in ("ADVISOR_TEST_VAR", "MALLOC_MMAP_THRESHOLD_")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    unchanged, applied = run.stdout.splitlines()
    assert unchanged.split() == ["True", "True", "on"]
    assert applied.split() == ["on", "65536", "[]", "['libc.so.6']"]  # exported, and mallopt took the threshold


def test_launch_env_must_be_strings(tmp_path):
    from advisor.errors import RecipeError
    from advisor.recipe import check_recipe

    text = RECIPE.read_text()
    assert "[launch.env]\n" in text  # the committed recipe carries the CPU allocator setting
    text = text.replace("[launch.env]\n", "[launch.env]\nOMP_NUM_THREADS = 1\n", 1)
    path = tmp_path / "r.toml"
    path.write_text(text)
    with pytest.raises(RecipeError, match="OMP_NUM_THREADS"):
        check_recipe(path)


def test_a_finished_run_is_never_lost_when_the_recipe_cannot_be_written(tmp_path):
    from advisor.recipe import check_recipe, read_recipe_data, save_recipe

    data, _ = read_recipe_data(RECIPE)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a folder should be")
    saved = save_recipe(data, blocker / "recipe.toml")
    assert saved.fallback_reason and saved.path.exists() and saved.path.parent != blocker
    assert check_recipe(saved.path)["batch"] == data["batch"]


def test_output_path_is_checked_before_any_work(tmp_path):
    from advisor.errors import RecipeError
    from advisor.recipe import check_output_path

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RecipeError, match="not a writable directory"):
        check_output_path(blocker / "r.toml")
    with pytest.raises(RecipeError, match="is a directory"):
        check_output_path(tmp_path)
    existing = tmp_path / "r.toml"
    existing.write_text("x")
    with pytest.raises(RecipeError, match="already exists"):
        check_output_path(existing)
    check_output_path(existing, force=True)
    with pytest.raises(RecipeError, match="does not exist"):  # folders are never made on the way (issue 25)
        check_output_path(tmp_path / "new" / "deeper" / "r.toml")
