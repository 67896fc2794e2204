"""What a user reads after a plan, rendered from the recipe's data (the decisions and the reasons the plan wrote
there), so the summary, `advisor explain RECIPE` and the recipe file cannot disagree.

- ``summary_text``: one screen: the numbers, why the sweep picked, the top warning, the launch line, and where
  the reasons are. Nothing in it is printed twice.
- ``explain_text``: every step's reason, the LR / warmup / precision reasons and every warning, in full.

A recipe (its typed RecipeDocument, or the TOML document) in, text out: no torch, no workload (``advisor explain`` reads a committed recipe anywhere).
"""

from __future__ import annotations

import re

from .recipe import LRSettings, MethodTable, RecipeDocument
from .units import format_bytes

SUMMARY_WARNING_CHARS = 160  # the top warning's first sentence, cut here: the rest is in `advisor explain`


def _first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence (not a decimal point), at most SUMMARY_WARNING_CHARS."""
    match = re.search(r"(?<=[^\d\s])\.(\s|$)", text)
    sentence = text[:match.start() + 1] if match else text
    if len(sentence) > SUMMARY_WARNING_CHARS:
        sentence = sentence[:SUMMARY_WARNING_CHARS - 1].rstrip() + "…"
    return sentence


def _epochs(value) -> str:
    text = f"{value:.3g}"
    return f"{text} epoch{'' if text == '1' else 's'}"


def table_lines(recipe: dict | RecipeDocument) -> list[str]:
    """The plan's numbers, one a line."""
    doc = RecipeDocument.of(recipe)
    b, lr, warmup = doc.batch, doc.lr, doc.warmup
    lines = [f"  per-device batch    {b.per_device}",
             f"  world size          {b.world_size}",
             f"  accumulation steps  {b.accumulation_steps}",
             f"  global batch        {b.global_}",
             f"  learning rate       {lr.value:.4g}  ({_lr_rule(lr)}; base {lr.base:g} at {lr.base_global_batch})",
             f"  warmup              {warmup.steps} steps"
             + (f" ({_epochs(warmup.epochs)})" if isinstance(warmup.epochs, (int, float)) else ""),
             f"  precision           {doc.precision.mode or 'fp32'}"]
    if doc.normalization.sync_batchnorm:
        lines.append("  SyncBatchNorm       yes")
    return lines


def _lr_rule(lr: LRSettings) -> str:
    """The LR's rule as the table states it: a value the plan lowered from the rule's (the bound past what was
    validated, a setting seen failing, the cap) says so, so "0.01 (unchanged; base 0.02)" cannot be printed."""
    return f"{lr.rule}, then lowered: see the LR reason" if lr.capped else str(lr.rule)


def _headline(doc: RecipeDocument) -> list[str]:
    headline = doc.method.headline
    return [f"NOT VALIDATED. {headline}", ""] if headline else []


def _workload_line(doc: RecipeDocument) -> str:
    workload, inputs = doc.workload, doc.inputs
    budget = doc.ceiling.budget_bytes or inputs.device_memory_bytes
    where = f"{doc.batch.world_size} x {inputs.device or 'the device'}"
    cluster = doc.table("provenance.cluster")  # `advisor plan --nnodes` (or the app on node 0): runs spanned them
    if cluster.get("nodes"):
        where = (f"{cluster['nodes']} nodes x {cluster.get('processes_per_node', '?')} process(es) = {where}, "
                 "measured across the nodes")
    return (f"Workload {workload.name or '?'} ({workload.task or '?'}), {where}"
            + (f", budget {format_bytes(budget)} per device" if budget else ""))


def _why_line(doc: RecipeDocument) -> str:
    """Why this batch, in one line: the sweep's rule and verdict (the full reasoning is in explain_text)."""
    method = doc.method
    sweep = method.sweep
    if method.headline:
        return "Sweep: no candidate learned, so nothing was picked: NOT VALIDATED (the plan is your base setting)."
    if not sweep.rule:
        return f"Sweep: {_or_unknown(method.sweep_choice)} per device."
    tied = sweep.tied or []
    detail = []
    if len(tied) > 1:  # equal: a mean paired gap under the margin (never "not shown different")
        detail.append(f"equal: {', '.join(map(str, tied))}")
    if sweep.seeds:
        from .method.sweep import seeds_words

        detail.append(seeds_words(sweep.seeds))
    if sweep.metric:
        detail.append(f"by {sweep.metric}")
    out = [c["per_device"] for c in sweep.candidates_scored if c.get("status") not in (None, "ok")]
    if out:
        detail.append(f"out: {', '.join(map(str, out))}")
    pick = sweep.pick if sweep.pick is not None else method.sweep_choice
    verdict = sweep.verdict if sweep.verdict is not None else sweep.rule
    line = f"Sweep: {pick} per device, {verdict}" + (f" ({'; '.join(detail)})." if detail else ".")
    yours = sweep.against_yours.get("sentence")
    return line + (f"\n{yours}" if yours else "")


