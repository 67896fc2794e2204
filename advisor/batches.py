"""Batches of any nesting: tuples, lists, dicts, named tuples, dataclasses and ``ModelOutput``-like mappings.

One walker (``map_tensors``) moves, casts and measures them, so the worker, the adapters and
``advisor workloads --check`` agree on what a batch holds. torch is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable


def steps_per_epoch(train_size: int, global_batch: int) -> int:
    """Optimizer steps in one epoch, by the sampler's own arithmetic (the worker's ``_IndexBatches``, as
    DistributedSampler with drop_last): each of W ranks takes train_size // W samples and cuts them into whole
    per-device batches, and every ``accumulation`` of those make a step. floor(floor(n / W) / b) / a floors to
    n // (W x b x a) = n // global batch: a partial batch is dropped, never rounded up. At least 1 (data smaller than
    one global batch is sampled with replacement, one step a pass)."""
    return max(1, train_size // max(1, global_batch))


def _is_tensor(obj) -> bool:
    return hasattr(obj, "numel") and hasattr(obj, "element_size") and hasattr(obj, "shape")


def map_tensors(fn: Callable[[Any], Any], obj):
    """``obj`` with ``fn`` applied to every tensor inside it; containers keep their type where they can."""
    if _is_tensor(obj):
        return fn(obj)
    if isinstance(obj, Mapping):
        mapped = {k: map_tensors(fn, v) for k, v in obj.items()}
        try:
            return type(obj)(mapped)  # dict, OrderedDict, ModelOutput, BatchEncoding (UserDict is no Mapping base)
        except Exception:  # noqa: BLE001 - a mapping type that cannot be rebuilt from a dict
            return mapped
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: map_tensors(fn, getattr(obj, f.name))
                                           for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(map_tensors(fn, o) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(fn, o) for o in obj)
    if hasattr(obj, "data") and isinstance(getattr(obj, "data"), Mapping):  # UserDict, e.g. HF BatchEncoding
        return type(obj)(map_tensors(fn, obj.data)) if _rebuildable(obj) else map_tensors(fn, dict(obj.data))
    return obj


def _rebuildable(obj) -> bool:
    try:
        type(obj)({})
        return True
    except Exception:  # noqa: BLE001
        return False


def tensors_in(obj) -> list:
    """Every tensor in a (nested) batch, in order."""
    found: list = []
    map_tensors(lambda t: found.append(t) or t, obj)
    return found


def tensor_bytes(obj) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_in(obj))


def batch_length(batch) -> int:
    """Samples in a collated batch: the leading size of its first tensor with one."""
    for tensor in tensors_in(batch):
        if tensor.dim() > 0:
            return int(tensor.shape[0])
    raise ValueError(f"cannot tell how many samples a {type(batch).__name__} batch holds: it has no tensor with a "
                     "batch dimension")


def sample_size(sample) -> int:
    """How large one raw sample is: its largest tensor's elements, or its longest list of numbers (token ids
    before a collate): a sequence's length, an image's pixels. The longest samples by this measure are what
    a padding collate pads a batch to."""
    return max([t.numel() for t in tensors_in(sample)] + [_longest_list(sample)])


def _longest_list(obj) -> int:
    if isinstance(obj, Mapping):
        return max([_longest_list(v) for v in obj.values()] + [0])
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in obj):
            return len(obj)
        return max([_longest_list(v) for v in obj] + [0])
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return max([_longest_list(getattr(obj, f.name)) for f in dataclasses.fields(obj)] + [0])
    return 0


def describe(batch, limit: int = 8) -> str:
    """The structure and shapes of a batch, e.g. ``dict(input_ids: int64[2, 17], labels: int64[2, 17])``."""
    def one(obj, depth=0) -> str:
        if _is_tensor(obj):
            dtype = str(getattr(obj, "dtype", "")).replace("torch.", "")
            return f"{dtype}[{', '.join(map(str, obj.shape))}]"
        if depth > 3:
            return "..."
        if isinstance(obj, Mapping) or (hasattr(obj, "data") and isinstance(getattr(obj, "data"), Mapping)):
            items = list((obj if isinstance(obj, Mapping) else obj.data).items())
            inner = ", ".join(f"{k}: {one(v, depth + 1)}" for k, v in items[:limit])
            return f"{type(obj).__name__}({inner}{', ...' if len(items) > limit else ''})"
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            inner = ", ".join(f"{f.name}: {one(getattr(obj, f.name), depth + 1)}" for f in dataclasses.fields(obj))
            return f"{type(obj).__name__}({inner})"
        if isinstance(obj, (tuple, list)):
            inner = ", ".join(one(v, depth + 1) for v in list(obj)[:limit])
            return f"{type(obj).__name__}({inner}{', ...' if len(obj) > limit else ''})"
        return type(obj).__name__
    return one(batch)


def shapes(batch) -> dict[str, list[int]]:
    """Every tensor's shape by its path in the batch (``input_ids``, ``0``, ``pixel_values``): for the recipe."""
    found: dict[str, list[int]] = {}

    def walk(obj, path):
        if _is_tensor(obj):
            found[path or "batch"] = list(obj.shape)
        elif isinstance(obj, Mapping) or (hasattr(obj, "data") and isinstance(getattr(obj, "data"), Mapping)):
            for k, v in (obj if isinstance(obj, Mapping) else obj.data).items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name), f"{path}.{f.name}" if path else f.name)
        elif isinstance(obj, (tuple, list)):
            names = getattr(obj, "_fields", None) or range(len(obj))  # a named tuple's fields by name
            for i, v in zip(names, obj):
                walk(v, f"{path}.{i}" if path else str(i))

    walk(batch, "")
    return found


