"""`advisor init`: commented workload files to fill in, one per kind of training code.

Each template is a complete workload file: the plain one runs as written (a toy model on made-up data)
so that `advisor workloads --check` passes before the first edit; the others need their framework
installed. The task list is written from advisor.tasks, so the file shows the table the advisor uses.
"""

from __future__ import annotations

from .tasks import TASKS

TEMPLATE_NAMES = ("plain", "transformers", "timm", "lightning")

_HEADER = '''"""{title}

Fill in each TODO, then:
    advisor workloads --check {{path}}:workload      # one training and one evaluation step at batch 2
    advisor plan --workload {{path}}:workload --nproc 2 --device-memory 8GiB --out recipe.toml

The advisor builds this workload again in every worker process: keep everything inside functions,
with no live objects (open files, CUDA tensors, process groups) created at import time.
{more}"""
'''

_TODAY = '''        # TODAY'S RUN: the base every scaled learning rate and warmup comes from.
        current_batch_size={batch},  # TODO the GLOBAL batch you train with today (per device x GPUs x accumulation)
        current_lr={lr},  # TODO the learning rate you use at that batch
        current_warmup_steps=None,  # TODO today's warmup in optimizer steps (None: the advisor's default)
        epochs=None,  # TODO the length of the run you plan (epochs), so warmup never fills too much of it
'''


def task_table() -> str:
    """The task rows as comment lines: name, per-device start, global range."""
    lines = ["# task: which row of the advisor's table sets the starting batch and the global target:"]
    for profile in TASKS.values():
        rng = f"global {profile.global_range[0]}-{profile.global_range[1]}" if profile.global_range else "no global target"
        lines.append(f"#   {profile.name:<26} start {profile.start_per_device:>4} per device, {rng}")
    return "\n".join(lines)


PLAIN = _HEADER.format(title="A plain PyTorch workload for batch-advisor.", more="") + '''
import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload


def build_model() -> nn.Module:
    # TODO your model, freshly initialised (the advisor trains it for a few steps per trial)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 128), nn.ReLU(), nn.Linear(128, 10))


def datasets():
    # TODO your datasets: map-style (__len__/__getitem__) yielding (input, target) or dicts; or an
    # IterableDataset with train_size= stated. This toy data is made up: noise around one faint pattern per
    # class, so that a plan of the template has something to learn (and validates) before your first edit.
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (1024,), generator=g)
    x = torch.randn(1024, 3, 16, 16, generator=g) + 0.2 * torch.randn(10, 3, 16, 16, generator=g)[y]
    return TensorDataset(x[:896], y[:896]), TensorDataset(x[896:], y[896:])


def workload() -> Workload:
    train, val = datasets()
    return Workload(
        name="my-model",
        build_model=build_model,
        train_data=train,
        val_data=val,
        collate_fn=None,  # TODO a padding collate for samples of different sizes (None: torch's default_collate)
        # LOSS: loss_fn(outputs, targets); or compute_loss(model, batch) -> scalar for any batch structure;
        # or neither, when the model returns its own .loss (Hugging Face models given labels).
        loss_fn=nn.functional.cross_entropy,
        # METRIC: with num_classes and (N, num_classes) outputs the sweep ranks by accuracy; else give
        # evaluate(model, batch) -> {"f1": ...} and metric="f1" (and higher_is_better when the name says nothing).
        num_classes=10,
        evaluate=None,
        metric=None,
{tasks}
        task="image-classification",  # TODO
        # OPTIMIZER: the family (sgd, adam, adamw, lamb, lars, adagrad, rmsprop) sets the LR scaling rule;
        # optimizer_factory=lambda model, lr: torch.optim.AdamW(groups, lr=lr) builds your own param groups.
        optimizer="sgd",
        momentum=0.9,
        weight_decay=0.0,
''' + _TODAY.format(batch=64, lr=0.05) + '''    )
'''

