"""Step 3, the short trial: double / halve / stop from what each run measured and how it trained, mixed
precision before halving, and the cap a training OOM sets."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import AdvisorError
from ..ledger import TrialRecord
from ..oom import is_primitive_failure
from .ceiling import CeilingResult
from .blame import blame_lr_or_batch
from .health import BLAME_WORDS, UNSTABLE, Health, judge
from .inputs import Decide, Runner, WorkloadInfo, lr_and_warmup, lr_for, warmup_for
from .precision import MIXED_PRECISIONS
from .speed import FASTER_BY, clears_bar, faster_at_every_pair, pairs_text, timing_steps
from .sweep import MIN_BATCHNORM_BATCH, smallest_sweepable


@dataclass(frozen=True)
class TrialPolicy:
    """Every number step 3's rules use (injectable: tests and callers pass their own)."""

    high_water: float = 0.60  # below this share of the ceiling's memory, double the trial batch
    faster_by: float = FASTER_BY  # doubling must buy more than this share of samples/s (advisor.method.speed)
    timing_rounds: int = 3  # a doubling is worth it only when faster in every one of this many paired rounds


DEFAULT_TRIAL_POLICY = TrialPolicy()
HIGH_WATER = DEFAULT_TRIAL_POLICY.high_water


@dataclass(frozen=True)
class TrialStep:
    """One decision of the trial: which rule decided (``rule``, a code of ``TRIAL_TEXT``), the batch it decided
    at, the batch to run next (None: the trial stops) and the numbers it used. Its text is rendered from these
    (``text``), so the app's live log, the recipe and the summary read one decision."""

    rule: str
    batch: int
    next_batch: int | None = None
    numbers: tuple[tuple[str, object], ...] = ()

    @property
    def text(self) -> str:
        return TRIAL_TEXT[self.rule].format(batch=self.batch, next=self.next_batch, **dict(self.numbers))

    def to_dict(self) -> dict:
        out = {"per_device": self.batch, "rule": self.rule, "next": self.next_batch}
        return {k: v for k, v in out.items() if v is not None}


def _step(rule: str, batch: int, next_batch: int | None = None, **numbers) -> TrialStep:
    return TrialStep(rule, batch, next_batch, tuple(numbers.items()))


# Every sentence the trial says, one per rule code.
TRIAL_TEXT = {
    "start-capped": "{start}: above the cap of {cap} ({why}): starting at {batch}",
    "oom-try-mixed": ("{batch}: out of memory in fp32; re-running it in {mixed} mixed precision before halving "
                      "(mixed precision comes before a smaller batch)"),
    "mixed-unsupported": ("{batch}: {mixed} failed too, with oneDNN's 'could not create a primitive': this CPU may "
                          "not support {mixed} at all (not only memory); staying in fp32"),
    "oom-halve": "{batch}: out of memory in {precision}: halving to {next}",
    "oom-at-smallest": "{batch}: out of memory in {precision}: nothing smaller to try{floor}",
    "lr-to-blame": ("{batch}: learned at {whose} LR {validated:.3g} but not at the scaled {lr:.3g}: "
                    + BLAME_WORDS["lr"]),
    "batch-to-blame": ("{batch}: unstable at {whose} LR {validated:.3g} too: " + BLAME_WORDS["batch"]
                       + ", not only the LR scale-up"),
    "unstable-halve": ("{batch}: unstable at LR {lr:.3g} ({why}): halving to {next}, a smaller global batch at a "
                       "smaller scaled LR"),
    "unstable-stop": "{batch}: unstable at LR {lr:.3g} ({why}): stop{floor}",
    "unstable-not-confirmed": ("{batch}: unstable at LR {lr:.3g} at seed 0 ({why}), but a second seed at the same "
                               "setting learned: one short run's curve, not instability; going on from the second"),
    "not-worth-doubling": ("{batch}: {throughput:.0f} samples/s; against {smaller}, timed side by side: {pairs}: not "
                           "more than {margin:.0%} faster in every round: stop doubling"),
    "double-unstable": "{batch}: learned; {bigger} did not ({verdict}): stop",
    "double": "{batch}: {share:.0%} of the ceiling's memory (< {high_water:.0%}): doubling to {next}",
    "memory-high": "{batch}: {share:.0%} of the ceiling's memory: stop",
    "at-cap": "{batch}: doubling would pass the cap of {cap} ({why}): stop",
}