def output_loss(outputs):
    """The loss a model computed itself (a Hugging Face ``ModelOutput.loss``, a dict's ``"loss"``), or None."""
    loss = getattr(outputs, "loss", None)
    if loss is None and isinstance(outputs, Mapping):
        loss = outputs.get("loss")
    return loss


def output_logits(outputs):
    """The prediction tensor of a model's outputs: the tensor itself, ``.logits``/``["logits"]``, or None."""
    if _is_tensor(outputs):
        return outputs
    logits = getattr(outputs, "logits", None)
    if logits is None and isinstance(outputs, Mapping):
        logits = outputs.get("logits")
    if logits is None and isinstance(outputs, (tuple, list)) and outputs and _is_tensor(outputs[0]):
        logits = outputs[0]
    return logits


SCAN_LIMIT = 20_000  # samples measured to find the longest (evenly spread over larger data sets)
KEEP_LONGEST = 4096  # indices handed to the probes; a larger probe batch repeats the longest ones


@dataclass
class ProbeSelection:
    """Which samples the memory probes feed: ``indices`` (longest first) or, when empty, ordinary random
    batches (every sample the same size) or the workload's own ``probe_batch``; ``reason`` says which."""

    kind: str  # "longest" | "uniform" | "probe_batch" | "stream"
    indices: list[int]
    reason: str
    longest: int | None = None
    median: int | None = None


def select_probe_samples(workload, limit: int = SCAN_LIMIT, keep: int = KEEP_LONGEST) -> ProbeSelection:
    """The worst case for memory: the longest training samples, found by measuring them once here.

    Padding collates pad to the longest sample of a batch, and unpadded models grow with every sample's
    length, so a batch of the longest samples is what an epoch's worst step holds; random batches would
    put the ceiling below it.
    """
    import statistics

    if workload.probe_batch is not None:
        return ProbeSelection("probe_batch", [], "the workload's probe_batch(n): the largest batch of n samples "
                                                 "it states")
    data = workload.train_data
    if is_iterable_dataset(data):
        return ProbeSelection("stream", [], "batches as the stream yields them (an IterableDataset cannot be "
                                            "scanned for its longest samples: give probe_batch(n) for a worst case)")
    tensors = getattr(data, "tensors", None)
    if tensors is not None and workload.collate_fn is None:  # a TensorDataset: every sample the same shape
        return ProbeSelection("uniform", [], "random samples: every sample has the same shape")
    total = len(data)
    step = max(1, total // limit)
    scanned = range(0, total, step)
    measure = workload.sample_length or sample_size
    sizes = {i: int(measure(data[i])) for i in scanned}
    longest, median = max(sizes.values()), int(statistics.median(sizes.values()))
    if longest == min(sizes.values()):
        return ProbeSelection("uniform", [], f"random samples: every sample measured has the same size ({longest})",
                              longest, median)
    order = sorted(sizes, key=lambda i: (-sizes[i], i))[:keep]
    by = "sample_length" if workload.sample_length else "elements of the largest tensor per sample"
    where = f"all {total}" if step == 1 else f"{len(sizes)} of {total} (every {step}th)"
    return ProbeSelection("longest", order,
                          f"the longest training samples ({by}: longest {longest}, median {median}; measured "
                          f"{where}), collated by the workload's collate_fn" if workload.collate_fn else
                          f"the longest training samples ({by}: longest {longest}, median {median}; measured "
                          f"{where})", longest, median)


def is_iterable_dataset(data) -> bool:
    try:
        from torch.utils.data import IterableDataset
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return isinstance(data, IterableDataset)
