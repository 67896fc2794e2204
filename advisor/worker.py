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
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

from .job import OOM_EXIT_CODE, TrialJob, write_event


class WorkerStrategy:
    """One data-parallel flavour inside a worker. The defaults are plain PyTorch on one process.

    ``rank``/``world_size``/``device`` (a ``torch.device``) are set by ``setup``.
    """

    rank = 0
    world_size = 1
    device = None
    scaler = None  # a GradScaler under fp16 on CUDA, made in ``prepare``

    def setup(self, job: TrialJob) -> None:
        """No super() needed. Set ``self.device`` (and ``rank``/``world_size`` under a process group): the default
        is the job's device (``cpu``, ``cuda``: this process's card, ``cuda:N``)."""
        from .device import worker_device

        self.device, _ = worker_device(job.device)

    def build_model(self, workload, job: TrialJob):
        """The user's model on this process's device (a strategy that shards parameters builds it sharded)."""
        return workload.build_model().to(self.device)

    def make_optimizer(self, workload, model, job: TrialJob):
        """The optimizer the user's training runs (with its state allocated on the first step)."""
        return workload.optimizer_for(model, job.lr)

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
        def micro_step(batch, last: bool):
            with self.sync_context(model, last):
                with self.precision_context(job):
                    loss = workload.batch_loss(model, batch)
                scaled = loss / job.accumulation_steps
                (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            return loss

        mean_loss = run_micro_batches(job, next_batch, between_micro, self.device, micro_step)
        if self.scaler:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return mean_loss

    def optimizer_implementation(self, optimizer) -> str:
        """Which optimizer implementation runs (the recipe records it): ``advisor_implementation`` or the class."""
        inner = getattr(optimizer, "optimizer", optimizer)  # wrappers (Accelerate, DeepSpeed) keep the real one inside
        found = getattr(optimizer, "advisor_implementation", None) or getattr(inner, "advisor_implementation", None)
        return found or f"{type(inner).__module__}.{type(inner).__qualname__}"

    def optimizer_hyperparameters(self, optimizer) -> dict:
        """The hyper-parameters the running optimizer holds (its first param group, inside any wrapper)."""
        inner = getattr(optimizer, "optimizer", optimizer)
        group = inner.param_groups[0] if getattr(inner, "param_groups", None) else {}
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items()
                if k in ("momentum", "weight_decay", "betas", "eps")}

    def recipe_extras(self) -> dict:
        """Settings the workers chose that the recipe must record (e.g. a fallback from a fused op)."""
        return {}

    def set_lr(self, optimizer, lr: float) -> None:
        """The first param group at ``lr``, the others at their built share of it (an optimizer_factory's or
        configure_optimizers' groups at different LRs keep their ratios through the warmup)."""
        groups = optimizer.param_groups
        if getattr(self, "_lr_shares", (None,))[0] is not optimizer:
            base = groups[0]["lr"]
            self._lr_shares = (optimizer, [group["lr"] / base if base else 1.0 for group in groups])
        for group, share in zip(groups, self._lr_shares[1]):
            group["lr"] = lr * share

    def eval_model(self, model):
        """The module to run validation forwards through."""
        return model

    def memory_view(self, model, optimizer):
        """(module, optimizer) whose parameters, gradients and state a CPU memory tracker should count."""
        return model, optimizer

    def extra_memory(self, model) -> dict[str, int]:
        """Bytes a training step holds outside the tracked tensors (e.g. DDP's all-reduce buckets), by name."""
        return {}

    def counted_apart(self, model) -> tuple[dict[str, int], list]:
        """Memory the CPU tracker would misattribute, counted by name instead: (bytes by name, the tensors that
        hold them). The tracker leaves those tensors out (an in-place op on a tensor made before the step would
        otherwise count as new memory) and the peak adds the named bytes (e.g. ZeRO-3's shards and buffers)."""
        return {}, []

    def sample_noise(self, active: bool) -> None:
        """Whether the coming steps count towards the gradient-noise estimate."""

    def between_micro_batches(self) -> None:
        """Called before each micro-batch of a training step after the first (gradients of the earlier ones
        accumulated in p.grad): where a noise meter reads the first micro-batch's gradient."""

    def loss_scale(self) -> float:
        """The loss scale the coming step's gradients carry (a GradScaler's, under fp16), to divide out of norms."""
        return self.scaler.get_scale() if self.scaler else 1.0

    def gradient_norms(self):
        """An ``advisor.method.noise.GradNormSample`` (collective: every rank calls it), or None if not measured."""
        return None

    def all_reduce_sum(self, tensor):
        return tensor

    def shutdown(self) -> None: ...


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's first line, or its type when it has no message (a bare MemoryError)."""
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:limit]


