"""The loop every launched worker runs; an adapter's WorkerStrategy supplies everything flavour-specific.

A worker reads a TrialJob, builds the user's workload, and reports through event
lines on stdout (one JSON object a line). What differs between DDP, Accelerate
and DeepSpeed lives behind the strategy: set-up and wrapping, the optimizer it
runs, the micro-step cadence (who divides the loss, who steps when), precision
and loss scaling, what memory is measured, and the gradient norms for the noise
scale. The loop itself only times, measures and reports.

A worker ends with ``os._exit`` after tearing down the process group: torch's
gloo workers can otherwise abort at exit.
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
    """One data-parallel flavour inside a worker. The defaults are plain PyTorch on one process.

    ``rank``/``world_size``/``device`` (a ``torch.device``) are set by ``setup``.
    """

    rank = 0
    world_size = 1
    device = None
    scaler = None  # a GradScaler under fp16 on CUDA, made in ``prepare``

    def setup(self, job: TrialJob) -> None:
        import torch

        self.device = torch.device("cpu")

    def make_optimizer(self, workload, model, job: TrialJob):
        """The optimizer the user's training runs (with its state allocated on the first step)."""
        return workload.make_optimizer(model.parameters(), job.lr)

    def prepare(self, model, optimizer, job: TrialJob):
        """Wrap the model/optimizer for this flavour; set up precision. Returns (model, optimizer)."""
        import torch

        if job.precision == "fp16" and self.device.type == "cuda":
            # fp16 gradients underflow without loss scaling.
            self.scaler = torch.amp.GradScaler("cuda")
        return model, optimizer

    def precision_context(self, job: TrialJob):
        """Autocast for the forward pass, as the user's mixed-precision training runs it."""
        import torch

        if job.precision in ("bf16", "fp16"):
            dtype = torch.bfloat16 if job.precision == "bf16" else torch.float16
            return torch.autocast(device_type=self.device.type, dtype=dtype)
        return contextlib.nullcontext()

    def sync_context(self, model, sync: bool):
        return contextlib.nullcontext()

    def train_cycle(self, model, optimizer, next_batch, workload, job: TrialJob, between_micro) -> "torch.Tensor":  # noqa: F821
        """One optimizer step over ``job.accumulation_steps`` micro-batches; returns the mean loss (detached).

        The default: divide each micro-loss by the accumulation count, sync gradients on the last
        micro-step only, and step the optimizer (and the GradScaler) once per cycle, as DOMAIN 3 asks.
        """
        import torch

        losses = []
        for micro in range(job.accumulation_steps):
            if micro:
                between_micro()
            batch = to_device(next_batch(), self.device)
            with self.sync_context(model, micro == job.accumulation_steps - 1):
                with self.precision_context(job):
                    loss = workload.batch_loss(model, batch)
                scaled = loss / job.accumulation_steps
                (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            losses.append(loss.detach().float())
        if self.scaler:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return torch.stack(losses).mean()

    def optimizer_implementation(self, optimizer) -> str:
        """Which optimizer implementation runs (the recipe records it): ``advisor_implementation`` or the class."""
        inner = getattr(optimizer, "optimizer", optimizer)  # wrappers (Accelerate, DeepSpeed) keep the real one inside
        found = getattr(optimizer, "advisor_implementation", None) or getattr(inner, "advisor_implementation", None)
        return found or f"{type(inner).__module__}.{type(inner).__qualname__}"

    def set_lr(self, optimizer, lr: float) -> None:
        for group in optimizer.param_groups:
            group["lr"] = lr

    def eval_model(self, model):
        """The module to run validation forwards through."""
        return model

    def memory_view(self, model, optimizer):
        """(module, optimizer) whose parameters, gradients and state a CPU memory tracker should count."""
        return model, optimizer

    def extra_memory(self, model) -> dict[str, int]:
        """Bytes a training step holds outside the tracked tensors (e.g. DDP's all-reduce buckets), by name."""
        return {}

    def sample_noise(self, active: bool) -> None:
        """Whether the coming steps count towards the gradient-noise estimate."""

    def gradient_norms(self):
        """An ``advisor.noise.GradNormSample`` (collective: every rank calls it), or None if not measured."""
        return None

    def all_reduce_sum(self, tensor):
        return tensor

    def shutdown(self) -> None: ...


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's first line, or its type when it has no message (a bare MemoryError)."""
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:limit]


def emit(kind: str, **payload) -> None:
    sys.stdout.write(encode_event(kind, **payload) + "\n")
    sys.stdout.flush()


def _batch(dataset, indices):
    from torch.utils.data import TensorDataset, default_collate

    if isinstance(dataset, TensorDataset):
        return tuple(t[indices] for t in dataset.tensors)
    return default_collate([dataset[int(i)] for i in indices])


def to_device(obj, device):
    if hasattr(obj, "to"):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(to_device(o, device) for o in obj)
    return obj


