"""The worker: WorkerStrategy's defaults are one plain PyTorch process on the CPU."""

from advisor.worker import WorkerStrategy, worker_main

if __name__ == "__main__":
    worker_main(WorkerStrategy())
