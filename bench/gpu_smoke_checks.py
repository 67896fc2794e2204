"""The checks of bench/gpu_smoke.sh (run it, not this, on a GPU host). The comparisons are plain functions,
so their logic runs without a GPU: ``python bench/gpu_smoke_checks.py --self-test``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

WORKLOAD = "synthetic-bn-cnn"
BATCH = 64
RESULTS = {"pass": 0, "fail": 0, "skip": 0}


def within(measured: float, reference: float, tol: float) -> bool:
    """``measured`` within ``tol`` (relative) of ``reference``."""
    return reference > 0 and abs(measured - reference) <= tol * reference


def check(name: str, ok: bool | None, detail: str) -> None:
    """ok None: skipped (the host cannot run it), said so."""
    verdict = "SKIP" if ok is None else "PASS" if ok else "FAIL"
    RESULTS[verdict.lower()] += 1
    print(f"CHECK {name} {verdict} {detail}", flush=True)


def probe(adapter: str, precision: str = "fp32", batch: int = BATCH, nproc: int = 1, options=None,
          optimizer=None, workload: str = WORKLOAD, budget: int | None = None) -> dict:
    from advisor.adapters import load_adapter
    from advisor.job import TrialJob
    from advisor.launch import run_job
    from advisor.units import parse_size

    chosen = load_adapter(adapter)
    job = TrialJob(kind="probe", workload=workload, per_device_batch=batch, steps=2, precision=precision,
                   device="cuda", memory_budget_bytes=budget or parse_size(os.environ["BUDGET"]), workdir=os.getcwd(),
                   extra={"adapter_options": options or {}, "optimizer": optimizer})
    outcome = run_job(chosen.command, job, nproc, 120, env=chosen.environment("cuda"))
    events = outcome.all("probe")
    return max(events, key=lambda e: e.get("peak_bytes") or 0) if events else {"status": outcome.status}


def plain_loop(batch: int, steps: int, precision: str = "fp32", lr: float = 0.01) -> int | None:
    """A plain loop on cuda:0 under the same cap (the same accounting as the probes): its peak, None on OOM."""
    from advisor.units import parse_size

    # A fresh process, like the user's training: nothing the probes' workers set up is shared.
    code = f"""
import sys, torch
from advisor.device import cap_memory
from advisor.workload import resolve_workload
torch.cuda.set_device(0)
cap_memory("cuda:0", {parse_size(os.environ['BUDGET'])})
w = resolve_workload({WORKLOAD!r})
model = w.build_model().cuda()
opt = w.make_optimizer(model.parameters(), {lr})
x, y = w.train_data.tensors
dtype = {{"bf16": torch.bfloat16, "fp16": torch.float16}}.get({precision!r})
scaler = torch.amp.GradScaler("cuda") if dtype is torch.float16 else None
torch.cuda.reset_peak_memory_stats()
try:
    for step in range({steps}):
        idx = torch.randint(0, len(x), ({batch},))
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            loss = w.loss_fn(model(x[idx].cuda()), y[idx].cuda())
        (scaler.scale(loss) if scaler else loss).backward()
        (scaler.step(opt), scaler.update()) if scaler else opt.step()
        opt.zero_grad(set_to_none=True)
except torch.OutOfMemoryError:
    print("OOM"); sys.exit(0)
torch.cuda.synchronize()
print(torch.cuda.max_memory_allocated())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    last = (out.stdout.strip().splitlines() or ["ERROR " + out.stderr[-300:]])[-1]
    return None if last == "OOM" else int(last) if last.isdigit() else -1


def param_bytes() -> int:
    from advisor.workload import resolve_workload

    return sum(p.numel() * p.element_size() for p in resolve_workload(WORKLOAD).build_model().parameters())


