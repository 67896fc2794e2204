"""An ordinary Hugging Face Trainer script: HfArgumentParser, a config-built tiny model, ragged token data, a
padding collator. Nothing in it knows about batch-advisor."""

from dataclasses import dataclass, field

import torch
from transformers import BertConfig, BertForSequenceClassification, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class DataArguments:
    samples: int = field(default=512)
    max_length: int = field(default=48)


class Ragged(torch.utils.data.Dataset):
    """Token sequences of 4..max_length tokens, half of them holding token 5 somewhere; the label is whether the
    first token is below 35 (what the pooled first position learns in a few dozen steps: a plan whose sweep
    learns nothing ends with exit 3)."""

    def __init__(self, count: int, max_length: int, seed: int):
        generator = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(count):
            length = int(torch.randint(4, max_length + 1, (1,), generator=generator))
            ids = torch.randint(6, 64, (length,), generator=generator)
            if torch.rand(1, generator=generator) < 0.5:
                ids[int(torch.randint(0, length, (1,), generator=generator))] = 5
            self.items.append({"input_ids": ids.tolist(), "labels": int(ids[0] < 35)})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]


def pad_collate(samples):
    """Pads each batch to its longest sequence, as DataCollatorWithPadding does."""
    longest = max(len(s["input_ids"]) for s in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    mask = torch.zeros(len(samples), longest, dtype=torch.long)
    for row, sample in enumerate(samples):
        ids[row, :len(sample["input_ids"])] = torch.tensor(sample["input_ids"])
        mask[row, :len(sample["input_ids"])] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([s["labels"] for s in samples])}


def main():
    data_args, training_args = HfArgumentParser((DataArguments, TrainingArguments)).parse_args_into_dataclasses()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2)
    model = BertForSequenceClassification(config)
    trainer = Trainer(model=model, args=training_args,
                      train_dataset=Ragged(data_args.samples, data_args.max_length, 0),
                      eval_dataset=Ragged(128, data_args.max_length, 1),
                      data_collator=pad_collate)
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
