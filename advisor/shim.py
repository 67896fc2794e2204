"""`python -m advisor.shim --job JOB`: run the user's training script unchanged, measure it, report events.

Started under the adapter's own launcher (torchrun, ``accelerate launch``, ``deepspeed``) in place of the
script, or on CPU forked as a torchrun rank from the fork server (advisor/probe_server.py). It rewrites ``sys.argv`` with the run's values (advisor.door.script_arguments), installs hooks that
see every optimizer of the process whichever framework built it, and runs the script with runpy as
``__main__``. The events are worker_main's (``started``, ``model``, ``optimizer``, ``probe``, ``progress``,
``eval``, ``result``, ``oom``, ``error``), so the engine reads both the same way; ``look`` reports what a
first run saw (data length, optimizer, batch structure).

What the hooks measure:
- optimizer steps: torch's global step pre/post hooks count them; a step's time is the wall time between
  two post-hooks (synchronised on CUDA) less the time spent waiting on DataLoader iterators;
- peak memory per measured step: on CUDA the allocator's peak; on CPU the tensor bytes MemTracker counts
  (the probes' method), under the same RLIMIT_DATA budget, applied at the first forward (the model built);
- the training loss: what the script back-propagates (summed over a step's micro-batches, divided by the
  GradScaler's scale when it scaled it), else its logged loss; validation metrics from its log lines
  (the `advisor diagnose` readers) or ``advisor.report(name=value)``.

After the requested steps the shim reports and ends the process (``os._exit``), unless validation was asked:
then the script runs on until it ends or starts another optimizer step.
"""

from __future__ import annotations

import argparse
import io
import os
import runpy
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .door import RunValues, ScriptSpec, script_arguments
from .job import OOM_EXIT_CODE, TrialJob, write_event

_ORIGINAL_STDOUT = sys.stdout


def emit(kind: str, **payload) -> None:
    write_event(_ORIGINAL_STDOUT, kind, **payload)


def first_line(exc: BaseException, limit: int = 300) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:limit]


class _LogTee(io.TextIOBase):
    """The script's own stdout/stderr, passed through, with each line read for metrics."""

    def __init__(self, stream, on_line):
        self.stream, self.on_line, self.pending = stream, on_line, ""

    def write(self, text):
        self.stream.write(text)
        self.pending += text
        *lines, self.pending = self.pending.replace("\r", "\n").split("\n")
        for line in lines:
            self.on_line(line)
        return len(text)

    def flush(self):
        self.stream.flush()

    def isatty(self):
        return False

    def fileno(self):
        return self.stream.fileno()


