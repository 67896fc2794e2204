"""`advisor replan`: a recipe's measured memory line, re-planned for another GPU or cluster.

A recipe holds the fit ``memory(b) = fixed_bytes + per_sample_bytes x b`` of its real probes. For another card
(its memory from --device-memory or the table in ``advisor.gpus``) the same line and the same headroom rule
give an *estimated* ceiling; the plan, LR and warmup follow from it with the rules every plan uses
(``plan.plan_data_parallel``, ``lr.scale_lr``, ``lr.plan_warmup``), and the precision from the card's Tensor
Cores (``method.choose_precision``). Every estimated number says so; ``confirm`` runs one real probe at the
estimated ceiling and a short trial at the planned batch when the card is here.

Pure functions over the recipe document (no torch, no processes) except ``confirm``.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field

from .method.ceiling import MemoryFit
from .errors import AdvisorError
from .gpus import GpuSpec
from .recipe import OptimizerTable, RecipeDocument, WorkloadTable
from .units import format_bytes

REPLAN_NOTE = ("Re-planned from a recipe, not measured on this device: the ceiling is the recipe's fitted memory "
               "line under the new memory (an estimate); the plan, LR and warmup follow from it by the rules.")


class ReplanError(AdvisorError):
    """The recipe cannot be re-planned (no fit, another precision, another torch): the message names the
    command that measures it instead."""


@dataclass
class ReplanTarget:
    """The device and cluster to plan for."""

    memory_bytes: int
    memory_source: str  # "--device-memory" | "the GPU table (nominal)"
    gpu: GpuSpec | None = None  # None: a device the table does not know (or a CPU budget)
    device_type: str = "cuda"  # "cuda" | "cpu"
    nproc: int | None = None  # processes per node; default the recipe's
    nodes: int = 1
    precision: str = "auto"
    global_batch: int | None = None  # a new global target; default the recipe's global batch
    headroom: float | None = None  # default the recipe's
    allow_few_steps: bool = False  # --force: a --global-batch past the steps-per-epoch cap is planned anyway

    def describe(self) -> str:
        if self.gpu is not None:
            size = ("" if self.memory_source != "--device-memory"
                    else f", {format_bytes(self.memory_bytes)} from --device-memory")
            return self.gpu.describe() + size
        kind = "GPU" if self.device_type == "cuda" else "CPU budget"
        return f"{kind} with {format_bytes(self.memory_bytes)} per device"


@dataclass
class Source:
    """What the recipe measured, read from its document."""

    path: str
    doc: RecipeDocument
    fit: MemoryFit
    fit_precision: str
    budget_bytes: int
    usable_bytes: float
    headroom: float
    edge_met: bool  # a real OOM was met, so usable_bytes is where the edge really sat
    outside_allocator_bytes: int | None
    device_type: str
    per_device_max: int

    @property
    def data(self) -> dict:
        """The recipe as parsed TOML (what the re-planned recipe starts from)."""
        return self.doc.data

    @property
    def workload(self) -> WorkloadTable:
        return self.doc.workload


@dataclass
class Row:
    """One line of the re-plan table: the recipe's value, the new one, and how the new one was obtained."""

    name: str
    before: str
    after: str
    how: str  # "estimate: ..." | "rule: ..." | "table" | "asked" | "measured: ..."


@dataclass
class ReplanResult:
    source: Source
    target: ReplanTarget
    per_device_max: int
    usable_bytes: float
    usable_reason: str
    estimated_peak_bytes: float
    precision: str
    precision_reason: str
    plan: object  # plan.Plan
    lr: object  # lr.LRDecision
    warmup: object  # lr.WarmupDecision
    world_size: int
    nproc: int
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confirmation: dict | None = None  # what the real probe and trial measured, when they ran
    by_memory: int = 0  # what the memory line alone fits per device
    data_share: int | None = None  # the training set's share per device, when known

    @property
    def ceiling_by(self) -> str:
        """What set the ceiling: "memory" (the fitted line), "data" (the training set's share) or "probe" (a
        confirming probe found the edge lower). The table and the notes both read it."""
        if self.data_share is not None and self.per_device_max == self.data_share < self.by_memory:
            return "data"
        if self.per_device_max < self.by_memory:
            return "probe"
        return "memory"