class BatchStream:
    """Endless per-rank mini-batches: epoch-wise shards when the data allows, else sampling with replacement."""

    def __init__(self, dataset, batch: int, rank: int, world: int, seed: int, shard: bool = True):
        import torch

        self.dataset, self.batch, self.rank, self.world = dataset, batch, rank, world
        self.generator = torch.Generator().manual_seed(seed)
        self.sharded = shard and len(dataset) >= batch * world
        self._queue = []

    def __call__(self):
        return next(self)

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


def _has_batchnorm(model) -> bool:
    from torch import nn

    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


class _Measured:
    """Peak memory of one training cycle, and its wall time with the device synchronised."""

    def __init__(self, strategy, model, optimizer, measure: bool):
        self.strategy, self.model, self.optimizer, self.measure = strategy, model, optimizer, measure
        self.peak: dict = {}
        self.seconds = 0.0

    def __enter__(self):
        from .device import synchronize
        from .memory import measure_peak

        self._stack = contextlib.ExitStack()
        if self.measure:
            module, optimizer = self.strategy.memory_view(self.model, self.optimizer)
            self.peak = self._stack.enter_context(measure_peak(self.strategy.device, module, optimizer))
        synchronize(self.strategy.device)
        self._started = time.perf_counter()
        return self

    def between_micro(self):
        if self.measure:
            self.peak["next_call"]()

    def __exit__(self, *exc):
        from .device import synchronize

        synchronize(self.strategy.device)
        self.seconds = time.perf_counter() - self._started
        self._stack.__exit__(*exc)
        if self.measure and exc[0] is None:
            extra = self.strategy.extra_memory(self.model) if self.strategy.device.type == "cpu" else {}
            if extra:  # a CUDA peak counts every allocation already; a CPU tracker only the tensors it saw
                self.peak["peak_bytes"] += sum(extra.values())
                self.peak["breakdown"].update(extra)
        return False


def run_probe(job, workload, strategy, model, optimizer, budget: dict):
    """Full training cycles (forward, backward, optimizer step with its state) at ``per_device_batch``.

    The peak of the last cycle is what one real training step at this batch holds.
    """
    from .oom import is_oom_exception

    stream = BatchStream(workload.train_data, job.per_device_batch, strategy.rank, strategy.world_size,
                         job.seed + 1000 * strategy.rank, shard=False)  # a probe only needs the right shape
    started = time.perf_counter()
    cycles = max(2, job.steps)
    try:
        for cycle in range(cycles):
            with _Measured(strategy, model, optimizer, measure=cycle == cycles - 1) as measured:
                strategy.train_cycle(model, optimizer, stream, workload, job, measured.between_micro)
    except Exception as exc:  # noqa: BLE001 - classify, then re-raise what is not an OOM
        if not is_oom_exception(exc):
            raise
        emit("probe", rank=strategy.rank, batch=job.per_device_batch, status="oom",
             message=first_line(exc), seconds=time.perf_counter() - started, budget=budget)
        return
    emit("probe", rank=strategy.rank, batch=job.per_device_batch, status="ok", peak_bytes=measured.peak["peak_bytes"],
         measured_by=measured.peak["how"], breakdown=measured.peak["breakdown"], step_seconds=measured.seconds,
         seconds=time.perf_counter() - started, budget=budget)


