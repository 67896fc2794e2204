"""`advisor workloads --check SPEC`: build a workload once, run one training and one evaluation step at
batch 2 in this process, and say what was found, or the one thing that is wrong and how to fix it.

Every failure is a ``WorkloadError`` (one paragraph, exit 2): the check exists so that a user's mistake
never first shows as a traceback from a worker in the middle of a plan.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import math
import traceback
from dataclasses import dataclass, field

from .errors import WorkloadError

CHECK_BATCH = 2


@dataclass
class WorkloadReport:
    """What the check found, as ``(label, value)`` rows in the order it found them."""

    spec: str
    rows: list[tuple[str, str]] = field(default_factory=list)
    workload: object = None

    def add(self, label: str, value) -> None:
        self.rows.append((label, str(value)))

    def text(self) -> str:
        width = max(len(label) for label, _ in self.rows)
        return "\n".join([f"Workload {self.spec}: OK"] + [f"  {label:<{width}}  {value}" for label, value in self.rows])


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename}:{last.lineno})"


def _fail(what: str, exc: BaseException, fix: str) -> WorkloadError:
    return WorkloadError(f"{what} raised {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                         f"{_where(exc)}. {fix}")


@contextlib.contextmanager
def _blamed(what: str, fix: str):
    """A failure of the user's code inside the block becomes one WorkloadError naming ``what`` and ``fix``."""
    try:
        yield
    except WorkloadError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code can raise anything
        raise _fail(what, exc, fix) from None


def check_workload(spec: str, batch_size: int = CHECK_BATCH) -> WorkloadReport:
    """The whole check; raises WorkloadError with the first problem found."""
    import torch
    from torch import nn

    from .batches import describe, select_probe_samples
    from .worker import _batch, _has_batchnorm
    from torch.utils.data import default_collate

    from .workload import check_scalar_loss, is_iterable_dataset, resolve_workload

    workload = resolve_workload(spec)  # import errors, a wrong return type and bad fields: one message each
    report = WorkloadReport(spec, workload=workload)
    name = workload.name
    report.add("name", f"{name} ({workload.task}" + (f", {workload.num_classes} classes)" if workload.num_classes
                                                      else ")"))
    if workload.description:
        report.add("description", workload.description)
    torch.manual_seed(0)
    try:
        model = workload.build_model()
    except Exception as exc:  # noqa: BLE001 - user code
        raise _fail(f"The workload {name!r}'s build_model()", exc, "Fix the model's construction.") from None
    if not isinstance(model, nn.Module):
        raise WorkloadError(f"The workload {name!r}'s build_model() returned {type(model).__name__}, not a "
                            "torch.nn.Module: return the model itself (build_model=MyModel or lambda: MyModel(...)).")
    report.add("parameters", f"{sum(p.numel() for p in model.parameters()):,}")
    report.add("BatchNorm", "yes (SyncBatchNorm or GroupNorm matter for small micro-batches)"
               if _has_batchnorm(model) else "no")

    data = workload.train_data
    streamed = is_iterable_dataset(data)
    try:
        samples = (list(itertools.islice(iter(data), batch_size)) if streamed else
                   [data[i] for i in range(min(batch_size, len(data)))])
    except Exception as exc:  # noqa: BLE001
        raise _fail(f"Reading the workload {name!r}'s " + ("first training samples" if streamed else "train_data[0]"),
                    exc, "Fix the dataset's " + ("__iter__." if streamed else "__getitem__.")) from None
    if not samples:
        raise WorkloadError(f"The workload {name!r}'s training stream yielded no sample: check its __iter__.")
    sharding = ("splits itself by rank" if workload.stream_shards_itself else
                "each rank keeps every world-size-th sample")
    report.add("training data", (f"a stream ({type(data).__name__}), train_size {workload.train_size} stated; "
                                 f"{sharding}" if streamed else f"{len(data)} samples ({type(data).__name__})")
               + f"; validation {len(workload.val_data)}")
    if not workload.has_own_loss and workload.collate_fn is None:
        first = samples[0]
        from collections.abc import Mapping

        if not (isinstance(first, Mapping) or (isinstance(first, (tuple, list)) and len(first) == 2)):
            shape = f" of {len(first)} items" if isinstance(first, (tuple, list)) else ""
            raise WorkloadError(
                f"The workload {name!r}'s train_data[0] is a {type(first).__name__}{shape}: the default loss needs "
                "(input, target) pairs or dicts of model keyword arguments. Return (x, y) from __getitem__, or "
                "give compute_loss(model, batch) for your batch structure.")
    try:
        batch = ((workload.collate_fn or default_collate)(samples) if streamed else
                 _batch(data, torch.arange(len(samples)), workload.collate_fn))
    except Exception as exc:  # noqa: BLE001
        ragged = "equal size" in str(exc) or "stack expects" in str(exc)
        raise _fail(f"Collating {len(samples)} samples of the workload {name!r}" +
                    (" with its collate_fn" if workload.collate_fn else " with torch's default_collate"), exc,
                    "The samples differ in size: give collate_fn that pads them (e.g. "
                    "transformers.DataCollatorWithPadding, or your own)." if ragged else
                    "Fix collate_fn, or give one that turns a list of samples into a batch.") from None
    report.add("batch", describe(batch))
    selection = select_probe_samples(workload)
    report.add("memory probes feed", selection.reason)

    lr = workload.current_lr or 1e-3
    with _blamed(f"Building the workload {name!r}'s optimizer", "Fix optimizer_factory or the optimizer settings."):
        optimizer = workload.optimizer_for(model, lr)
    report.add("optimizer", f"{workload.optimizer}: {type(optimizer).__module__}.{type(optimizer).__qualname__}, "
                            f"{len(optimizer.param_groups)} param group(s)")
    model.train()
    with _blamed(f"The training step's loss of the workload {name!r} (batch {describe(batch)})",
                 "Check the model's forward and the loss against this batch structure "
                 "(compute_loss(model, batch) can take any structure)."):
        loss = workload.batch_loss(model, batch)
    check_scalar_loss(loss, name)
    value = float(loss.detach())
    if not math.isfinite(value):
        raise WorkloadError(f"The workload {name!r}'s loss is {value} at step 1, before any update: the "
                            "model's initial outputs or the data hold NaN/inf (check inputs, normalization, "
                            "log of 0, and the labels' range against num_classes).")
    try:
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    except Exception as exc:  # noqa: BLE001
        raise _fail(f"The backward pass / optimizer step of the workload {name!r}", exc,
                    "A loss detached from the graph (e.g. built from .item()) or frozen parameters cause this.") \
            from None
    report.add("training step", f"loss {value:.4f} at batch {len(samples)} (finite, scalar)")

    val = workload.val_data
    with _blamed(f"The evaluation step of the workload {name!r}", "Fix evaluate(model, batch) or the validation data."):
        val_batch = _batch(val, torch.arange(min(batch_size, len(val))), workload.collate_fn)
        model.eval()
        with torch.no_grad():
            val_loss, metrics = workload.eval_batch(model, val_batch)
    ranked, higher, why = workload.ranking_metric(metrics)  # a named metric that was not computed: an error
    shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))
    report.add("evaluation step", f"val loss {val_loss:.4f}" + (f"; {shown}" if shown else ""))
    report.add("sweep ranks by", f"{'validation loss' if ranked == 'loss' else ranked} "
                                 f"({'higher' if higher else 'lower'} is better: {why})")
    today = [f"global batch {workload.current_batch_size}" if workload.current_batch_size else
             "no current_batch_size (pass --base-batch)",
             f"LR {workload.current_lr:g}" if workload.current_lr else "no current_lr (pass --base-lr)",
             f"warmup {workload.current_warmup_steps} steps" if workload.current_warmup_steps is not None else
             "warmup not stated (the advisor's default)"]
    report.add("today's run", ", ".join(today))
    return report


