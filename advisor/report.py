"""Turn a MethodResult into the recipe document, the JSON summary, and the human summary."""

from __future__ import annotations

import datetime
import platform
import shlex
from dataclasses import asdict

from . import __version__
from .adapters import shell_line
from .ledger import loader_bottleneck
from .assembly import MethodResult
from .options import recipe_inputs
from .recipe import SCHEMA_VERSION
from .units import format_bytes

MAX_CURVE_POINTS = 50
ENV_REASON = ("The probes measured the ceiling with these variables set (on CPU a fixed glibc mmap threshold "
              "returns freed activations to the OS at once; without it the heap fragments and a batch at the "
              "ceiling can run out of memory). Train with them set, or the ceiling does not hold.")


def _env_reason(env: dict) -> str | None:
    from .device import TF32_ENV

    reasons = [ENV_REASON] if set(env) - set(TF32_ENV) else []
    if set(TF32_ENV) <= set(env):
        reasons.append("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 lets fp32 matmuls use TF32 Tensor Cores, as they did in "
                       "the probes, trial and sweep ([precision] tf32).")
    return " ".join(reasons) or None


def _hardware(device: str, host=None) -> dict:
    """From the host detected before the plan: asking torch.cuda here would create a CUDA context on GPU 0."""
    from .history import host_fingerprint

    info = {"device": device, "host": platform.node(), "cpu": platform.processor() or platform.machine(),
            "fingerprint": host_fingerprint(host)}
    if device.startswith("cuda") and host is not None and host.type == "cuda" and host.names:
        info.update(gpu=host.names[0], gpu_memory_bytes=host.memories[0], gpu_count=len(host.names))
        if host.capabilities:
            info["gpu_capability"] = ".".join(map(str, host.capabilities[0]))
    return info


def _thin(values: list[float]) -> list[float]:
    if len(values) <= MAX_CURVE_POINTS:
        return [round(v, 5) for v in values]
    stride = len(values) / MAX_CURVE_POINTS
    return [round(values[int(i * stride)], 5) for i in range(MAX_CURVE_POINTS)]


def _measured_warnings(result: MethodResult) -> list[dict]:
    """Warnings the runs' measurements raise beyond the plan's own: the loader setting the pace."""
    note = loader_bottleneck(result.ledger)
    return [{"code": "loader-bottleneck", "message": note}] if note else []


def _noise_and_goodput_tables(result: MethodResult) -> dict:
    """The recipe's [noise] (B_simple and its interval) and [goodput] (the goodput-optimal batch) tables."""
    tables = {}
    if result.noise is not None:
        tables["noise"] = {k: (round(v, 2) if isinstance(v, float) else v)
                           for k, v in result.noise.to_dict().items()}
    if result.goodput is not None:
        tables["goodput"] = result.goodput.to_dict()
    return tables


def _noise_json(result: MethodResult) -> dict:
    noise = result.noise
    if noise is None:
        return {"value": result.noise_scale, "low": None, "high": None, "reason": result.noise_reason}
    return {"value": noise.value, "low": noise.low, "high": noise.high, "stage": noise.stage,
            "candidate": noise.candidate, "early_lower_bound": noise.early_value, "reason": noise.reason}


def _goodput_json(result: MethodResult) -> dict | None:
    """The goodput-optimal batch, or None with the reason in ``goodput_reason``."""
    choice = result.goodput.choice if result.goodput else None
    if choice is None:
        return None
    return {"per_device": choice.per_device, "accumulation_steps": choice.accumulation,
            "global": choice.global_batch, "steps_over_min": round(choice.steps_ratio, 4),
            "examples_over_min": round(choice.examples_ratio, 4), "lr_gain": round(choice.lr_gain, 4),
            "past_critical_batch": choice.past_critical}


