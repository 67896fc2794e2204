"""The worker: WorkerStrategy's defaults (one plain PyTorch process on the job's device), with the
adapter's `threads` option applied."""

from advisor.worker import WorkerStrategy, worker_main


class SingleProcessStrategy(WorkerStrategy):
    def setup(self, job):
        import torch

        super().setup(job)
        torch.set_num_threads(int(job.extra.get("adapter_options", {}).get("threads", 1)))

    def recipe_extras(self) -> dict:
        import torch

        return {"threads_ran": torch.get_num_threads()}


if __name__ == "__main__":
    worker_main(SingleProcessStrategy())