@dataclass
class TrialState:
    """What the trial's rules read: every run so far by batch, the unstable ones, the cap and the policy."""

    tried: dict[int, TrialRecord]
    unhealthy: dict[int, Health]
    cap: int
    cap_reason: str
    ceiling_bytes: float
    policy: TrialPolicy
    smallest: int = 1  # the least per-device batch the model can train (smallest_sweepable: 2 with BatchNorm)
    # Per bigger batch of a doubling: (smaller's, bigger's) samples/s by round, timed side by side (time_doubling).
    rounds: dict[int, tuple[dict[int, float], dict[int, float]]] = field(default_factory=dict)

    def share(self, record: TrialRecord) -> float:
        """The run's peak memory as a share of the ceiling's."""
        return (record.peak_bytes or 0) / self.ceiling_bytes if self.ceiling_bytes else 1.0

    def paired_speeds(self, small: int, big: int) -> tuple[dict[int, float], dict[int, float]]:
        """(small's, big's) samples/s by round: the rounds timed side by side when the doubling was, else the two
        runs as made (one round)."""
        if big in self.rounds and big == 2 * small:
            return self.rounds[big]
        return {0: self.tried[small].samples_per_s or 0.0}, {0: self.tried[big].samples_per_s or 0.0}

    def worth_doubling(self, small: int, big: int) -> bool:
        """The one speed rule (advisor.method.speed): more than FASTER_BY faster in every paired round."""
        small_speeds, big_speeds = self.paired_speeds(small, big)
        return faster_at_every_pair(big_speeds, small_speeds, self.policy.faster_by)


# The rules after a run, in order: the first that answers decides the next batch (or stop). Each returns a
# TrialStep (its code and the numbers it used) or None when it does not apply.

