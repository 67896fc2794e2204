"""The gradient noise scale (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training").

B_simple = tr(Sigma) / |G|^2 predicts the critical batch: beyond it more batch buys little
statistical progress. Two gradient norms at two batch sizes give unbiased estimates of both
terms. Data parallelism hands them over for free: each replica's gradient (batch b_small) and
the all-reduced one (batch b_big = b_small x replicas). Any adapter that can report those two
squared norms feeds this module; the maths lives here, not in a worker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GradNormSample:
    """Mean squared gradient norms over some optimizer steps, at two batch sizes."""

    small_sq: float  # E|g_b|^2 for the per-replica batch b_small
    big_sq: float  # E|g_B|^2 for the all-reduced batch b_big
    b_small: int
    b_big: int
    steps: int


@dataclass(frozen=True)
class NoiseScale:
    true_grad_sq: float  # estimate of |G|^2
    trace_sigma: float  # estimate of tr(Sigma), the per-sample gradient variance summed over parameters
    b_simple: float | None  # None when |G|^2 or tr(Sigma) came out non-positive (too noisy to tell)
    sample: GradNormSample

    def to_dict(self) -> dict:
        return {"g_true_sq": self.true_grad_sq, "trace_sigma": self.trace_sigma, "b_simple": self.b_simple,
                **asdict(self.sample)}


def noise_scale(sample: GradNormSample) -> NoiseScale:
    """Unbiased |G|^2 and tr(Sigma) from E|g_b|^2 = |G|^2 + tr(Sigma)/b at two batch sizes (Appendix A.1)."""
    if sample.b_big <= sample.b_small:
        raise ValueError(f"the big batch ({sample.b_big}) must exceed the small one ({sample.b_small})")
    b, big = sample.b_small, sample.b_big
    true_sq = (big * sample.big_sq - b * sample.small_sq) / (big - b)
    trace = (sample.small_sq - sample.big_sq) / (1 / b - 1 / big)
    # Either estimate at or below zero means the short run was too noisy to separate signal from noise.
    return NoiseScale(true_sq, trace, trace / true_sq if true_sq > 0 and trace > 0 else None, sample)

