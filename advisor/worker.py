"""The loop every launched worker runs; adapters supply the distributed strategy.

A worker reads a TrialJob, builds the user's workload, and reports through event
lines on stdout (one JSON object a line). It ends with ``os._exit`` after tearing
down the process group: torch's gloo workers can otherwise abort at exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

from .job import OOM_EXIT_CODE, TrialJob, encode_event


class WorkerStrategy:
    """How one data-parallel flavour sets up, wraps the model, and communicates.

    ``rank``/``world_size``/``device`` are set by ``setup``.
    """

    rank = 0
    world_size = 1
    device = "cpu"

    def setup(self, job: TrialJob) -> None: ...

    def wrap(self, model, optimizer, job: TrialJob):
        return model, optimizer

    def sync_context(self, model, sync: bool):
        return contextlib.nullcontext()

    scaler = None  # a GradScaler under fp16 (CUDA only): set by the worker loop

    def backward(self, loss, model, optimizer) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def optimizer_step(self, model, optimizer) -> None:
        # Under AMP with accumulation, the optimizer and the scaler step once per `accumulation` micro-steps.
        if self.scaler:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def all_reduce_sum(self, tensor):
        return tensor

    def noise_stats(self) -> dict | None:
        return None

    def sample_noise(self, active: bool) -> None:
        """Whether the coming steps count towards the gradient-noise estimate."""

    def measured_module(self, model):
        return model

    def shutdown(self) -> None: ...


def emit(kind: str, **payload) -> None:
    sys.stdout.write(encode_event(kind, **payload) + "\n")
    sys.stdout.flush()


def _batch(dataset, indices):
    from torch.utils.data import TensorDataset, default_collate

    if isinstance(dataset, TensorDataset):
        return tuple(t[indices] for t in dataset.tensors)
    return default_collate([dataset[int(i)] for i in indices])


def _to_device(obj, device):
    if hasattr(obj, "to"):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to_device(o, device) for o in obj)
    return obj


class BatchStream:
    """Endless per-rank mini-batches: epoch-wise shards when the data allows, else sampling with replacement."""

    def __init__(self, dataset, batch: int, rank: int, world: int, seed: int):
        import torch

        self.dataset, self.batch, self.rank, self.world = dataset, batch, rank, world
        self.generator = torch.Generator().manual_seed(seed)
        self.sharded = len(dataset) >= batch * world
        self.epoch_samples = 0
        self._queue = []

    def __next__(self):
        import torch

        if not self.sharded:
            idx = torch.randint(0, len(self.dataset), (self.batch,), generator=self.generator)
            return _batch(self.dataset, idx)
        if not self._queue:
            # Same permutation on every rank (shared seed), each takes its own shard: DistributedSampler's scheme.
            perm = torch.randperm(len(self.dataset), generator=self.generator)
            per_rank = len(perm) // self.world
            shard = perm[self.rank * per_rank:(self.rank + 1) * per_rank]
            n = len(shard) // self.batch
            self._queue = [shard[i * self.batch:(i + 1) * self.batch] for i in range(n)][::-1]
        return _batch(self.dataset, self._queue.pop())


def _autocast(precision: str, device: str):
    import torch

    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return torch.autocast(device_type=device, dtype=dtype)
    return contextlib.nullcontext()


def _has_batchnorm(model) -> bool:
    from torch import nn

    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def run_probe(job, workload, strategy, model, optimizer):
    """One training step at ``per_device_batch`` under the memory budget: did it fit, and at what peak."""
    from .memory import apply_budget, is_oom, measure_peak

    gen_seed = job.seed + 1000 * strategy.rank
    warm = BatchStream(workload.train_data, 2, strategy.rank, strategy.world_size, gen_seed)
    _train_step(job, workload, strategy, model, optimizer, next(warm), sync=True)  # allocate optimizer state
    budget = apply_budget(strategy.device, job.memory_budget_bytes)
    stream = BatchStream(workload.train_data, job.per_device_batch, strategy.rank, strategy.world_size, gen_seed)
    stream.sharded = False  # a probe only needs the right shape: sample with replacement
    started = time.perf_counter()
    try:
        batch = next(stream)
        _train_step(job, workload, strategy, model, optimizer, batch, sync=True)  # first step at this size
        with measure_peak(strategy.device, strategy.measured_module(model), optimizer) as peak:
            _train_step(job, workload, strategy, model, optimizer, batch, sync=True)
    except Exception as exc:  # noqa: BLE001 - classify, then re-raise what is not an OOM
        if not is_oom(exc):
            raise
        emit("probe", rank=strategy.rank, batch=job.per_device_batch, status="oom", message=str(exc).splitlines()[0][:300],
             seconds=time.perf_counter() - started, budget=budget)
        return
    emit("probe", rank=strategy.rank, batch=job.per_device_batch, status="ok", peak_bytes=peak["peak_bytes"],
         measured_by=peak["how"], breakdown=peak["breakdown"], seconds=time.perf_counter() - started, budget=budget)


def _train_step(job, workload, strategy, model, optimizer, batch, sync: bool):
    inputs, targets = _to_device(batch, strategy.device)
    with strategy.sync_context(model, sync):
        with _autocast(job.precision, strategy.device):
            outputs = model(inputs)
            loss = workload.loss_fn(outputs, targets)
        strategy.backward(loss / job.accumulation_steps, model, optimizer)
    return loss.detach()


def run_training(job, workload, strategy, model, optimizer):
    """A short real training run: step times, peak memory, loss curve, validation, noise scale."""
    import torch

    from .memory import apply_budget, is_oom, measure_peak

    budget = apply_budget(strategy.device, job.memory_budget_bytes)
    stream = BatchStream(workload.train_data, job.per_device_batch, strategy.rank, strategy.world_size, job.seed)
    step_seconds, losses = [], []
    peak_bytes = measured_by = None
    try:
        for step in range(job.steps):
            if job.warmup_steps:
                factor = min(1.0, (step + 1) / job.warmup_steps)
                for group in optimizer.param_groups:
                    group["lr"] = job.lr * factor
            if strategy.device == "cuda":
                torch.cuda.synchronize()
            # The noise scale grows as training settles; the first steps' huge gradients would dominate it.
            strategy.sample_noise(step >= job.steps // 2)
            started = time.perf_counter()
            measure = measure_peak(strategy.device, strategy.measured_module(model), optimizer) if step == 1 \
                else contextlib.nullcontext({})
            with measure as peak:
                micro_losses = []
                for micro in range(job.accumulation_steps):
                    sync = micro == job.accumulation_steps - 1
                    if micro and step == 1:
                        peak["next_call"]()
                    micro_losses.append(_train_step(job, workload, strategy, model, optimizer, next(stream), sync))
                strategy.optimizer_step(model, optimizer)
            if strategy.device == "cuda":
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - started
            if step == 1:
                peak_bytes, measured_by = peak["peak_bytes"], peak["how"]
            elif step > 1:  # step 0 pays one-time costs, step 1 pays the memory tracker's
                step_seconds.append(elapsed)
            loss_value = float(torch.stack(micro_losses).mean())
            losses.append(loss_value)
            if strategy.rank == 0 and (step % job.loss_every == 0 or step == job.steps - 1):
                emit("progress", step=step + 1, steps=job.steps, loss=loss_value, seconds=elapsed)
    except Exception as exc:  # noqa: BLE001
        if not is_oom(exc):
            raise
        emit("oom", rank=strategy.rank, batch=job.per_device_batch, message=str(exc).splitlines()[0][:300],
             budget=budget)
        raise _OOMExit() from None

    val = _evaluate(job, workload, strategy, model) if job.evaluate else {}
    # Each rank reports its own peak; the engine keeps the largest.
    noise = strategy.noise_stats()
    if not step_seconds:
        step_seconds = [elapsed]
    median = statistics.median(step_seconds)
    global_batch = job.per_device_batch * strategy.world_size * job.accumulation_steps
    emit("result", rank=strategy.rank, per_device_batch=job.per_device_batch, world_size=strategy.world_size,
         accumulation_steps=job.accumulation_steps, global_batch=global_batch, steps=job.steps,
         peak_bytes=peak_bytes, measured_by=measured_by, step_seconds=median, throughput=global_batch / median,
         losses=losses if strategy.rank == 0 else None, final_loss=losses[-1], lr=job.lr,
         warmup_steps=job.warmup_steps, precision=job.precision, budget=budget, noise=noise, **val)


def _evaluate(job, workload, strategy, model) -> dict:
    import torch

    model.eval()
    data = workload.val_data
    n = len(data)
    share = range(strategy.rank, n, strategy.world_size)
    totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, count
    with torch.no_grad():
        chunk = max(1, job.per_device_batch)
        indices = list(share)
        for start in range(0, len(indices), chunk):
            inputs, targets = _to_device(_batch(data, torch.tensor(indices[start:start + chunk])), strategy.device)
            with _autocast(job.precision, strategy.device):
                outputs = model(inputs)
            loss = workload.loss_fn(outputs.float(), targets)
            totals[0] += float(loss) * len(targets)
            totals[2] += len(targets)
            if workload.num_classes and outputs.dim() == 2 and outputs.shape[-1] == workload.num_classes:
                totals[1] += float((outputs.argmax(dim=-1) == targets).sum())
    totals = strategy.all_reduce_sum(totals)
    model.train()
    result = {"val_loss": float(totals[0] / totals[2])}
    if workload.num_classes:
        result["val_metric"] = float(totals[1] / totals[2])
        result["val_metric_name"] = "accuracy"
    return result


class _OOMExit(Exception):
    pass


def worker_main(strategy: WorkerStrategy, argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="batch-advisor worker (launched by the engine)")
    parser.add_argument("--job", required=True, help="path of the TrialJob JSON file")
    args = parser.parse_args(argv)
    job = TrialJob.from_json(Path(args.job).read_text())
    code = 0
    try:
        if job.workdir and job.workdir not in sys.path:
            sys.path.insert(0, job.workdir)
        import torch

        from .workload import resolve_workload

        if job.device == "cpu":
            torch.set_num_threads(1)  # one core per rank, as one GPU per rank
        strategy.setup(job)
        emit("started", rank=strategy.rank, pid=os.getpid(), world_size=strategy.world_size, device=strategy.device)
        torch.manual_seed(job.seed)
        workload = resolve_workload(job.workload)
        model = workload.build_model().to(strategy.device)
        if strategy.rank == 0:
            emit("model", parameters=sum(p.numel() for p in model.parameters()),
                 has_batchnorm=_has_batchnorm(model), train_size=len(workload.train_data),
                 val_size=len(workload.val_data))
        optimizer = workload.make_optimizer(model.parameters(), job.lr)
        model, optimizer = strategy.wrap(model, optimizer, job)
        if job.precision == "fp16" and strategy.device.startswith("cuda"):
            # fp16 gradients underflow without loss scaling (not exercised on the CPU-only test machine).
            strategy.scaler = torch.amp.GradScaler("cuda")
        if job.kind == "probe":
            run_probe(job, workload, strategy, model, optimizer)
        else:
            run_training(job, workload, strategy, model, optimizer)
    except _OOMExit:
        code = OOM_EXIT_CODE
    except BaseException as exc:  # noqa: BLE001 - the engine needs to hear about every failure
        tb = traceback.format_exc().strip().splitlines()
        emit("error", rank=getattr(strategy, "rank", None), error=type(exc).__name__,
             message=str(exc)[:1000], traceback=tb[-12:])
        code = 1
    finally:
        try:
            if code != OOM_EXIT_CODE:  # after an OOM, peers may sit in a collective: leave without a handshake
                strategy.shutdown()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