TRANSFORMERS = _HEADER.format(title="A Hugging Face transformers workload for batch-advisor.", more='''
Two shapes, pick one (examples/hf_text.py is this file filled in):
    workload()  a plain Workload: model, datasets, collator, loss and metric spelled out;
    trainer()   your transformers.Trainer, converted by advisor.integrations.transformers.from_trainer:
                its collator, compute_loss, TrainingArguments' optimizer settings, bf16/fp16, gradient
                checkpointing, compute_metrics and metric_for_best_model.
                advisor plan --workload {path}:trainer --nproc 2 --device-memory 8GiB --out recipe.toml
''') + '''
import torch
from torch.utils.data import Dataset

from advisor import Workload

MAX_LENGTH = 128  # TODO your tokenizer's max_length: the longest sample sets the memory ceiling
NUM_LABELS = 2  # TODO


def build_model():
    from transformers import AutoConfig, AutoModelForSequenceClassification

    # TODO from_pretrained("your-checkpoint") for fine-tuning (the weights are read in every worker);
    # a config alone builds a random model with no download.
    config = AutoConfig.for_model("bert", vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=128, num_labels=NUM_LABELS,
                                  max_position_embeddings=MAX_LENGTH)
    return AutoModelForSequenceClassification.from_config(config)


class Tokenized(Dataset):
    """TODO your tokenized dataset (a datasets.Dataset with set_format("torch") works as is)."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(8, MAX_LENGTH + 1, (n,), generator=g)
        self.items = [{"input_ids": torch.randint(5, 1000, (int(k),), generator=g),
                       "labels": torch.randint(0, NUM_LABELS, (), generator=g)} for k in lengths]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def pad(samples):
    # TODO transformers.DataCollatorWithPadding(tokenizer) does this for a real tokenizer
    longest = max(len(s["input_ids"]) for s in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    mask = torch.zeros(len(samples), longest, dtype=torch.long)
    for row, s in enumerate(samples):
        ids[row, :len(s["input_ids"])], mask[row, :len(s["input_ids"])] = s["input_ids"], 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.stack([s["labels"] for s in samples])}


def workload() -> Workload:
    return Workload(
        name="my-transformer",
        build_model=build_model,
        train_data=Tokenized(2048, seed=1),
        val_data=Tokenized(256, seed=2),
        collate_fn=pad,
        # LOSS: none given: model(**batch).loss, the model's own (the batch carries "labels").
        # METRIC: logits are (N, num_labels), so the sweep ranks by accuracy; for token classification or
        # generation give evaluate(model, batch) -> {"f1": ...} and metric="f1" (see examples/hf_tokens.py).
        num_classes=NUM_LABELS,
{tasks}
        task="nlp-classification",  # TODO
        optimizer="adamw",
        weight_decay=0.01,
        betas=(0.9, 0.999),
        eps=1e-8,
''' + _TODAY.format(batch=32, lr=5e-5) + '''    )


def accuracy(prediction):
    # TODO your compute_metrics (an EvalPrediction of logits and labels); the advisor calls it per
    # validation batch and averages over samples (exact for accuracy; F1 gets a per-batch average).
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


def make_trainer():
    import os
    import tempfile

    from transformers import Trainer, TrainingArguments

    # TODO your Trainer. The advisor never calls train(): it reads what training would do from here, and sets
    # its own learning rate per trial (learning_rate below is today's, the base its scaling rules start from).
    args = TrainingArguments(
        output_dir=os.path.join(tempfile.gettempdir(), "my-transformer"),  # nothing is saved while measuring
        per_device_train_batch_size=16,  # TODO today's per-device batch
        gradient_accumulation_steps=1,  # TODO
        learning_rate=5e-5,  # TODO today's learning rate
        warmup_steps=0,  # TODO today's warmup, in optimizer steps
        num_train_epochs=3,  # TODO the run you plan
        weight_decay=0.01, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,  # optim="adamw_torch" (default)
        bf16=False,  # TODO True if you train in bf16: --precision auto then measures in bf16
        # TODO activation_checkpointing=True (gradient_checkpointing in transformers 4) if you train with it:
        # the probes then measure it.
        metric_for_best_model="accuracy", greater_is_better=True,  # the sweep ranks by it (unset: the loss)
        report_to="none", save_strategy="no", use_cpu=not torch.cuda.is_available(),
    )
    return Trainer(model=build_model(), args=args, train_dataset=Tokenized(2048, seed=1),
                   eval_dataset=Tokenized(256, seed=2), data_collator=pad, compute_metrics=accuracy)


def trainer() -> Workload:
    from advisor.integrations.transformers import from_trainer

    # devices_today: the GPUs today's run uses (today's global batch = per device x accumulation x devices).
    # task=: the row of the table above; without it the model's head class decides (...ForSequenceClassification
    # -> nlp-classification, ...ForCausalLM -> language-modeling).
    return from_trainer(make_trainer(), name="my-transformer-trainer", devices_today=2)  # TODO devices_today
'''

