"""`advisor check`'s second half: a valid recipe redone from its own rules. The LR and the warmup are computed
again from the recipe's base, batch and rule (advisor.method.lr, as the plan made them) and against its own
ledger (a recipe never advises a setting its runs saw fail); a difference names the hand edit that broke the
agreement. A layer above the recipe format (advisor/recipe.py), which knows no rule."""

from __future__ import annotations

import math

from .ledger import TrialRecord
from .method.inputs import WorkloadInfo
from .method.lr import bound_past_validated, check_lr_change, plan_warmup, scale_lr
from .method.validated import LRAtGlobal, largest_validated_global, lr_at_global, trained_runs
from .recipe import RecipeDocument


def recipe_warnings(data: dict) -> list[str]:
    """Valid but suspicious: what a hand edit of a generated recipe can get wrong. The LR and the warmup are
    redone from the recipe's own rule, base and batch (advisor.method.lr, as the plan made them), and each
    difference names the edit that broke the agreement: the batch (its LR was scaled for another global batch)
    or the LR / warmup itself."""
    batch, lr = data["batch"], data["lr"]
    found = []
    headline = (data.get("method") or {}).get("headline")
    if headline:  # a CI gate on the recipe must not pass a fallback for advice
        found.append(f"NOT VALIDATED: {headline} Its batch and LR are your base setting, not a validated choice: fix "
                     "what the headline names and plan again before committing it.")
    planned_global = _planned_global(lr)
    batch_edited = planned_global is not None and planned_global != batch["global"]
    expected = _rules_lr(data)
    refused = _never_validated(data)
    if expected is not None and not math.isclose(expected, lr["value"], rel_tol=1e-3):
        rule = f"{expected:.4g} ({_rule_words(data)})"
        if batch_edited:
            found.append(f"the batch was edited: lr.value {lr['value']:g} was scaled for global batch {planned_global}, "
                         f"but the batch now gives {batch['global']}; there the recipe's rule gives {rule}. Set "
                         "lr.value to it (and re-plan before a long run: the new batch was not validated).")
        else:
            found.append(f"lr.value {lr['value']:g} is not what the recipe's rule gives at global batch "
                         f"{batch['global']}: {rule}, {lr['value'] / expected:.3g}x off. It looks edited by hand: set "
                         "it back, or re-plan (`advisor plan`, or `advisor replan`) if the base LR changed.")
    elif expected is None and not batch_edited and not refused:
        flagged = check_lr_change(lr["base"], lr["base_global_batch"], lr["value"], batch["global"],
                                  batch["accumulation_steps"])
        found += [flagged] if flagged else []
    # Whatever the LR says, a global batch whose every run failed is named: an edit that also broke the LR rule
    # must not hide it behind the LR's warning (the batch is the edit a re-plan cannot save).
    if refused:
        found.append(refused)
    warmup = _rules_warmup(data)
    if warmup is not None and warmup != data["warmup"]["steps"]:
        what = "the batch was edited" if batch_edited else "warmup.steps looks edited by hand"
        found.append(f"{what}: warmup.steps is {data['warmup']['steps']}, the recipe's rule gives {warmup} at global "
                     f"batch {batch['global']}. Set it to {warmup}.")
    if batch["global"] != lr["base_global_batch"] and lr["rule"] == "unchanged":
        found.append(f"lr.rule is 'unchanged' but the global batch ({batch['global']}) differs from the one the "
                     f"base LR was tuned for ({lr['base_global_batch']}): scale the LR (linear for SGD, square "
                     "root for Adam) or regenerate the recipe.")
    return found


def _planned_global(lr: dict) -> int | None:
    """The global batch the recipe's LR was scaled for (base batch x the recorded scale)."""
    scale = lr.get("scale")
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or scale <= 0:
        return None
    return round(lr["base_global_batch"] * scale)


def _rules_lr(data: dict) -> float | None:
    """The LR the recipe's rule gives at its batch: scale_lr from its base, then the bound past the validated
    batch when the plan applied one (its inputs are recorded). None when the recipe lacks what that needs (an
    optimizer), or was bounded by a plan that did not record how (before schema 2: no check then)."""
    lr, batch = data["lr"], data["batch"]
    optimizer = lr.get("optimizer") or RecipeDocument.of(data).workload.optimizer
    if not isinstance(optimizer, str):
        return None
    rules = scale_lr(float(lr["base"]), int(lr["base_global_batch"]), int(batch["global"]), optimizer)
    bounded_from = lr.get("bound_from_global")
    if isinstance(bounded_from, int) and not isinstance(bounded_from, bool):
        rules = bound_past_validated(rules, bounded_from, optimizer, lr.get("bound_noise_low"))
    elif lr.get("capped") and rules.value > lr["value"] and not rules.capped:
        return None  # bounded by an older plan that did not record the bound's inputs
    # Never a setting its runs saw fail: the ledger says so (a plan's recipe), or the recorded lowering does (a
    # re-planned recipe, whose ledger holds only what the re-plan measured).
    failed = failed_lr(data, int(batch["global"]), rules.value, optimizer)
    if failed is not None:
        return failed.lr  # None when nothing at the batch was validated: recipe_warnings says so
    seen = lr.get("seen_failing_at")
    if isinstance(seen, (int, float)) and math.isclose(seen, rules.value, rel_tol=1e-6) and lr["value"] < seen:
        return lr["value"]
    return rules.value


