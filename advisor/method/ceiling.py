"""Step 1 of the method: the per-device memory ceiling.

Fit memory(b) = fixed + per_sample x b from two small real probes, predict the
largest batch under the budget, then find the real out-of-memory edge with real
probes placed where the line says the edge is (then bisect the band between the
largest batch that ran and the smallest that ran out).
The ceiling keeps ``headroom`` of memory free below that edge: on a GPU the edge
sits at the budget; on CPU allocator overhead puts it lower, and the headroom is
kept against what really fits, not against the nominal budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..errors import AdvisorError
from ..oom import is_primitive_failure, unsupported_configuration_message

if TYPE_CHECKING:
    from ..adapters import ShardingAdvice

DEFAULT_HEADROOM = 0.15
FIT_BATCHES = (2, 8)
GROWTH = 1.5
DEFAULT_RESOLUTION = 0.05  # stop bisecting when the band is within 5% of the batch (or one sample)


class UnsupportedConfiguration(AdvisorError):
    """oneDNN could not create a primitive even at the smallest batches: the configuration, not memory."""


@dataclass
class ProbeTrial:
    batch: int
    status: str  # "ok" | "oom"
    peak_bytes: int | None
    seconds: float
    purpose: str = ""
    message: str = ""
    breakdown: dict = field(default_factory=dict)  # what the peak held: parameters, gradients, optimizer state, ...
    measured_by: str = ""
    budget: dict = field(default_factory=dict)  # how the worker enforced the budget (e.g. what it took off on CUDA)


@dataclass
class MemoryFit:
    fixed_bytes: float
    per_sample_bytes: float

    def bytes_at(self, batch: float) -> float:
        return self.fixed_bytes + self.per_sample_bytes * batch

    def batch_for(self, memory_bytes: float) -> int:
        return max(0, math.floor((memory_bytes - self.fixed_bytes) / self.per_sample_bytes))

    def batch_with_headroom(self, usable_bytes: float, headroom: float) -> int:
        """The headroom rule, its one owner: the largest batch whose fitted peak leaves ``headroom`` (a fraction)
        of ``usable_bytes`` free. The search, the history's known ceiling, replan and mixed cards all use it."""
        return self.batch_for((1 - headroom) * usable_bytes)


@dataclass
class CeilingResult:
    per_device_max: int
    budget_bytes: int
    headroom: float
    fit: MemoryFit | None  # None when fewer than two batch sizes fit: no line was measured, none is written
    largest_ok: int  # the largest batch a real probe ran under the budget
    smallest_oom: int | None  # the smallest batch that met a real OOM (None: none met up to max_batch)
    usable_bytes: float  # memory that really fits: the budget, or less where the OOM edge says so
    trials: list[ProbeTrial] = field(default_factory=list)
    reason: str = ""

    capped_by: str = ""  # why the search stopped growing without an OOM (the cap's reason), if it did

    @property
    def estimated_peak_bytes(self) -> float | None:
        if self.fit is None:
            return None
        return self.fit.bytes_at(self.per_device_max)

    def split(self) -> dict[str, int]:
        """Fixed vs growing memory at the largest probe that ran, from the tracker's breakdown (when there is one)."""
        ok = [t for t in self.trials if t.status == "ok" and t.breakdown]
        if not ok:
            return {}
        largest = max(ok, key=lambda t: t.batch)
        fixed = sum(v for k, v in largest.breakdown.items() if not _grows_with_batch(k))
        grows = sum(v for k, v in largest.breakdown.items() if _grows_with_batch(k))
        return {"at_batch": largest.batch, "fixed_bytes": fixed, "batch_dependent_bytes": grows,
                **{k: v for k, v in largest.breakdown.items() if v}}


def _grows_with_batch(kind: str) -> bool:
    # Activations, temporaries and input batches scale with the batch; parameters, gradients, optimizer state and buckets do not.
    return kind.lower().startswith(("activation", "temp", "other", "input"))


MODEL_DOES_NOT_FIT = "the model itself does not fit"  # the worker's message when building/wrapping it ran out


def budget_primitive_message(precision: str, batches: list[int], budget_bytes: int, evidence: str) -> str:
    """oneDNN's "could not create a primitive" at the smallest batches on hardware that runs ``precision``: the
    budget left no room for its scratch space, which is memory, not support."""
    from ..units import format_bytes

    tried = " and ".join(str(b) for b in sorted(set(batches)))
    return (f"The probes at batch {tried} failed in {precision} with oneDNN's 'could not create a primitive', but "
            f"this machine runs {precision} ({evidence}): under the {format_bytes(budget_bytes)} budget oneDNN "
            "could not allocate its working memory, so it is the budget, not the hardware. Fix: raise "
            f"--device-memory (or plan in fp32, whose kernels need less scratch space).")


