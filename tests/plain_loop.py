"""A plain training loop, outside the advisor's worker code: does an advised batch really hold?

Run as a fresh process: python tests/plain_loop.py WORKLOAD BATCH BUDGET_BYTES STEPS [longest]
With ``longest`` every step trains on the BATCH longest samples (the largest tensor of each), collated by the
workload's collate_fn and scored by its loss: the worst batch an epoch of variable-length data meets.
It loads the data, builds the model and the workload's optimizer, then limits the process's data
segment so that BUDGET_BYTES cover the model's tensors and everything training allocates from here on
(the probes' rule: the device budget holds tensors, not the interpreter), and trains STEPS steps at BATCH.
Exit 0 when every step ran, 75 on out-of-memory. The caller decides the environment (e.g. a
recipe's [launch.env]); this script sets none.
"""

import resource
import sys

import torch

from advisor.memory import data_segment_bytes  # reads /proc: the loop itself is plain torch


def main() -> int:
    spec, batch, budget, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    from advisor.workload import resolve_workload  # the user's workload definition only

    torch.set_num_threads(1)
    torch.manual_seed(0)
    workload = resolve_workload(spec)
    longest = len(sys.argv) > 5 and sys.argv[5] == "longest"
    if longest:
        data = workload.train_data
        length = [max(t.numel() for t in data[i].values()) for i in range(len(data))]
        top = sorted(range(len(data)), key=lambda i: -length[i])[:batch]
        worst = workload.collate_fn([data[i] for i in top])
    else:
        x_all, y_all = workload.train_data.tensors
    model = workload.build_model()
    optimizer = workload.make_optimizer(model.parameters(), workload.current_lr or 0.01)
    held = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    limit = data_segment_bytes() + budget - held
    resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    step = 0
    try:
        for step in range(steps):
            if longest:
                loss = workload.batch_loss(model, worst)
            else:
                idx = torch.randint(0, len(x_all), (batch,))
                loss = workload.loss_fn(model(x_all[idx]), y_all[idx])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    except RuntimeError as exc:
        if "allocate" in str(exc) or "primitive" in str(exc) or "memory" in str(exc):
            print(f"OOM at step {step}: {str(exc).splitlines()[0]}")
            return 75
        raise
    print(f"OK: {steps} steps at batch {batch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
