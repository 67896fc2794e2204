"""A plain data-parallel training loop, outside the advisor: torch DDP on 2 gloo processes, nothing of the advisor's
worker, runner or sampler on the training path. bench/time_to_accuracy.py --loop plain trains its grid through it,
so that the advice is judged the way a user's own loop would run it.

What the loop takes from the workload definition: the model, the data, the loss function and the optimizer family
with its hyper-parameters (momentum, weight decay, betas), as a user's script would. Everything else is torch:
``DistributedSampler`` (shuffled per epoch, ``drop_last``), a ``DataLoader`` in the rank's own process, DDP without
SyncBatchNorm (each rank's BatchNorm sees its own micro-batch, as the advisor's DDP adapter trains), a linear LR
warmup, and validation of the ranked metric (accuracy) at evenly spaced checkpoints on each rank's share of the
validation set, summed across ranks.

A step's time is measured apart from its loader wait (both medians over steps 2.., like the worker's record), so the
bench's time to target (median step + median wait, times the crossing step) reads both loops alike.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class PlainRecord:
    """What bench/time_to_accuracy.py reads of a run (the fields it reads of the worker's TrialRecord)."""

    per_device: int
    steps: int
    lr: float
    warmup_steps: int
    status: str = "ok"
    step_seconds: float | None = None
    data_seconds: float | None = None
    val_metric: float | None = None
    evals: list[dict] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _optimizer(workload, params, lr: float):
    """The workload's optimizer family built with torch's own class (what a user's script constructs)."""
    import torch

    family = workload.optimizer.lower()
    if family == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=workload.momentum, weight_decay=workload.weight_decay)
    if family == "adam":
        return torch.optim.Adam(params, lr=lr, betas=workload.betas, eps=workload.eps,
                                weight_decay=workload.weight_decay)
    if family == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=workload.betas, eps=workload.eps,
                                 weight_decay=workload.weight_decay)
    return workload.make_optimizer(params, lr)  # LAMB / LARS: not in torch


def _validate(model, val_data, rank: int, world: int) -> float:
    """Accuracy over the whole validation set: each rank scores every world-th sample, the counts are summed."""
    import torch
    import torch.distributed as dist

    model.eval()
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        indices = list(range(rank, len(val_data), world))
        for start in range(0, len(indices), 256):
            x, y = torch.utils.data.default_collate([val_data[i] for i in indices[start:start + 256]])
            correct[0] += float((model(x).argmax(dim=-1) == y).sum())
            correct[1] += len(y)
    dist.all_reduce(correct)
    model.train()
    return float(correct[0] / correct[1])


def _rank_main(rank: int, world: int, port: int, job: dict, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    from advisor.workload import resolve_workload  # the user's workload definition, nothing else of the advisor

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(job["seed"])
    workload = resolve_workload(job["spec"])
    model = DistributedDataParallel(workload.build_model())
    lr, warmup, steps = job["lr"], job["warmup_steps"], job["steps"]
    optimizer = _optimizer(workload, model.parameters(), lr)
    sampler = DistributedSampler(workload.train_data, num_replicas=world, rank=rank, shuffle=True,
                                 seed=job["seed"], drop_last=True)
    loader = DataLoader(workload.train_data, batch_size=job["per_device"], sampler=sampler, drop_last=True)
    points = min(job["eval_points"], steps)
    eval_at = {round(steps * (i + 1) / points) for i in range(points)}
    step_seconds, data_seconds, evals, status = [], [], [], "ok"
    step, epoch, train_seconds = 0, 0, 0.0
    while step < steps and status == "ok":
        sampler.set_epoch(epoch)
        epoch += 1
        batches = iter(loader)
        while step < steps:
            began = time.perf_counter()
            try:
                x, y = next(batches)
            except StopIteration:
                break
            fetched = time.perf_counter()
            for group in optimizer.param_groups:
                group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
            loss = workload.loss_fn(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            # The parameters are the same on every rank after the all-reduced step, so every rank stops together.
            finite = bool(torch.stack([p.detach().sum() for p in model.parameters()]).isfinite().all())
            done = time.perf_counter()
            train_seconds += done - began
            if step >= 2:  # step 0 and 1 pay one-time costs
                step_seconds.append(done - fetched)
                data_seconds.append(fetched - began)
            step += 1
            if not finite:
                status = "non-finite loss"
                break
            if step in eval_at:
                evals.append({"step": step, "train_seconds": train_seconds,
                              "val_metric": _validate(model.module, workload.val_data, rank, world)})
    if rank == 0:
        Path(out).write_text(json.dumps({
            "status": status, "evals": evals, "val_metric": evals[-1]["val_metric"] if evals else None,
            "step_seconds": statistics.median(step_seconds) if step_seconds else None,
            "data_seconds": statistics.median(data_seconds) if data_seconds else None}))
    dist.destroy_process_group()


class PlainTrainer:
    """bench/time_to_accuracy.py's trainer with the plain loop: ``run`` has the product Trainer's signature."""

    def __init__(self, spec: str, world: int, schedule):
        self.spec, self.world, self.schedule = spec, world, schedule  # schedule(global batch) -> (lr, warmup)
        from advisor.workload import resolve_workload

        workload = resolve_workload(spec)
        sample = workload.train_data[0]
        if not (isinstance(sample, (tuple, list)) and len(sample) == 2 and workload.num_classes
                and workload.loss_fn is not None and workload.collate_fn is None):
            sys.exit(f"The plain loop trains (inputs, class) pairs with the workload's loss_fn and scores accuracy; "
                     f"{spec} is not such a workload (dict batches, its own collate or loss): run it with --loop "
                     "worker.")

    def run(self, per_device: int, steps: int, seed: int, eval_points: int) -> PlainRecord:
        import torch.multiprocessing as mp

        lr, warmup = self.schedule(per_device * self.world)
        record = PlainRecord(per_device, steps, lr, warmup)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "result.json")
            job = {"spec": self.spec, "per_device": per_device, "steps": steps, "lr": lr, "warmup_steps": warmup,
                   "seed": seed, "eval_points": eval_points}
            try:
                mp.start_processes(_rank_main, args=(self.world, _free_port(), job, out), nprocs=self.world,
                                   start_method="spawn")
            except Exception as exc:  # noqa: BLE001 -- a rank that died (out of memory, a crash) is a failed run
                record.status = f"failed: {str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else exc!r}"
                return record
            result = json.loads(Path(out).read_text())
        record.status, record.evals, record.val_metric = result["status"], result["evals"], result["val_metric"]
        record.step_seconds, record.data_seconds = result["step_seconds"], result["data_seconds"]
        return record

    def close(self) -> None: ...


if __name__ == "__main__":  # a smoke run: python bench/plain_ddp.py SPEC PER_DEVICE STEPS LR
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    spec, per_device, steps, lr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    print(PlainTrainer(spec, 2, lambda g: (lr, 0)).run(per_device, steps, 0, 4))