TIMM = _HEADER.format(title="A timm image-model workload for batch-advisor.", more='''
timm needs torchvision, whose build must match your torch: on a GPU host `pip install 'batch-advisor[timm]'`
next to your CUDA torch; with a CPU-only torch install the matching CPU torchvision from PyTorch's own index
first (the registry's torchvision is a CUDA build that replaces a CPU torch). Without torchvision, a
transformers vision model from a config does the same job (examples/hf_image.py).
''') + '''
import torch
from torch import nn
from torch.utils.data import TensorDataset

from advisor import Workload

IMAGE_SIZE = 64  # TODO your training resolution: memory grows with it


def build_model():
    import timm

    # pretrained=True reads weights in every worker; the advisor's short trials do not need them.
    return timm.create_model("resnet18", pretrained=False, num_classes=10)  # TODO your architecture


def datasets():
    # TODO e.g. torchvision.datasets.ImageFolder(root, transform=...) for train and val
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g)
    y = torch.randint(0, 10, (640,), generator=g)
    return TensorDataset(x[:512], y[:512]), TensorDataset(x[512:], y[512:])


def workload() -> Workload:
    train, val = datasets()
    return Workload(
        name="my-timm-model",
        build_model=build_model,
        train_data=train,
        val_data=val,
        loss_fn=nn.functional.cross_entropy,
        num_classes=10,  # (N, num_classes) logits: the sweep ranks by accuracy
{tasks}
        task="image-classification",  # TODO
        optimizer="sgd",
        momentum=0.9,
        weight_decay=1e-4,
''' + _TODAY.format(batch=256, lr=0.1) + '''    )
'''

LIGHTNING = _HEADER.format(title="A LightningModule and its LightningDataModule as a batch-advisor workload.", more="") + '''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from advisor.integrations.lightning import lightning_workload


def build():
    import lightning as L  # or: import pytorch_lightning as L

    class Classifier(L.LightningModule):  # TODO your LightningModule
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):  # the loss: a tensor or {"loss": ...}
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def validation_step(self, batch, batch_idx):  # what it logs are the metrics the sweep can rank by
            x, y = batch
            self.log("val_acc", (self(x).argmax(-1) == y).float().mean())

        def configure_optimizers(self):  # param groups kept; the advisor sets the LR; schedulers are ignored
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    class Data(L.LightningDataModule):  # TODO your LightningDataModule (setup("fit") is called first)
        def setup(self, stage):
            # This toy data is random (it exists so --check runs).
            g = torch.Generator().manual_seed(0)
            x, y = torch.randn(1024, 32, generator=g), torch.randint(0, 4, (1024,), generator=g)
            self.train, self.val = TensorDataset(x[:896], y[:896]), TensorDataset(x[896:], y[896:])

        def train_dataloader(self):  # its dataset and collate_fn are used; batch size and sampler are the advisor's
            return DataLoader(self.train, batch_size=64, shuffle=True)

        def val_dataloader(self):
            return DataLoader(self.val, batch_size=64)

    return Classifier(), Data()


def workload():
    return lightning_workload(
        build,  # called in every worker process: a fresh module each time
        name="my-lightning-module",
        metric="val_acc",  # a name validation_step logs (None: the validation loss)
{tasks}
        task="nlp-classification",  # TODO
''' + _TODAY.format(batch=64, lr=1e-3) + '''    )
'''

TEMPLATES = {"plain": PLAIN, "transformers": TRANSFORMERS, "timm": TIMM, "lightning": LIGHTNING}


def render(template: str, path: str) -> str:
    """The template's text for a file at ``path``, the task table filled in."""
    tasks = "\n".join("        " + line for line in task_table().splitlines())
    return TEMPLATES[template].replace("{tasks}", tasks).replace("{path}", path)
