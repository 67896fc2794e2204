"""The gradient noise scale (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training").

B_simple = tr(Sigma) / |G|^2 predicts the critical batch: beyond it more batch buys little
statistical progress. Two gradient norms at two batch sizes give unbiased estimates of both
terms. Data parallelism hands them over for free: each replica's gradient (batch b_small) and
the all-reduced one (batch b_big = b_small x replicas). One device gets them from accumulation: the
first micro-batch's gradient (b_small) and the accumulated one (b_big = b_small x steps). Any adapter that can report those two squared norms per optimizer
step feeds this module; the maths lives here, not in a worker.

Appendix A's recipe: the two terms are averaged over steps separately and only then divided (the
ratio of noisy per-step values is biased and heavy-tailed). A bootstrap over steps (and over seeds, when
several seeds of one setting measured it) gives the interval; an interval spanning an order of magnitude is
reported as unknown, not as a number. The value comes from one stage of training: the chosen sweep
candidate's runs (noise_estimate), with the trial's early runs as a lower bound.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from ..ledger import TrialRecord
from .health import UNSTABLE, judge

BOOTSTRAP_RESAMPLES = 2000
# Two-sided: the 0.5th to 99.5th percentile of the bootstrap ratios. Per-step norms are heavy-tailed, so the
# bootstrap understates the ratio's spread: on least squares with 150 steps a nominal 95% interval held the
# truth in 91.5% of 200 seeds, a nominal 99% one in 99%.
CONFIDENCE = 0.99
MAX_SPREAD = 10.0  # high / low above this: the interval spans an order of magnitude, so "unknown"
MIN_STEPS = 4  # fewer measured steps give no usable bootstrap
# Each seed of the chosen candidate whose own interval is within MAX_SPREAD also gets its own estimate; when those
# disagree by more than this factor, the seeds measure different things and no one number stands for them:
# "unknown". Only seeds of one setting are compared: B_simple grows as the loss falls, so an early trial run and a
# late sweep run always disagree (trial runs 95-336 against sweep runs 510-796 on an Adam MLP), and pooling them
# gave two plans of digits-cnn intervals of 6-21 and 56-117, which do not overlap.
RUN_DISAGREEMENT = 3.0


@dataclass(frozen=True)
class GradNormSample:
    """Mean squared gradient norms over some optimizer steps, at two batch sizes, and the per-step values."""

    small_sq: float  # E|g_b|^2 for the per-replica (or first micro-) batch b_small
    big_sq: float  # E|g_B|^2 for the all-reduced (or accumulated) batch b_big
    b_small: int
    b_big: int
    steps: int
    small_sq_steps: tuple[float, ...] = ()  # |g_b|^2 each step (averaged over replicas), loss scale divided out
    big_sq_steps: tuple[float, ...] = ()  # |g_B|^2 each step
    skipped: int = 0  # steps left out because a norm was not finite (an fp16 overflow step)
    pair: str = "replicas"  # which two gradients: "replicas" (per-replica vs all-reduced) or "accumulation"


# What each pair of gradients is, said in the estimate's reason.
PAIR_WORDS = {"replicas": "per-replica vs all-reduced gradient norms",
              "accumulation": "micro-batch vs accumulated gradient norms on one device"}


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
    true_sq, trace = _unbiased_terms(sample.small_sq, sample.big_sq, sample.b_small, sample.b_big)
    # Either estimate at or below zero means the short run was too noisy to separate signal from noise.
    return NoiseScale(true_sq, trace, trace / true_sq if true_sq > 0 and trace > 0 else None, sample)


def _unbiased_terms(small_sq: float, big_sq: float, b: int, big: int) -> tuple[float, float]:
    if big <= b:
        raise ValueError(f"the big batch ({big}) must exceed the small one ({b})")
    return (big * big_sq - b * small_sq) / (big - b), (small_sq - big_sq) / (1 / b - 1 / big)


@dataclass(frozen=True)
class NoiseEstimate:
    """B_simple with a bootstrap interval, or ``value`` None and a reason when it cannot be told."""

    value: float | None
    low: float | None
    high: float | None
    steps: int  # optimizer steps the estimate rests on
    runs: int
    reason: str
    true_grad_sq: float | None = None
    trace_sigma: float | None = None
    skipped: int = 0
    notes: list[str] = field(default_factory=list)
    per_run: list[float] = field(default_factory=list)  # each run's own B_simple (runs with MIN_STEPS+ steps)
    stage: str = "any"  # "sweep": the chosen candidate's sweep runs; "trial": the trial's early runs; "none"
    candidate: int | None = None  # the per-device batch whose sweep runs gave the value (stage "sweep")
    early_value: float | None = None  # the trial's early estimate beside a sweep one: a lower bound

    @property
    def known(self) -> bool:
        return self.value is not None

    def to_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "steps": self.steps, "runs": self.runs,
                "per_run": [round(v, 3) for v in self.per_run],
                "skipped_steps": self.skipped, "confidence": CONFIDENCE, "stage": self.stage,
                "candidate": self.candidate, "early_lower_bound": self.early_value, "reason": self.reason}


def step_terms(sample: GradNormSample) -> list[tuple[float, float]]:
    """Per-step unbiased (|G|^2, tr(Sigma)) from one run's per-step norms; non-finite steps left out."""
    terms = []
    for small, big in zip(sample.small_sq_steps, sample.big_sq_steps):
        if math.isfinite(small) and math.isfinite(big):
            terms.append(_unbiased_terms(small, big, sample.b_small, sample.b_big))
    return terms