def measure_command(recipe: dict | RecipeDocument, target: ReplanTarget | None = None, precision: str | None = None,
                    out: str = "NEW.toml") -> str:
    """The `advisor plan` line that measures what a re-plan could only estimate (or could not)."""
    from .adapters import recipe_adapter_name, shell_line

    doc = RecipeDocument.of(recipe)
    inputs, workload = doc.inputs, doc.workload
    argv = ["advisor", "plan", "--workload", str(workload.spec or workload.name or "WORKLOAD"),
            "--adapter", recipe_adapter_name(doc),
            "--nproc", str((target.nproc if target and target.nproc else None) or inputs.nproc
                           or doc.batch.world_size)]
    if target is not None and target.memory_source == "--device-memory":
        argv += ["--device-memory", format_bytes(target.memory_bytes).replace(" ", "")]
    elif target is None:
        budget = doc.ceiling.budget_bytes
        if budget:
            argv += ["--device-memory", format_bytes(budget).replace(" ", "")]
    argv += ["--precision", precision or (target.precision if target else None)
             or inputs.precision or "auto", "--out", out]
    return shell_line(argv)


def _fit_precision(doc: RecipeDocument) -> str:
    """The precision the ceiling's probes ran in: the probe at the largest batch that fit (a plan that switched
    to mixed precision after a trial OOM keeps an fp32 ceiling), else the recipe's mode."""
    rows = [r for r in doc.ledger if r.get("phase") == "ceiling" and r.get("status") == "ok"]
    at_edge = [r for r in rows if r.get("per_device") == doc.ceiling.largest_ok]
    if at_edge:
        return str(at_edge[-1].get("precision", "fp32"))
    return str(doc.precision.mode or "fp32")


def _torch_major(version: str | None) -> str | None:
    return version.split(".")[0] if version else None


