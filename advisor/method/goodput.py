"""Goodput: the batch that trains fastest to a given quality, from the step-time model and the noise scale.

Pollux (Qiao et al., OSDI 2021) / AdaptDL form: goodput(M) = throughput(M) x efficiency(M), with
efficiency(M) = (phi + M0) / (phi + M) the progress per sample at global batch M relative to the base
batch M0, phi the gradient noise scale. Throughput comes from a step-time model fitted to the trial and
sweep timings: T_iter(b, s) = s x T_acc(b) + T_opt, T_acc(b) = a + c x b (a micro-step's forward and
backward, the loader's wait for its samples included), T_opt (the all-reduce and optimizer step, paid once per
optimizer step). The search runs over
per-device batches within the cap and accumulation steps up to the advisor's limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .lr import lr_gain, statistical_efficiency  # the LR rule's: the bound past the validated batch reads them too
from .plan import MAX_SENSIBLE_ACCUMULATION


@dataclass(frozen=True)
class StepTimeModel:
    micro_fixed_s: float  # a: a micro-step's cost that does not grow with the batch
    per_sample_s: float  # c: seconds per sample per micro-step
    per_step_s: float  # T_opt: once per optimizer step (all-reduce, optimizer)
    points: int
    note: str
    timed_batches: tuple[int, int] | None = None  # the smallest and largest per-device batch timed, when fitted

    def step_seconds(self, per_device: int, accumulation: int = 1) -> float:
        return accumulation * (self.micro_fixed_s + self.per_sample_s * per_device) + self.per_step_s


def fit_step_time(points: list[tuple[int, int, float]]) -> StepTimeModel | None:
    """Least squares over measured (per-device b, accumulation s, seconds per optimizer step); None if fewer
    than two batch sizes were timed.

    With no accumulated run timed, the fixed cost cannot be split between micro-steps and the optimizer step:
    it is all charged to the micro-step, so the model never credits accumulation with throughput it did not
    show (a conservative choice, said in the note).
    """
    import numpy as np

    if len({b for b, _, _ in points}) < 2:
        return None
    b = np.array([p[0] for p in points], dtype=np.float64)
    s = np.array([p[1] for p in points], dtype=np.float64)
    t = np.array([p[2] for p in points], dtype=np.float64)
    if len({(p[0], p[1]) for p in points}) >= 3 and len(set(s)) > 1:
        (fixed, per_sample, per_step), *_ = np.linalg.lstsq(np.stack([s, s * b, np.ones_like(s)], 1), t, rcond=None)
        note = (f"fitted to {len(points)} timed runs, accumulated ones among them, so the per-step cost "
                "(all-reduce, optimizer) is measured apart from the micro-steps")
    else:
        (fixed, per_sample), *_ = np.linalg.lstsq(np.stack([s, s * b], 1), t, rcond=None)
        per_step = 0.0
        note = (f"fitted to {len(points)} timed runs without accumulation, so the fixed cost is charged to every "
                "micro-step: the model credits accumulation with no throughput it did not show")
    # A fit below zero is timing noise: a step never gets cheaper with a bigger batch.
    return StepTimeModel(max(0.0, float(fixed)), max(0.0, float(per_sample)), max(0.0, float(per_step)),
                         len(points), note, (int(b.min()), int(b.max())))


@dataclass
class GoodputChoice:
    per_device: int
    accumulation: int
    global_batch: int
    goodput: float  # base-batch-equivalent samples per second
    throughput: float  # samples per second from the step-time model
    efficiency: float
    steps_ratio: float  # S / S_min = 1 + phi / M (McCandlish et al. 2018)
    examples_ratio: float  # E / E_min = 1 + M / phi
    lr_gain: float
    lr_gain_rule: str
    past_critical: bool  # M > phi: more batch now mostly buys throughput, not progress


@dataclass
class GoodputResult:
    choice: GoodputChoice | None
    reason: str
    model: StepTimeModel | None = None
    noise_scale: float | None = None
    base_batch: int | None = None
    rule_of_thumb_global: int | None = None
    rule_of_thumb_share: float | None = None  # the rule-of-thumb batch's goodput / the optimum's
    warnings: list[str] = field(default_factory=list)
    warning_codes: list[str] = field(default_factory=list)  # one per warning, for the plan's warning list

    def warn(self, code: str, message: str) -> None:
        self.warnings.append(message)
        self.warning_codes.append(code)

    def to_dict(self) -> dict:
        out: dict = {"computed": self.choice is not None, "reason": self.reason}
        if self.choice:
            c = self.choice
            out.update(per_device=c.per_device, accumulation_steps=c.accumulation, global_batch=c.global_batch,
                       goodput=round(c.goodput, 3), throughput=round(c.throughput, 3),
                       efficiency=round(c.efficiency, 4), steps_over_min=round(c.steps_ratio, 4),
                       examples_over_min=round(c.examples_ratio, 4), lr_gain=round(c.lr_gain, 4),
                       lr_gain_rule=c.lr_gain_rule, past_critical_batch=c.past_critical,
                       noise_scale=round(self.noise_scale, 2), base_batch=self.base_batch,
                       rule_of_thumb_global=self.rule_of_thumb_global,
                       rule_of_thumb_goodput_share=(round(self.rule_of_thumb_share, 4)
                                                    if self.rule_of_thumb_share is not None else None),
                       warnings=self.warnings)
        if self.model:
            out["step_time"] = {"micro_fixed_s": self.model.micro_fixed_s, "per_sample_s": self.model.per_sample_s,
                                "per_step_s": self.model.per_step_s, "note": self.model.note}
        return out


def _choice(model: StepTimeModel, b: int, s: int, world: int, phi: float, base: int, optimizer: str) -> GoodputChoice:
    m = b * world * s
    throughput = m / model.step_seconds(b, s)
    efficiency = statistical_efficiency(m, phi, base)
    gain, rule = lr_gain(m, phi, base, optimizer)
    return GoodputChoice(b, s, m, throughput * efficiency, throughput, efficiency, 1 + phi / m, 1 + m / phi,
                         gain, rule, m > phi)


TIMED_REACH = 2  # goodput searches per-device batches at most this factor outside the ones timed


def goodput_optimum(model: StepTimeModel | None, noise_scale: float | None, noise_reason: str, base_batch: int,
                    world_size: int, per_device_cap: int, optimizer: str, max_accumulation: int = MAX_SENSIBLE_ACCUMULATION,
                    rule_of_thumb: tuple[int, int] | None = None, max_global: int | None = None) -> GoodputResult:
    """The (per-device b <= cap, accumulation s <= max) that maximises goodput, or why it cannot be computed.
    Searched only where it means something: global batches up to ``max_global`` (the steps-per-epoch cap,
    advisor.method.plan.largest_learnable_global) and per-device batches within TIMED_REACH x of the ones timed
    (further out the step time is the fitted line extended: "outside what was measured").

    ``rule_of_thumb``: the plan's (per-device, accumulation), to say how much goodput it gives up.
    """
    if noise_scale is None:
        why = noise_reason.removeprefix("Gradient noise scale: ").removeprefix("unknown").lstrip(" ,:")
        return GoodputResult(None, "Goodput-optimal batch: not computed, the gradient noise scale is unknown"
                             + ((" " if why.startswith("(") else ": ") + why if why else "."), model)
    if model is None:
        return GoodputResult(None, "Goodput-optimal batch: not computed, fewer than two batch sizes were timed, so "
                             "no step-time model could be fitted.", None, noise_scale, base_batch)
    timed = model.timed_batches
    low, high = (max(1, timed[0] // TIMED_REACH), timed[1] * TIMED_REACH) if timed else (1, per_device_cap)
    candidates = [_choice(model, b, s, world_size, noise_scale, base_batch, optimizer)
                  for b in range(low, min(per_device_cap, high) + 1) for s in range(1, max_accumulation + 1)
                  if model.step_seconds(b, s) > 0 and (max_global is None or b * world_size * s <= max_global)]
    if not candidates:
        return GoodputResult(None, "Goodput-optimal batch: not computed, no batch within the steps-per-epoch cap "
                                   f"and {TIMED_REACH}x of the timed ones has a positive fitted step time.", model)
    best = max(candidates, key=lambda c: (c.goodput, -c.global_batch))
    result = GoodputResult(best, "", model, noise_scale, base_batch)
    text = (f"Goodput-optimal batch (an estimate): {best.per_device} per device x {world_size} device(s) x "
            f"{best.accumulation} accumulation step(s) = global {best.global_batch}, from the step-time model ({model.note}) and the noise scale "
            f"~{noise_scale:.0f} with base batch {base_batch}. There S/S_min = {best.steps_ratio:.2f}, "
            f"E/E_min = {best.examples_ratio:.2f}; its LR would be the base LR x {best.lr_gain:.3g} "
            f"({best.lr_gain_rule}).")
    if timed and not timed[0] <= best.per_device <= timed[1]:
        result.warn("goodput-extrapolated",
                    f"The goodput-optimal {best.per_device} per device lies outside the batches timed ({timed[0]}-"
                    f"{timed[1]} per device): its step time is the fitted line extended, an extrapolation; time it "
                    "before relying on it.")
    if best.past_critical:
        result.warn("goodput-past-critical-batch",
                    f"The goodput-optimal global batch {best.global_batch} is past the critical batch (~ the noise "
                    f"scale, {noise_scale:.0f}): training there needs E/E_min = {best.examples_ratio:.2f}x the "
                    "fewest samples any batch would; it wins on throughput, not on progress per sample.")
    if rule_of_thumb:
        b, s = rule_of_thumb
        plan = _choice(model, b, s, world_size, noise_scale, base_batch, optimizer)
        result.rule_of_thumb_global, result.rule_of_thumb_share = plan.global_batch, plan.goodput / best.goodput
        if plan.global_batch == best.global_batch:
            text += f" It agrees with the advised plan (global {plan.global_batch})."
        else:
            why = (f"past the noise scale a bigger batch loses statistical efficiency ({plan.efficiency:.2f} of the "
                   f"base batch's progress per sample against {best.efficiency:.2f})"
                   if plan.global_batch > best.global_batch else
                   f"the model's throughput still rises ({best.throughput:.0f} against {plan.throughput:.0f} "
                   f"samples/s) while the noise scale keeps efficiency at {best.efficiency:.2f}")
            text += (f" The advised plan (global {plan.global_batch}) differs: it gets "
                     f"{plan.goodput / best.goodput:.0%} of the optimum's goodput because {why}. The advised "
                     "plan stands on what its runs measured; goodput is a model, so compare both before a long run.")
    result.reason = text
    return result


def timed_points(rows, precision: str | None = None) -> list[tuple[int, int, float]]:
    """(per-device, accumulation, seconds per optimizer step) of the trial, noise (accumulation 2: a second s) and
    sweep runs that completed, in ``precision`` when any ran in it (another precision's step time is another
    machine's). The seconds count the loader's wait (TrialRecord.wall_step_seconds), as every samples/s the advisor
    reads does: a loader-bound job's step is the wait, and a fit to the device's compute alone would promise the
    throughput of a loader it does not have."""
    timed = [r for r in rows if r.status == "ok" and r.phase in ("trial", "noise", "sweep") and r.step_seconds]
    same = [r for r in timed if r.precision == precision]
    return [(r.per_device, r.accumulation, r.wall_step_seconds) for r in (same or timed)]