def one_core_per_rank(environ=os.environ) -> int | None:
    """On a CPU plan, pin this rank to a core of its own (the core's number; None where nothing was pinned), as a
    GPU job gives each rank its own device. A rank's processes start on the core of the process that forked them
    and the kernel spreads them only later: two ranks of a 2 s timing run on one core measured exactly half the
    samples/s (digits-cnn, ten fresh plans on a 2-core host: 16 per device at 420-430 in all three rounds of a pair
    whose other batch ran at 870-900, which decided the walk), a state a long run does not stay in. Pinned only
    when this host's ranks fit its cores: ``LOCAL_WORLD_SIZE`` consecutive global ranks (torchrun's numbering and
    the fork server's) fall on distinct cores modulo their count. One rank alone is left to the kernel."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        rank, local_world = int(environ["RANK"]), int(environ["LOCAL_WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if not 2 <= local_world <= len(allowed):
        return None
    core = allowed[rank % len(allowed)]
    try:
        os.sched_setaffinity(0, {core})
    except OSError:  # a container may refuse; the kernel's placement is then what there is
        return None
    return core


def emit(kind: str, **payload) -> None:
    write_event(sys.stdout, kind, **payload)


def _batch(dataset, indices, collate_fn=None):
    from torch.utils.data import TensorDataset, default_collate

    if isinstance(dataset, TensorDataset) and collate_fn is None:
        return tuple(t[indices] for t in dataset.tensors)
    return (collate_fn or default_collate)([dataset[int(i)] for i in indices])


def run_micro_batches(job: TrialJob, next_batch, between_micro, device, micro_step) -> "torch.Tensor":  # noqa: F821
    """One training step's accumulation loop, the same for every strategy: ``job.accumulation_steps`` micro-batches,
    each taken from ``next_batch`` onto ``device`` (``between_micro`` runs before each after the first: where a noise
    meter reads the first one's gradient), run by ``micro_step(batch, last)``, which does the forward and backward
    its flavour's way (who divides the loss, who syncs and steps when) and returns the micro-loss. Returns the mean
    micro-loss, detached."""
    import torch

    losses = []
    for micro in range(job.accumulation_steps):
        if micro:
            between_micro()
        batch = to_device(next_batch(), device)
        loss = micro_step(batch, micro == job.accumulation_steps - 1)
        losses.append(loss.detach().float())
    return torch.stack(losses).mean()


def to_device(obj, device):
    """A batch of any nesting (dicts, tuples, named tuples, dataclasses, ModelOutput-like mappings) on ``device``."""
    from .batches import map_tensors

    return map_tensors(lambda t: t.to(device, non_blocking=True), obj)


def loader_settings(device, world_size: int, collate_fn=None) -> dict:
    """DataLoader options for a training run's batches on ``device``.

    On CUDA, worker processes decode the next batches while the device computes, and pinned host memory
    lets the copy to the device run asynchronously, as a tuned training loop does. On CPU the ranks
    already own every core (one thread each), so loading stays in the rank's own process.
    """
    from .device import normalize

    dev = normalize(device) if device is not None else None
    on_cuda = dev is not None and dev.type == "cuda"
    cores_per_rank = (os.cpu_count() or 1) // max(1, world_size)
    return {"num_workers": max(1, min(4, cores_per_rank - 1)) if on_cuda else 0, "pin_memory": on_cuda,
            "collate_fn": collate_fn}


class _IndexBatches:
    """Endless index batches for one rank: DistributedSampler's scheme, or sampling with replacement.

    Sharded: every epoch draws one permutation from the shared seed (the same on every rank), and each
    rank takes its own contiguous shard, cut into whole batches. Unsharded (probes, data smaller than one
    global batch): indices drawn with replacement. Runs in the rank's own process, so the order does not
    depend on how many loader workers fetch the samples.
    """

    def __init__(self, size: int, batch: int, rank: int, world: int, seed: int, shard: bool):
        import torch

        self.size, self.batch, self.rank, self.world = size, batch, rank, world
        self.generator = torch.Generator().manual_seed(seed)
        self.sharded = shard and size >= batch * world

    def __iter__(self):
        import torch

        from .batches import steps_per_epoch

        while True:
            if not self.sharded:
                yield torch.randint(0, self.size, (self.batch,), generator=self.generator).tolist()
                continue
            perm = torch.randperm(self.size, generator=self.generator)
            per_rank = self.size // self.world
            shard = perm[self.rank * per_rank:(self.rank + 1) * per_rank]
            for i in range(steps_per_epoch(self.size, self.batch * self.world)):  # the plan's own arithmetic
                yield shard[i * self.batch:(i + 1) * self.batch].tolist()


class BatchStream:
    """Endless per-rank mini-batches, fetched outside the timed step: ``take`` returns them with the wait.

    A DataLoader (the workload's ``collate_fn``, worker processes and pinned memory per ``loader_settings``)
    fetches them; a TensorDataset without its own collate is indexed directly, which is what its
    collation would do, only faster.
    """

    def __init__(self, dataset, batch: int, rank: int, world: int, seed: int, shard: bool = True,
                 device=None, collate_fn=None, loader: dict | None = None, stream_of: tuple[str, bool] | None = None):
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        self.dataset, self.batch, self.rank, self.world = dataset, batch, rank, world
        self.settings = loader or loader_settings(device, world, collate_fn)
        self.loader = None
        if stream_of is not None:  # (workload name, stream_shards_itself): an IterableDataset, see advisor.streams
            from .streams import StreamBatches, stream_loader

            name, shards_itself = stream_of
            self.indices, self.sharded = None, True  # a stream is always read in per-rank shares
            self.loader = stream_loader(dataset, batch, rank, world, shards_itself, self.settings, seed)
            self._batches = StreamBatches(self.loader, name, rank, batch)
            return
        self.indices = _IndexBatches(len(dataset), batch, rank, world, seed, shard)
        self.sharded = self.indices.sharded
        if isinstance(dataset, TensorDataset) and self.settings.get("collate_fn") is None:
            self._batches = self._tensor_batches()
        else:
            # Its own generator seeds the loader workers; the global RNG (dropout, augmentation) stays untouched.
            self.loader = DataLoader(dataset, batch_sampler=self.indices, num_workers=self.settings["num_workers"],
                                     pin_memory=self.settings["pin_memory"], collate_fn=self.settings["collate_fn"],
                                     generator=torch.Generator().manual_seed(seed))
            self._batches = iter(self.loader)

    def _tensor_batches(self):
        for indices in self.indices:
            batch = tuple(t[indices] for t in self.dataset.tensors)
            yield tuple(t.pin_memory() for t in batch) if self.settings["pin_memory"] else batch

    def __call__(self):
        return next(self._batches)

    __next__ = __call__

    def __iter__(self):
        return self

    def take(self, count: int) -> tuple[list, float]:
        """The next ``count`` batches (one optimizer step's micro-batches) and the seconds spent waiting for them."""
        started = time.perf_counter()
        batches = [next(self._batches) for _ in range(count)]
        return batches, time.perf_counter() - started

    def close(self) -> None:
        """Stop the loader's worker processes now rather than at interpreter exit (workers end with os._exit)."""
        shutdown = getattr(self._batches, "_shutdown_workers", None) or getattr(self._batches, "close", None)
        if shutdown:
            shutdown()


def stream_of(workload) -> tuple[str, bool] | None:
    """BatchStream's ``stream_of`` for ``workload``'s training data: None unless it is an IterableDataset."""
    from .workload import is_iterable_dataset

    return (workload.name, workload.stream_shards_itself) if is_iterable_dataset(workload.train_data) else None


def _tensor_bytes(obj) -> int:
    """Bytes of the tensors in a (nested) batch."""
    from .batches import tensor_bytes

    return tensor_bytes(obj)


def _has_batchnorm(model) -> bool:
    from torch import nn

    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


class _Measured:
    """Peak memory of one training cycle, and its wall time with the device synchronised.

    The cycle's batches were fetched before it (``BatchStream.take``): the time covers the step, not the loader.
    On CPU their bytes join the peak, since the tracker entered after they were made does not see them.
    """

    def __init__(self, strategy, model, optimizer, measure: bool, batches=()):
        self.strategy, self.model, self.optimizer, self.measure = strategy, model, optimizer, measure
        self.batches = batches
        self.peak: dict = {}
        self.seconds = 0.0

    def __enter__(self):
        from .device import synchronize
        from .memory import measure_peak

        self._stack = contextlib.ExitStack()
        self.apart: dict[str, int] = {}
        if self.measure:
            module, optimizer = self.strategy.memory_view(self.model, self.optimizer)
            self.apart, tensors = self.strategy.counted_apart(self.model)
            self.peak = self._stack.enter_context(measure_peak(self.strategy.device, module, optimizer, tensors))
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
            extra = {}
            if self.strategy.device.type == "cpu":
                extra = {**self.strategy.extra_memory(self.model), **self.apart}
                extra["input_batches"] = _tensor_bytes(self.batches)
            if extra:  # a CUDA peak counts every allocation already; a CPU tracker only the tensors it saw
                self.peak["peak_bytes"] += sum(extra.values())
                self.peak["breakdown"].update(extra)
        self.batches = ()  # the next step's batches are fetched before this object is replaced: hold none
        return False


class _RepeatedBatch:
    """The same worst-case batch for every micro-step of a probe (``take`` as BatchStream's)."""

    def __init__(self, batch):
        self.batch = batch

    def take(self, count: int) -> tuple[list, float]:
        return [self.batch] * count, 0.0

    def close(self) -> None: ...


def probe_batches(job, workload, strategy):
    """What a memory probe feeds: the workload's ``probe_batch(n)``, a batch of the longest samples (the
    engine measured them: ``probe_indices``, longest first, repeated when the batch is larger), or, when
    every sample has the same shape, random batches drawn with replacement in this process; a stream's
    batches as this rank's share yields them (the recipe warns: no worst case was chosen)."""
    import torch

    size = job.per_device_batch
    if workload.probe_batch is not None:
        return _RepeatedBatch(workload.probe_batch(size))
    longest = job.extra.get("probe_indices")
    if longest:
        indices = torch.tensor([longest[i % len(longest)] for i in range(size)])
        return _RepeatedBatch(_batch(workload.train_data, indices, workload.collate_fn))
    return BatchStream(workload.train_data, size, strategy.rank, strategy.world_size,
                       job.seed + 1000 * strategy.rank, shard=False,
                       loader={"num_workers": 0, "pin_memory": False, "collate_fn": workload.collate_fn},
                       stream_of=stream_of(workload))


def run_probe(job, workload, strategy, model, optimizer, budget: dict):
    """Full training cycles (forward, backward, optimizer step with its state) at ``per_device_batch``.

    The peak of the last cycle is what one real training step at this batch holds.
    """
    from .oom import is_oom_exception

    from .batches import shapes

    stream = probe_batches(job, workload, strategy)
    started = time.perf_counter()
    cycles = max(2, job.steps)
    try:
        for cycle in range(cycles):
            batches, data_seconds = stream.take(job.accumulation_steps)
            with _Measured(strategy, model, optimizer, cycle == cycles - 1, batches) as measured:
                strategy.train_cycle(model, optimizer, iter(batches).__next__, workload, job, measured.between_micro)
    except Exception as exc:  # noqa: BLE001 - classify, then re-raise what is not an OOM
        if not is_oom_exception(exc):
            raise
        emit("probe", rank=strategy.rank, batch=job.per_device_batch, status="oom",
             message=first_line(exc), seconds=time.perf_counter() - started, budget=budget)
        return
    emit("probe", rank=strategy.rank, batch=job.per_device_batch, status="ok", peak_bytes=measured.peak["peak_bytes"],
         batch_shapes=shapes(batches[0]),
         measured_by=measured.peak["how"], breakdown=measured.peak["breakdown"], step_seconds=measured.seconds,
         data_seconds=data_seconds, seconds=time.perf_counter() - started, budget=budget)


def run_training(job, workload, strategy, model, optimizer, budget: dict):
    """A short real training run: step times, peak memory, loss curve, validation checkpoints, noise scale."""
    from .method.noise import noise_scale
    from .oom import is_oom_exception

    stream = BatchStream(workload.train_data, job.per_device_batch, strategy.rank, strategy.world_size, job.seed,
                         device=strategy.device, collate_fn=workload.collate_fn, stream_of=stream_of(workload))
    step_seconds, data_seconds, losses, evals = [], [], [], []
    peak: dict = {}
    train_seconds = 0.0
    eval_at = set()
    if job.evaluate and job.eval_points > 1:
        eval_at = {round(job.steps * (i + 1) / job.eval_points) - 1 for i in range(job.eval_points - 1)}
    try:
        for step in range(job.steps):
            if job.warmup_steps:
                strategy.set_lr(optimizer, job.lr * min(1.0, (step + 1) / job.warmup_steps))
            # The noise scale grows as training settles; the first steps' huge gradients (and the LR warm-up's)
            # would dominate it.
            strategy.sample_noise(step >= max(job.steps // 2, job.warmup_steps))
            # The loader's wait is timed apart from the step: samples/s decisions rest on the step alone,
            # and a slow loader shows up as data time instead of as a slow model.
            batches, waited = stream.take(job.accumulation_steps)
            with _Measured(strategy, model, optimizer, step == 1, batches) as measured:
                loss = strategy.train_cycle(model, optimizer, iter(batches).__next__, workload, job,
                                            _both(measured.between_micro, strategy.between_micro_batches))
            del batches
            train_seconds += measured.seconds + waited
            if step == 1:
                peak = measured.peak
            elif step > 1:  # step 0 pays one-time costs (loader workers starting too), step 1 the memory tracker's
                step_seconds.append(measured.seconds)
                data_seconds.append(waited)
            loss_value = float(loss)
            losses.append(loss_value)
            if strategy.rank == 0 and (step % job.loss_every == 0 or step == job.steps - 1):
                emit("progress", step=step + 1, steps=job.steps, loss=loss_value, seconds=measured.seconds,
                     data_seconds=waited, per_device_batch=job.per_device_batch)
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
    finally:
        stream.close()

    val = {}
    if job.evaluate:
        val = _evaluate(job, workload, strategy, model)
        evals.append({"step": job.steps, "train_seconds": train_seconds, **val})
        ranked, higher, why = workload.ranking_metric(val.get("val_metrics", {}))
        val["ranking"] = {"metric": ranked, "higher_is_better": higher, "reason": why}
    sample = strategy.gradient_norms()  # a collective: every rank takes part
    noise = noise_scale(sample).to_dict() if sample and sample.steps else None
    if not step_seconds:
        step_seconds, data_seconds = [measured.seconds], [waited]
    median = statistics.median(step_seconds)
    global_batch = job.per_device_batch * strategy.world_size * job.accumulation_steps
    emit("result", rank=strategy.rank, per_device_batch=job.per_device_batch, world_size=strategy.world_size,
         accumulation_steps=job.accumulation_steps, global_batch=global_batch, steps=job.steps,
         peak_bytes=peak.get("peak_bytes"), measured_by=peak.get("how"), breakdown=peak.get("breakdown"),
         step_seconds=median, data_seconds=statistics.median(data_seconds), throughput=global_batch / median,
         train_seconds=train_seconds,
         losses=losses if strategy.rank == 0 else None, final_loss=losses[-1], lr=job.lr,
         warmup_steps=job.warmup_steps, precision=job.precision, budget=budget, noise=noise,
         evals=evals if strategy.rank == 0 else None, **val)


def _both(first, second):
    """One ``between_micro`` callback that calls ``first`` then ``second``."""
    def call():
        first()
        second()
    return call


def _evaluate(job, workload, strategy, model) -> dict:
    """Validation over this rank's share of ``val_data``: the loss, every metric computed, and the one the
    sweep ranks by (``val_metric``, named in ``val_metric_name``) unless that is the loss itself."""
    import torch

    from .batches import batch_length

    module = strategy.eval_model(model)
    module.eval()
    data = workload.val_data
    indices = list(range(strategy.rank, len(data), strategy.world_size))
    chunk = max(1, job.per_device_batch)
    # Every rank runs the same number of forwards: under ZeRO-3 each one gathers parameters collectively, so
    # a rank with one chunk fewer would leave the others waiting. Rank 0 has the most indices; the others pad
    # with a forward on one sample that does not count.
    forwards = math.ceil(len(range(0, len(data), strategy.world_size)) / chunk)
    names: list[str] | None = None
    totals = None  # loss sum, sample count, then each metric's sum, in ``names`` order
    with torch.no_grad():
        for start in range(0, forwards * chunk, chunk):
            real = indices[start:start + chunk]
            batch = to_device(_batch(data, torch.tensor(real or [0]), workload.collate_fn), strategy.device)
            with strategy.precision_context(job):
                loss, metrics = workload.eval_batch(module, batch)
            if names is None:  # the first batch names the metrics; every rank computes the same ones
                names = sorted(metrics)
                totals = torch.zeros(2 + len(names), dtype=torch.float64)
            if not real:
                continue
            count = batch_length(batch)
            totals[0] += loss * count
            totals[1] += count
            for i, name in enumerate(names):
                if name not in metrics:
                    from .errors import WorkloadError

                    raise WorkloadError(f"The workload {workload.name!r}'s validation returned {name!r} for one "
                                        "batch and not for another: return the same metrics for every batch.")
                totals[2 + i] += metrics[name] * count
    totals = strategy.all_reduce_sum(totals.to(strategy.device)).cpu()
    module.train()
    count = float(totals[1])
    result = {"val_loss": float(totals[0]) / count}
    means = {name: float(totals[2 + i]) / count for i, name in enumerate(names)}
    ranked, higher_is_better, _ = workload.ranking_metric(means)
    if means:
        result["val_metrics"] = means
    if ranked in means:
        result.update(val_metric=means[ranked], val_metric_name=ranked, higher_is_better=higher_is_better)
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

        from .device import open_collectives
        from .memory import apply_budget, held_tensor_bytes, parameter_count
        from .oom import is_oom_exception
        from .workload import resolve_workload

        if job.device == "cpu":
            torch.set_num_threads(1)  # one core per rank, as one GPU per rank
            one_core_per_rank()
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
        what = "the budget itself is used up"
        try:
            if strategy.device.type == "cuda":
                # NCCL creates its buffers at the first collective: open them now, so the cap sees them.
                open_collectives(strategy.device)
                budget = apply_budget(strategy.device, job.memory_budget_bytes)
            what = "the model itself does not fit"
            model = strategy.build_model(workload, job)
            if strategy.rank == 0:
                # built_bytes: what this rank holds once the model is built (under ZeRO-3, only its shards)
                emit("model", parameters=parameter_count(model), built_bytes=held_tensor_bytes(model),
                     has_batchnorm=_has_batchnorm(model), train_size=workload.train_length,
                     val_size=len(workload.val_data))
            optimizer = strategy.make_optimizer(workload, model, job)
            model, optimizer = strategy.prepare(model, optimizer, job)
            if strategy.device.type != "cuda":
                held = held_tensor_bytes(model)
                budget = apply_budget(strategy.device, job.memory_budget_bytes,
                                      held + sum(strategy.extra_memory(model).values()))
            if strategy.rank == 0:
                emit("optimizer", name=workload.optimizer, implementation=strategy.optimizer_implementation(optimizer),
                     hyperparameters=strategy.optimizer_hyperparameters(optimizer),
                     adapter_extras=strategy.recipe_extras())
        except Exception as exc:  # noqa: BLE001 - the model alone not fitting is an answer, not a crash
            if not is_oom_exception(exc):
                raise
            kind = "probe" if job.kind == "probe" else "oom"
            payload = {"status": "oom"} if job.kind == "probe" else {}
            emit(kind, rank=strategy.rank, batch=job.per_device_batch, budget=budget,
                 message=f"{what}: " + first_line(exc), **payload)
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
