"""A Hugging Face token classifier whose sweep ranks batch sizes by its own metric, through the Trainer.

    advisor plan --workload examples/hf_tokens.py:trainer --nproc 2 --device-memory 256MiB --out tags.toml

A 2-layer BERT for token classification built from a config (random weights, no download), on ragged
token sequences made here (median 16 tokens, the longest 64), padded per batch with labels -100 on the
padding, as DataCollatorForTokenClassification pads. ``compute_metrics`` returns the accuracy over real
(non-padding) tokens, and ``metric_for_best_model="token_accuracy"`` makes the sweep rank by it: the
recipe's ``[workload] metric`` says so. ``workload()`` is the same thing as a plain Workload.
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from advisor import Workload

VOCAB, TAGS = 512, 4
MEDIAN_LENGTH, LONGEST = 16, 64
IGNORED = -100  # the label of padding: no loss, no metric


def build_model():
    from transformers import BertConfig, BertForTokenClassification

    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=LONGEST, num_labels=TAGS)
    return BertForTokenClassification(config)


class TaggedTokens(Dataset):
    """Sequences of 8-24 tokens, one in 25 of 48-64; each token's tag is its id modulo TAGS (learnable)."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(MEDIAN_LENGTH - 8, MEDIAN_LENGTH + 9, (n,), generator=g)
        long = torch.rand(n, generator=g) < 0.04
        lengths[long] = torch.randint(3 * MEDIAN_LENGTH, LONGEST + 1, (int(long.sum()),), generator=g)
        lengths[0] = LONGEST
        self.samples = [torch.randint(1, VOCAB, (int(k),), generator=g) for k in lengths]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        ids = self.samples[i]
        return {"input_ids": ids, "labels": ids % TAGS}


def pad(samples: list[dict]) -> dict:
    longest = max(len(s["input_ids"]) for s in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    mask = torch.zeros(len(samples), longest, dtype=torch.long)
    labels = torch.full((len(samples), longest), IGNORED, dtype=torch.long)
    for row, sample in enumerate(samples):
        n = len(sample["input_ids"])
        ids[row, :n], mask[row, :n], labels[row, :n] = sample["input_ids"], 1, sample["labels"]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def token_accuracy(prediction) -> dict:
    """compute_metrics: the share of real tokens tagged right (padding, labelled -100, does not count)."""
    real = prediction.label_ids != IGNORED
    return {"token_accuracy": float((prediction.predictions.argmax(-1)[real] == prediction.label_ids[real]).mean())}


def make_trainer():
    import os
    import tempfile

    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(output_dir=os.path.join(tempfile.gettempdir(), "hf-tokens-example"),
                             per_device_train_batch_size=8, gradient_accumulation_steps=2, learning_rate=1e-3,
                             weight_decay=0.01, num_train_epochs=2, report_to="none", save_strategy="no",
                             use_cpu=not torch.cuda.is_available(),
                             metric_for_best_model="token_accuracy", greater_is_better=True)
    return Trainer(model=build_model(), args=args, train_dataset=TaggedTokens(1024, seed=1),
                   eval_dataset=TaggedTokens(128, seed=2), data_collator=pad, compute_metrics=token_accuracy)


def trainer() -> Workload:
    """Today: 8 per device x 2 accumulation steps on 2 GPUs (global 32)."""
    from advisor.integrations.transformers import from_trainer

    return from_trainer(make_trainer(), name="hf-bert-tagger", devices_today=2)


def workload() -> Workload:
    """The same model as a plain Workload: the model's own loss, evaluate + metric for the ranking."""
    def evaluate(model, batch):
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        real = batch["labels"] != IGNORED
        return {"token_accuracy": (logits.argmax(-1)[real] == batch["labels"][real]).float().mean()}

    return Workload(name="hf-bert-tagger", build_model=build_model, train_data=TaggedTokens(1024, seed=1),
                    val_data=TaggedTokens(128, seed=2), collate_fn=pad, evaluate=evaluate,
                    metric="token_accuracy", higher_is_better=True, task="nlp-classification",
                    optimizer="adamw", weight_decay=0.01, current_batch_size=32, current_lr=1e-3, epochs=2)