def estimate_noise(samples: list[GradNormSample], optimizer: str = "sgd", resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = 0, accumulation_run: bool = False, left_out: str = "", by_run: bool = False,
                   whose: str = "", metered: bool = True) -> NoiseEstimate:
    """B_simple over every step of ``samples`` (runs at any batch sizes), with a percentile bootstrap interval.

    |G|^2 and tr(Sigma) are each averaged over the steps, then divided; the bootstrap resamples steps and
    repeats exactly that, so the interval covers the ratio's sampling error over steps. ``accumulation_run``:
    a one-device run with accumulation was made to measure it (the "unknown" sentence says so). ``left_out``:
    a sentence naming measured runs the caller left out, and why; it ends the reason. ``by_run``: the runs are
    seeds of one setting: the interval resamples steps within each (run_bootstrap_interval), and the seeds' own
    estimates must agree within RUN_DISAGREEMENT. ``whose``: which runs, said in the reason. ``metered`` False: no
    run of the plan carried gradient norms at all (the "unknown" sentence says so, not what more it needs).
    """
    import numpy as np

    from .lr import ADAPTIVE_OPTIMIZERS

    terms = [t for s in samples for t in step_terms(s)]
    skipped = sum(s.skipped for s in samples) + sum(
        len(s.small_sq_steps) - len(step_terms(s)) for s in samples)
    runs = sum(1 for s in samples if step_terms(s))
    notes = [left_out] if left_out else []
    if optimizer.lower() in ADAPTIVE_OPTIMIZERS:
        notes.append(f"{optimizer} rescales each coordinate, so B_simple (derived for SGD) is a proxy for its "
                     "critical batch, not the exact value.")
    if len(terms) < MIN_STEPS:
        if accumulation_run or any(s.pair == "accumulation" for s in samples):
            needs = ("the one-device run with accumulation 2 (micro-batch vs accumulated gradient) gave too few: "
                     "only steps past the warm-up and the run's first half count, and only a run whose loss fell; "
                     "a longer --trial-steps gives more")
        elif not metered:
            needs = ("no run of this plan reported gradient norms. They come from 2+ processes whose adapter meters "
                     "them (or one process and an adapter that runs an accumulation run); a script planned through "
                     "`advisor plan -- SCRIPT` reports none at any process count")
        else:
            needs = ("it needs 2+ processes (or one process and an adapter that runs an accumulation run), an "
                     "adapter that reports the gradient norms, and steps past the warm-up")
        return NoiseEstimate(None, None, None, len(terms), runs, (
            f"Gradient noise scale: unknown, {len(terms)} measured step(s) (needs {MIN_STEPS}+): {needs}."
            + (" " + left_out if left_out else "")), skipped=skipped, notes=notes)
    values = np.array(terms, dtype=np.float64)
    true_sq, trace = values.mean(axis=0)
    runs_terms = [np.array(step_terms(s), dtype=np.float64) for s in samples if step_terms(s)]
    if by_run and len(runs_terms) >= 2:
        low, high = run_bootstrap_interval(runs_terms, resamples, np.random.default_rng(seed))
    else:
        low, high = bootstrap_interval(values, resamples, np.random.default_rng(seed))
    pairs = " and ".join(PAIR_WORDS.get(p, p) for p in sorted({s.pair for s in samples if step_terms(s)}))
    one_device = all(s.pair == "accumulation" for s in samples if step_terms(s))
    base = f"over {len(terms)} steps of {whose or f'{runs} run(s)'}: {pairs}"
    if true_sq <= 0 or trace <= 0:
        return NoiseEstimate(None, None, None, len(terms), runs, (
            f"Gradient noise scale: unknown ({base}, the averaged |G|^2 or tr(Sigma) came out non-positive: the "
            "gradient noise swamps the signal in runs this short)." + (" " + left_out if left_out else "")),
            float(true_sq), float(trace), skipped, notes)
    value = float(trace / true_sq)
    per_run = per_run_estimates(samples)
    if len(per_run) >= 2 and max(per_run) / min(per_run) > RUN_DISAGREEMENT:
        return NoiseEstimate(None, low, high if math.isfinite(high) else None, len(terms), runs, (
            f"Gradient noise scale: unknown ({base}: the runs disagree, their own estimates run from "
            f"{min(per_run):.3g} to {max(per_run):.3g}, more than {RUN_DISAGREEMENT:g}x apart, so no one number "
            "stands for them; the pooled value would be "
            f"{value:.3g})." + (" " + left_out if left_out else "")), float(true_sq), float(trace), skipped, notes,
            per_run)
    if not math.isfinite(high) or low <= 0 or high / low > MAX_SPREAD:
        spread = f"{low:.3g} to {high:.3g}" if math.isfinite(high) else f"{low:.3g} to unbounded"
        return NoiseEstimate(None, low, high if math.isfinite(high) else None, len(terms), runs, (
            f"Gradient noise scale: unknown ({base}, the point estimate {value:.3g} has a "
            f"{CONFIDENCE:.0%} interval of {spread}, wider than {MAX_SPREAD:g}x: "
            + ("a longer --trial-steps would narrow it)." if one_device else "longer runs or more processes would "
               "narrow it).") + (" " + left_out if left_out else "")), float(true_sq), float(trace), skipped, notes)
    across = (f"; the runs' own estimates {min(per_run):.0f}-{max(per_run):.0f}, within {RUN_DISAGREEMENT:g}x"
              if len(per_run) >= 2 else "")
    how = ("bootstrap interval, steps resampled within each seed," if by_run and len(runs_terms) >= 2
           else "bootstrap interval")
    reason = (f"Estimated gradient noise scale B_simple ~ {value:.0f} ({CONFIDENCE:.0%} {how} "
              f"{low:.0f}-{high:.0f}, {base}{across}; |G|^2 and tr(Sigma) "
              "averaged separately; McCandlish et al. 2018). Past it a bigger global batch buys little. An estimate "
              "from short runs." + ("" if not skipped else f" {skipped} non-finite step(s) left out.")
              + "".join(" " + n for n in notes))
    return NoiseEstimate(value, low, high, len(terms), runs, reason, float(true_sq), float(trace), skipped, notes,
                         per_run)


