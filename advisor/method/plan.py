"""Data-parallel planning: per-device batch, accumulation, and the warnings of DOMAIN section 3."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..batches import steps_per_epoch
from ..errors import AdvisorError
from ..tasks import BN_SENSITIVE_TASKS, IMAGE_TASKS, task_profile
from .ceiling import CeilingResult
from .inputs import MethodSettings, WorkloadInfo, lr_for, warmup_for
from .lr import LRDecision, WarmupDecision, bound_past_validated
from .sweep import SMALL_MICRO_BATCH  # one owner: the sweep's BatchNorm constraint and the SyncBN advice

# DOMAIN 3: accumulation above this many steps costs clear throughput (more sync overhead). The one owner: the
# plan's accumulation-high warning and goodput's search both read it here.
MAX_SENSIBLE_ACCUMULATION = 8
# Fewer optimizer steps than this in the planned run leave too few updates to learn from. Counted over the run
# (its stated epochs; one epoch when none is stated), not per epoch: a 5-epoch run of a small data set learns from
# 2 steps an epoch as well as a 1-epoch run from 10.
MIN_STEPS_PER_RUN = 10


def run_steps_needed_per_epoch(run_epochs: float | None) -> int:
    """The steps per epoch the planned run needs to reach MIN_STEPS_PER_RUN over its epochs."""
    return max(1, math.ceil(MIN_STEPS_PER_RUN / (run_epochs or 1) - 1e-9))


def largest_learnable_global(train_size: int, run_epochs: float | None = None) -> int:
    """The largest global batch whose planned run (``run_epochs``; one epoch when unknown) still takes
    MIN_STEPS_PER_RUN optimizer steps, by the sampler's steps per epoch (a big batch on small data trains in too
    few updates). The one owner of that cap: the trial, the sweep, `--global-batch`, `replan` and goodput all read
    it here."""
    return max(1, train_size // run_steps_needed_per_epoch(run_epochs))


def few_steps_cost(train_size: int, global_batch: int, run_epochs: float | None = None) -> str:
    """What a global batch past ``largest_learnable_global`` costs, in words."""
    steps = steps_per_epoch(train_size, global_batch)
    epochs = run_epochs or 1
    run = (f"{steps} optimizer step(s) per epoch" if epochs == 1 else
           f"{steps} optimizer step(s) per epoch, {math.floor(steps * epochs)} over the {epochs:g}-epoch run")
    return (f"{train_size} training samples / global batch {global_batch} = {run} (< {MIN_STEPS_PER_RUN} in the "
            f"run): too few updates to learn from, and each epoch costs a full pass of data for {steps} update(s); "
            f"the largest global batch that keeps {MIN_STEPS_PER_RUN} in the run is "
            f"{largest_learnable_global(train_size, run_epochs)}")


@dataclass
class Warning_:
    code: str
    message: str


@dataclass
class Plan:
    per_device: int
    world_size: int
    accumulation_steps: int
    global_batch: int
    target_global: int
    reason: str
    warnings: list[Warning_] = field(default_factory=list)
    sync_batchnorm: bool = False  # convert to SyncBatchNorm for the run this recipe launches (never on CPU)
    sync_batchnorm_on_gpu: bool = False  # advised for a multi-GPU run of the same plan
    normalization_advice: str = ""
    precision: str = "fp32"
    precision_advice: str = ""
    validated_global: int | None = None  # the global batch the comparison sweep ran, for the extrapolation note


def plan_data_parallel(  # noqa: C901 -- complexity debt, a list of independent cases; split when next changed
    target_global: int,
    world_size: int,
    ceiling: int,
    task: str,
    num_classes: int | None = None,
    has_batchnorm: bool = False,
    device_type: str = "cpu",
    precision: str = "fp32",
    amp_available: bool = False,
    train_size: int | None = None,
    run_epochs: float | None = None,
) -> Plan:
    """Split a global batch target over ``world_size`` identical devices under a memory ceiling."""
    if world_size < 1:
        raise AdvisorError(f"World size must be at least 1, got {world_size}.")
    if ceiling < 1:
        raise AdvisorError(
            "Not even one sample per device fits in memory. Enable mixed precision, shrink the model or its "
            "input, or plan for a device with more memory (--device-memory)."
        )
    if target_global < 1:
        raise AdvisorError(f"The global batch target must be at least 1, got {target_global}.")
    profile = task_profile(task)
    reference = math.ceil(target_global / world_size)
    if reference <= ceiling:
        per_device, accumulation = reference, 1
        reason = (f"Global target {target_global} / {world_size} device(s) = {reference} per device, "
                  f"within the per-device ceiling of {ceiling}.")
    else:
        accumulation = math.ceil(target_global / (ceiling * world_size))
        # Once the accumulation count is known, the smallest per-device batch that reaches the target:
        # 256 on 2 devices under a ceiling of 100 is 64 x 2 x 2, not 100 x 2 x 2 = 400.
        per_device = math.ceil(target_global / (world_size * accumulation))
        reason = (f"Global target {target_global} / {world_size} device(s) = {reference} per device exceeds the "
                  f"ceiling of {ceiling}: accumulation = ceil({target_global} / ({ceiling} x {world_size})) = "
                  f"{accumulation}, and per-device = ceil({target_global} / ({world_size} x {accumulation})) = "
                  f"{per_device}, the smallest that reaches the target.")
    global_batch = per_device * world_size * accumulation
    plan = Plan(per_device, world_size, accumulation, global_batch, target_global, reason, precision=precision)
    if global_batch != target_global:
        over = global_batch - target_global
        plan.warnings.append(Warning_(
            "global-rounded",
            f"Identical per-device batches give a global batch of {global_batch}, not exactly {target_global} "
            f"({over:+d} samples, {over / target_global:+.1%}); the LR is scaled for the real global batch."))
    if accumulation > MAX_SENSIBLE_ACCUMULATION:
        plan.warnings.append(Warning_(
            "accumulation-high",
            f"{accumulation} accumulation steps (> {MAX_SENSIBLE_ACCUMULATION}) cost clear throughput in sync "
            "overhead. Use devices with more memory, more devices, or a smaller global target."))
    amp_name = "bf16/fp16 AMP" if device_type == "cuda" else "bf16 autocast (fp16 needs a CUDA GPU)"
    if accumulation > 1 and precision == "fp32":
        plan.warnings.append(Warning_(
            "amp-before-shrinking",
            f"Memory is short: try mixed precision ({amp_name}) first; it roughly halves activation memory "
            "and may remove the need for accumulation. Under AMP, step the optimizer and the scaler only every "
            f"{accumulation} micro-steps."))
    lower = max(profile.min_global if task in IMAGE_TASKS else 0, (num_classes or 0) + 1)
    if task in IMAGE_TASKS and global_batch < 16:
        plan.warnings.append(Warning_(
            "global-too-small", f"Global batch {global_batch} is below 16, the floor for image tasks."))
    if num_classes and global_batch <= num_classes:
        plan.warnings.append(Warning_(
            "global-below-classes",
            f"Global batch {global_batch} does not exceed the {num_classes} classes: most classes are absent from "
            "each step. Raise it (accumulation, more devices) to at least " + str(lower) + "."))
    if per_device <= 2 and global_batch < 32:
        plan.warnings.append(Warning_(
            "tiny-batch", f"Per-device batch {per_device} with a global batch of {global_batch} is unlikely to converge."))
    # BatchNorm statistics come from each micro-batch: what matters is the micro-batch, not the accumulation.
    if has_batchnorm and per_device < SMALL_MICRO_BATCH:
        sensitive = " Detection and segmentation are the most sensitive." if task in BN_SENSITIVE_TASKS else ""
        why = (f"BatchNorm computes statistics per micro-batch of {per_device} (< {SMALL_MICRO_BATCH})"
               + (", and accumulation does not enlarge them" if accumulation > 1 else "") + ".")
        if world_size > 1:
            plan.sync_batchnorm_on_gpu = True
        if world_size > 1 and device_type == "cuda":
            plan.sync_batchnorm = True
            plan.normalization_advice = why + " Convert to SyncBatchNorm (torch.nn.SyncBatchNorm.convert_sync_batchnorm)." + sensitive
        elif world_size > 1:
            # A CPU launch that applied sync_batchnorm = true would fail: DDP refuses SyncBatchNorm on CPU modules.
            plan.normalization_advice = (why + " Use SyncBatchNorm on the GPUs (it does not run on CPU, so the "
                                         "advisor did not run it here, and the recipe keeps sync_batchnorm = false "
                                         "with sync_batchnorm_on_gpu = true), or GroupNorm/LayerNorm." + sensitive)
        else:
            plan.normalization_advice = why + " On one device use GroupNorm or LayerNorm instead." + sensitive
        plan.warnings.append(Warning_("batchnorm-small-micro-batch", plan.normalization_advice))
    elif has_batchnorm:
        plan.normalization_advice = f"BatchNorm sees {per_device} samples per device: plain BatchNorm is fine."
    else:
        plan.normalization_advice = "The model has no BatchNorm layers."
    if precision == "fp32":
        if device_type == "cuda":
            plan.precision_advice = ("Mixed precision (bf16 AMP, or fp16 with a GradScaler) on a Tensor-Core GPU is "
                                     "faster and halves activation memory: try it before shrinking the batch."
                                     if amp_available else "fp32: this device has no fast mixed precision.")
        else:
            plan.precision_advice = ("On CPU, bf16 autocast cuts activation memory (fp16 needs a CUDA GPU); on "
                                     "Tensor-Core GPUs use bf16 AMP: try it before shrinking the batch.")
    elif precision == "fp16":
        plan.precision_advice = ("fp16 mixed precision: torch.autocast(dtype=torch.float16) with a torch.amp.GradScaler "
                                 "(fp16 gradients underflow without loss scaling)"
                                 + (f"; under accumulation, step the optimizer and the scaler every {accumulation} "
                                    "micro-steps." if accumulation > 1 else "."))
    else:
        plan.precision_advice = ("bf16 mixed precision: torch.autocast(dtype=torch.bfloat16), no GradScaler needed"
                                 + (f"; under accumulation, step the optimizer every {accumulation} micro-steps."
                                    if accumulation > 1 else "."))
    if profile.global_range and global_batch < profile.global_range[0]:
        low, high = profile.global_range
        plan.warnings.append(Warning_(
            "below-task-range",
            f"Global batch {global_batch} is below the usual {low}-{high} for {profile.label}. Fine when the "
            "comparison sweep chose it (small data sets favour 32-64); on million-sample data expect 128-256+."))
    if train_size and global_batch > largest_learnable_global(train_size, run_epochs):
        plan.warnings.append(Warning_(
            "few-steps-per-epoch",
            f"{few_steps_cost(train_size, global_batch, run_epochs)}. Use a smaller global batch (fewer devices or a smaller "
            "per-device batch) or more data."))
    if profile.name == "contrastive" and global_batch < 4096:
        plan.warnings.append(Warning_(
            "contrastive-small-batch",
            f"Contrastive learning with a global batch of {global_batch} (SimCLR used 4096-8192): use a MoCo-style "
            "queue of negatives instead of a giant batch."))
    return plan


def identical_batch_for(ceilings: list[int]) -> tuple[int, Warning_ | None]:
    """With heterogeneous devices, the identical per-device batch is the smallest ceiling."""
    batch = min(ceilings)
    note = None
    if max(ceilings) - batch > 1:
        note = Warning_(
            "heterogeneous-devices",
            f"Device ceilings differ ({ceilings}); every device uses {batch} so batches stay identical. "
            "The larger devices have idle memory: balance the load explicitly if that matters.")
    return batch, note


NOISE_MARGIN = 2.0  # a global batch past this multiple of the noise scale buys little



def heterogeneous_devices_note(ceiling: CeilingResult, device_memories: list[int] | None):
    """With cards of different sizes, say what identical batches leave unused (probes ran on the smallest)."""
    if not device_memories or len(set(device_memories)) < 2 or ceiling.fit is None:
        return None
    usable_share = ceiling.usable_bytes / ceiling.budget_bytes
    ceilings = [ceiling.fit.batch_with_headroom(usable_share * m, ceiling.headroom) for m in device_memories]
    return identical_batch_for(ceilings)[1]



def validated_global(settings: MethodSettings, per_device: int) -> int:
    """The global batch a trial or sweep run at ``per_device`` validates: the processes the runs had (this host's,
    or every node's when the plan ran on the cluster), whatever the target cluster."""
    return per_device * settings.run_processes



def make_plan(settings: MethodSettings, info: WorkloadInfo, per_device_cap: int, sweep_choice: int,
              sweep_reason: str, precision: str, noise: float | None, amp_available: bool,
              healthy_global: int | None = None, noise_low: float | None = None
              ) -> tuple[Plan, LRDecision, WarmupDecision]:
    """The data-parallel plan for the target cluster, its LR and warmup, and the warnings that go with them.
    ``healthy_global``: the largest global batch validated at the LR the rules give it
    (advisor.method.validated.largest_validated_global; default: the sweep's); past it the LR is bounded
    (advisor.method.lr.bound_past_validated)."""
    world, nproc = settings.world_size, settings.run_processes
    validated = validated_global(settings, sweep_choice)
    target = settings.global_batch or validated
    plan = plan_data_parallel(target, world, per_device_cap, info.task, info.num_classes, info.has_batchnorm,
                              settings.device, precision, amp_available=amp_available, train_size=info.train_size,
                              run_epochs=info.run_epochs)
    plan.validated_global = validated
    if not settings.global_batch:
        on_target = f"; the plan keeps it on the target's {world} device(s)" if world != nproc else ""
        plan.reason = (f"The sweep's winner, {sweep_choice} per device x {nproc} process(es) = global "
                       f"{validated}{on_target}. " + plan.reason)
    if plan.global_batch != validated:
        why = ("you asked for it (--global-batch)" if settings.global_batch
               else f"identical per-device batches on {world} device(s) round it")
        plan.warnings.append(Warning_(
            "global-not-validated",
            f"The global batch {plan.global_batch} was not validated: it is {plan.global_batch / validated:.3g}x "
            f"the {validated} the comparison sweep ran ({sweep_choice} per device x {nproc} process(es)), because "
            f"{why}. Its LR is scaled by the rules, but how it trains is an extrapolation: sweep it on the target "
            "before a long run."))
    elif world > nproc and plan.per_device < per_device_cap:
        plan.warnings.append(Warning_(
            "target-memory-unused",
            f"On the target's {world} devices the validated global batch {validated} leaves {plan.per_device} per "
            f"device, below the per-device cap of {per_device_cap}. A bigger global batch (up to "
            f"{per_device_cap * world}) would use the memory but was not validated here: sweep it on the target, "
            "or pass --global-batch N (the LR is scaled for it; the recipe then says it is extrapolated)."))
    if settings.global_batch:
        for warning in plan.warnings:
            if warning.code == "few-steps-per-epoch":
                warning.message += f" It stands because you asked for a global batch of {settings.global_batch} " \
                                   "(--global-batch)."
    lr = bound_past_validated(lr_for(info, plan.global_batch),
                              validated if healthy_global is None else healthy_global, info.optimizer, noise_low)
    warmup = warmup_for(info, lr)
    if noise and plan.global_batch > NOISE_MARGIN * noise:
        why = (f"It stands because you asked for a global batch of {settings.global_batch} (--global-batch)."
               if settings.global_batch else
               f"It stands because the comparison sweep chose it on validation, not on the noise scale: "
               f"{sweep_reason} Compare a smaller global batch before a long run.")
        plan.warnings.append(Warning_(
            "beyond-noise-scale",
            f"Global batch {plan.global_batch} is over {NOISE_MARGIN:g}x the estimated gradient noise scale "
            f"(~{noise:.0f}): more batch buys little statistical progress. {why}"))
    return plan, lr, warmup