def installed_torch_version() -> str | None:
    """torch's version from its metadata: no import (which takes seconds and may touch CUDA)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def read_source(recipe: dict | RecipeDocument, path: str, torch_version: str | None = None) -> Source:
    """The recipe's fit and what it was measured with; a ReplanError with the measuring command when it has
    no fit or was measured with another torch major version."""
    doc = RecipeDocument.of(recipe, path)
    ceiling = doc.ceiling
    fixed, per_sample = ceiling.fixed_bytes, ceiling.per_sample_bytes
    if not isinstance(per_sample, (int, float)) or not isinstance(fixed, (int, float)) or per_sample <= 0:
        raise ReplanError(
            f"{path} has no memory fit ([ceiling] fixed_bytes and per_sample_bytes): its probes fit fewer than two "
            "batch sizes, or it predates them, so there is no line to re-plan from. Measure on the new device "
            f"instead: {measure_command(doc)}")
    made_with = doc.provenance.torch_version
    torch_version = torch_version if torch_version is not None else installed_torch_version()
    if made_with and torch_version and _torch_major(made_with) != _torch_major(torch_version):
        raise ReplanError(
            f"{path} was measured with torch {made_with}, and this is torch {torch_version}: a major version "
            "changes kernels, the allocator and autocast, so its memory line does not carry over. Measure again "
            f"with this torch: {measure_command(doc)}")
    budget = int(ceiling.budget_bytes or 0)
    if budget <= 0:
        raise ReplanError(f"{path} records no [ceiling] budget_bytes, so the fit has no scale to re-plan from. "
                          f"Measure again: {measure_command(doc)}")
    edge_met = ceiling.smallest_oom is not None
    device = str(doc.inputs.device or doc.provenance.hardware.device or "cpu")
    return Source(path, doc, MemoryFit(float(fixed), float(per_sample)), _fit_precision(doc), budget,
                  float(ceiling.usable_bytes or budget), float(_or(ceiling.headroom, 0.15)), edge_met,
                  ceiling.outside_allocator_bytes, "cuda" if device.startswith("cuda") else "cpu",
                  int(_or(ceiling.per_device_max, 0)))


def _or(value, default):
    """``value``, or ``default`` where the recipe does not hold it."""
    return default if value is None else value


# What a GPU process holds outside torch's caching allocator when no recipe measured it: the CUDA context
# (~0.3-0.5 GiB with lazy module loading) and NCCL's buffers and communicators (tens to hundreds of MiB a peer
# group): an estimate on the safe side, used only when re-planning a CPU recipe for a GPU.
CUDA_OUTSIDE_ALLOCATOR_ESTIMATE = 2**30


def estimate_usable(source: Source, target: ReplanTarget) -> tuple[float, str]:
    """Memory that will really fit on the new device, and how that was estimated."""
    memory = target.memory_bytes
    if target.device_type == "cuda" and source.device_type == "cuda" and source.outside_allocator_bytes:
        outside = source.outside_allocator_bytes
        return memory - outside, (f"{format_bytes(memory)} less the {format_bytes(outside)} the CUDA context and "
                                  "NCCL held outside the allocator in the recipe's probes (assumed the same here)")
    if target.device_type == "cuda" and source.device_type != "cuda":
        # A CPU recipe's edge share is the CPU allocator's (glibc, RSS): it says nothing about a GPU, whose
        # caching allocator stops at the card's memory less what the CUDA context and NCCL hold outside it.
        outside = CUDA_OUTSIDE_ALLOCATOR_ESTIMATE
        return memory - outside, (f"{format_bytes(memory)} less an estimated {format_bytes(outside)} for the CUDA "
                                  "context and NCCL buffers outside the caching allocator (the recipe was measured "
                                  "on CPU, whose edge share does not carry over to a GPU; the confirming probe "
                                  "measures it)")
    if source.edge_met:
        share = min(1.0, source.usable_bytes / source.budget_bytes)
        return share * memory, (f"{share:.0%} of {format_bytes(memory)}: the recipe's real OOM edge sat at that "
                                "share of its budget, assumed the same here")
    note = (f"all of {format_bytes(memory)}: the recipe met no OOM, so the share that really fits is unknown "
            "(on a GPU the allocator's cap is the edge")
    if target.device_type == "cuda":
        note += "; the CUDA context and NCCL buffers, not measured by this recipe, come off it: the headroom covers them"
    else:
        note += "; on CPU allocator overhead can put the edge below it: the confirming probe checks"
    return memory, note + ")"


def card_precision(source: Source, target: ReplanTarget) -> tuple[str, str]:
    """The precision of the new plan, and why; a ReplanError when the numbers cannot hold for it.

    The fit holds for the precision it was measured in. Mixed precision keeps activations in 16 bits, so an
    fp32 fit over-estimates a bf16/fp16 run's memory: re-planning fp32 -> mixed is safe (a lower bound on the
    ceiling); mixed -> fp32 under-estimates and is refused. An explicit --precision must match the fit.
    """
    from .method import choose_precision

    fit = source.fit_precision
    requested = target.precision
    if requested != "auto" and requested != fit:
        raise ReplanError(
            f"{source.path} was measured in {fit}; --precision {requested} needs a memory line measured in "
            f"{requested} (activations differ in size), which a re-plan cannot give. Measure it: "
            f"{measure_command(source.doc, target, requested)}")
    if requested != "auto":
        return fit, f"{fit}, as asked (--precision {fit}), the precision the recipe's fit was measured in."
    if target.device_type == "cpu":
        return fit, f"{fit}: the precision the recipe's fit was measured in (CPU: bf16 autocast only helps with AMX)."
    if target.gpu is None:
        return fit, (f"{fit}: the precision the recipe's fit was measured in. The card's Tensor Cores are unknown "
                     "(not in the table): pass --gpu NAME for advice on mixed precision.")
    gpu = target.gpu
    choice = choose_precision("auto", "cuda", gpu.bf16, {"bf16", "fp16"} if gpu.tensor_cores else set())
    wanted = choice.measure
    if wanted == fit:
        reason = f"{wanted}: the auto policy for the {gpu.name} is {wanted}, as the recipe's fit was measured."
        if wanted == "fp32" and choice.mixed:
            reason += (f" Its fp16 Tensor Cores sit idle in fp32: fp16 AMP with a GradScaler is faster and comes "
                       "before accumulation when memory is short (measure it: "
                       f"{measure_command(source.doc, target, 'fp16')}).")
        return wanted, reason
    if fit == "fp32" and wanted in ("bf16", "fp16"):
        return wanted, (f"{wanted}: the {gpu.name} has {wanted} Tensor Cores, which sit idle in fp32. The fit was "
                        f"measured in fp32, and {wanted} autocast keeps activations in 16 bits, so the ceiling "
                        f"estimated from it is a safe lower bound for {wanted}; measure the real one: "
                        f"{measure_command(source.doc, target, wanted)}")
    raise ReplanError(
        f"{source.path} was measured in {fit}, and the {gpu.name} runs {wanted} ("
        + ("no bf16 Tensor Cores: compute capability below 8.0" if fit == "bf16" else choice.reason.split(':')[0])
        + f"): a {fit} memory line under-estimates {wanted}'s memory, so it cannot be re-planned safely. Measure "
          f"it on the card: {measure_command(source.doc, target, wanted)}")


def replan(recipe: dict | RecipeDocument, path: str, target: ReplanTarget, torch_version: str | None = None,
           ceiling: int | None = None) -> ReplanResult:
    """The estimated plan for ``target`` from the recipe (read from ``path``); ``ceiling``: what a
    confirming probe found really fits, when it was below the estimate."""
    from .adapters import sharding_advice
    from .method.lr import bound_past_validated, plan_warmup, scale_lr
    from .method import data_cap
    from .method.plan import Warning_, plan_data_parallel

    source = read_source(recipe, path, torch_version)
    doc = source.doc
    precision, precision_reason = card_precision(source, target)
    batch, lr_doc, warmup_doc, workload = doc.batch, doc.lr, doc.warmup, source.workload
    nproc = target.nproc if target.nproc is not None else int(doc.inputs.nproc or batch.world_size)
    if nproc < 1 or target.nodes < 1:
        raise AdvisorError(f"--nproc and --nodes must be at least 1 (got {nproc} and {target.nodes}).")
    world = nproc * target.nodes
    headroom = source.headroom if target.headroom is None else target.headroom
    if not 0 <= headroom < 1:
        raise AdvisorError(f"--headroom must be a fraction in [0, 1) (0.10-0.20 is the method's range), not {headroom}.")
    usable, usable_reason = estimate_usable(source, target)
    by_memory = source.fit.batch_with_headroom(usable, headroom)
    train_size = workload.train_size
    cap = min(by_memory, data_cap(train_size, world)) if train_size else by_memory
    if ceiling is not None:
        cap = min(cap, ceiling)
    if by_memory < 1:
        raise ReplanError(
            f"By the recipe's memory line ({format_bytes(source.fit.fixed_bytes)} fixed + "
            f"{format_bytes(source.fit.per_sample_bytes)} per sample) not even one sample fits in "
            f"{(1 - headroom):.0%} of {format_bytes(usable)} on {target.describe()}. Use a larger device, shard the "
            f"model state ({sharding_advice().flags()}) or mixed precision, and measure: "
            f"{measure_command(doc, target)}")
    target_global = target.global_batch or int(batch.global_)
    if target_global < 1:
        raise AdvisorError(f"--global-batch must be at least 1, not {target_global}.")
    if train_size and target.global_batch and not target.allow_few_steps:
        from .method.plan import few_steps_cost, largest_learnable_global

        epochs = warmup_doc.run_epochs
        if target_global > largest_learnable_global(train_size, epochs):
            raise AdvisorError(f"--global-batch {target_global} is past what the data can train: "
                               f"{few_steps_cost(train_size, target_global, epochs)}. Ask for at most that, or add --force to "
                               "plan it anyway (the recipe then warns few-steps-per-epoch).")
    task = _or(workload.task, "image-classification")
    plan = plan_data_parallel(target_global, world, cap, task, workload.num_classes,
                              bool(doc.normalization.has_batchnorm), target.device_type, precision,
                              amp_available=target.device_type == "cpu" or bool(target.gpu and target.gpu.tensor_cores),
                              train_size=train_size, run_epochs=warmup_doc.run_epochs)
    validated = recipe_validated_global(doc)
    plan.validated_global = validated
    if validated is None:
        plan.warnings.insert(0, Warning_(
            "no-candidate-learned",
            f"NOT VALIDATED: {doc.method.headline} This re-plan scales that base setting to the new "
            "device; nothing in it was validated either: plan on the device itself (advisor plan)."))
    elif plan.global_batch != validated:
        plan.warnings.append(Warning_(
            "global-not-validated",
            f"The global batch {plan.global_batch} was not validated: the recipe's comparison sweep ran "
            f"{validated}. Its LR is scaled by the rules, but how it trains is an extrapolation: sweep it on the "
            "new device before a long run."))
    optimizer = str(lr_doc.optimizer or workload.optimizer or "sgd")
    lr = bound_past_validated(scale_lr(float(lr_doc.base), int(lr_doc.base_global_batch), plan.global_batch,
                                       optimizer), _bound_from(doc, validated, optimizer), optimizer)
    lr = _never_a_failed_lr(doc, plan, lr, optimizer)
    base_epochs = warmup_doc.base_epochs
    warmup = plan_warmup(lr.scale, int(train_size or plan.global_batch), plan.global_batch,
                         *((float(base_epochs), str(_or(warmup_doc.base_source, "the recipe")))
                           if base_epochs is not None else ()),
                         run_epochs=warmup_doc.run_epochs,
                         run_source="the recipe's run" if warmup_doc.run_epochs else "")
    result = ReplanResult(source, target, cap, usable, usable_reason, source.fit.bytes_at(cap), precision,
                          precision_reason, plan, lr, warmup, world, nproc)
    result.by_memory, result.data_share = by_memory, data_cap(train_size, world) if train_size else None
    result.rows = table_rows(result)
    result.notes = _notes(result)
    return result


def recipe_validated_global(recipe: dict | RecipeDocument) -> int | None:
    """The global batch the recipe's sweep validated; None for a NOT VALIDATED recipe (no candidate learned: its
    plan is the user's base setting, and no global batch may be claimed as validated)."""
    doc = RecipeDocument.of(recipe)
    if not doc.validated:
        return None
    return doc.batch.validated_global or doc.batch.global_


