"""A Hugging Face text classifier as a batch-advisor workload, two ways: a plain Workload and a Trainer.

    advisor workloads --check examples/hf_text.py:workload
    advisor plan --workload examples/hf_text.py:workload --nproc 2 --device-memory 256MiB --out text.toml
    advisor plan --workload examples/hf_text.py:trainer  --nproc 2 --device-memory 256MiB --out text.toml

The model is a 2-layer BERT built from a config (random weights: nothing is downloaded). The data is made
here: token sequences of widely varying length (median 16 tokens, the longest 64: 4x the median), padded
per batch by ``pad``, as DataCollatorWithPadding pads. The ceiling probes feed the longest sequences, so
the recipe's ``[workload.probed]`` shows batches padded to 64. Copy this file and swap in your model,
tokenized data and collator (``DataCollatorWithPadding(tokenizer)``).
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from advisor import Workload

VOCAB, CLASSES = 512, 2
MEDIAN_LENGTH, LONGEST = 16, 64


def build_model():
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=LONGEST, num_labels=CLASSES)
    return BertForSequenceClassification(config)


class RaggedText(Dataset):
    """Tokenized "sentences": most 8-24 tokens, one in 25 of 48-64. The class is the first token's parity,
    which a model can learn, so validation accuracy means something."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(MEDIAN_LENGTH - 8, MEDIAN_LENGTH + 9, (n,), generator=g)
        long = torch.rand(n, generator=g) < 0.04
        lengths[long] = torch.randint(3 * MEDIAN_LENGTH, LONGEST + 1, (int(long.sum()),), generator=g)
        lengths[0] = LONGEST  # the data's longest sample is LONGEST, whatever the draw
        self.samples = [torch.randint(1, VOCAB, (int(k),), generator=g) for k in lengths]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        ids = self.samples[i]
        return {"input_ids": ids, "labels": ids[0] % CLASSES}


def pad(samples: list[dict]) -> dict:
    """Pads each batch to its longest sequence (what DataCollatorWithPadding does for a real tokenizer)."""
    longest = max(len(s["input_ids"]) for s in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    mask = torch.zeros(len(samples), longest, dtype=torch.long)
    for row, sample in enumerate(samples):
        n = len(sample["input_ids"])
        ids[row, :n], mask[row, :n] = sample["input_ids"], 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.stack([s["labels"] for s in samples])}


def workload() -> Workload:
    """The plain Workload: the model's own loss (the batch carries labels); logits are (N, CLASSES), so the
    sweep ranks by accuracy."""
    return Workload(name="hf-bert-text", build_model=build_model, train_data=RaggedText(1024, seed=1),
                    val_data=RaggedText(128, seed=2), collate_fn=pad, num_classes=CLASSES,
                    task="nlp-classification", optimizer="adamw", weight_decay=0.01,
                    current_batch_size=32, current_lr=5e-4, epochs=3)


def accuracy(prediction) -> dict:
    """compute_metrics as a Trainer takes it: an EvalPrediction of logits and labels (numpy)."""
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


def make_trainer():
    """The Trainer a user already has. Returned as is (--workload examples/hf_text.py:make_trainer), the
    advisor converts it but cannot know today's number of GPUs: pass --base-batch then."""
    import os
    import tempfile

    from transformers import Trainer, TrainingArguments

    # save_strategy="no": nothing is written to output_dir while the advisor measures.
    args = TrainingArguments(output_dir=os.path.join(tempfile.gettempdir(), "hf-text-example"), per_device_train_batch_size=16,
                             gradient_accumulation_steps=1, learning_rate=5e-4, weight_decay=0.01,
                             adam_beta2=0.98, warmup_steps=10, num_train_epochs=3, report_to="none",
                             save_strategy="no", use_cpu=not torch.cuda.is_available(),
                             metric_for_best_model="accuracy", greater_is_better=True)
    return Trainer(model=build_model(), args=args, train_dataset=RaggedText(1024, seed=1),
                   eval_dataset=RaggedText(128, seed=2), data_collator=pad, compute_metrics=accuracy)


def trainer() -> Workload:
    """The same model through the Trainer factory; today's run is 16 per device on 2 GPUs (global 32)."""
    from advisor.integrations.transformers import from_trainer

    return from_trainer(make_trainer(), name="hf-bert-text-trainer", devices_today=2)