class ShimMonitor:
    """The hooks' shared state, and the events they send."""

    def __init__(self, job: TrialJob, rank: int, world: int, device):
        self.job, self.rank, self.world, self.device = job, rank, world, device
        self.steps_done = 0
        self.step_seconds: list[float] = []
        self.data_seconds: list[float] = []
        self.losses: list[float] = []
        self.micro_loss = 0.0
        self.micro_seen = False
        self.logged_losses: list[float] = []
        self.val: dict[str, float] = {}
        self.reported: dict[str, float] = {}
        self.peaks: list[dict] = []
        self.budget: dict = {"enforced": False}
        self.first_forward_done = False
        self.depth = 0
        self.batch_sizes: list[int] = []
        self.batch_shapes: dict | None = None
        self.longest: tuple[int, dict] | None = None  # (elements per sample, shapes) of the largest batch seen
        self.has_batchnorm = False
        self.optimizer_seen = None
        self.scales: dict[int, float] = {}
        self.tracker = None
        self.tracker_step = 0  # the optimizer steps done when the tracker started
        self.tracked_input_bytes = 0  # the batches fetched while the CPU tracker ran (fetched out of its sight)
        self.outside_tracker: dict[str, int] = {}  # bytes a step holds that the CPU tracker cannot see, by name
        self.measure_next = None  # the optimizer whose next step to measure
        self.step_started = time.perf_counter()
        self.waited = 0.0
        self.train_length: int | None = None
        self.data_longest: dict | None = None  # the longest training sample (the look run measures them)
        self.val_length: int | None = None
        self.stop_after = job.steps
        self.readers = None
        self.spec_form = job.script_form

    # -- forward: the budget (CPU), the batch the script feeds, BatchNorm -------------------------------
    def forward_pre(self, module, args):
        import torch

        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            self.has_batchnorm = True
        self.depth += 1
        if self.depth == 1 and module.training:
            if not self.first_forward_done:
                self.first_forward_done = True
                self.first_forward(module)
        return None

    def between_steps(self):
        """Before the script fetches a batch, outside any module call: a step's tracker starts or stops here.
        Not in the optimizer hooks (MemTracker adds and removes optimizer hooks of its own, which torch forbids
        while it runs them), nor inside a forward (it would miss the outer module's own hooks)."""
        if self.depth:
            return
        if self.tracker is not None and self.tracker_step < self.steps_done:
            self._end_measure()
        elif self.tracker is not None and self.tracker != "cuda":
            # another micro-batch (or a validation batch) within the measured step: MemTracker wants its
            # module stats reset between forwards, as the worker does between micro-steps
            self.tracker.reset_mod_stats()
        if self.measure_next is not None:
            self._begin_measure(self.measure_next)
            self.measure_next = None

    def fetch_untracked(self, fetch, iterator):
        """Fetch a batch out of the CPU tracker's sight and count the batch's own bytes instead, as the worker
        counts its input batches: MemTracker charges a view of an untracked storage at the storage's full size,
        so a TensorDataset indexed in the loader would count the whole dataset as the step's memory."""
        if self.tracker is None or self.tracker == "cuda":
            return fetch(iterator)
        from torch.utils._python_dispatch import _disable_current_modes

        from .batches import tensor_bytes

        with _disable_current_modes():
            batch = fetch(iterator)
        self.tracked_input_bytes += tensor_bytes(batch)
        return batch

    def forward_post(self, module, args, kwargs, output):
        """The outermost training forward's inputs: global pre-hooks do not see keyword arguments."""
        outermost = self.depth == 1
        self.depth = max(0, self.depth - 1)
        if not outermost or not module.training:
            return None
        from .batches import batch_length, shapes, tensors_in

        inputs = {"args": list(args), **(kwargs or {})}
        try:
            size = batch_length(inputs)
        except ValueError:
            size = None
        found = shapes(inputs)
        elements = max((t.numel() // max(1, size or 1) for t in tensors_in(inputs)), default=0)
        if self.longest is None or elements > self.longest[0]:
            self.longest = (elements, found)
        if size is not None:
            self.batch_sizes.append(size)
        if self.batch_shapes is None:
            self.batch_shapes = found
            self.check_batch(size)
        return None

    def check_batch(self, size):
        if self.job.kind != "look" and size is not None and size != self.job.per_device_batch:
            self.fail("IgnoredBatchFlag",
                      f"the advisor asked the script for {self.job.per_device_batch} samples per device, but its "
                      f"first training batch holds {size}: the script does not take its batch size from the "
                      "argument the advisor set (a fixed batch_size in the code, or another flag). Pass the "
                      "batch through {per_device} (or --per_device_train_batch_size for a Trainer script)")

    def first_forward(self, module):
        """The model is built and wrapped: report it, and (on CPU) start the budget, as the probes do."""
        from .memory import apply_budget, held_tensor_bytes, parameter_count

        if self.rank == 0:
            emit("model", parameters=parameter_count(module), built_bytes=held_tensor_bytes(module),
                 has_batchnorm=_has_batchnorm(module), train_size=self.train_length, val_size=self.val_length)
        if self.device.type == "cpu" and self.job.kind != "look":
            from .process_group import ddp_bucket_bytes

            self.outside_tracker = ddp_bucket_bytes(module)  # made at wrap time: the tracker never sees them
            held = held_tensor_bytes(module) + sum(self.outside_tracker.values())
            self.budget = apply_budget(self.device, self.job.memory_budget_bytes, held)

    # -- backward: the loss the script back-propagates --------------------------------------------------
    def wrap_backward(self):
        import torch

        original = torch.autograd.backward
        monitor = self

        def backward(tensors, *args, **kwargs):
            first = tensors if isinstance(tensors, torch.Tensor) else (tensors[0] if tensors else None)
            if isinstance(first, torch.Tensor) and first.numel() == 1:
                value = float(first.detach().float())
                monitor.micro_loss += value / monitor.scales.pop(id(first), 1.0)
                monitor.micro_seen = True
            return original(tensors, *args, **kwargs)

        torch.autograd.backward = backward
        scaler = getattr(torch.amp, "GradScaler", None)
        if scaler is not None:
            scale = scaler.scale

            def scaled(self, outputs):
                result = scale(self, outputs)
                if isinstance(result, torch.Tensor) and self.is_enabled() and self._scale is not None:
                    monitor.scales[id(result)] = float(self._scale)
                return result

            scaler.scale = scaled

    # -- data loading: its wait is not step time; the data's length ------------------------------------
    def wrap_loader(self):
        from torch.utils.data import dataloader

        monitor = self
        base = dataloader._BaseDataLoaderIter
        original_next = base.__next__

        def timed_next(self):
            monitor.between_steps()
            started = time.perf_counter()
            try:
                return monitor.fetch_untracked(original_next, self)
            finally:
                monitor.waited += time.perf_counter() - started

        base.__next__ = timed_next
        original_iter = dataloader.DataLoader.__iter__

        def counted_iter(self):
            try:
                length = len(self.dataset)
            except TypeError:
                length = None
            if length is not None:
                if monitor.train_length is None and not monitor.first_forward_done:
                    monitor.train_length = length
                    if monitor.job.kind == "look":
                        monitor.data_longest = _longest_sample(self.dataset)
                elif length != monitor.train_length and monitor.val_length is None:
                    monitor.val_length = length
            return original_iter(self)

        dataloader.DataLoader.__iter__ = counted_iter

    # -- optimizer steps --------------------------------------------------------------------------------
    def step_pre(self, optimizer, args, kwargs):
        if self.steps_done >= self.stop_after:  # validation was asked and the script trains on: stop here
            self.finish()
        if self.optimizer_seen is None:
            self.optimizer_seen = optimizer
            if self.rank == 0:
                inner = getattr(optimizer, "optimizer", optimizer)
                group = inner.param_groups[0] if getattr(inner, "param_groups", None) else {}
                emit("optimizer", name=type(inner).__name__,
                     implementation=f"{type(inner).__module__}.{type(inner).__qualname__}",
                     lr=group.get("lr"),
                     hyperparameters={k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items()
                                      if k in ("momentum", "weight_decay", "betas", "eps")},
                     adapter_extras={})

    def step_post(self, optimizer, args, kwargs):
        from .device import synchronize

        synchronize(self.device)
        now = time.perf_counter()
        elapsed, waited = now - self.step_started, self.waited
        self.steps_done += 1
        loss = self.micro_loss if self.micro_seen else None
        self.micro_loss, self.micro_seen = 0.0, False
        if self.steps_done > 1:  # the first step pays one-time costs (loader start, lazy optimizer state)
            self.step_seconds.append(max(1e-9, elapsed - waited))
            self.data_seconds.append(waited)
        if loss is not None:
            self.losses.append(loss)
        if self.job.kind == "train" and self.rank == 0:
            every = max(1, self.job.loss_every)
            if self.steps_done % every == 0 or self.steps_done == self.job.steps:
                emit("progress", step=self.steps_done, steps=self.job.steps, loss=loss, seconds=elapsed - waited,
                     data_seconds=waited, per_device_batch=self.job.per_device_batch)
        if self.job.kind == "look" or (self.steps_done >= self.stop_after and not self.job.evaluate):
            self.finish()
        if self.steps_done == 1 or (self.job.kind == "probe" and self.steps_done < self.stop_after):
            self.measure_next = optimizer  # the second step (and a probe's last) holds what a step holds
        synchronize(self.device)
        self.waited = 0.0
        self.step_started = time.perf_counter()

    def _begin_measure(self, optimizer):
        from .device import reset_peak

        self.tracker_step = self.steps_done
        if self.device.type == "cuda":
            reset_peak(self.device)
            self.tracker = "cuda"
            return
        from torch.distributed._tools.mem_tracker import MemTracker

        tracker = MemTracker()
        tracker.track_external(getattr(optimizer, "optimizer", optimizer))
        tracker.__enter__()
        self.tracker = tracker
        self.tracked_input_bytes = 0

    def _end_measure(self):
        if self.tracker is None:
            return
        tracker, self.tracker = self.tracker, None
        if tracker == "cuda":
            from .device import peak_allocated

            self.peaks.append({"peak_bytes": peak_allocated(self.device), "how": "torch.cuda.max_memory_allocated",
                               "breakdown": {}})
            return
        tracker.__exit__(None, None, None)
        peaks = tracker.get_tracker_snapshot("peak")
        cpu = dict(next(iter(peaks.values()), {}))
        breakdown = {getattr(k, "value", str(k)): int(v) for k, v in cpu.items() if k != "Total"}
        extra = {**self.outside_tracker, "input_batches": self.tracked_input_bytes}
        breakdown.update(extra)
        self.peaks.append({"peak_bytes": int(cpu.get("Total", 0)) + sum(extra.values()),
                           "how": "MemTracker (tensor bytes)", "breakdown": breakdown})

    # -- log lines: validation metrics, a logged training loss ------------------------------------------
    def read_line(self, line: str):
        if self.readers is None:
            from .diagnose.readers import METRIC_READERS

            self.readers = list(METRIC_READERS)
        for reader in self.readers:
            try:
                points = reader.read(line, 0)
            except Exception:  # noqa: BLE001 - a log line the readers cannot parse is only not a metric
                points = None
            if points is None:
                continue
            for point in points:
                if point.name.startswith("val"):
                    self.val[point.name] = point.value
                elif point.name == "train_loss":
                    self.logged_losses.append(point.value)
            return

    # -- endings --------------------------------------------------------------------------------------
    def measured_peak(self) -> dict:
        if self.tracker is not None and self.tracker_step < self.steps_done:
            self._end_measure()
        elif self.tracker is not None and self.tracker != "cuda":
            # another micro-batch (or a validation batch) within the measured step: MemTracker wants its
            # module stats reset between forwards, as the worker does between micro-steps
            self.tracker.reset_mod_stats()  # the process ends next: no hook runs again
        return max(self.peaks, key=lambda p: p["peak_bytes"]) if self.peaks else {}

    def seen(self) -> dict:
        sizes = sorted(set(self.batch_sizes))
        return {"batch_shapes": self.batch_shapes or {}, "batch_sizes": sizes,
                "longest_elements_per_sample": self.longest[0] if self.longest else None,
                "longest_batch_shapes": self.longest[1] if self.longest else None,
                "train_size": self.train_length, "val_size": self.val_length,
                "optimizer": (f"{type(getattr(self.optimizer_seen, 'optimizer', self.optimizer_seen)).__module__}."
                              f"{type(getattr(self.optimizer_seen, 'optimizer', self.optimizer_seen)).__qualname__}"
                              if self.optimizer_seen is not None else None),
                "has_batchnorm": self.has_batchnorm, "data_longest": self.data_longest}

    def finish(self):
        """The requested steps are done: report and end the process (no script teardown, no saving)."""
        job = self.job
        if job.kind == "look":
            inner = getattr(self.optimizer_seen, "optimizer", self.optimizer_seen)
            lr = inner.param_groups[0].get("lr") if inner is not None and getattr(inner, "param_groups", None) else None
            emit("look", rank=self.rank, world_size=self.world, lr=lr, **self.seen())
        elif job.kind == "probe":
            peak = self.measured_peak()
            emit("probe", rank=self.rank, batch=job.per_device_batch, status="ok", peak_bytes=peak.get("peak_bytes"),
                 batch_shapes=self.longest[1] if self.longest else self.batch_shapes,
                 measured_by=peak.get("how"), breakdown=peak.get("breakdown") or {},
                 step_seconds=self.step_seconds[-1] if self.step_seconds else None,
                 data_seconds=self.data_seconds[-1] if self.data_seconds else None, budget=self.budget,
                 seen=self.seen())
        else:
            self.emit_result()
        _leave(0)

    def emit_result(self):
        job = self.job
        if self.steps_done < job.steps:
            self.fail("ScriptEndedEarly",
                      f"the script ended after {self.steps_done} optimizer step(s); the advisor asked for "
                      f"{job.steps}: it stops on its own (a fixed step or epoch count, too little data for "
                      f"{job.steps} steps at {job.per_device_batch} per device, or an early exit). Let "
                      "the advisor set the length ({steps}, or --max_steps for a Trainer script) or give it "
                      "more data")
        peak = self.measured_peak()
        step_seconds = statistics.median(self.step_seconds) if self.step_seconds else None
        global_batch = job.per_device_batch * self.world * job.accumulation_steps
        # A Trainer scales what it back-propagates (by the world size when it averages tokens across devices):
        # its own logged loss (every step: --logging_steps=1) is the one to report.
        prefer_log = self.spec_form == "hf" and len(self.logged_losses) >= len(self.losses) // 2 > 0
        losses = self.logged_losses if prefer_log or not self.losses else self.losses
        val = {**self.val, **self.reported}
        payload: dict = {}
        if job.evaluate:
            payload = _validation(val)
        emit("result", rank=self.rank, per_device_batch=job.per_device_batch, world_size=self.world,
             accumulation_steps=job.accumulation_steps, global_batch=global_batch, steps=self.steps_done,
             peak_bytes=peak.get("peak_bytes"), measured_by=peak.get("how"), breakdown=peak.get("breakdown"),
             step_seconds=step_seconds, data_seconds=statistics.median(self.data_seconds) if self.data_seconds else 0,
             throughput=global_batch / step_seconds if step_seconds else None,
             train_seconds=sum(self.step_seconds) + sum(self.data_seconds),
             losses=losses if self.rank == 0 else None, final_loss=losses[-1] if losses else None,
             loss_source=("none seen" if not losses else "the script's logged loss" if losses is self.logged_losses
                          else "the loss the script back-propagates"),
             lr=job.lr, warmup_steps=job.warmup_steps, precision=job.precision, budget=self.budget, noise=None,
             evals=([{"step": self.steps_done, "train_seconds": sum(self.step_seconds) + sum(self.data_seconds),
                      **payload}] if (payload and self.rank == 0) else None),
             seen=self.seen(), **payload)

    def script_ended(self):
        if self.steps_done == 0:
            self.fail("NoOptimizerStep",
                      "the script ended without stepping an optimizer: the advisor counts training steps through "
                      "torch.optim's step hooks, so a script that never calls optimizer.step() (or ends before "
                      "training, e.g. on an argument it did not expect) cannot be measured")
        if self.job.kind in ("look", "probe"):
            self.fail("ScriptEndedEarly",
                      f"the script ended after {self.steps_done} optimizer step(s); the advisor asked for "
                      f"{self.stop_after}")
        self.emit_result()

    def fail(self, error: str, message: str):
        emit("error", rank=self.rank, error=error, message=message, traceback=[])
        _leave(1)


def _validation(val: dict) -> dict:
    """The eval fields worker_main's result carries, from the metrics the script printed or reported."""
    if not val:
        return {"ranking": {"metric": "loss", "higher_is_better": False,
                            "reason": "the script printed no validation metric (nor called advisor.report): the "
                                      "sweep ranks by training loss"}}
    metrics = {k: v for k, v in val.items() if k != "val_loss"}
    out: dict = {"val_loss": val.get("val_loss"), "val_metrics": metrics}
    accuracy = next((k for k in metrics if "acc" in k), None)
    if accuracy:
        out.update(val_metric=metrics[accuracy], val_metric_name=accuracy, higher_is_better=True,
                   ranking={"metric": accuracy, "higher_is_better": True, "reason": "the script's log reports it"})
    else:
        out["ranking"] = {"metric": "loss", "higher_is_better": False,
                          "reason": "the script's log reports a validation loss and no accuracy"}
    return out


def _longest_first_flags() -> list[str]:
    """The installed Trainer's flag for LengthGroupedSampler, which puts the longest batch first: transformers 5
    spells it --train_sampling_strategy group_by_length, 4.x --group_by_length."""
    import dataclasses

    try:
        from transformers import TrainingArguments
    except ImportError:
        return []
    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    if "train_sampling_strategy" in names:
        return ["--train_sampling_strategy=group_by_length"]
    return ["--group_by_length"] if "group_by_length" in names else []


def _longest_sample(dataset) -> dict | None:
    """The longest sample of a sized, indexable data set (elements of its largest tensor or longest list), as
    the Workload probes measure them; None where samples cannot be read by index."""
    from .batches import SCAN_LIMIT, sample_size

    try:
        total = len(dataset)
        step = max(1, total // SCAN_LIMIT)
        sizes = [int(sample_size(dataset[i])) for i in range(0, total, step)]
    except Exception:  # noqa: BLE001 - an iterable or unusual data set: the recipe says it was not measured
        return None
    if not sizes:
        return None
    return {"longest": max(sizes), "median": int(statistics.median(sizes)), "measured": len(sizes), "of": total}


def _has_batchnorm(module) -> bool:
    import torch

    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in module.modules())


_MONITOR: ShimMonitor | None = None


def report(**metrics: float) -> None:
    """``advisor.report(val_accuracy=0.91)``: a validation metric for the advisor (a no-op outside a run)."""
    if _MONITOR is None:
        return
    for name, value in metrics.items():
        key = name if name.startswith("val") else f"val_{name}"
        _MONITOR.reported[key] = float(value)


def _leave(code: int) -> None:
    if code == 1 and int(os.environ.get("RANK", 0)):
        # Every rank usually fails the same way: rank 0 reports first, so that torchrun's SIGTERM to it, sent
        # when another rank exits, does not read as the cause.
        time.sleep(10.0)  # generous: on a loaded host rank 0 can take seconds to write its report
    try:
        import torch.distributed as dist

        if code == 0 and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - leaving anyway
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _heartbeat_through_extension_builds() -> None:
    """A JIT build of a torch extension (DeepSpeed builds its ops at the script's first init_distributed or
    initialize) prints nothing for minutes: send heartbeats meanwhile, as the DeepSpeed worker does, so the idle
    timeout does not kill the build halfway (which would leave a lock that hangs every later DeepSpeed start)."""
    from torch.utils import cpp_extension

    from .extensions import heartbeat

    build = cpp_extension._jit_compile

    def built_with_heartbeats(name, *args, **kwargs):
        with heartbeat(f"building the torch extension {name}"):
            return build(name, *args, **kwargs)

    cpp_extension._jit_compile = built_with_heartbeats


def main(argv: list[str] | None = None) -> None:
    global _MONITOR
    if __name__ == "__main__":  # `python -m advisor.shim`: the script's `import advisor.shim` must find this copy
        sys.modules["advisor.shim"] = sys.modules[__name__]
    parser = argparse.ArgumentParser(description="batch-advisor's script shim (launched by the engine)")
    parser.add_argument("--job", required=True)
    # What the launcher adds for the script itself (the deepspeed launcher's --local_rank=N) goes on to it, in
    # front of its own arguments, as `deepspeed train.py ARGS` would hand it over.
    options, launcher_args = parser.parse_known_args(argv)
    job = TrialJob.from_json(Path(options.job).read_text())
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    code = 0
    try:
        import torch

        from .device import cap_memory, worker_device
        from .oom import is_oom_exception

        device, _ = worker_device(job.device)
        spec = ScriptSpec.from_dict(job.extra["script"])
        # A Trainer's --output_dir for the advisor's runs: a temporary folder, never the user's own
        scratch = Path(tempfile.gettempdir()) / "advisor-scratch" / os.environ.get("BATCH_ADVISOR_ENGINE_PID", "run")
        run = RunValues(per_device=job.per_device_batch, accumulation=job.accumulation_steps, steps=job.steps,
                        # the look run keeps a Trainer script's own LR and warmup, to read them
                        lr=None if job.kind == "look" and spec.form == "hf" else job.lr,
                        warmup=None if job.kind == "look" and spec.form == "hf" else job.warmup_steps,
                        precision=job.precision,
                        evaluate=job.evaluate, output_dir=str(scratch), on_cpu=device.type == "cpu",
                        longest_first=_longest_first_flags() if job.kind == "probe" and spec.form == "hf" else [])
        script_argv, _ = script_arguments(spec, run)
        emit("started", rank=rank, pid=os.getpid(), world_size=world, device=str(device), argv=script_argv)
        if device.type == "cuda" and job.memory_budget_bytes and job.kind != "look":
            monitor_budget = cap_memory(device, job.memory_budget_bytes)
        else:
            monitor_budget = None
        monitor = _MONITOR = ShimMonitor(job, rank, world, device)
        if monitor_budget:
            monitor.budget = monitor_budget
        monitor.wrap_backward()
        monitor.wrap_loader()
        _heartbeat_through_extension_builds()
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        register_module_forward_pre_hook(monitor.forward_pre)
        register_module_forward_hook(monitor.forward_post, with_kwargs=True)
        register_optimizer_step_pre_hook(monitor.step_pre)
        register_optimizer_step_post_hook(monitor.step_post)
        sys.stdout = _LogTee(sys.stdout, monitor.read_line)
        sys.stderr = _LogTee(sys.stderr, monitor.read_line)
        script = str(Path(job.workdir) / spec.path)
        sys.argv = [script, *launcher_args, *script_argv]
        sys.path.insert(0, str(Path(script).parent))
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
        monitor.script_ended()
    except EOFError as exc:
        emit("error", rank=rank, error="AsksForInput",
             message="the script asked for input (it read end-of-file: the advisor runs it with stdin closed, "
                     "without a terminal). Pass the answer as an argument or an environment variable, or set "
                     f"the environment the prompt stands for (e.g. WANDB_MODE=disabled); it said: {exc}",
             traceback=[])
        code = 1
    except BaseException as exc:  # noqa: BLE001 - the engine needs to hear about every failure
        try:
            oom = is_oom_exception(exc)
        except Exception:  # noqa: BLE001
            oom = False
        if oom:
            kind, payload = ("probe", {"status": "oom"}) if job.kind == "probe" else ("oom", {})
            emit(kind, rank=rank, batch=job.per_device_batch, message=first_line(exc),
                 budget=_MONITOR.budget if _MONITOR else {}, **payload)
            code = OOM_EXIT_CODE
        else:
            tb = traceback.format_exc().strip().splitlines()
            emit("error", rank=rank, error=type(exc).__name__, message=str(exc)[:1000], traceback=tb[-12:])
            code = 1
    _leave(code)


if __name__ == "__main__":
    main()