@dataclass(frozen=True)
class WorkloadSummary:
    """What a front end shows of a checked workload (the Workload itself holds code and cannot cross processes)."""

    name: str
    task: str
    num_classes: int | None
    optimizer: str
    current_lr: float | None
    current_batch_size: int | None
    train_length: int
    val_length: int

    @classmethod
    def of(cls, workload) -> "WorkloadSummary":
        return cls(workload.name, workload.task, workload.num_classes, workload.optimizer, workload.current_lr,
                   workload.current_batch_size, workload.train_length, len(workload.val_data))


_RUNNING_CHECKS: set = set()  # the check processes alive now: killed at exit if their thread did not get to it


def _kill_running_checks() -> None:
    from .launch import _kill_group

    for proc in list(_RUNNING_CHECKS):
        _kill_group(proc)


def check_in_process(spec: str, cancelled=lambda: False, timeout_s: float = 600.0) -> WorkloadSummary:
    """``check_workload`` in a child process, so that a workload that tokenises or downloads can be stopped:
    ``cancelled()`` is polled and, once true, the child's whole process group is killed (CancelledError).
    Raises WorkloadError with the check's own message when the workload is broken."""
    import json
    import subprocess
    import sys
    import time

    from .errors import CancelledError
    from .launch import _kill_group

    proc = subprocess.Popen([sys.executable, "-m", "advisor.workload_check", spec], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, errors="replace",
                            start_new_session=True)
    if not _RUNNING_CHECKS:
        atexit.unregister(_kill_running_checks)
        atexit.register(_kill_running_checks)  # a front end that exits while a check runs leaves no orphan
    _RUNNING_CHECKS.add(proc)
    began = time.monotonic()
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if cancelled():
                    _kill_group(proc)
                    raise CancelledError(f"The check of the workload {spec!r} was cancelled; its process was "
                                         "stopped.") from None
                if time.monotonic() - began > timeout_s:
                    _kill_group(proc)
                    raise WorkloadError(f"The check of the workload {spec!r} did not finish within {timeout_s:.0f} "
                                        "s (one training and one evaluation step at batch 2). Make building the "
                                        "model and the data faster, or check it with `advisor workloads --check`."
                                        ) from None
    finally:
        if proc.poll() is None:  # an exception in this thread (KeyboardInterrupt): never leave an orphan
            _kill_group(proc)
        _RUNNING_CHECKS.discard(proc)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    answer = json.loads(lines[-1]) if lines else None
    if not answer:  # the child died without answering (a crash in native code, a kill)
        last = (err.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise WorkloadError(f"The check of the workload {spec!r} ended without an answer ({last}). Run "
                            f"`advisor workloads --check {spec}` in a terminal to see the whole output.")
    if answer.get("error"):
        raise WorkloadError(answer["error"])
    return WorkloadSummary(**answer["summary"])


def _main(argv: list[str]) -> int:
    """The child side of ``check_in_process``: one JSON line on stdout, the workload's own output on stderr."""
    import json
    import sys
    from dataclasses import asdict

    from .errors import AdvisorError

    real_stdout, sys.stdout = sys.stdout, sys.stderr  # the user's prints must not break the answer line
    try:
        answer = {"summary": asdict(WorkloadSummary.of(check_workload(argv[0]).workload))}
    except AdvisorError as exc:
        answer = {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - user code can raise anything, even past the engine's checks
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    real_stdout.write(json.dumps(answer) + "\n")
    real_stdout.flush()
    return 0 if "summary" in answer else 2


if __name__ == "__main__":
    import sys

    raise SystemExit(_main(sys.argv[1:]))