def _nothing_fits_advice(trial: ProbeTrial, budget_bytes: int, sharding: "ShardingAdvice | None" = None) -> str:
    """Why not even a batch of 1 fits, and what helps: no smaller batch does when the model alone is too big.
    ``sharding``: what the adapters offer for a model larger than one device (default: the installed ones')."""
    from ..adapters import sharding_advice

    sharding = sharding or sharding_advice()
    budget = f"{budget_bytes / 2**20:.0f} MiB"
    if trial.message.startswith(MODEL_DOES_NOT_FIT):
        return (f"The model itself (its parameters, with gradients and optimizer state) does not fit the budget of "
                f"{budget} per device, before any batch runs ({trial.message[:200]}). No batch size can fix that: "
                f"shard it over the devices ({sharding.how()}; more devices make each shard smaller), offload "
                f"optimizer state or parameters to CPU memory{sharding.offload()}, or use mixed precision; or plan "
                "for a larger device (--device-memory).")
    return (f"Even a batch of 1 runs out of memory under the budget of {budget}. Enable mixed precision, shard "
            f"the model state ({sharding.short()}), shrink the model or its input, or plan for a larger "
            "device (--device-memory).")


def fit_linear(trials: list[ProbeTrial]) -> MemoryFit:
    """Least-squares line through the successful probes' peaks."""
    points = [(t.batch, t.peak_bytes) for t in trials if t.status == "ok" and t.peak_bytes]
    if len({b for b, _ in points}) < 2:
        raise AdvisorError("Need two successful probes at different batch sizes to fit memory against batch.")
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_m = sum(m for _, m in points) / n
    var = sum((b - mean_b) ** 2 for b, _ in points)
    slope = sum((b - mean_b) * (m - mean_m) for b, m in points) / var
    slope = max(slope, 1.0)  # a model whose memory does not grow with batch still needs a finite answer
    return MemoryFit(fixed_bytes=mean_m - slope * mean_b, per_sample_bytes=slope)


def search_ceiling(
    probe: Callable[[int, str], ProbeTrial],
    budget_bytes: int,
    headroom: float = DEFAULT_HEADROOM,
    max_batch: int = 65536,
    resolution: float = DEFAULT_RESOLUTION,
    on_trial: Callable[[ProbeTrial], None] | None = None,
    cap_reason: str = "",
    precision: str = "fp32",
    hardware_runs: Callable[[], tuple[bool | None, str]] | None = None,
    sharding: "ShardingAdvice | None" = None,
) -> CeilingResult:
    """Find the largest per-device batch that fits with ``headroom`` of memory to spare.

    ``probe(batch, purpose)`` runs one real step at ``batch`` in a fresh process under the budget;
    ``precision`` is what it runs in (named when the configuration turns out unsupported); ``sharding``: what
    the adapters offer when even a batch of 1 does not fit (default: every installed adapter's ``big_model``).
    One path for every case: fit the line on two small batches, probe where it puts the edge, narrow the
    band between the largest batch that ran and the smallest that ran out (to ``resolution``, one sample
    at small batches), keep the headroom where a line was measured, and confirm the answer with a probe.
    """
    if not 0 <= headroom < 1:
        raise AdvisorError(f"Headroom must be a fraction in [0, 1), got {headroom}.")
    trials: list[ProbeTrial] = []

    def run(batch: int, purpose: str) -> ProbeTrial:
        trial = probe(batch, purpose)
        trials.append(trial)
        if on_trial:
            on_trial(trial)
        return trial

    for batch in [b for b in FIT_BATCHES if b <= max_batch] or [max_batch]:
        trial = run(batch, "fit")
        if trial.status != "ok":
            if batch == FIT_BATCHES[0]:
                one = run(1, "fit")
                if one.status != "ok":
                    smallest = trials[-2:]
                    if all(is_primitive_failure(t.message) for t in smallest):
                        runs, evidence = hardware_runs() if hardware_runs else (None, "")
                        if runs:  # the hardware runs it: oneDNN's scratch space did not fit the budget
                            raise AdvisorError(budget_primitive_message(
                                precision, [t.batch for t in smallest], budget_bytes, evidence))
                        raise UnsupportedConfiguration(unsupported_configuration_message(
                            precision, [t.batch for t in smallest], smallest[-1].message))
                    raise AdvisorError(_nothing_fits_advice(one, budget_bytes, sharding))
            break
    while True:
        largest_ok, smallest_oom = _bracket(trials)
        if smallest_oom is None and largest_ok >= max_batch:
            break  # everything up to the cap fits
        if smallest_oom is not None and smallest_oom - largest_ok <= max(1, math.floor(largest_ok * resolution)):
            break
        fit = _fit_if_measured(trials)
        predicted = fit.batch_for(budget_bytes) if fit else None
        run(next_edge_probe(largest_ok, smallest_oom, predicted, max_batch, resolution), "edge")
    fit = _fit_if_measured(trials)  # every measured point: the large probes pin the slope down
    if fit is None:
        reason = (f"Only a batch of {largest_ok} fits under {budget_bytes / 2**20:.0f} MiB"
                  + (f" ({smallest_oom} ran out of memory)" if smallest_oom else f" (the cap: {cap_reason})")
                  + ". With one size measured there is no memory line to fit, so no headroom could be kept: "
                    "the ceiling is the largest batch that ran. Try mixed precision or a larger device.")
        return CeilingResult(largest_ok, budget_bytes, headroom, None, largest_ok, smallest_oom, budget_bytes,
                             trials, reason, capped_by="" if smallest_oom else cap_reason)
    usable = budget_bytes if smallest_oom is None else min(budget_bytes, fit.bytes_at(largest_ok))
    by_memory = fit.batch_with_headroom(usable, headroom)
    ceiling = max(1, min(largest_ok, by_memory))
    ran = {t.batch for t in trials if t.status == "ok"}
    # Confirm the answer itself with a real probe; near the edge OOM is a band, not a line.
    while ceiling > 1 and ceiling not in ran and run(ceiling, "confirm").status != "ok":
        ceiling = max(1, math.floor(ceiling * 0.9))
    edge = (f"Real OOM edge between {largest_ok} (ran) and {smallest_oom} (OOM){_probed(trials)}. " if smallest_oom
            else f"No OOM up to the cap of {max_batch}{' (' + cap_reason + ')' if cap_reason else ''}. ")
    reason = (f"Fit: {fit.fixed_bytes / 2**20:.1f} MiB fixed + {fit.per_sample_bytes / 2**20:.3f} MiB per sample. "
              + edge + (_cap_bound_text(trials, fit, largest_ok, budget_bytes, headroom)
                        if smallest_oom is None and ceiling == largest_ok and by_memory >= largest_ok else
                        f"Keeping {headroom:.0%} headroom below {usable / 2**20:.0f} MiB that really fits gives "
                        f"{ceiling}."))
    return CeilingResult(ceiling, budget_bytes, headroom, fit, largest_ok, smallest_oom, usable, trials, reason,
                         capped_by=cap_reason if smallest_oom is None else "")


