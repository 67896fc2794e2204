"""The gradient noise scale against a value known in closed form; the recipe's launch env; saving safely."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from advisor.noise import GradNormSample, noise_scale
from conftest import REPO, analytic_linear_regression_b_simple


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
    small_sq = grads.pow(2).sum(-1).mean()
    big_sq = grads.mean(dim=1).pow(2).sum(-1).mean()
    return GradNormSample(float(small_sq), float(big_sq), b_small, b_small * replicas, steps)


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
    check_output_path(tmp_path / "new" / "deeper" / "r.toml")
