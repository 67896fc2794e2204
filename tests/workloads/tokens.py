"""Token workloads as Hugging Face users write them: dict samples of ragged length, a padding collate,
a model that takes keyword arguments and returns a ``ModelOutput``-like mapping with its own ``.loss``,
and a metric of its own (token accuracy) that the sweep ranks by.

Every tensor comes from a local generator: each rank and each test builds the same data and weights.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn
from torch.utils.data import Dataset

from advisor import Workload

VOCAB, TAGS, DIM = 64, 4, 32
MEDIAN_LENGTH, LONGEST = 16, 64  # the longest sample is 4x the median


class Output(OrderedDict):
    """What transformers' ModelOutput is: an ordered mapping whose keys are attributes too."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class RaggedTokens(Dataset):
    """Token sequences of varying length; the tag of a token is its id modulo TAGS (learnable).

    Lengths sit around MEDIAN_LENGTH; ``rare_long`` samples are LONGEST tokens: a random batch seldom meets
    one, an epoch always does.
    """

    def __init__(self, n: int, seed: int, rare_long: int = 4):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(MEDIAN_LENGTH - 4, MEDIAN_LENGTH + 5, (n,), generator=g)
        lengths[torch.randperm(n, generator=g)[:rare_long]] = LONGEST
        self.samples = [torch.randint(1, VOCAB, (int(n_),), generator=g) for n_ in lengths]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        ids = self.samples[i]
        return {"input_ids": ids, "labels": ids % TAGS}


def pad_collate(samples: list[dict]) -> dict:
    """Pads to the longest sample of the batch, as DataCollatorForTokenClassification does."""
    longest = max(len(s["input_ids"]) for s in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    labels = torch.full((len(samples), longest), -100, dtype=torch.long)
    mask = torch.zeros(len(samples), longest, dtype=torch.long)
    for row, s in enumerate(samples):
        n = len(s["input_ids"])
        ids[row, :n], labels[row, :n], mask[row, :n] = s["input_ids"], s["labels"], 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class Tagger(nn.Module):
    """A one-layer Transformer token tagger: memory grows with the padded length (attention with its square)."""

    def __init__(self, dim: int = DIM, layers: int = 1):
        super().__init__()
        g = torch.random.fork_rng()
        with g:
            torch.manual_seed(21)
            self.embed = nn.Embedding(VOCAB, dim)
            layer = nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=4 * dim, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(dim, TAGS)

    def forward(self, input_ids, attention_mask=None, labels=None):
        padding = attention_mask == 0 if attention_mask is not None else None
        logits = self.head(self.encoder(self.embed(input_ids), src_key_padding_mask=padding))
        out = Output(logits=logits)
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits.reshape(-1, TAGS), labels.reshape(-1), ignore_index=-100)
        return out


def token_accuracy(model, batch) -> dict:
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    scored = batch["labels"] != -100
    return {"token_accuracy": (logits.argmax(-1)[scored] == batch["labels"][scored]).float().mean()}


def tagger() -> Workload:
    """No loss_fn: the model's own .loss; the sweep ranks by token accuracy (num_classes set, yet outputs are
    (N, L, C): argmax accuracy over (N, C) would be meaningless and is not computed)."""
    return Workload(name="ragged-tagger", build_model=Tagger, train_data=RaggedTokens(768, seed=1),
                    val_data=RaggedTokens(96, seed=2), collate_fn=pad_collate, task="nlp-classification",
                    num_classes=TAGS, evaluate=token_accuracy, metric="token_accuracy", optimizer="adamw",
                    current_batch_size=32, current_lr=3e-3)


def tagger_for_memory() -> Workload:
    """A wider tagger on more data, for the worst-case survival test: its memory is dominated by activations."""
    workload = tagger()
    workload.name = "ragged-tagger-wide"
    workload.build_model = lambda: Tagger(dim=128, layers=2)
    workload.train_data = RaggedTokens(2000, seed=3, rare_long=4)
    return workload


def tagger_by_perplexity() -> Workload:
    """Ranked by a lower-is-better metric named by the user."""
    import math

    def perplexity(model, batch):
        return {"perplexity": math.exp(float(model(**batch).loss))}

    workload = tagger()
    workload.evaluate, workload.metric = perplexity, "perplexity"
    return workload


def tagger_with_param_groups() -> Workload:
    """An optimizer factory with two param groups: no weight decay on biases and norms."""
    def factory(model, lr):
        decay = [p for n, p in model.named_parameters() if p.dim() > 1]
        no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                  {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95), eps=1e-6)

    workload = tagger()
    workload.optimizer_factory = factory
    return workload
