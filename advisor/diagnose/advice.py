"""What to do about a finding, shared by the rules that find it in long logs (detectors.py) and in short ones
(shortlog.py): one owner for each piece of advice."""

from __future__ import annotations

NOT_LEARNING_ACTIONS = [
    "Check that the optimizer steps the model's parameters: optimizer.zero_grad() before backward(), not between "
    "backward() and step(); the optimizer built over this model's parameters; requires_grad not turned off; "
    "model.train() called.",
    "Check the loss wiring: CrossEntropyLoss takes raw logits (no softmax before it), labels match the outputs "
    "(class indices, not one-hot, for the number of classes the head has).",
    "Check the LR schedule is not at 0 (warmup from 0, a scheduler stepped too often) and not so high that the "
    "network died (ReLUs or saturated activations): try a 10x smaller LR for a few hundred steps.",
    "Overfit one small batch first: a model that cannot drive the loss of 20 samples to ~0 has a pipeline bug.",
    "If all of that is right, the LR may be far too low to move off the start (e.g. plain SGD at 1e-4): run a "
    "short trial with the LR 10x higher, or with Adam.",
]


PERIODIC_ACTIONS = (
    "Check the data order: shuffle every epoch (DataLoader(shuffle=True) / DistributedSampler.set_epoch(epoch)); "
    "sorted or grouped data (by class, source or length) makes the loss swing with the same period.",
    "Check class balance and noisy samples: a block of hard or mislabelled examples recurring each epoch produces "
    "these swings; clean or rebalance (weighted sampler).",
    "Changing the batch size will not fix this.")


def jitter_actions(ctx) -> list[str]:
    if ctx.per_device is not None and ctx.per_device < 16:
        actions = [f"The per-device batch is {ctx.per_device} (< 16): raise it (or accumulate gradients) so "
                   "each step's gradient is less noisy.",
                   "If the model uses BatchNorm, switch to GroupNorm/LayerNorm (or SyncBatchNorm across GPUs): "
                   "BN statistics over so few samples jitter.",
                   "If that is not possible, lower the LR in proportion to the batch (linear rule for SGD, "
                   "square root for Adam)."]
    elif ctx.per_device is not None:
        actions = [f"The per-device batch is already {ctx.per_device}: the LR is the likely cause; lower it "
                   "(try half) or lengthen the warmup.",
                   "Clip gradients to tame occasional large steps."]
    else:
        actions = ["If the per-device batch is below 16: raise it (or accumulate), and prefer GroupNorm over "
                   "BatchNorm at such sizes.",
                   "If the batch is already large: the LR is too high for it; lower it (try half) or warm up "
                   "longer.",
                   "Pass --recipe RECIPE so the advisor can tell which case applies."]
    return actions


def overfitting_actions(ctx, checkpoint_on: str = "val loss") -> list[str]:
    """What to do about overfitting, for every rule that finds it (the long logs' and the short ones');
    ``checkpoint_on``: the measure to keep the best checkpoint by (a quality, where the log prints no loss)."""
    actions = []
    if ctx.per_device and ctx.global_batch and ctx.global_batch >= 128:
        actions.append(f"Try a smaller global batch than {ctx.global_batch} (half, LR scaled down with "
                       "it): smaller batches regularise; large ones converge to sharper minima.")
    else:
        actions.append("Try a smaller batch (LR scaled down with it): smaller batches regularise.")
    return actions + ["Add augmentation, dropout or weight decay.",
                      f"Stop early at the best validation step (checkpoint on {checkpoint_on})."]