def build_recipe(result: MethodResult, argv: list[str] | None = None) -> dict:
    import torch

    s, w, c, p = result.settings, result.workload, result.ceiling, result.plan
    ledger = []
    for row in result.ledger:
        entry = row.to_dict()
        if "losses" in entry:
            entry["loss_curve"] = _thin(entry.pop("losses"))
        ledger.append(entry)
    ceiling = {"per_device_max": c.per_device_max, "budget_bytes": c.budget_bytes, "headroom": c.headroom,
               "largest_ok": c.largest_ok, "smallest_oom": c.smallest_oom, "usable_bytes": round(c.usable_bytes),
               "trials": len(c.trials), "reason": c.reason}
    if c.fit is not None:  # no line is written that was not measured
        ceiling.update(fixed_bytes=round(c.fit.fixed_bytes), per_sample_bytes=round(c.fit.per_sample_bytes),
                       estimate_note="memory(b) = fixed_bytes + per_sample_bytes x b is a linear fit to measured "
                                     "peaks (an estimate); per_device_max was confirmed by a real probe")
    else:
        ceiling["estimate_note"] = "fewer than two batch sizes fit, so no memory line was fitted"
    split = c.split()
    if split:
        ceiling["breakdown"] = split
    if result.per_device_cap < c.per_device_max:
        ceiling["data_cap"] = result.per_device_cap
        ceiling["data_cap_reason"] = result.cap_reason
    outside = next((t.budget for t in c.trials if t.budget.get("outside_allocator_bytes") is not None), None)
    if outside:  # CUDA: the context and NCCL buffers a card of the budget's size holds beside the allocator
        ceiling["outside_allocator_bytes"] = outside["outside_allocator_bytes"]
        ceiling["allocator_budget_bytes"] = outside["allocator_budget_bytes"]
        ceiling["outside_allocator_reason"] = outside["outside_allocator_how"]
    probe_worlds = sorted({row.world_size for row in result.ledger if row.phase == "ceiling"})
    if probe_worlds:  # how many processes the probes ran with (the adapter's call: 1, or the plan's --nproc)
        ceiling["probe_world_size"] = probe_worlds[-1]
    measured_by = next((t.measured_by for t in c.trials if t.measured_by), None)
    if measured_by:
        ceiling["measured_by"] = measured_by
    return {
        "schema_version": SCHEMA_VERSION,
        "batch": {"per_device": p.per_device, "world_size": p.world_size,
                  "accumulation_steps": p.accumulation_steps, "global": p.global_batch, "reason": p.reason,
                  "validated_global": p.validated_global,
                  "extrapolation": (round(p.global_batch / p.validated_global, 4) if p.validated_global else None)},
        "lr": {"value": result.lr.value, "base": result.lr.base, "base_global_batch": result.lr.base_global_batch,
               "rule": result.lr.rule, "scale": result.lr.scale, "cap": result.lr.cap, "capped": result.lr.capped,
               "optimizer": w.optimizer, "optimizer_implementation": result.optimizer_implementation,
               "base_source": w.base_source, "reason": result.lr.reason,
               "layerwise_optimizer": result.lr.suggest_layerwise,
               "bound_from_global": result.lr.bounded_from, "bound_noise_low": result.lr.bound_noise_low,
               "seen_failing_at": result.lr.seen_failing_at},
        "optimizer": {"name": w.optimizer, "implementation": result.optimizer_implementation,
                      **result.optimizer_hyperparameters, "source": result.optimizer_hyperparameters_source},
        "warmup": {"steps": result.warmup.steps, "epochs": result.warmup.epochs,
                   "steps_per_epoch": result.warmup.steps_per_epoch, "reason": result.warmup.reason,
                   "base_epochs": result.warmup.base_epochs, "base_source": result.warmup.base_source,
                   "run_epochs": result.warmup.run_epochs, "capped_by_run": result.warmup.capped},
        "precision": {"mode": p.precision, "tf32": result.tf32, "advice": p.precision_advice,
                      "reason": result.precision_reason},
        "normalization": {"sync_batchnorm": p.sync_batchnorm, "sync_batchnorm_on_gpu": p.sync_batchnorm_on_gpu,
                          "has_batchnorm": w.has_batchnorm,
                          "advice": p.normalization_advice},
        "method": {
            "start_value": result.start_value, "start_reason": result.start_reason,
            "trial_choice": result.trial_choice, "trial_reason": result.trial_reason,
            # NOT VALIDATED: no candidate learned, so there is no pick to record (the plan is the base setting).
            "sweep_choice": None if result.headline else result.sweep_choice, "sweep_reason": result.sweep_reason,
            "headline": result.headline or None,
            "trial": result.trial_summary or None,
            "sweep": _sweep_section(result),
            "noise_scale": round(result.noise_scale, 1) if result.noise_scale else None,
            "noise_reason": None if result.noise is not None else result.noise_reason,  # [noise] holds it once
            "step_seconds": {t.name: round(t.seconds, 2) for t in result.timings},
        },
        "ceiling": ceiling,
        **_noise_and_goodput_tables(result),
        "warnings": [{"code": wn.code, "message": wn.message} for wn in p.warnings]
                    + [{"code": "lr", "message": m} for m in result.lr.warnings] + _measured_warnings(result),
        "workload": {"spec": s.workload, "name": w.name, "task": w.task, "num_classes": w.num_classes,
                     "optimizer": w.optimizer, "train_size": w.train_size, "parameters": w.parameters,
                     **result.workload_notes},
        "adapter": {"name": s.adapter_name, **result.adapter_extras},
        "inputs": recipe_inputs(s, w),  # every option the plan was asked, as advisor/options.py declares it
        "launch": {"example": shell_line(result.launch_command),
                   "note": "Adapt the flag names to your script; load_recipe() gives the same numbers in Python "
                           "and its apply_env() sets [launch.env] inside the script.",
                   "env": dict(result.launch_env),
                   "env_reason": _env_reason(result.launch_env)},
        "provenance": {"tool": "batch-advisor", "tool_version": __version__, "torch_version": torch.__version__,
                       "python_version": platform.python_version(),
                       "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "hardware": _hardware(s.device, result.host),
                       "command": shlex.join(argv) if argv else None,
                       **({"cluster": result.cluster} if result.cluster else {})},
        "ledger": ledger,
    }