def _never_validated(data: dict) -> str | None:
    """The refusal's words when the recipe's own runs failed at its global batch at its LR or below and learned
    at no lower LR there (advisor.method.validated.lr_at_global); else None."""
    optimizer = data["lr"].get("optimizer") or RecipeDocument.of(data).workload.optimizer
    if not isinstance(optimizer, str):
        return None
    failed = failed_lr(data, int(data["batch"]["global"]), float(data["lr"]["value"]), optimizer)
    if failed is None or not failed.refused:
        return None
    return f"lr.value {data['lr']['value']:g} at global batch {data['batch']['global']}: {failed.message}"


def ledger_records(data: dict) -> list:
    """The recipe's trial, noise and sweep rows back as ledger records (the loss curve as written), for the rules
    that read what ran (replan, the check of lr.value)."""
    fields = TrialRecord.__dataclass_fields__
    out = []
    for row in data.get("ledger", []):
        if row.get("phase") in ("trial", "noise", "sweep") and {"per_device", "global_batch", "status"} <= set(row):
            values = {k: v for k, v in row.items() if k in fields and k != "losses"}
            values.setdefault("world_size", 1)
            values.setdefault("accumulation", 1)
            values.setdefault("seconds", 0.0)
            out.append(TrialRecord(**values, losses=list(row.get("loss_curve") or [])))
    return out


def recipe_info(data: dict, optimizer: str) -> WorkloadInfo:
    """The workload facts the LR rules read, from the recipe (its base LR and batch, with ``optimizer``)."""
    doc = RecipeDocument.of(data)
    workload, lr = doc.workload, doc.lr
    return WorkloadInfo(str(workload.name or ""), str(workload.task or ""), workload.num_classes,
                        optimizer, int(workload.train_size or 0), 0, int(workload.parameters or 0),
                        bool(doc.normalization.has_batchnorm), float(lr.base),
                        int(lr.base_global_batch), str(lr.base_source or "the recipe"))


def failed_lr(data: dict, global_batch: int, lr_value: float, optimizer: str) -> LRAtGlobal | None:
    """advisor.method.validated.lr_at_global on the recipe's own ledger: None when no run at ``global_batch`` was
    unstable at ``lr_value`` or below, else the highest LR validated there (``lr`` None: none is) and the words
    that say why."""
    return lr_at_global(recipe_info(data, optimizer), global_batch, lr_value, ledger_records(data))


def ledger_validated_global(data: dict, optimizer: str) -> int | None:
    """advisor.method.validated.largest_validated_global on the recipe's own ledger; None when the ledger holds no
    trained run (a re-planned recipe's holds only what the re-plan measured) or none is validated."""
    rows = ledger_records(data)
    if not trained_runs(rows):
        return None
    return largest_validated_global(recipe_info(data, optimizer), rows)


def _rule_words(data: dict) -> str:
    lr = data["lr"]
    bound = (f", bounded past the validated global batch {lr['bound_from_global']}"
             if lr.get("bound_from_global") and data["batch"]["global"] > lr["bound_from_global"] else "")
    return (f"{lr.get('optimizer', 'the optimizer')}'s scaling of the base LR {lr['base']:g} at global batch "
            f"{lr['base_global_batch']}{bound}")


def _rules_warmup(data: dict) -> int | None:
    """The warmup steps the recipe's rule gives at its batch, or None when the recipe lacks its inputs."""
    warmup, lr, batch = data["warmup"], data["lr"], data["batch"]
    train_size = RecipeDocument.of(data).workload.train_size
    base_epochs = warmup.get("base_epochs")
    if not isinstance(train_size, int) or not isinstance(base_epochs, (int, float)):
        return None
    run_epochs = warmup.get("run_epochs")
    return plan_warmup(batch["global"] / lr["base_global_batch"], train_size, batch["global"], float(base_epochs),
                       run_epochs=run_epochs, run_source="the recipe's run" if run_epochs else "").steps