def _bound_from(doc: RecipeDocument, validated: int | None, optimizer: str) -> int | None:
    """The global batch the LR is bounded past: the largest validated at its rules' LR by the recipe's own ledger
    (advisor.method.validated), else (a ledger without trained runs: a re-planned recipe's) the one its sweep
    validated; None for a NOT VALIDATED recipe."""
    from .recipe_check import ledger_validated_global

    if validated is None:
        return None
    return ledger_validated_global(doc.data, optimizer) or validated


def _never_a_failed_lr(doc: RecipeDocument, plan, lr, optimizer: str):
    """``lr`` unless the recipe's own runs were unstable at the plan's global batch at it or below: then the
    highest LR validated there, said in a warning, or a refusal (AdvisorError) when none is
    (advisor.method.validated: a recipe never advises a setting its runs saw fail)."""
    from .method.plan import Warning_
    from .method.validated import never_a_failed_lr
    from .recipe_check import ledger_records, recipe_info

    lr, lowered = never_a_failed_lr(recipe_info(doc.data, optimizer), lr, ledger_records(doc.data))
    if lowered is not None:
        plan.warnings.append(Warning_(lowered.code, lowered.message))
    return lr


def table_rows(r: ReplanResult) -> list[Row]:
    doc, plan, s = r.source.doc, r.plan, r.source
    batch, lr_doc = doc.batch, doc.lr
    old_name = doc.provenance.hardware.gpu or s.device_type
    fit = (f"estimate: fit {format_bytes(s.fit.fixed_bytes)} + {format_bytes(s.fit.per_sample_bytes)}/sample, "
           f"{1 - (r.target.headroom if r.target.headroom is not None else s.headroom):.0%} of usable memory")
    if r.ceiling_by == "data":
        fit = (f"the training set's share per device ({s.workload.train_size} samples / {r.world_size}); "
               f"memory alone would fit {r.by_memory}")
    validated = recipe_validated_global(doc)
    kept = ("kept: the recipe's base setting, NOT VALIDATED" if validated is None else
            "kept: the recipe's validated global batch" if batch.global_ == validated else
            f"kept: the recipe's global batch (its sweep validated {validated})")
    return [
        Row("device", f"{old_name}, {format_bytes(s.budget_bytes)}",
            f"{r.target.gpu.name if r.target.gpu else r.target.device_type}, {format_bytes(r.target.memory_bytes)}",
            r.target.memory_source),
        Row("usable memory", format_bytes(s.usable_bytes), format_bytes(r.usable_bytes), "estimate (notes: usable)"),
        Row("precision", str(_or(doc.precision.mode, s.fit_precision)), r.precision,
            "rule: precision policy (fit in " + s.fit_precision + ")"),
        Row("ceiling per device", str(s.per_device_max), str(r.per_device_max),
            fit + ("; " + _confirmed_text(r.confirmation) if r.confirmation else "")),
        Row("peak at ceiling", format_bytes(s.fit.bytes_at(s.per_device_max)), format_bytes(r.estimated_peak_bytes),
            "estimate: the fitted line"),
        Row("world size", str(batch.world_size), str(r.world_size), "asked" if r.target.nproc or
            r.target.nodes > 1 else "the recipe's"),
        Row("per-device batch", str(batch.per_device), str(plan.per_device), "rule: global / world, under the ceiling"),
        Row("accumulation", str(batch.accumulation_steps), str(plan.accumulation_steps),
            "rule: ceil(global / (ceiling x world))"),
        Row("global batch", str(batch.global_), str(plan.global_batch),
            "asked (--global-batch)" if r.target.global_batch else kept),
        Row("learning rate", f"{float(lr_doc.value):.4g}", f"{r.lr.value:.4g}", f"rule: {r.lr.rule} from base "
            f"{float(lr_doc.base):g} at {lr_doc.base_global_batch}"
            + ("; lowered from the rule's value (the notes say why)" if r.lr.capped else "")),
        Row("warmup steps", str(doc.warmup.steps), str(r.warmup.steps),
            f"rule: {r.warmup.epochs:.3g} epoch(s) at {r.warmup.steps_per_epoch} steps/epoch"),
    ]