def _or_unknown(value) -> str:
    return "?" if value is None else str(value)


def _sweep_pick(method: MethodTable) -> str:
    """The sweep's pick as step 4 states it, or that there is none (NOT VALIDATED)."""
    if method.headline:
        return "no pick, NOT VALIDATED"
    return _or_unknown(method.sweep_choice)


def summary_text(recipe: dict | RecipeDocument, recipe_path: str | None) -> str:
    """The plan on one screen (about 15 lines)."""
    doc = RecipeDocument.of(recipe)
    lines = _headline(doc) + [_workload_line(doc), "", *table_lines(doc), "", _why_line(doc)]
    found = doc.warnings
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        lines.append(f"Warning [{found[0].code}]: {_first_sentence(found[0].message)}{more}")
    if doc.launch.example:
        lines.append(f"Launch: {doc.launch.example}")
    if recipe_path:
        lines.append(f"Recipe written to {recipe_path}. Every reason and warning: advisor explain {recipe_path}")
    else:
        lines.append("Every reason and warning: rerun with --explain (or --out FILE, then advisor explain FILE)")
    return "\n".join(lines)


def _step_lines(doc: RecipeDocument) -> list[str]:
    """The four steps' reasons, then the noise scale's and the goodput's."""
    method, ceiling = doc.method, doc.ceiling
    lines = []
    if doc.data.get("ceiling"):
        lines.append(f"1. Ceiling: {ceiling.per_device_max} per device after {_or_unknown(ceiling.trials)} "
                     f"probes. {ceiling.reason or ''}".rstrip())
    lines += [f"2. Start: {method.start_reason or ''}".rstrip(),
              f"3. Trial: {_or_unknown(method.trial_choice)}. {method.trial_reason or ''}".rstrip(),
              f"4. Sweep: {_sweep_pick(method)}. {method.sweep_reason or ''}".rstrip()]
    noise_reason = doc.noise.reason or method.noise_reason
    if noise_reason:
        lines.append(f"   {noise_reason}")
    goodput = doc.goodput
    if goodput.reason:
        unknown_noise = goodput.per_device is None and goodput.reason.startswith(
            "Goodput-optimal batch: not computed, the gradient noise scale is unknown")
        lines.append("   Goodput-optimal batch: not computed, it needs the gradient noise scale, unknown here (above)."
                     if unknown_noise else f"   {goodput.reason}")
    return lines


def explain_text(recipe: dict | RecipeDocument, header: bool = True) -> str:
    """Every reason the plan wrote, step by step, then every warning in full (``header``: the headline and the
    workload line first, as `advisor explain` prints it; the plan's --explain follows its summary, which has them)."""
    doc = RecipeDocument.of(recipe)
    lines = _headline(doc) + [_workload_line(doc), ""] if header else []
    lines += _step_lines(doc)
    lines += ["",
              f"Batch: {doc.batch.reason or ''}".rstrip(),
              f"Learning rate: {doc.lr.reason or ''}".rstrip(),
              f"Warmup: {doc.warmup.reason or ''}".rstrip()]
    precision = doc.precision
    if precision.reason:
        lines.append(f"Precision: {precision.reason}")
    if precision.advice:
        lines.append(f"   {precision.advice}")
    if doc.normalization.advice:
        lines.append(f"Normalization: {doc.normalization.advice}")
    if doc.warnings:
        lines += ["", "Warnings:"] + [f"  - [{w.code}] {w.message}" for w in doc.warnings]
    seconds = doc.method.step_seconds or {}
    if seconds:
        lines += ["", "Time: " + ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items())]
    missing = measurements_missing(doc.data)
    if missing:
        lines += ["", f"Measurements: {missing}"]
    return "\n".join(lines)


def measurements_missing(data: dict) -> str | None:
    """Why the recipe's sibling measurements are not loaded, said as a note (the decisions above are whole), or
    None. A recipe copied without its NAME.measurements.toml lost its per-run rows and times without a word."""
    why = (data.get("measurements") or {}).get("missing") if isinstance(data.get("measurements"), dict) else None
    if not why:
        return None
    return (f"{why}. The decisions and reasons are the recipe's own and whole; the per-run rows and step times "
            "are not shown. Keep the file `advisor plan` wrote beside the recipe (commit both).")
