"""Metric names by meaning: what a printed name ("Val_Loss", "validation/loss", "lm loss", "gnorm") measures.

A name is split into lower-case words (on any separator and on camelCase), then read as:
split (train / validation / test) + measure (loss, accuracy, LR, gradient norm, loss scale) + qualifiers
(average, epoch-level, component). The tables below are the vocabulary, drawn from what the frameworks
people run print: PyTorch examples, Lightning, HF Trainer, DeepSpeed, Megatron, nanoGPT/litgpt, timm,
fairseq, mmengine, DLLogger, Keras, Time-Series-Library. Unknown words make a name a component (ranked
below the plain loss) or, as the last word, not a metric at all ("Validation loss decreased").
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from .records import TRAIN_LOSS, VAL_LOSS

SPLITS = {
    "train": "train", "training": "train", "trn": "train", "tr": "train",
    "val": "val", "vali": "val", "valid": "val", "validation": "val", "eval": "val", "evaluation": "val",
    "dev": "val", "test": "test", "testing": "test",
    # The same words in the languages people write their own loggers in (Spanish, Catalan, Portuguese, Italian,
    # French, German; accents are dropped before a name is read): a header like "Epoca,Perdua,Accuracy".
    "entrenamiento": "train", "entrenament": "train", "treino": "train", "treinamento": "train",
    "addestramento": "train", "entrainement": "train", "validacion": "val", "validacio": "val", "validacao": "val",
    "validazione": "val", "validierung": "val", "prueba": "test",
}
LOSS_WORDS = {"loss", "losses", "nll", "xent",
              "perdida", "perdua", "perda", "perdita", "perte", "verlust"}  # loss in es, ca, pt, it, fr, de
ACC_WORDS = {"acc", "accuracy", "acc1", "acc@1", "top1", "top-1",
             "exactitud", "acuracia", "accuratezza", "exactitude", "genauigkeit"}
AVERAGE_WORDS = {"avg", "average", "mean", "running", "smooth", "smoothed", "ema", "reduced"}
PLAIN_QUALIFIERS = {"step", "batch", "value", "cur", "current", "iter", "inner"}
TOTAL_WORDS = {"total", "lm", "overall", "full", "all", "sum", "combined"}
STEP_NAMES = {"step", "global step", "global_step", "globalstep", "iter", "iters", "iteration", "it",
              "num_updates", "updates", "update", "trainer/global_step", "train/global_step", "train step",
              "training iteration", "train iteration", "training step"}
EPOCH_NAMES = {"epoch", "ep", "train epoch", "training epoch", "epoch num", "epochs", "train",  # timm: "Train: 3 [ 100/390 ..."
               "epoca", "epocas", "epoque", "epoche", "epochen"}  # epoch in es, ca, pt, it, fr, de (accents dropped)
POSITION_NAMES = {"batch", "step", "iter", "iteration", "it"}  # "Step [100/600]": a position within the epoch

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^a-z0-9@]+")
_KNOWN_LAST = (set(SPLITS) | LOSS_WORDS | ACC_WORDS | AVERAGE_WORDS | PLAIN_QUALIFIERS | TOTAL_WORDS
               | {"lr", "rate", "norm", "gnorm", "scale", "scaler", "epoch", "1"})


def _unaccented(name: str) -> str:
    """"Época" -> "Epoca", "Pèrdua" -> "Perdua": a letter without its accent (ASCII names pass as they are)."""
    if name.isascii():
        return name
    return "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))


def words(name: str) -> list[str]:
    return [w for w in _SPLIT.split(_CAMEL.sub(" ", _unaccented(name.strip().strip("'\""))).lower()) if w]


@lru_cache(maxsize=4096)  # a log repeats a handful of names millions of times
def position_name(name: str) -> str | None:
    """'step' / 'epoch' when the name is a step or epoch counter, else None."""
    keys = {" ".join(words(name)), _unaccented(name.strip()).lower()}
    if keys & STEP_NAMES:
        return "step"
    if keys & EPOCH_NAMES:
        return "epoch"
    return None


# Last words of identifiers that name a setting about the loss, not a loss value ("loss_weight=1.0").
SETTING_WORDS = {"weight", "weights", "type", "fn", "func", "function", "name", "coef", "coeff", "factor", "window",
                 "mode", "cfg", "config", "reduction", "kwargs"}


def _loss_identifier(name: str, tokens: list[str]) -> bool:
    """An identifier (no spaces: "loss_net", "loss.total_sum") with a loss word is a loss, whatever its last word;
    prose ("Validation loss decreased") is not."""
    return (" " not in name.strip() and any(t in LOSS_WORDS for t in tokens) and tokens[-1] not in SETTING_WORDS)


_MAP_TOKEN = re.compile(r"m?ap(50|75|s|m|l)?")


def _map_rank(tokens: list[str]) -> int | None:
    """A detection metric, higher is better: 0 for COCO's mean average precision over IoU 0.5:0.95 (YOLOv5
    'metrics/mAP_0.5:0.95', Ultralytics 'metrics/mAP50-95(B)', detectron2 'bbox/AP', mmdet 'coco/bbox_mAP'), 1 for
    mAP at IoU 0.5 alone ('mAP50', 'mAP_0.5', 'AP50'); None for anything else, the size and IoU-0.75 variants
    included (APs, AP75, bbox_mAP_l)."""
    for index, token in enumerate(tokens):
        if token == "m" and index + 1 < len(tokens):
            token, index = "m" + tokens[index + 1], index + 1
        found = _MAP_TOKEN.fullmatch(token)
        if not found or not (token.startswith("map") or token.startswith("ap")):
            continue
        rest = tokens[index + 1:]
        variant = found.group(1)
        if variant in ("75", "s", "m", "l") or (rest and rest[0] in ("75", "s", "m", "l")):
            return None
        if "95" in rest:
            return 0
        return 1 if variant == "50" or "50" in rest or rest[:2] == ["0", "5"] else 0
    return None


# Quality scores, higher is better, of generated or extracted text (BLEU, ROUGE, chrF, METEOR, exact match, F1) and
# of segmentation masks (Dice, IoU / Jaccard, mean IoU): the validation quality of what the model is for, like an
# accuracy or a detection mAP. Rank 0 for the headline variant (BLEU-4, ROUGE-L / ROUGE-Lsum, F1, exact match, Dice,
# IoU), 1 for the others (BLEU-1..3, ROUGE-1/2): one point a line.
_QUALITY = re.compile(r"(?:sacre)?bleu(?P<bleu>\d)?|rouge(?P<rouge>1|2|l|lsum)?|chrf|meteor|exactmatch|em|f1"
                      r"|dice|m?iou|jaccard")
QUALITY_QUALIFIERS = {"score", "macro", "micro", "weighted", "avg", "mean", "overall", "final", "epoch", "step"}
PERPLEXITY_WORDS = {"ppl", "perplexity"}
# YOLOv10's loss columns name a component and a head, no "loss": train/box_om (one-to-many), val/dfl_oo (one-to-one).
HEAD_LOSS_PARTS = {"box", "cls", "dfl", "obj", "seg", "pose", "kobj"}
HEAD_WORDS = {"om", "oo", "o2m", "o2o"}


def _quality_rank(tokens: list[str]) -> int | None:
    """0 or 1 for a text-quality score (_QUALITY), None for anything else (a running best is no curve)."""
    if "best" in tokens:
        return None
    rest = [t for t in tokens if t not in SPLITS and t not in QUALITY_QUALIFIERS]
    found = _QUALITY.fullmatch("".join(rest)) if rest else None
    if not found:
        return None
    if found.group("bleu"):
        return 0 if found.group("bleu") == "4" else 1
    return 1 if found.group("rouge") in ("1", "2") else 0


def _stage_of(tokens: list[str], stage: str | None, default: str) -> str:
    return next((SPLITS[t] for t in tokens if t in SPLITS), None) or stage or default


@lru_cache(maxsize=4096)
def classify(name: str, stage: str | None = None) -> tuple[str, int] | None:
    """(series, rank) for a metric name, or None to ignore it. Lower rank wins among one line's candidates.

    ``stage`` is what the line itself says it reports ("val" for "Test set: ...", fairseq's "valid | ...").
    """
    tokens = words(name)
    if tokens and tokens[0] == "lr":  # Lightning's LearningRateMonitor: lr-Adam, lr-SGD/pg1
        return "lr", 0
    detection = _map_rank(tokens)
    if detection is not None:
        split = next((SPLITS[t] for t in tokens if t in SPLITS), None) or stage
        return ("test_map" if split == "test" else "val_map"), detection
    rest = [t for t in tokens if t not in SPLITS]
    if len(rest) == 2 and rest[0] in HEAD_LOSS_PARTS and rest[1] in HEAD_WORDS:
        split = _stage_of(tokens, stage, "train")
        return {"train": TRAIN_LOSS, "test": "test_loss"}.get(split, VAL_LOSS), 3
    if rest and set(rest) <= PERPLEXITY_WORDS | PLAIN_QUALIFIERS | AVERAGE_WORDS:
        return f"{_stage_of(tokens, stage, 'train')}_ppl", 0
    quality = _quality_rank(tokens) if not set(tokens) & (LOSS_WORDS | SETTING_WORDS) else None
    if quality is not None:  # scored on held-out data unless the name says otherwise
        return f"{_stage_of(tokens, stage, 'val')}_score", quality
    if not tokens or (tokens[-1] not in _KNOWN_LAST and not _loss_identifier(name, tokens)):
        return None
    token_set = set(tokens)
    split = next((SPLITS[t] for t in tokens if t in SPLITS), None) or stage or "train"
    has_loss = bool(token_set & LOSS_WORDS) or any(t.endswith("loss") for t in tokens)
    if has_loss and token_set & {"scale", "scaler"}:
        return "loss_scale", 0
    if "gnorm" in token_set or ("norm" in token_set and token_set & {"grad", "gradient", "grads"}):
        return "grad_norm", 0
    if "lr" in token_set or ("learning" in token_set and "rate" in token_set):
        return ("lr", 0) if not has_loss else None
    if has_loss:
        other = token_set - LOSS_WORDS - set(SPLITS) - PLAIN_QUALIFIERS - {"epoch"}
        if other <= TOTAL_WORDS:
            rank = 1 if other else 0
        elif other <= AVERAGE_WORDS | TOTAL_WORDS:
            rank = 2
        else:
            rank = 3  # a component: loss_cls, mlm_loss, d0.loss_bbox
        if split == "train":
            return ("train_loss_epoch", rank) if "epoch" in token_set else (TRAIN_LOSS, rank)
        # A test loss is its own series: it stands in for validation only when a log prints no validation loss
        # (scan.separate_series), never merged into it.
        return ("test_loss", rank) if split == "test" else (VAL_LOSS, rank)
    if token_set & ACC_WORDS:
        return _accuracy_series(tokens, split, stage), 0
    return None


def _accuracy_series(tokens: list[str], split: str, stage: str | None) -> str:
    """The accuracy's series. One under a `metrics/` group that names no split is the validation set's, as its
    mAP is (Ultralytics classification: metrics/accuracy_top1 beside train/loss and val/loss)."""
    if tokens[0] == "metrics" and not set(tokens) & set(SPLITS) and stage is None:
        split = "val"
    return {"train": "train_acc", "test": "test_acc"}.get(split, "val_acc")


__all__ = ["classify", "position_name", "words", "SPLITS", "STEP_NAMES", "EPOCH_NAMES"]