def run_training(job, workload, strategy, model, optimizer, budget: dict):
    """A short real training run: step times, peak memory, loss curve, validation checkpoints, noise scale."""
    from .noise import noise_scale
    from .oom import is_oom_exception

    stream = BatchStream(workload.train_data, job.per_device_batch, strategy.rank, strategy.world_size, job.seed)
    step_seconds, losses, evals = [], [], []
    peak: dict = {}
    train_seconds = 0.0
    eval_at = set()
    if job.evaluate and job.eval_points > 1:
        eval_at = {round(job.steps * (i + 1) / job.eval_points) - 1 for i in range(job.eval_points - 1)}
    try:
        for step in range(job.steps):
            if job.warmup_steps:
                strategy.set_lr(optimizer, job.lr * min(1.0, (step + 1) / job.warmup_steps))
            # The noise scale grows as training settles; the first steps' huge gradients would dominate it.
            strategy.sample_noise(step >= job.steps // 2)
            with _Measured(strategy, model, optimizer, measure=step == 1) as measured:
                loss = strategy.train_cycle(model, optimizer, stream, workload, job, measured.between_micro)
            train_seconds += measured.seconds
            if step == 1:
                peak = measured.peak
            elif step > 1:  # step 0 pays one-time costs, step 1 pays the memory tracker's
                step_seconds.append(measured.seconds)
            loss_value = float(loss)
            losses.append(loss_value)
            if strategy.rank == 0 and (step % job.loss_every == 0 or step == job.steps - 1):
                emit("progress", step=step + 1, steps=job.steps, loss=loss_value, seconds=measured.seconds,
                     per_device_batch=job.per_device_batch)
            if step in eval_at:
                evals.append({"step": step + 1, "train_seconds": train_seconds,
                              **_evaluate(job, workload, strategy, model)})
                if strategy.rank == 0:
                    emit("eval", **evals[-1])
    except Exception as exc:  # noqa: BLE001
        if not is_oom_exception(exc):
            raise
        emit("oom", rank=strategy.rank, batch=job.per_device_batch, message=first_line(exc),
             budget=budget)
        raise _OOMExit() from None

    val = {}
    if job.evaluate:
        val = _evaluate(job, workload, strategy, model)
        evals.append({"step": job.steps, "train_seconds": train_seconds, **val})
    sample = strategy.gradient_norms()  # a collective: every rank takes part
    noise = noise_scale(sample).to_dict() if sample and sample.steps else None
    if not step_seconds:
        step_seconds = [measured.seconds]
    median = statistics.median(step_seconds)
    global_batch = job.per_device_batch * strategy.world_size * job.accumulation_steps
    emit("result", rank=strategy.rank, per_device_batch=job.per_device_batch, world_size=strategy.world_size,
         accumulation_steps=job.accumulation_steps, global_batch=global_batch, steps=job.steps,
         peak_bytes=peak.get("peak_bytes"), measured_by=peak.get("how"), breakdown=peak.get("breakdown"),
         step_seconds=median, throughput=global_batch / median, train_seconds=train_seconds,
         losses=losses if strategy.rank == 0 else None, final_loss=losses[-1], lr=job.lr,
         warmup_steps=job.warmup_steps, precision=job.precision, budget=budget, noise=noise,
         evals=evals if strategy.rank == 0 else None, **val)


def _evaluate(job, workload, strategy, model) -> dict:
    import torch

    module = strategy.eval_model(model)
    module.eval()
    data = workload.val_data
    indices = list(range(strategy.rank, len(data), strategy.world_size))
    totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, count
    chunk = max(1, job.per_device_batch)
    with torch.no_grad():
        for start in range(0, len(indices), chunk):
            inputs, targets = to_device(_batch(data, torch.tensor(indices[start:start + chunk])), strategy.device)
            with strategy.precision_context(job):
                outputs = module(inputs)
            loss = workload.loss_fn(outputs.float(), targets)
            totals[0] += float(loss) * len(targets)
            totals[2] += len(targets)
            if workload.num_classes and outputs.dim() == 2 and outputs.shape[-1] == workload.num_classes:
                totals[1] += float((outputs.argmax(dim=-1) == targets).sum())
    totals = strategy.all_reduce_sum(totals.to(strategy.device)).cpu()
    module.train()
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

        from .memory import apply_budget
        from .oom import is_oom_exception
        from .workload import resolve_workload

        if job.device == "cpu":
            torch.set_num_threads(1)  # one core per rank, as one GPU per rank
        strategy.setup(job)
        if job.tf32:
            from .device import enable_tf32

            enable_tf32(strategy.device)
        emit("started", rank=strategy.rank, pid=os.getpid(), world_size=strategy.world_size,
             device=str(strategy.device))
        torch.manual_seed(job.seed)
        workload = resolve_workload(job.workload)
        if job.extra.get("optimizer"):
            workload.optimizer = job.extra["optimizer"]  # the plan's --optimizer overrides the workload's
        from .optimizers import preload

        preload(workload.optimizer)  # the first optimizer's imports happen before the budget: not training memory
        # The budget covers everything a training step holds on the device (parameters, gradients, optimizer
        # state, buckets, activations). On CUDA it is set before the model exists; on CPU after wrapping,
        # crediting the tensors already held, so the process's own overhead (libraries, the thread arenas
        # DDP starts) is not charged to it, as it would not be to a GPU.
        budget = {"enforced": False}
        try:
            if strategy.device.type == "cuda":
                budget = apply_budget(strategy.device, job.memory_budget_bytes)
            model = workload.build_model().to(strategy.device)
            if strategy.rank == 0:
                emit("model", parameters=sum(p.numel() for p in model.parameters()),
                     has_batchnorm=_has_batchnorm(model), train_size=len(workload.train_data),
                     val_size=len(workload.val_data))
            optimizer = strategy.make_optimizer(workload, model, job)
            model, optimizer = strategy.prepare(model, optimizer, job)
            if strategy.device.type != "cuda":
                held = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
                budget = apply_budget(strategy.device, job.memory_budget_bytes,
                                      held + sum(strategy.extra_memory(model).values()))
            if strategy.rank == 0:
                emit("optimizer", name=workload.optimizer, implementation=strategy.optimizer_implementation(optimizer))
        except Exception as exc:  # noqa: BLE001 - the model alone not fitting is an answer, not a crash
            if not is_oom_exception(exc):
                raise
            kind = "probe" if job.kind == "probe" else "oom"
            payload = {"status": "oom"} if job.kind == "probe" else {}
            emit(kind, rank=strategy.rank, batch=job.per_device_batch, budget=budget,
                 message="the model itself does not fit: " + first_line(exc), **payload)
            raise _OOMExit() from None
        if job.kind == "probe":
            run_probe(job, workload, strategy, model, optimizer, budget)
        else:
            run_training(job, workload, strategy, model, optimizer, budget)
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