def plan(adapter: str, *extra: str) -> dict | None:
    out = os.path.join(os.environ["OUT"], f"{adapter}{'-'.join(extra)}.toml")
    cmd = [sys.executable, "-m", "advisor.cli", "plan", "--workload", WORKLOAD, "--adapter", adapter, "--device",
           "cuda", "--nproc", os.environ["NPROC"], "--device-memory", os.environ["BUDGET"], "--trial-steps", "4",
           "--sweep-steps", "8", "--out", out, "--force", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    if done.returncode:
        print(done.stderr[-1500:], flush=True)
        return None
    import advisor

    return advisor.load_recipe(out, apply_env=False).data


def main() -> int:
    import torch

    tol = float(os.environ["TOL"])
    p = torch.cuda.get_device_properties(0)
    print(f"RESULT gpu name={p.name!r} memory_gib={p.total_memory / 2**30:.1f} torch={torch.__version__} "
          f"bf16={torch.cuda.is_bf16_supported()} budget={os.environ['BUDGET']}", flush=True)
    buckets = param_bytes()  # DDP's all-reduce buckets: the gradients' size (fp32)
    bare = plain_loop(BATCH, 3)
    peaks = {}
    for adapter, options in (("ddp", None), ("accelerate", None), ("deepspeed", {"zero_stage": 0}),
                             ("deepspeed", {"zero_stage": 2})):
        name = adapter + (f"-zero{options['zero_stage']}" if options else "")
        event = probe(adapter, options=options, nproc=int(os.environ["NPROC"]) if adapter != "ddp" else 1)
        peaks[name] = peak = event.get("peak_bytes")
        if not peak or not bare:
            check(f"probe_{name}", False, f"no peak: {event.get('message') or event}")
            continue
        expected = bare + (buckets if adapter in ("ddp", "accelerate") else 0)
        check(f"probe_{name}_vs_plain_loop", within(peak, expected, tol) or adapter == "deepspeed" and peak >= bare,
              f"probe={peak / 2**20:.1f}MiB plain={bare / 2**20:.1f}MiB expected~{expected / 2**20:.1f}MiB tol={tol}")
        check(f"probe_{name}_measured_by", event.get("measured_by") == "torch.cuda.max_memory_allocated",
              repr(event.get("measured_by")))
        check(f"probe_{name}_budget_outside_allocator", "outside_allocator_bytes" in (event.get("budget") or {}),
              json.dumps(event.get("budget")))
    if peaks.get("accelerate") and bare:
        check("accelerate_probe_holds_ddp_buckets", peaks["accelerate"] >= bare + 0.9 * buckets,
              f"accelerate={peaks['accelerate'] / 2**20:.1f}MiB bare+buckets={(bare + buckets) / 2**20:.1f}MiB")
    for precision in ("bf16", "fp16"):
        if precision == "bf16" and not torch.cuda.is_bf16_supported():
            check("probe_bf16_below_fp32", None, "no bf16 on this GPU")
            continue
        event = probe("ddp", precision=precision)
        low = event.get("peak_bytes")
        check(f"probe_{precision}_below_fp32", bool(low and peaks.get("ddp") and low < peaks["ddp"]),
              f"{precision}={(low or 0) / 2**20:.1f}MiB fp32={(peaks.get('ddp') or 0) / 2**20:.1f}MiB")
    lamb = probe("deepspeed", optimizer="lamb", options={"zero_stage": 0})
    check("deepspeed_lamb_probe_runs", lamb.get("status") == "ok", str(lamb.get("message") or ""))
    for adapter, extra in (("ddp", ("--precision", "fp32")), ("accelerate", ("--precision", "bf16")),
                           ("deepspeed", ("--zero-stage", "2", "--precision", "fp16"))):
        recipe = plan(adapter, *extra)
        if recipe is None:
            check(f"plan_{adapter}", False, "advisor plan failed (stderr above)")
            continue
        ceiling, ledger = recipe["ceiling"], recipe.get("ledger", [])
        asked = extra[extra.index("--precision") + 1]
        ran = {row.get("precision") for row in ledger if row["phase"] in ("trial", "sweep")}
        check(f"plan_{adapter}_met_cuda_oom", ceiling.get("smallest_oom") is not None,
              f"largest_ok={ceiling.get('largest_ok')} smallest_oom={ceiling.get('smallest_oom')}")
        check(f"plan_{adapter}_measured_by", ceiling.get("measured_by") == "torch.cuda.max_memory_allocated",
              repr(ceiling.get("measured_by")))
        check(f"plan_{adapter}_records_outside_allocator", "outside_allocator_bytes" in ceiling,
              str(ceiling.get("outside_allocator_bytes")))
        check(f"plan_{adapter}_precision_recorded_is_what_ran", recipe["precision"]["mode"] == asked and ran == {asked},
              f"recipe={recipe['precision']['mode']} ran={sorted(ran)} asked={asked}")
        if adapter == "ddp":
            survived = plain_loop(ceiling["per_device_max"], 50)
            check("ceiling_survives_50_plain_steps", survived is not None and survived > 0,
                  f"batch={ceiling['per_device_max']} peak={survived}")
    # ZeRO-3 keeps a shard, its fp32 copy and its gradients per process (3/8 of the fp32 model on 8 GPUs) plus a
    # few gathered layers: a budget of 3/4 of the model holds it only when built and kept sharded (on 4 GPUs the
    # shards alone are 3/4 of the model, so the check needs 8).
    if torch.cuda.device_count() >= 8 and int(os.environ["NPROC"]) >= 8:
        os.environ["DEEP_MLP_WIDTH"] = "4096"  # 32 x 4096 x 4096 fp32 weights: 2 GiB
        model_bytes = 32 * 4096 * 4096 * 4
        event = probe("deepspeed", nproc=8, options={"zero_stage": 3}, batch=2, budget=int(0.75 * model_bytes),
                      workload="tests/workloads/wide_mlp.py:deep_workload")
        check("zero3_model_larger_than_budget_gets_a_ceiling", event.get("status") == "ok",
              str(event.get("message") or event.get("peak_bytes")))
    else:
        check("zero3_model_larger_than_budget_gets_a_ceiling", None, "needs NPROC>=8 GPUs")
    print(f"RESULT gpu_smoke pass={RESULTS['pass']} fail={RESULTS['fail']} skip={RESULTS['skip']} out={os.environ['OUT']}")
    return 1 if RESULTS["fail"] else 0


def self_test() -> int:
    """The comparisons' logic, without a GPU."""
    assert within(105, 100, 0.1) and not within(120, 100, 0.1) and not within(1, 0, 0.1)
    check("self_test_pass", True, "")
    check("self_test_skip", None, "")
    assert RESULTS == {"pass": 1, "fail": 0, "skip": 1}
    print("self-test ok")
    return 0


if __name__ == "__main__":
    sys.exit(self_test() if "--self-test" in sys.argv else main())