def bootstrap_interval(values, resamples: int, rng) -> tuple[float, float]:
    """The CONFIDENCE percentile interval of tr(Sigma)/|G|^2 over steps resampled with replacement (``values``:
    steps x (|G|^2, tr(Sigma))); a resample with a non-positive term counts as unbounded (inf-safe)."""
    import numpy as np

    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where((means[:, 0] > 0) & (means[:, 1] > 0), means[:, 1] / means[:, 0], np.inf)
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail], method="inverted_cdf")
    return float(low), float(high)


def run_bootstrap_interval(runs_terms: list, resamples: int, rng) -> tuple[float, float]:
    """The CONFIDENCE percentile interval of tr(Sigma)/|G|^2 over the seeds of one setting, each run's steps
    resampled within it (a stratified bootstrap: every seed stays in, with its own share of the steps).

    Why not resample the seeds too: with the sweep's 3 seeds a cluster bootstrap's extremes are the draws of one
    seed three times, so its interval is the widest single seed's (on real plans of digits-mlp and a loader-bound
    MLP, 37-450 and 139-1770: "unknown" for a noise scale the pooled steps pin within ~2x), and the seeds' own
    spread is judged apart, by RUN_DISAGREEMENT."""
    import numpy as np

    counts = sum(len(t) for t in runs_terms)
    sums = sum(t[rng.integers(0, len(t), size=(resamples, len(t)))].sum(axis=1) for t in runs_terms)
    pooled = sums / counts
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where((pooled[:, 0] > 0) & (pooled[:, 1] > 0), pooled[:, 1] / pooled[:, 0], np.inf)
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail], method="inverted_cdf")
    return float(low), float(high)


def per_run_estimates(samples: list[GradNormSample], resamples: int = 500, seed: int = 0) -> list[float]:
    """Each run's own B_simple (its steps' |G|^2 and tr(Sigma) averaged, then divided), for the runs that measure
    one on their own: MIN_STEPS+ steps, both terms positive, and a bootstrap interval within MAX_SPREAD (a run
    whose own interval spans an order of magnitude says nothing about whether runs agree)."""
    import numpy as np

    out = []
    rng = np.random.default_rng(seed)
    for sample in samples:
        terms = step_terms(sample)
        if len(terms) < MIN_STEPS:
            continue
        values = np.array(terms, dtype=np.float64)
        true_sq, trace = values.mean(axis=0)
        if true_sq <= 0 or trace <= 0:
            continue
        low, high = bootstrap_interval(values, resamples, rng)
        if low > 0 and math.isfinite(high) and high / low <= MAX_SPREAD:
            out.append(float(trace / true_sq))
    return out


