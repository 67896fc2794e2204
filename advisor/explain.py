"""What a user reads after a plan, rendered from the recipe's data (the decisions and the reasons the plan wrote
there), so the summary, `advisor explain RECIPE` and the recipe file cannot disagree.

- ``summary_text``: one screen: the numbers, why the sweep picked, the top warning, the launch line, and where
  the reasons are. Nothing in it is printed twice.
- ``explain_text``: every step's reason, the LR / warmup / precision reasons and every warning, in full.

Plain dictionaries in, text out: no torch, no workload (``advisor explain`` reads a committed recipe anywhere).
"""

from __future__ import annotations

import re

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


def table_lines(data: dict) -> list[str]:
    """The plan's numbers, one a line."""
    b, lr, warmup = data["batch"], data["lr"], data["warmup"]
    lines = [f"  per-device batch    {b['per_device']}",
             f"  world size          {b['world_size']}",
             f"  accumulation steps  {b['accumulation_steps']}",
             f"  global batch        {b['global']}",
             f"  learning rate       {lr['value']:.4g}  ({_lr_rule(lr)}; base {lr['base']:g} at {lr['base_global_batch']})",
             f"  warmup              {warmup['steps']} steps"
             + (f" ({_epochs(warmup['epochs'])})" if isinstance(warmup.get("epochs"), (int, float)) else ""),
             f"  precision           {data.get('precision', {}).get('mode', 'fp32')}"]
    if data.get("normalization", {}).get("sync_batchnorm"):
        lines.append("  SyncBatchNorm       yes")
    return lines


def _lr_rule(lr: dict) -> str:
    """The LR's rule as the table states it: a value the plan lowered from the rule's (the bound past what was
    validated, a setting seen failing, the cap) says so, so "0.01 (unchanged; base 0.02)" cannot be printed."""
    return f"{lr['rule']}, then lowered: see the LR reason" if lr.get("capped") else str(lr["rule"])


def _headline(data: dict) -> list[str]:
    headline = data.get("method", {}).get("headline")
    return [f"NOT VALIDATED. {headline}", ""] if headline else []


def _workload_line(data: dict) -> str:
    workload, inputs, ceiling = data.get("workload", {}), data.get("inputs", {}), data.get("ceiling", {})
    budget = ceiling.get("budget_bytes") or inputs.get("device_memory_bytes")
    where = f"{data['batch']['world_size']} x {inputs.get('device', 'the device')}"
    return (f"Workload {workload.get('name', '?')} ({workload.get('task', '?')}), {where}"
            + (f", budget {format_bytes(budget)} per device" if budget else ""))


def _why_line(data: dict) -> str:
    """Why this batch, in one line: the sweep's rule and verdict (the full reasoning is in explain_text)."""
    method = data.get("method", {})
    sweep = method.get("sweep", {})
    if method.get("headline"):
        return "Sweep: no candidate learned, so nothing was picked: NOT VALIDATED (the plan is your base setting)."
    if not sweep.get("rule"):
        return f"Sweep: {method.get('sweep_choice', '?')} per device."
    tied = sweep.get("tied") or []
    detail = []
    if len(tied) > 1:  # equal: a mean paired gap under the margin (never "not shown different")
        detail.append(f"equal: {', '.join(map(str, tied))}")
    if sweep.get("seeds"):
        detail.append(f"{sweep['seeds']} paired seed(s)")
    if sweep.get("metric"):
        detail.append(f"by {sweep['metric']}")
    out = [c["per_device"] for c in sweep.get("candidates_scored", []) if c.get("status") not in (None, "ok")]
    if out:
        detail.append(f"out: {', '.join(map(str, out))}")
    pick = sweep.get("pick", method.get("sweep_choice"))
    verdict = sweep.get("verdict", sweep["rule"])
    line = f"Sweep: {pick} per device, {verdict}" + (f" ({'; '.join(detail)})." if detail else ".")
    yours = (sweep.get("against_yours") or {}).get("sentence")
    return line + (f"\n{yours}" if yours else "")


def _sweep_pick(method: dict) -> str:
    """The sweep's pick as step 4 states it, or that there is none (NOT VALIDATED)."""
    if method.get("headline"):
        return "no pick, NOT VALIDATED"
    return str(method.get("sweep_choice", "?"))


def warnings_of(data: dict) -> list[dict]:
    return [w for w in data.get("warnings", []) if isinstance(w, dict) and w.get("message")]


def summary_text(data: dict, recipe_path: str | None) -> str:
    """The plan on one screen (about 15 lines)."""
    lines = _headline(data) + [_workload_line(data), "", *table_lines(data), "", _why_line(data)]
    found = warnings_of(data)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        lines.append(f"Warning [{found[0].get('code', 'warning')}]: {_first_sentence(found[0]['message'])}{more}")
    launch = data.get("launch", {}).get("example")
    if launch:
        lines.append(f"Launch: {launch}")
    if recipe_path:
        lines.append(f"Recipe written to {recipe_path}. Every reason and warning: advisor explain {recipe_path}")
    else:
        lines.append("Every reason and warning: rerun with --explain (or --out FILE, then advisor explain FILE)")
    return "\n".join(lines)


def explain_text(data: dict, header: bool = True) -> str:
    """Every reason the plan wrote, step by step, then every warning in full (``header``: the headline and the
    workload line first, as `advisor explain` prints it; the plan's --explain follows its summary, which has them)."""
    method, ceiling = data.get("method", {}), data.get("ceiling", {})
    lines = _headline(data) + [_workload_line(data), ""] if header else []
    if ceiling:
        lines.append(f"1. Ceiling: {ceiling.get('per_device_max')} per device after {ceiling.get('trials', '?')} "
                     f"probes. {ceiling.get('reason', '')}".rstrip())
    lines += [f"2. Start: {method.get('start_reason', '')}".rstrip(),
              f"3. Trial: {method.get('trial_choice', '?')}. {method.get('trial_reason', '')}".rstrip(),
              f"4. Sweep: {_sweep_pick(method)}. {method.get('sweep_reason', '')}".rstrip()]
    noise_reason = data.get("noise", {}).get("reason") or method.get("noise_reason")
    if noise_reason:
        lines.append(f"   {noise_reason}")
    goodput = data.get("goodput", {})
    if goodput.get("reason"):
        unknown_noise = goodput.get("per_device") is None and goodput["reason"].startswith(
            "Goodput-optimal batch: not computed, the gradient noise scale is unknown")
        lines.append("   Goodput-optimal batch: not computed, it needs the gradient noise scale, unknown here (above)."
                     if unknown_noise else f"   {goodput['reason']}")
    lines += ["",
              f"Batch: {data['batch'].get('reason', '')}".rstrip(),
              f"Learning rate: {data['lr'].get('reason', '')}".rstrip(),
              f"Warmup: {data['warmup'].get('reason', '')}".rstrip()]
    precision = data.get("precision", {})
    if precision.get("reason"):
        lines.append(f"Precision: {precision['reason']}")
    if precision.get("advice"):
        lines.append(f"   {precision['advice']}")
    normalization = data.get("normalization", {}).get("advice")
    if normalization:
        lines.append(f"Normalization: {normalization}")
    found = warnings_of(data)
    if found:
        lines += ["", "Warnings:"] + [f"  - [{w.get('code', 'warning')}] {w['message']}" for w in found]
    seconds = method.get("step_seconds") or {}
    if seconds:
        lines += ["", "Time: " + ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items())]
    return "\n".join(lines)
