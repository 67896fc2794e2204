"""Streaming training data: an ``IterableDataset`` read in batches, each rank its own share.

The rule (docs/your-training.md, "Your own model"): by default the advisor splits the stream itself. Rank ``r`` of ``W``
keeps samples ``r, r + W, r + 2W, ...`` of what the dataset yields, and with ``K`` DataLoader worker
processes worker ``k`` keeps every ``K``-th of those (from ``r + kW``), so no sample is read twice in one
pass (each worker batches its own samples: up to ``K`` partial batches a pass are dropped). A dataset
that already splits itself (its ``__iter__`` reads ``torch.distributed.get_rank()`` and
``torch.utils.data.get_worker_info()``, as ``datasets.distributed.split_dataset_by_node`` or webdataset's
node splitters do) says ``stream_shards_itself=True`` and is read as it yields. The length of an epoch is
the workload's stated ``train_size``: a stream cannot be counted without reading it all. When a rank's
share ends, the next pass starts (``set_epoch(n)`` first, when the dataset has it, so it can reshuffle).
torch is imported inside the functions.
"""

from __future__ import annotations

import itertools

from .errors import WorkloadError


def rank_share(dataset, rank: int, world: int):
    """The part of ``dataset``'s stream that rank ``rank`` of ``world`` reads (see the module's rule)."""
    from torch.utils.data import IterableDataset, get_worker_info

    class RankShare(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
            return itertools.islice(iter(dataset), rank + world * worker, None, world * workers)

        def set_epoch(self, epoch: int) -> None:
            if hasattr(dataset, "set_epoch"):
                dataset.set_epoch(epoch)

    return RankShare()


class StreamBatches:
    """Endless batches from a DataLoader over a stream: a new pass (a new epoch) when one ends."""

    def __init__(self, loader, name: str, rank: int, batch: int):
        self.loader, self.name, self.rank, self.batch = loader, name, rank, batch
        self.epoch = 0
        self._batches = None

    def __iter__(self):
        return self

    def __next__(self):
        fresh = self._batches is None
        if fresh:
            self._start_pass()
        try:
            return next(self._batches)
        except StopIteration:
            if fresh:  # a whole pass gave not one batch: another pass would not either
                raise WorkloadError(
                    f"The workload {self.name!r}'s training stream gave rank {self.rank} fewer than {self.batch} "
                    "samples in a whole pass: it is shorter than one batch per rank (give more data, or check "
                    "that a dataset with stream_shards_itself=True does not leave a rank empty).") from None
            self._batches = None
            self.epoch += 1
            return next(self)

    def _start_pass(self) -> None:
        dataset = self.loader.dataset
        if hasattr(dataset, "set_epoch"):
            dataset.set_epoch(self.epoch)
        self._batches = iter(self.loader)

    def close(self) -> None:
        """Stop the loader's worker processes now (see BatchStream.close)."""
        shutdown = getattr(self._batches, "_shutdown_workers", None)
        if shutdown:
            shutdown()
        self._batches = None


def stream_loader(dataset, batch: int, rank: int, world: int, shards_itself: bool, settings: dict, seed: int):
    """A DataLoader of whole batches of ``batch`` samples from this rank's share of the stream."""
    import torch
    from torch.utils.data import DataLoader

    source = dataset if shards_itself else rank_share(dataset, rank, world)
    return DataLoader(source, batch_size=batch, drop_last=True, num_workers=settings["num_workers"],
                      pin_memory=settings["pin_memory"], collate_fn=settings["collate_fn"],
                      generator=torch.Generator().manual_seed(seed))
