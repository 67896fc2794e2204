"""Step 3, the short trial: double / halve / stop from what each run measured and how it trained, mixed
precision before halving, and the cap a training OOM sets."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import AdvisorError
from ..ledger import TrialRecord
from ..oom import is_primitive_failure
from .ceiling import CeilingResult
from .health import UNSTABLE, Health, judge
from .inputs import Decide, Runner, WorkloadInfo, lr_and_warmup, lr_for, warmup_for
from .precision import MIXED_PRECISIONS


HIGH_WATER = 0.60  # below this share of the ceiling's memory, double the trial batch



WORTH_DOUBLING = 1.10  # doubling must buy >= 10% more samples/s to be worth it



@dataclass
class TrialOutcome:
    chosen: int
    reason: str
    precision: str  # what the trial ended up running: mixed precision if it was needed to fit
    rows: list[TrialRecord]
    decisions: list[str]
    # One device: the run with accumulation 2 at ``chosen`` that measures the noise scale (not a trial candidate).
    noise_run: TrialRecord | None = None
    unhealthy: dict[int, Health] = field(default_factory=dict)  # per batch: the unstable runs, and why



def short_trial(runner: Runner, start: int, ceiling: CeilingResult, steps: int, info: WorkloadInfo,
                precision: str, mixed: str | None, decide: Decide = lambda message: None,
                cap: int | None = None, cap_reason: str = "") -> TrialOutcome:
    """Step 3: run at ``start``; double while memory stays under 60% of the ceiling's; on OOM try ``mixed``
    precision at the same batch (when the user left the precision open), then halve. No run passes ``cap``
    (default: the ceiling), the first included; its reason is said when it binds. Every run is judged
    (advisor.method.health): the trial never doubles from a run that did not learn, halves from an unstable one (a
    smaller global batch, a smaller scaled LR) and never chooses one while another run exists; a flat run is
    noted in its ledger row (a short trial in its warmup often is)."""
    ceiling_bytes = ceiling.estimated_peak_bytes
    cap = ceiling.per_device_max if cap is None else cap
    batch, rows, notes = min(start, cap), [], []
    tried: dict[int, TrialRecord] = {}
    unhealthy: dict[int, Health] = {}
    decisions: list[str] = []

    def say(message: str) -> None:
        decisions.append(message)
        decide(message)

    if batch < start:  # the cap bounds the first run too, not only doubling
        say(f"{start}: above the cap of {cap} ({cap_reason or 'the memory ceiling'}): starting at {batch}")

    while batch >= 1 and batch not in tried:
        lr, warmup = lr_and_warmup(info, batch * runner.nproc, steps)
        record = runner.train("trial", batch, steps, lr, warmup, precision=precision)
        rows.append(record)
        if record.status == "oom" and mixed and precision == "fp32":
            say(f"{batch}: out of memory in fp32; re-running it in {mixed} mixed precision before halving "
                "(mixed precision comes before a smaller batch)")
            retry = runner.train("trial", batch, steps, lr, warmup, precision=mixed)
            rows.append(retry)
            if retry.status == "ok":
                precision = mixed
                record = retry
                notes.append(f"{batch}: OOM in fp32, fits in {mixed}: switched to {mixed}")
            elif is_primitive_failure(retry.note or ""):
                say(f"{batch}: {mixed} failed too, with oneDNN's 'could not create a primitive': this CPU may not "
                    f"support {mixed} at all (not only memory); staying in fp32")
        tried[batch] = record
        if record.status == "oom":
            notes.append(f"{batch}: OOM, halving")
            say(f"{batch}: out of memory in {precision}: halving to {batch // 2}")
            batch //= 2
            continue
        health = judge(record)
        if not health.learned:
            record.note = (record.note + "; " if record.note else "") + f"{health.verdict}: {health.reason}"
        if health.verdict == UNSTABLE:
            unhealthy[batch] = health
            notes.append(f"{batch}: unstable at LR {lr:.3g}, never doubled from")
            blame = _blame_lr_or_batch(runner, batch, steps, lr, precision, info, tried, unhealthy)
            if blame:
                rows.append(blame[0])
                notes.append(blame[1])
                say(blame[1])
            if batch // 2 >= 1 and batch // 2 not in tried:
                say(f"{batch}: unstable at LR {lr:.3g} ({health.reason}): halving to {batch // 2}, a smaller global "
                    "batch at a smaller scaled LR")
                batch //= 2
                continue
            say(f"{batch}: unstable at LR {lr:.3g} ({health.reason}): stop")
            break
        share = (record.peak_bytes or 0) / ceiling_bytes if ceiling_bytes else 1.0
        notes.append(f"{batch}: {share:.0%} of the ceiling's memory, {record.throughput:.0f} samples/s")
        previous = tried.get(batch // 2)
        if previous and previous.status == "ok" and record.throughput < previous.throughput * WORTH_DOUBLING:
            say(f"{batch}: {record.throughput:.0f} samples/s, under +10% over {batch // 2}: stop doubling")
            break
        if batch * 2 in unhealthy:
            say(f"{batch}: learned; {batch * 2} did not ({unhealthy[batch * 2].verdict}): stop")
            break
        if share < HIGH_WATER and batch * 2 <= cap:
            say(f"{batch}: {share:.0%} of the ceiling's memory (< 60%): doubling to {batch * 2}")
            batch *= 2
        else:
            why = (f"{share:.0%} of the ceiling's memory" if share >= HIGH_WATER
                   else f"doubling would pass the cap of {cap} ({cap_reason or 'the memory ceiling'})")
            say(f"{batch}: {why}: stop")
            break
    chosen = _trial_choice(tried, unhealthy, ceiling, notes)
    return TrialOutcome(chosen, "; ".join(notes), precision, rows, decisions, unhealthy=unhealthy)



def _validated_lr(info: WorkloadInfo, batch: int, nproc: int, tried: dict[int, TrialRecord],
                  unhealthy: dict[int, Health]) -> tuple[float, str]:
    """The LR nearest below ``batch`` that a run trained healthily at: the largest healthy trial batch under it,
    else the base LR (the one the user validated, at the base global batch)."""
    below = [b for b, r in tried.items() if b < batch and r.status == "ok" and b not in unhealthy]
    if below:
        b = max(below)
        return lr_for(info, b * nproc).value, f"{b} per device's"
    return info.base_lr, "the base"



def _blame_lr_or_batch(runner: Runner, batch: int, steps: int, lr: float, precision: str, info: WorkloadInfo,
                       tried: dict[int, TrialRecord], unhealthy: dict[int, Health]) -> tuple[TrialRecord, str] | None:
    """An unstable run at a scaled-up LR blames the LR before the batch (DOMAIN 2): the same batch once more at the
    nearest validated LR. Its verdict says which was to blame; the batch is still never doubled from (the plan's
    LR at it is the scaled one) and the trial goes on as for any unstable run. None when the LR was not scaled up
    past a validated one (nothing to tell apart)."""
    validated, whose = _validated_lr(info, batch, runner.nproc, tried, unhealthy)
    if not lr > validated * (1 + 1e-9):
        return None
    warmup = min(warmup_for(info, lr_for(info, batch * runner.nproc)).steps, steps // 4)
    record = runner.train("trial", batch, steps, validated, warmup, precision=precision)
    verdict = judge(record)
    record.note = (record.note + "; " if record.note else "") + f"rerun at {whose} LR {validated:.3g}: {verdict.verdict}"
    if verdict.learned:
        return record, (f"{batch}: learned at {whose} LR {validated:.3g} but not at the scaled {lr:.3g}: the LR "
                        "scale-up, not the batch, is to blame")
    return record, (f"{batch}: unstable at {whose} LR {validated:.3g} too: the batch itself is to blame, not only "
                    "the LR scale-up")



def _trial_choice(tried: dict[int, TrialRecord], unhealthy: dict[int, Health], ceiling: CeilingResult,
                  notes: list[str]) -> int:
    """The trial's pick among its runs: the largest healthy batch each of whose doublings bought >= 10% more
    samples/s (an unstable run only when nothing else trained); the notes say why."""
    fitted = sorted((b, r) for b, r in tried.items() if r.status == "ok")
    ok = [(b, r) for b, r in fitted if b not in unhealthy] or fitted
    if fitted and all(b in unhealthy for b, _ in fitted):
        notes.append("every trial run was unstable: " + "; ".join(f"{b} {h.verdict}" for b, h in sorted(unhealthy.items())))
    if not ok:
        raise AdvisorError(f"Every trial batch down to 1 ran out of memory, although the ceiling probes fit "
                           f"{ceiling.per_device_max}. Multi-process training can need more memory per device than "
                           "one process: raise --headroom, or plan for a device with more --device-memory.")
    chosen = ok[0][0]
    for (small, small_rec), (big, big_rec) in zip(ok, ok[1:]):
        gain = big_rec.throughput / small_rec.throughput
        if gain >= WORTH_DOUBLING:
            chosen = big
            notes.append(f"{small} -> {big} bought {gain - 1:+.0%} throughput: worth it")
        else:
            notes.append(f"{small} -> {big} bought only {gain - 1:+.0%} throughput: the bigger batch is not worth "
                         "it (bandwidth-bound)")
            break
    return chosen



def trained_cap(rows: list[TrialRecord], precision: str) -> tuple[int | None, str]:
    """The per-device cap the plan's own training runs set in ``precision`` (None and "" when none ran out of
    memory): a trial or sweep run that ran out of memory at b caps the plan at the largest batch below b that
    trained (the probes' ceiling is two steps on the probe's processes; a longer N-process run can hold more).
    A run that trained in fp32 counts for a mixed-precision plan too (mixed precision holds less), not the
    other way round. A recipe never advises a batch its own runs saw run out of memory."""
    runs = [r for r in rows if r.phase in ("trial", "noise", "sweep")]
    ooms = [r for r in runs if r.status == "oom" and r.precision == precision]
    if not ooms:
        return None, ""
    smallest = min(r.per_device for r in ooms)
    holds_as_much = {precision} | ({"fp32"} if precision in MIXED_PRECISIONS else set())
    trained = [r.per_device for r in runs if r.status == "ok" and r.precision in holds_as_much
               and r.per_device < smallest]
    phase = next(r.phase for r in ooms if r.per_device == smallest)
    if trained:
        cap = max(trained)
        return cap, (f"the {phase} run at {smallest} per device ran out of memory in {precision}; the largest that "
                     f"trained is {cap} per device")
    return smallest - 1, (f"the {phase} run at {smallest} per device ran out of memory in {precision} and nothing "
                          f"smaller trained in it: capped just below it, {smallest - 1} per device, unmeasured "
                          "(rerun the plan with a smaller --device-memory headroom to measure it)")