def _out_of_memory(batch: int, record: TrialRecord, health: Health | None, state: TrialState, lr: float,
                   precision: str) -> TrialStep | None:
    if record.status == "oom":
        if batch // 2 < state.smallest:
            return _step("oom-at-smallest", batch, precision=precision, floor=_floor_words(batch, state))
        return _step("oom-halve", batch, batch // 2, precision=precision)
    return None


def _floor_words(batch: int, state: TrialState) -> str:
    """Why a halving stops above 1 per device: BatchNorm cannot train on a micro-batch of 1 (DOMAIN 2)."""
    if state.smallest == MIN_BATCHNORM_BATCH and batch // 2 < state.smallest <= batch:
        return (f" (the model has BatchNorm, which cannot train on fewer than {MIN_BATCHNORM_BATCH} samples per "
                "device)")
    return ""


def _unstable(batch, record, health, state, lr, precision) -> TrialStep | None:
    if health is None or health.verdict != UNSTABLE:
        return None
    if batch // 2 >= state.smallest and batch // 2 not in state.tried:
        return _step("unstable-halve", batch, batch // 2, lr=lr, why=health.reason)
    return _step("unstable-stop", batch, lr=lr, why=health.reason, floor=_floor_words(batch, state))


def _doubling_not_worth_it(batch, record, health, state, lr, precision) -> TrialStep | None:
    smaller = state.tried.get(batch // 2)
    if smaller and smaller.status == "ok" and not state.worth_doubling(batch // 2, batch):
        small_speeds, big_speeds = state.paired_speeds(batch // 2, batch)
        return _step("not-worth-doubling", batch, throughput=record.samples_per_s, smaller=batch // 2,
                     pairs=pairs_text(big_speeds, small_speeds, state.policy.faster_by),
                     margin=state.policy.faster_by)
    return None


def _double_was_unstable(batch, record, health, state, lr, precision) -> TrialStep | None:
    if batch * 2 in state.unhealthy:
        return _step("double-unstable", batch, bigger=batch * 2, verdict=state.unhealthy[batch * 2].verdict)
    return None


def _memory_room(batch, record, health, state, lr, precision) -> TrialStep:
    share = state.share(record)
    if share < state.policy.high_water and batch * 2 <= state.cap:
        return _step("double", batch, batch * 2, share=share, high_water=state.policy.high_water)
    if share >= state.policy.high_water:
        return _step("memory-high", batch, share=share)
    return _step("at-cap", batch, cap=state.cap, why=state.cap_reason or "the memory ceiling")


TRIAL_RULES = (_out_of_memory, _unstable, _doubling_not_worth_it, _double_was_unstable, _memory_room)


def next_trial_step(batch: int, record: TrialRecord, health: Health | None, state: TrialState, lr: float,
                    precision: str) -> TrialStep:
    """The trial's decision after the run at ``batch``: the first rule of ``TRIAL_RULES`` that answers."""
    for rule in TRIAL_RULES:
        step = rule(batch, record, health, state, lr, precision)
        if step is not None:
            return step
    raise AssertionError("_memory_room always answers")


@dataclass
class TrialOutcome:
    chosen: int
    reason: str
    precision: str  # what the trial ended up running: mixed precision if it was needed to fit
    rows: list[TrialRecord]
    steps: list[TrialStep]
    # One device: the run with accumulation 2 at ``chosen`` that measures the noise scale (not a trial candidate).
    noise_run: TrialRecord | None = None
    unhealthy: dict[int, Health] = field(default_factory=dict)  # per batch: the unstable runs, and why

    @property
    def decisions(self) -> list[str]:
        """Each decision in words, in the order made."""
        return [step.text for step in self.steps]

    def summary(self) -> dict:
        """What the recipe's [method.trial] records: each decision's rule code."""
        return {"pick": self.chosen, "steps": [step.to_dict() for step in self.steps]}


def short_trial(runner: Runner, start: int, ceiling: CeilingResult, steps: int, info: WorkloadInfo,
                precision: str, mixed: str | None, decide: Decide = lambda message: None,
                cap: int | None = None, cap_reason: str = "", policy: TrialPolicy = DEFAULT_TRIAL_POLICY
                ) -> TrialOutcome:
    """Step 3: run at ``start``, then let ``TRIAL_RULES`` decide after each run: halve on OOM (after trying
    ``mixed`` precision at the same batch, when the user left the precision open) or from an unstable run; stop
    when doubling was not more than 10% faster in every round timed side by side (``time_doubling``) or the double
    was unstable; else double while memory stays under
    60% of the ceiling's and within ``cap`` (default: the ceiling; the first run too, its reason said when it
    binds). Every run is judged (advisor.method.health): the trial never doubles from a run that did not learn,
    and an unstable run at a scaled-up LR is rerun at the nearest validated LR to tell the LR from the batch; a
    flat run is noted in its ledger row (a short trial in its warmup often is)."""
    cap = ceiling.per_device_max if cap is None else cap
    state = TrialState({}, {}, cap, cap_reason, ceiling.estimated_peak_bytes, policy,
                       smallest_sweepable(info.has_batchnorm))
    if cap < state.smallest:  # DOMAIN 2: 1 sample per device is an error for BatchNorm in training mode
        raise AdvisorError(f"The per-device cap is {cap} ({cap_reason or 'the memory ceiling'}), and the model has "
                           f"BatchNorm, which cannot train on fewer than {state.smallest} samples per device: plan "
                           "for a device with more --device-memory, lower --headroom, or replace BatchNorm with "
                           "GroupNorm/LayerNorm.")
    batch, rows, notes, said = min(start, cap), [], [], []

    def say(step: TrialStep) -> None:
        said.append(step)
        decide(step.text)

    if batch < start:  # the cap bounds the first run too, not only doubling
        say(_step("start-capped", batch, start=start, cap=cap, why=cap_reason or "the memory ceiling"))

    while batch >= state.smallest and batch not in state.tried:
        lr, warmup = lr_and_warmup(info, batch * runner.nproc, steps)
        record = runner.train("trial", batch, steps, lr, warmup, precision=precision)
        rows.append(record)
        if record.status == "oom" and mixed and precision == "fp32":
            say(_step("oom-try-mixed", batch, mixed=mixed))
            retry = runner.train("trial", batch, steps, lr, warmup, precision=mixed)
            rows.append(retry)
            if retry.status == "ok":
                precision, record = mixed, retry
                notes.append(f"{batch}: OOM in fp32, fits in {mixed}: switched to {mixed}")
            elif is_primitive_failure(retry.note or ""):
                say(_step("mixed-unsupported", batch, mixed=mixed))
        state.tried[batch] = record
        health = None if record.status == "oom" else judge(record)
        if health and health.verdict == UNSTABLE:
            record, health = _confirm_unstable(runner, record, health, steps, lr, warmup, precision, rows, say)
            state.tried[batch] = record
        if health and not health.learned:
            record.note = (record.note + "; " if record.note else "") + f"{health.verdict}: {health.reason}"
        if health and health.verdict == UNSTABLE:
            state.unhealthy[batch] = health
            notes.append(f"{batch}: unstable at LR {lr:.3g}, never doubled from")
            blame = _blame_lr_or_batch(runner, batch, steps, lr, precision, info, rows[:-1])
            if blame:
                rows.append(blame[0])
                notes.append(blame[1].text)
                say(blame[1])
        elif record.status == "oom":
            notes.append(f"{batch}: OOM, halving")
        else:
            notes.append(f"{batch}: {state.share(record):.0%} of the ceiling's memory, "
                         f"{record.samples_per_s:.0f} samples/s")
            if _healthy_double(batch, state):
                state.rounds[batch] = time_doubling(runner, batch // 2, batch, state, steps, info, precision, rows)
        step = next_trial_step(batch, record, health, state, lr, precision)
        say(step)
        if step.next_batch is None:
            break
        batch = step.next_batch
    chosen = _trial_choice(state, ceiling, notes)
    return TrialOutcome(chosen, "; ".join(notes), precision, rows, said, unhealthy=state.unhealthy)


def _healthy_double(batch: int, state: TrialState) -> bool:
    """Whether ``batch`` and its half both trained healthily: a doubling whose speed the trial must judge."""
    small, big = state.tried.get(batch // 2), state.tried.get(batch)
    return (batch % 2 == 0 and small is not None and big is not None and small.status == "ok"
            and big.status == "ok" and batch // 2 not in state.unhealthy and batch not in state.unhealthy)


def time_doubling(runner: Runner, small: int, big: int, state: TrialState, steps: int, info: WorkloadInfo,
                  precision: str, rows: list[TrialRecord]) -> tuple[dict[int, float], dict[int, float]]:
    """The doubling's speed, timed side by side so that it does not hang on one noisy timing (DOMAIN 2: the same
    host gives the same pick): round 1 is the two trial runs as made when each lasted ``MIN_TIMING_SECONDS`` (else
    both run again, as every later round does, at the trial's settings for at least that long: ``timing_steps``);
    while every round so far cleared the bar, one more round runs both again, the order reversed every other round (a steady drift
    then falls on each alike), up to the policy's ``timing_rounds``. A round that misses ends it: the doubling is
    then not worth it whatever later rounds would say (the one rule: faster in every round), so a clear miss costs
    no extra run. Runs are phase "timing": never a result, never reused from the history."""
    small_speeds: dict[int, float] = {}
    big_speeds: dict[int, float] = {}
    rounds = state.policy.timing_rounds
    stretched = {b: timing_steps(steps, state.tried[b].samples_per_s, b * runner.nproc) for b in (small, big)}
    first = 0
    if all(n <= steps for n in stretched.values()):  # the trial's own runs lasted long enough: they are round 1
        small_speeds[0] = state.tried[small].samples_per_s or 0.0
        big_speeds[0] = state.tried[big].samples_per_s or 0.0
        first = 1
    for round_ in range(first, rounds):
        if round_ and not clears_bar(big_speeds[round_ - 1], small_speeds[round_ - 1], state.policy.faster_by):
            break
        for batch in ((big, small) if round_ % 2 else (small, big)):
            lr, warmup = lr_and_warmup(info, batch * runner.nproc, steps)
            record = runner.train("timing", batch, stretched[batch], lr, warmup, precision=precision, seed=round_)
            record.seed = round_
            record.note = (record.note + "; " if record.note else "") + (
                f"not a trial candidate's run: timing round {round_ + 1} of {rounds}, {small} vs {big} side by side")
            rows.append(record)
            speed = record.samples_per_s if record.status == "ok" else None
            (small_speeds if batch == small else big_speeds)[round_] = speed or 0.0
    return small_speeds, big_speeds


def _confirm_unstable(runner: Runner, record: TrialRecord, health: Health, steps: int, lr: float, warmup: int,
                      precision: str, rows: list[TrialRecord], say) -> tuple[TrialRecord, Health]:
    """(the run the trial goes on from, its verdict) after an unstable one: the second seed when it learned (said as
    ``unstable-not-confirmed``; the first run stays in the ledger with its verdict), else the first."""
    second = _second_seed(runner, record.per_device, steps, lr, warmup, precision)
    rows.append(second)
    if second.status != "ok" or not judge(second).learned:
        return record, health
    say(_step("unstable-not-confirmed", record.per_device, lr=lr, why=health.reason))
    record.note = (record.note + "; " if record.note else "") + f"unstable: {health.reason}"
    return second, judge(second)


def _second_seed(runner: Runner, batch: int, steps: int, lr: float, warmup: int, precision: str) -> TrialRecord:
    """The same trial run at seed 1: an unstable verdict moves the trial (it halves, stops doubling) only when a
    second seed confirms it. A 40-step curve of one-batch losses from initialisation, its warmup squeezed into the
    first quarter, can give back half its decrease on a transient: a held-out Adam model at a quarter of its edge LR
    was judged unstable at its own base setting (16 per device, 55% given back) where the sweep's 6 seeds there
    learned, and the trial halved away from it (session m-v3). A run that really diverges does so at any seed."""
    record = runner.train("trial", batch, steps, lr, warmup, precision=precision, seed=1)
    record.seed = 1
    record.note = (record.note + "; " if record.note else "") + "second seed, to confirm an unstable verdict: " + (
        judge(record).verdict if record.status == "ok" else record.status)
    return record


def _blame_lr_or_batch(runner: Runner, batch: int, steps: int, lr: float, precision: str, info: WorkloadInfo,
                       earlier: list[TrialRecord]) -> tuple[TrialRecord, TrialStep] | None:
    """An unstable run at a scaled-up LR blames the LR before the batch (DOMAIN 2): the same batch once more at the
    nearest validated LR. Its verdict says which was to blame; the batch is still never doubled from (the plan's
    LR at it is the scaled one) and the trial goes on as for any unstable run. None when the LR was not scaled up
    past a validated one (nothing to tell apart)."""
    global_batch = batch * runner.nproc
    warmup = min(warmup_for(info, lr_for(info, global_batch)).steps, steps // 4)
    blame = blame_lr_or_batch(runner, info, "trial", batch, global_batch, steps, lr, warmup, earlier, precision)
    if blame is None:
        return None
    record = blame.rerun
    record.note = (record.note + "; " if record.note else "") + (
        f"rerun at {blame.whose} LR {blame.validated:.3g}: {blame.verdict}")
    return record, _step(f"{blame.to_blame}-to-blame", batch, whose=blame.whose, validated=blame.validated, lr=lr)


def _trial_choice(state: TrialState, ceiling: CeilingResult, notes: list[str]) -> int:
    """The trial's pick among its runs: the largest healthy batch each of whose doublings was more than FASTER_BY
    faster in every round timed side by side (an unstable run only when nothing else trained); the notes say why."""
    tried, unhealthy = state.tried, state.unhealthy
    fitted = sorted((b, r) for b, r in tried.items() if r.status == "ok")
    ok = [(b, r) for b, r in fitted if b not in unhealthy] or fitted
    if fitted and all(b in unhealthy for b, _ in fitted):
        notes.append("every trial run was unstable: " + "; ".join(f"{b} {h.verdict}" for b, h in sorted(unhealthy.items())))
    if not ok:
        floor = (f" (the model has BatchNorm, which cannot train on fewer than {state.smallest} samples per device)"
                 if state.smallest > 1 else "")
        raise AdvisorError(f"Every trial batch down to {state.smallest}{floor} ran out of memory, although the ceiling "
                           f"probes fit {ceiling.per_device_max}. Multi-process training can need more memory per "
                           "device than one process: raise --headroom, or plan for a device with more "
                           "--device-memory.")
    chosen = ok[0][0]
    for (small, _), (big, _) in zip(ok, ok[1:]):
        small_speeds, big_speeds = state.paired_speeds(small, big)
        pairs = pairs_text(big_speeds, small_speeds, state.policy.faster_by)
        rounds = len(set(small_speeds) & set(big_speeds))
        said = f"{small} -> {big} samples/s ratio in {rounds} round(s) timed side by side: {pairs}"
        if state.worth_doubling(small, big):
            chosen = big
            notes.append(f"{said}: worth it")
        else:
            notes.append(f"{said}: the bigger batch is not worth it (a step of more samples takes about "
                         "proportionally longer: the device, or the data loader, is already saturated)")
            break
    return chosen


def trained_cap(rows: list[TrialRecord], precision: str) -> tuple[int | None, str]:
    """The per-device cap the plan's own training runs set in ``precision`` (None and "" when none ran out of
    memory): a trial or sweep run that ran out of memory at b, where no bigger batch trained, caps the plan at the
    largest batch below b that trained (the probes' ceiling is two steps on the probe's processes; a longer
    N-process run can hold more).
    A run that trained in fp32 counts for a mixed-precision plan too (mixed precision holds less), not the
    other way round. A recipe never advises a batch its own runs saw run out of memory."""
    runs = [r for r in rows if r.phase in ("trial", "noise", "sweep")]
    holds_as_much = {precision} | ({"fp32"} if precision in MIXED_PRECISIONS else set())
    held = [r.per_device for r in runs if r.status == "ok" and r.precision in holds_as_much]
    # An OOM under a batch that trained is not that batch's memory but its run's length (a smaller batch runs more
    # steps on equal samples, and the process's allocations grow over them): it caps nothing, and that candidate
    # stays out of the comparison on its own.
    ooms = [r for r in runs if r.status == "oom" and r.precision == precision
            and not any(b > r.per_device for b in held)]
    if not ooms:
        return None, ""
    smallest = min(r.per_device for r in ooms)
    trained = [b for b in held if b < smallest]
    phase = next(r.phase for r in ooms if r.per_device == smallest)
    if trained:
        cap = max(trained)
        return cap, (f"the {phase} run at {smallest} per device ran out of memory in {precision}; the largest that "
                     f"trained is {cap} per device")
    return smallest - 1, (f"the {phase} run at {smallest} per device ran out of memory in {precision} and nothing "
                          f"smaller trained in it: capped just below it, {smallest - 1} per device, unmeasured "
                          "(no run trained at it)")