def _sweep_section(result: MethodResult) -> dict:
    """The comparison sweep's verdict: the pick, whether the data could tell it from the others ("equal within
    noise" and the rule that then picked), each candidate's value with its spread, and any diverged runs."""
    return {"pick": None if result.headline else result.sweep_choice, **result.sweep_summary}


def json_summary(result: MethodResult, recipe_path: str | None) -> dict:
    p = result.plan
    return {
        "validated": not result.headline, "headline": result.headline or None,
        "per_device_batch": p.per_device, "world_size": p.world_size, "accumulation_steps": p.accumulation_steps,
        "global_batch": p.global_batch, "lr": result.lr.value, "lr_rule": result.lr.rule,
        "warmup_steps": result.warmup.steps, "precision": p.precision, "sync_batchnorm": p.sync_batchnorm,
        "ceiling": {"per_device_max": result.ceiling.per_device_max, "trials": len(result.ceiling.trials),
                    "largest_ok": result.ceiling.largest_ok, "smallest_oom": result.ceiling.smallest_oom},
        "noise_scale": _noise_json(result),
        "goodput_batch": _goodput_json(result),
        "goodput_reason": result.goodput.reason if result.goodput else None,
        "sweep": _sweep_section(result),
        "precision_reason": result.precision_reason,
        "launch": {"command": shell_line(result.launch_command), "env": dict(result.launch_env)},
        "warnings": [asdict(wn) for wn in p.warnings] + _measured_warnings(result),
        "step_seconds": {t.name: round(t.seconds, 2) for t in result.timings},
        "recipe": recipe_path,
    }


def human_summary(result: MethodResult, recipe_path: str | None, explain: bool = False,
                  recipe: dict | None = None) -> str:
    """What `advisor plan` prints: the one-screen summary, then with ``explain`` every reason and warning. Both
    are rendered from the recipe's own data (advisor.explain; ``recipe``: the one already built from ``result``),
    so they say what the file says."""
    from .explain import explain_text, summary_text

    data = recipe if recipe is not None else build_recipe(result)
    text = summary_text(data, recipe_path)
    if explain:
        text += "\n\nReasons\n-------\n" + explain_text(data, header=False)
    return text