def _confirmed_text(confirmation: dict) -> str:
    if confirmation.get("probe_fits"):
        return f"measured: a real probe at {confirmation['probe_batch']} fit"
    return (f"measured: {confirmation['probe_batch']} ran out of memory, {confirmation.get('largest_ran')} ran, "
            "headroom kept below it")


def with_confirmation(recipe: dict | RecipeDocument, path: str, target: ReplanTarget, estimate: ReplanResult, outcome: dict,
                      torch_version: str | None = None) -> ReplanResult:
    """The re-plan again, on the ceiling the confirming probe found (the plan must sit under what really ran)."""
    result = estimate
    if outcome["confirmed_ceiling"] != outcome["probe_batch"]:
        result = replan(recipe, path, target, torch_version, ceiling=outcome["confirmed_ceiling"])
    result.confirmation = outcome
    result.rows = table_rows(result)
    return result


def _notes(r: ReplanResult) -> list[str]:
    notes = [REPLAN_NOTE, "Usable memory: " + r.usable_reason + ".", r.precision_reason]
    if r.ceiling_by == "data":
        notes.append(f"Memory alone would fit {r.by_memory} per device; the training set's share per device "
                     f"({r.source.workload.train_size} samples / {r.world_size}) caps it at {r.per_device_max}.")
    elif r.ceiling_by == "probe":
        notes.append(f"The recipe's line estimated {r.by_memory} per device; a real probe on this device found the "
                     f"edge lower, so the ceiling is {r.per_device_max}.")
    spare = r.per_device_max * r.world_size
    if r.plan.per_device < r.per_device_max and not r.target.global_batch:
        validated = recipe_validated_global(r.source.doc)
        kept = (f"the recipe's base setting, global batch {r.plan.global_batch}, NOT VALIDATED" if validated is None
                else f"the recipe's validated global batch {r.plan.global_batch}" if r.plan.global_batch == validated
                else f"the recipe's global batch {r.plan.global_batch}; its sweep validated {validated}")
        notes.append(f"The new device fits up to {r.per_device_max} per device, {spare} global without accumulation "
                     f"(the plan keeps {kept}). A bigger card "
                     f"allows a bigger batch with the LR scaled: pass --global-batch N (up to {spare}) and sweep it "
                     "there before a long run.")
    notes += [w.message for w in r.plan.warnings]
    notes += list(r.lr.warnings)
    return notes


