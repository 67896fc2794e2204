"""What experience says about batch sizes per task (DOMAIN sections 2 and 3).

Per-device starting values get a full curve quickly; global targets are what the
optimizer should see. Values not given in the brief are marked as the advisor's
own defaults so the recipe can say where a number came from.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskProfile:
    name: str
    label: str
    start_per_device: int
    global_range: tuple[int, int] | None
    min_global: int
    source: str
    note: str = ""


TASKS: dict[str, TaskProfile] = {
    p.name: p
    for p in (
        TaskProfile("image-classification", "image classification", 64, (256, 1024), 16,
                    "experience: 64 per device; ImageNet-style global 256-1024"),
        TaskProfile("object-detection", "object detection", 16, (16, 64), 16,
                    "experience: 16 per device; global 16-64",
                    "Detection is among the most sensitive to BatchNorm on small micro-batches."),
        TaskProfile("semantic-segmentation", "semantic segmentation", 8, (16, 64), 16,
                    "experience: 8 per device; global range is the advisor's default",
                    "Segmentation is among the most sensitive to BatchNorm on small micro-batches."),
        TaskProfile("nlp-classification", "NLP classification", 16, (32, 256), 8,
                    "experience: 16 per device; global range is the advisor's default"),
        TaskProfile("language-modeling", "generative / autoregressive LM", 2, (64, 512), 8,
                    "experience: 1-4 per device; global range is the advisor's default",
                    "Autoregressive LMs usually reach their global batch through many devices and accumulation."),
        TaskProfile("long-sequence-transformer", "Transformer with long sequences", 8, (32, 256), 8,
                    "experience: 8-16 per device; global range is the advisor's default"),
        TaskProfile("contrastive", "contrastive self-supervised (SimCLR, MoCo)", 256, (4096, 8192), 256,
                    "experience: SimCLR used global 4096-8192",
                    "Contrastive methods need very large batches; on small hardware use a MoCo-style "
                    "queue of negatives instead of a giant batch."),
        TaskProfile("regression", "regression / other", 32, None, 8,
                    "the advisor's default: experience gives no value for this task"),
    )
}

IMAGE_TASKS = {"image-classification", "object-detection", "semantic-segmentation", "contrastive"}
BN_SENSITIVE_TASKS = {"object-detection", "semantic-segmentation"}


def task_profile(name: str) -> TaskProfile:
    from .errors import AdvisorError

    try:
        return TASKS[name]
    except KeyError:
        raise AdvisorError(
            f"Unknown task {name!r}. Known tasks: {', '.join(sorted(TASKS))}. "
            "Set Workload.task to one of them (use 'regression' for anything else)."
        ) from None