def _measured_healthy(rows: list[TrialRecord]) -> tuple[list[TrialRecord], str]:
    """The rows with per-step gradient norms whose loss fell and held, and a sentence naming the ones left out."""
    # An unstable run's gradients are dominated by the blow-up, not by sampling noise.
    measured = [r for r in rows if r.status == "ok" and r.gradient_norms.get("small_sq_steps")]
    verdicts = {id(r): judge(r) for r in measured}
    healthy = [r for r in measured if verdicts[id(r)].verdict != UNSTABLE]
    unlearned = [r for r in measured if r not in healthy]
    if not unlearned:
        return healthy, ""
    # Runs alike (a confirmation seed repeats its setting) are named once, with their count.
    described = [f"{r.phase} run{{s}} at {r.per_device} per device"
                 + (f" x {r.accumulation} accumulation" if r.accumulation > 1 else "")
                 + f" ({verdicts[id(r)].verdict})" for r in unlearned]
    counts = {text: described.count(text) for text in described}
    named = ", ".join(("the " + text.format(s="")) if count == 1 else (f"the {count} " + text.format(s="s"))
                      for text, count in counts.items())
    return healthy, (f"Left out: {named}, whose training loss did not fall and hold (the gradients of an unstable "
                     "run measure the blow-up, not sampling noise).")


def _samples(rows: list[TrialRecord]) -> list[GradNormSample]:
    fields = GradNormSample.__dataclass_fields__
    return [GradNormSample(**{k: (tuple(v) if isinstance(v, list) else v)
                              for k, v in r.gradient_norms.items() if k in fields})
            for r in rows]


EARLY_PHASES = ("trial", "noise")  # runs of the first few dozen steps from initialisation


def noise_estimate(rows: list[TrialRecord], optimizer: str = "sgd", pick: int | None = None,
                   validated: bool = True) -> NoiseEstimate:
    """B_simple with its interval, from runs at one stage of training.

    B_simple grows as the loss falls (McCandlish et al. 2018), so runs from different stages are never pooled:
    with ``pick`` (the sweep's chosen per-device batch) the value comes from that candidate's sweep runs alone
    (equal samples, paired seeds; agreement judged across its seeds), and the trial's early runs give only a lower
    bound beside it. Without a pick (before the sweep, or one device whose sweep runs do not meter gradients) the
    trial's early runs give the value, said as early. ``validated`` False (no sweep candidate learned): not
    estimated at all, since nothing noise-based may stand on runs that never learned."""
    if not validated:
        return NoiseEstimate(None, None, None, 0, 0, (
            "Gradient noise scale: not estimated, the plan is NOT VALIDATED (no sweep candidate learned); an "
            "estimate from runs that did not learn would measure nothing the plan can use."), stage="none")
    healthy, left_out = _measured_healthy(rows)
    metered = any(r.status == "ok" and r.gradient_norms.get("small_sq_steps") for r in rows)
    early_rows = [r for r in healthy if r.phase in EARLY_PHASES]
    picked = [r for r in healthy if r.phase == "sweep" and pick is not None and r.per_device == pick
              and r.accumulation == 1]
    early = None
    if early_rows or not picked:
        early = estimate_noise(_samples(early_rows), optimizer, accumulation_run=any(r.phase == "noise" for r in rows),
                               left_out=left_out, metered=metered)
    if not picked:
        if early is None or not early.known or pick is None:
            return early if early is not None else estimate_noise([], optimizer, left_out=left_out, metered=metered)
        why = ("Taken from the trial's early runs: the sweep's runs at the chosen " + f"{pick} per device carry no "
               "gradient norms (one device meters them only in the trial's accumulation run). B_simple grows as the "
               "loss falls, so this early value is a lower bound on the one later in training.")
        return replace(early, reason=early.reason + " " + why, stage="trial")
    estimate = estimate_noise(_samples(picked), optimizer, left_out=left_out, by_run=True,
                              whose=f"the chosen {pick} per device's {len(picked)} sweep seed(s)")
    estimate = replace(estimate, stage="sweep", candidate=pick)
    if early is not None and early.known:
        estimate = replace(estimate, early_value=early.value, reason=estimate.reason + (
            f" The trial's early runs give {early.value:.3g} ({early.low:.3g}-{early.high:.3g}): B_simple grows as "
            "the loss falls, so that early value is a lower bound, not a second estimate."))
    return estimate


def noise_summary(rows: list[TrialRecord], optimizer: str = "sgd") -> tuple[float | None, str]:
    """The noise scale (None when unknown) and the sentence that explains it."""
    estimate = noise_estimate(rows, optimizer)
    return estimate.value, estimate.reason