def render_table(r: ReplanResult) -> str:
    """The re-plan as a table: the recipe's value, the new one, and which of them are estimates."""
    head = ("quantity", "recipe", "re-plan", "how the re-plan got it")
    rows = [head] + [(x.name, x.before, x.after, x.how) for x in r.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    headline = r.source.doc.method.headline
    lines = ([f"NOT VALIDATED. {headline}"] if headline else []) + [
        f"Re-plan of {r.source.path} for {r.target.describe()} x {r.world_size}", ""]
    for row in rows:
        lines.append("  " + "  ".join(row[i].ljust(widths[i]) for i in range(3)) + "  " + row[3])
    lines.append("")
    lines.append("Estimates: the ceiling, its peak and the usable memory come from the recipe's fitted memory line, "
                 "not from a probe on this device" + (" (confirmed below)." if r.confirmation else "."))
    if r.confirmation:
        lines.append("Confirmed: " + r.confirmation["summary"])
    lines += [f"  - {note}" for note in r.notes]
    return "\n".join(lines)


def replanned_recipe(r: ReplanResult, argv: list[str] | None = None) -> dict:
    """The new recipe: the old document with the new plan, its estimates marked, and a [replan] table."""
    import copy
    import shlex

    from . import __version__
    from .recipe import SCHEMA_VERSION

    old = r.source.doc
    data = copy.deepcopy(old.data)
    plan, lr, warmup = r.plan, r.lr, r.warmup
    data["schema_version"] = SCHEMA_VERSION
    data["batch"] = {"per_device": plan.per_device, "world_size": plan.world_size,
                     "accumulation_steps": plan.accumulation_steps, "global": plan.global_batch,
                     "reason": plan.reason, "validated_global": plan.validated_global,
                     "extrapolation": (round(plan.global_batch / plan.validated_global, 4)
                                       if plan.validated_global else None)}
    data["lr"] = {**old.table("lr"), "value": lr.value, "base": lr.base, "base_global_batch": lr.base_global_batch,
                  "rule": lr.rule, "scale": lr.scale, "cap": lr.cap, "capped": lr.capped, "reason": lr.reason,
                  "layerwise_optimizer": lr.suggest_layerwise, "bound_from_global": lr.bounded_from,
                  "bound_noise_low": lr.bound_noise_low, "seen_failing_at": lr.seen_failing_at}
    data["warmup"] = {**old.table("warmup"), "steps": warmup.steps, "epochs": warmup.epochs,
                      "steps_per_epoch": warmup.steps_per_epoch, "reason": warmup.reason,
                      "capped_by_run": warmup.capped}
    data["precision"] = {"mode": r.precision, "tf32": bool(r.target.gpu and r.target.gpu.bf16 and r.precision != "fp32"),
                         "advice": plan.precision_advice, "reason": r.precision_reason}
    data["normalization"] = {**old.table("normalization"), "sync_batchnorm": plan.sync_batchnorm,
                             "sync_batchnorm_on_gpu": plan.sync_batchnorm_on_gpu,
                             "advice": plan.normalization_advice}
    old_ceiling = old.ceiling
    data["ceiling"] = {"per_device_max": r.per_device_max, "budget_bytes": r.target.memory_bytes,
                       "headroom": r.target.headroom if r.target.headroom is not None else r.source.headroom,
                       "usable_bytes": round(r.usable_bytes), "fixed_bytes": old_ceiling.fixed_bytes,
                       "per_sample_bytes": old_ceiling.per_sample_bytes, "estimated": True,
                       "estimate_note": ("per_device_max is an estimate: the recipe's fitted memory line under the "
                                         f"new memory ({r.usable_reason}), not a real probe on this device"
                                         + ("" if not r.confirmation else "; a real probe then confirmed it"
                                            if r.confirmation.get("probe_fits") else
                                            "; a real probe then found the edge lower: " + r.confirmation["summary"])),
                       "reason": next(x.how for x in r.rows if x.name == "ceiling per device")}
    if old_ceiling.measured_by:
        data["ceiling"]["measured_by"] = old_ceiling.measured_by + " (in the source recipe)"
    data["warnings"] = [{"code": w.code, "message": w.message} for w in plan.warnings] + \
                       [{"code": "lr", "message": m} for m in lr.warnings]
    inputs = old.table("inputs")
    inputs.update(nproc=r.nproc, nodes=r.target.nodes, world_size=r.world_size, device=r.target.device_type,
                  device_memory_bytes=r.target.memory_bytes, precision=r.target.precision,
                  global_batch=r.target.global_batch)
    data["inputs"] = inputs
    data["launch"] = _launch(r, old)
    hardware = {"device": r.target.device_type, "memory_bytes": r.target.memory_bytes,
                "memory_source": r.target.memory_source}
    if r.target.gpu is not None:
        hardware.update(gpu=r.target.gpu.name, gpu_capability=".".join(map(str, r.target.gpu.capability)))
    data["provenance"] = {**old.table("provenance"), "tool_version": __version__,
                          "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                          "command": shlex.join(argv) if argv else None, "hardware": hardware}
    data["replan"] = {"source_recipe": r.source.path, "source_created": old.provenance.created,
                      "source_hardware": old.table("provenance.hardware"),
                      "fit_precision": r.source.fit_precision, "estimated": ["ceiling.per_device_max",
                                                                            "ceiling.usable_bytes"],
                      "note": REPLAN_NOTE, "notes": r.notes[1:], "confirmed": bool(r.confirmation)}
    if r.confirmation:
        data["replan"]["confirmation"] = {k: v for k, v in r.confirmation.items() if k != "rows"}
    data["ledger"] = [row for row in (r.confirmation or {}).get("rows", [])]
    return _drop_none(data)


def _drop_none(value):
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


def _launch(r: ReplanResult, old: RecipeDocument) -> dict:
    """The launch line for the new plan, through the recipe's adapter (its own launcher and flags)."""
    from .adapters import LaunchSpec, load_adapter, recipe_adapter_name, shell_line
    from .device import TF32_ENV
    from .report import _env_reason  # the recipe's own wording for each variable

    name = recipe_adapter_name(old)
    old_launch = old.table("launch")
    try:
        adapter = load_adapter(name)
        env = adapter.environment(r.target.device_type)
    except AdvisorError:
        return {**old_launch, "example": None, "note": f"The adapter {name!r} is not installed here: no launch line."}
    if r.target.device_type == "cuda" and r.target.gpu is not None and r.target.gpu.bf16:
        env.update(TF32_ENV)
    optimizer = old.optimizer or OptimizerTable()
    spec = LaunchSpec(r.nproc, r.target.nodes, r.plan.per_device, r.plan.accumulation_steps, r.lr.value,
                      r.warmup.steps, r.precision, env, optimizer=optimizer.name or old.lr.optimizer,
                      optimizer_hyperparameters=dict(optimizer.hyperparameters))
    return {"example": shell_line(adapter.launch_command(spec)),
            "note": old_launch.get("note", "Adapt the flag names to your script."), "env": env,
            "env_reason": _env_reason(env) if r.target.device_type == "cpu" else (
                "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 lets fp32 matmuls use the card's TF32 Tensor Cores (the auto "
                "policy from compute capability 8.0); the re-plan ran nothing on this card." if env else None)}


def confirm(r: ReplanResult, workdir: str, trial_steps: int = 20, run_trial: bool = True,
            on_event=None, runner=None) -> dict:
    """One real probe at the estimated ceiling under the new memory (a fresh process, the ceiling's own probe)
    and a short trial at the planned per-device batch; a probe that runs out of memory steps down 10% at a time,
    as the ceiling search confirms its answer. Returns what was measured, with the ledger rows."""
    if runner is None:  # tests hand in a stub with the JobRunner's probe/train/ledger surface
        runner = _confirm_runner(r, workdir, on_event)
    headroom = r.target.headroom if r.target.headroom is not None else r.source.headroom
    batch = r.per_device_max
    try:
        probes = [runner.probe(batch, "replan confirm", r.precision)]
        while probes[-1].status != "ok" and batch > 1:
            batch = max(1, math.floor(batch * 0.9))  # the ceiling search's own confirm step
            probes.append(runner.probe(batch, "replan confirm", r.precision))
    finally:
        close = getattr(runner, "close", None)  # the probes' fork server holds an imported torch: end it now
        if close:
            close()
    fits = probes[-1].status == "ok"
    confirmed = batch
    if fits and len(probes) > 1:
        # The edge sits below the estimate: keep the headroom below what really ran, as the search does.
        confirmed = max(1, min(batch, r.source.fit.batch_with_headroom(r.source.fit.bytes_at(batch), headroom)))
    outcome = {"probe_batch": r.per_device_max, "probe_fits": probes[0].status == "ok",
               "confirmed_ceiling": confirmed if fits else 0, "probes": len(probes),
               "largest_ran": batch if fits else None, "probe_peak_bytes": probes[-1].peak_bytes,
               "estimated_peak_bytes": round(r.source.fit.bytes_at(batch))}
    if run_trial and fits:
        per_device = min(r.plan.per_device, confirmed)
        record = runner.train("trial", per_device, trial_steps, r.lr.value, min(r.warmup.steps, trial_steps // 4),
                              precision=r.precision)
        outcome.update(trial_per_device=per_device, trial_status=record.status, trial_peak_bytes=record.peak_bytes,
                       trial_step_seconds=record.step_seconds, trial_throughput=record.samples_per_s)
    if outcome["probe_fits"]:
        summary = (f"a real probe at {r.per_device_max} per device fit under {format_bytes(r.target.memory_bytes)} "
                   f"(peak {format_bytes(outcome['probe_peak_bytes'])}, estimated "
                   f"{format_bytes(r.estimated_peak_bytes)})")
    elif fits:
        summary = (f"the estimate {r.per_device_max} ran out of memory under {format_bytes(r.target.memory_bytes)}; "
                   f"stepping down 10% at a time, {batch} ran, so the ceiling keeps {headroom:.0%} headroom below "
                   f"it: {confirmed}")
    else:
        summary = f"nothing fit down to 1 per device under {format_bytes(r.target.memory_bytes)}"
    if "trial_status" in outcome:
        summary += (f"; a {trial_steps}-step trial at {outcome['trial_per_device']} per device on {r.nproc} "
                    f"process(es): {outcome['trial_status']}"
                    + (f", {outcome['trial_throughput']:.0f} samples/s" if outcome.get("trial_throughput") else ""))
    outcome["summary"] = summary + "."
    outcome["rows"] = [row.to_dict() for row in runner.ledger]
    for row in outcome["rows"]:
        if "losses" in row:
            row["loss_curve"] = [round(v, 5) for v in row.pop("losses")][:50]
    if fits and confirmed != r.per_device_max:
        r.per_device_max = confirmed
        r.estimated_peak_bytes = r.source.fit.bytes_at(confirmed)
    r.confirmation = outcome
    if not fits:
        raise ReplanError(f"Confirming the re-plan: {summary}. The recipe's line does not hold on this device; "
                          f"measure it: {measure_command(r.source.doc, r.target)}")
    return outcome


def _confirm_runner(r: ReplanResult, workdir: str, on_event=None):
    """The real runner, through the recipe's adapter, under the new memory."""
    from .adapters import load_adapter, recipe_adapter_name
    from .launch import CancelToken
    from .method import MethodSettings
    from .runner import JobRunner

    adapter = load_adapter(recipe_adapter_name(r.source.doc))
    settings = MethodSettings(workload=str(r.source.workload.spec or r.source.workload.name),
                              adapter_name=adapter.name, nproc=r.nproc, device=r.target.device_type,
                              memory_budget_bytes=r.target.memory_bytes, precision=r.precision,
                              optimizer=r.source.doc.inputs.optimizer, workdir=workdir)
    return JobRunner(adapter, settings, on_event or (lambda event: None), CancelToken(),
                     tf32=bool(r.target.gpu and r.target.gpu.bf16 and r.precision != "fp32"))


def device_present(target: ReplanTarget, host) -> bool:
    """The target device is this host's: a CPU budget on a CPU host, or the named GPU among this host's."""
    if target.device_type == "cpu":
        return host.type == "cpu"
    if host.type != "cuda" or target.gpu is None:
        return False
    from .gpus import lookup_gpu

    for name in host.names:
        try:
            if lookup_gpu(name).key == target.gpu.key:
                return True
        except AdvisorError:
            continue
    return False