# Where the real OOM edge has been met, as a share of the batch the fitted line predicts at the budget: at
# it on a GPU, at 65-90% of it on CPU (allocator overhead counts against RLIMIT_DATA, not in tensor bytes);
# the low end leaves a margin below that.
EDGE_PRIOR = (0.6, 0.8, 1.0)  # low end, the first probe, high end


def next_edge_probe(largest_ok: int, smallest_oom: int | None, predicted: int | None, max_batch: int,
                    resolution: float = DEFAULT_RESOLUTION) -> int:
    """The next batch to probe, strictly between the largest batch that ran and the smallest that ran out.

    With a fitted line, the first probe goes inside the band where the edge is expected (``EDGE_PRIOR`` of
    the line's prediction at the budget), the second to that band's end on the side the first one points
    to, so two probes usually bracket the edge within the band, where bisection then needs few steps.
    Where the band was wrong (all ran past its top, or ran out below its bottom): growth or bisection.
    Without a line (one size ran, nothing ran out: the cap is below the fit's second batch), the cap.
    """
    if predicted is None:
        return max_batch if smallest_oom is None else (largest_ok + smallest_oom) // 2
    low, first, high = (math.floor(share * predicted) for share in EDGE_PRIOR)
    if smallest_oom is None:
        if largest_ok < first:
            guess = first
        elif largest_ok < high:
            guess = math.ceil(high * (1 + resolution))  # just past the predicted edge: an OOM there closes the band
        else:
            guess = math.ceil(largest_ok * GROWTH)  # more fits than the line said: grow until OOM
        return min(max_batch, max(largest_ok + 1, guess))
    if largest_ok < low < smallest_oom - 1 and smallest_oom <= first:
        return low  # ran out inside the band: its low end either closes it or says the band was wrong
    return (largest_ok + smallest_oom) // 2


def _bracket(trials: list[ProbeTrial]) -> tuple[int, int | None]:
    """(largest batch that ran, smallest that ran out of memory or None)."""
    largest_ok = max(t.batch for t in trials if t.status == "ok")
    ooms = [t.batch for t in trials if t.status != "ok"]
    return largest_ok, (min(ooms) if ooms else None)


def _fit_if_measured(trials: list[ProbeTrial]) -> MemoryFit | None:
    """The memory line once two batch sizes ran with a measured peak, else None."""
    if len({t.batch for t in trials if t.status == "ok" and t.peak_bytes}) < 2:
        return None
    return fit_linear(trials)


def _probed(trials: list[ProbeTrial]) -> str:
    edge = [t for t in trials if t.purpose == "edge"]
    return f", {len(edge)} edge probe{'s' if len(edge) != 1 else ''}" if edge else ""


def _cap_bound_text(trials: list[ProbeTrial], fit: MemoryFit, batch: int, budget_bytes: int, headroom: float) -> str:
    """The cap, not memory, set the ceiling: say so with the peak that was measured there."""
    from ..units import format_bytes

    peak = next((t.peak_bytes for t in trials if t.batch == batch and t.status == "ok" and t.peak_bytes),
                fit.bytes_at(batch))
    share = peak / budget_bytes
    return (f"The cap bounds the ceiling, not memory: at {batch} the peak was {format_bytes(peak)} of the "
            f"{format_bytes(budget_bytes)} budget ({'under 1%' if share < 0.01 else f'{share:.0%}'}), so the "
            f"{headroom:.0%} headroom played no part. Ceiling: {batch}.")
