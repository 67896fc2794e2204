"""A worker that speaks the protocol by hand: read the job file, run full training steps at the job's
batch under its memory budget, report one `probe` event, exit 0 (fits) or 75 (out of memory).

Written from docs/plugins.md, section 3 ("The job file", "Event lines", "Exit codes"); it uses the
engine's documented helpers for the workload, the budget, the peak and the OOM test, nothing else.
"""

import argparse
import json
import os
import sys
import time
import traceback

EVENT_PREFIX = "ADVISOR_EVENT "
OOM_EXIT_CODE = 75


def emit(kind: str, **payload) -> None:
    sys.stdout.write(EVENT_PREFIX + json.dumps({"event": kind, **payload}) + "\n")
    sys.stdout.flush()


def probe(job: dict) -> int:
    import torch
    from torch.utils.data import default_collate

    from advisor.memory import apply_budget, measure_peak
    from advisor.oom import is_oom_exception
    from advisor.workload import resolve_workload

    device = torch.device("cpu")
    batch_size = job["per_device_batch"]
    emit("started", rank=0, pid=os.getpid(), world_size=1, device=str(device))
    torch.manual_seed(job["seed"])
    workload = resolve_workload(job["workload"])
    if job["extra"].get("optimizer"):
        workload.optimizer = job["extra"]["optimizer"]
    model = workload.build_model().to(device)
    optimizer = workload.optimizer_for(model, job["lr"])
    generator = torch.Generator().manual_seed(job["seed"])
    indices = job["extra"].get("probe_indices") or torch.randint(
        0, len(workload.train_data), (batch_size,), generator=generator).tolist()
    samples = [workload.train_data[int(indices[i % len(indices)])] for i in range(batch_size)]
    batch = (workload.collate_fn or default_collate)(samples)
    del samples
    # The budget holds what one training step holds: the model, its input batch (made before the budget, so
    # counted here), and whatever the step allocates. Library overhead does not count, as on a GPU.
    inputs = batch if isinstance(batch, (list, tuple)) else [batch]
    batch_bytes = sum(t.numel() * t.element_size() for t in inputs)
    held = batch_bytes + sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    emit("model", parameters=sum(p.numel() for p in model.parameters()), built_bytes=held, has_batchnorm=False,
         train_size=len(workload.train_data), val_size=len(workload.val_data))
    started = time.perf_counter()
    budget = {"enforced": False}
    try:
        budget = apply_budget(device, job["memory_budget_bytes"], held)
        for step in range(max(2, job["steps"])):  # the last step, with its optimizer state, is the one measured
            with measure_peak(device, model, optimizer) as peak:
                step_started = time.perf_counter()
                for _ in range(job["accumulation_steps"]):
                    (workload.batch_loss(model, batch) / job["accumulation_steps"]).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step_seconds = time.perf_counter() - step_started
    except Exception as exc:  # noqa: BLE001 - an out-of-memory error is an answer; anything else is re-raised
        if not is_oom_exception(exc):
            raise
        emit("probe", rank=0, batch=batch_size, status="oom", message=(str(exc).strip().splitlines() or [type(exc).__name__])[0][:300],
             seconds=time.perf_counter() - started, budget=budget)
        return OOM_EXIT_CODE
    # The tracker sees the tensors made inside the step; the input batch, made before it, is added by hand.
    emit("probe", rank=0, batch=batch_size, status="ok", peak_bytes=peak["peak_bytes"] + batch_bytes,
         measured_by=peak["how"], breakdown={**peak["breakdown"], "input_batch": batch_bytes},
         step_seconds=step_seconds, data_seconds=0.0,
         seconds=time.perf_counter() - started, budget=budget)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description="a hand-written batch-advisor worker (probes only)")
    parser.add_argument("--job", required=True)
    with open(parser.parse_args().job) as file:
        job = json.load(file)
    code = 1
    try:
        if job["kind"] != "probe":
            raise NotImplementedError("this example worker answers ceiling probes only (kind 'probe')")
        import torch

        torch.set_num_threads(1)  # one core for the one process, as the engine's own workers run on CPU
        code = probe(job)
    except BaseException as exc:  # noqa: BLE001 - the engine must hear about every failure
        emit("error", rank=0, error=type(exc).__name__, message=str(exc)[:1000],
             traceback=traceback.format_exc().strip().splitlines()[-12:])
        code = 1
    finally:
        sys.stdout.flush()
        os._exit(code)  # no interpreter teardown: the exit code is the answer


if __name__ == "__main__":
    main()
