"""LAMB and LARS run for real; the CPU LAMB applies DeepSpeed's FusedLamb rule, checked by hand."""

import math

import pytest
import torch

from advisor.optimizers import LAMB_DEFAULTS, Lamb, build_optimizer
from advisor.workload import resolve_workload


def one_step(weights, grads, **kwargs):
    w = torch.nn.Parameter(torch.tensor(weights, dtype=torch.float32))
    w.grad = torch.tensor(grads, dtype=torch.float32)
    opt = Lamb([w], **kwargs)
    opt.step()
    return w.detach(), opt.lamb_coeffs[0]


def test_lamb_first_step_matches_deepspeeds_rule_by_hand():
    # t=1, b1=0.9, b2=0.999, g=(1,0): m=(0.1,0), v=(0.001,0), u=m/(sqrt(v)+eps)=(sqrt(10),0) (to 3e-7).
    # |w|=5, |u|=sqrt(10): coeff=5/sqrt(10)=1.5811 (inside [0.01, 10]).
    # DeepSpeed puts the bias correction in the step size: lr*sqrt(1-b2)/(1-b1) = 0.1*0.0316228/0.1 = 0.0316228.
    # w0 -= 0.0316228 * 1.5811 * sqrt(10) = 0.0316228 * 5 = 0.158114.
    w, coeff = one_step([3.0, 4.0], [1.0, 0.0], lr=0.1)
    assert coeff == pytest.approx(5 / math.sqrt(10), rel=1e-5)
    assert w.tolist() == pytest.approx([3.0 - 0.5 * math.sqrt(0.1), 4.0], rel=1e-6)
    # The paper's rule (bias correction inside the trust ratio) would move w0 by lr*|w| = 0.5: DeepSpeed's does not.
    assert 3.0 - w[0].item() != pytest.approx(0.5, rel=0.1)


def test_lamb_trust_ratio_is_clamped_to_min_and_max_coeff():
    # |w|=100, |u|=sqrt(10): 31.6 is clamped to max_coeff 10: w0 -= 0.0316228*10*sqrt(10) = 1.0
    w, coeff = one_step([100.0, 0.0], [1.0, 0.0], lr=0.1)
    assert coeff == LAMB_DEFAULTS["max_coeff"] and w[0].item() == pytest.approx(99.0, rel=1e-6)
    # |w|=0.001: 0.000316 is clamped to min_coeff 0.01: w0 -= 0.0316228*0.01*sqrt(10) = 0.001
    w, coeff = one_step([0.001, 0.0], [1.0, 0.0], lr=0.1)
    assert coeff == LAMB_DEFAULTS["min_coeff"] and w[0].item() == pytest.approx(0.0, abs=1e-7)
    # A zero weight takes the plain (bias-corrected) Adam-like step: coeff 1.
    w, coeff = one_step([0.0, 0.0], [1.0, 0.0], lr=0.1)
    assert coeff == 1.0 and w[0].item() == pytest.approx(-0.1, rel=1e-5)


def test_lamb_weight_decay_enters_the_update_and_the_trust_ratio():
    # wd 0.1: u = (sqrt(10) + 0.3, 0.4); coeff = 5/|u|; w -= 0.0316228 * coeff * u
    w, coeff = one_step([3.0, 4.0], [1.0, 0.0], lr=0.1, weight_decay=0.1)
    u = torch.tensor([math.sqrt(10) + 0.3, 0.4])
    assert coeff == pytest.approx(5 / u.norm().item(), rel=1e-5)
    expected = torch.tensor([3.0, 4.0]) - math.sqrt(0.001) * coeff * u
    assert w.tolist() == pytest.approx(expected.tolist(), rel=1e-5)


def test_lamb_second_step_uses_the_step_count_in_the_bias_correction():
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    opt = Lamb([w], lr=0.1)
    for _ in range(2):
        w.grad = torch.tensor([1.0, 0.0])
        opt.step()
    # t=2: m0 = 0.19, v0 = 0.001999; step size 0.1*sqrt(1-0.999^2)/(1-0.9^2)
    m, v = 0.19, 0.001 * 0.999 + 0.001
    u0 = m / (math.sqrt(v) + 1e-8)
    w1 = 3.0 - 0.5 * math.sqrt(0.1)
    coeff = math.hypot(w1, 4.0) / u0
    expected = w1 - 0.1 * math.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2) * coeff * u0
    assert w[0].item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("name, implementation", [
    ("lamb", "advisor.optimizers.Lamb"), ("lars", "pytorch_optimizer.LARS"), ("adamw", "torch.optim.AdamW"),
    ("sgd", "torch.optim.SGD")])
def test_the_named_optimizer_runs_no_stand_in(name, implementation):
    model = torch.nn.Linear(4, 2)
    built = build_optimizer(name, model.parameters(), 0.01)
    assert built.implementation.startswith(implementation)
    before = model.weight.detach().clone()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    built.optimizer.step()
    assert not torch.equal(before, model.weight)


def test_the_workloads_optimizer_override_selects_lamb():
    workload = resolve_workload("digits-mlp")
    workload.optimizer = "lamb"
    optimizer = workload.make_optimizer(workload.build_model().parameters(), 1e-3)
    assert optimizer.advisor_implementation.startswith("advisor.optimizers.Lamb")
    assert not isinstance(optimizer, torch.optim.AdamW)
