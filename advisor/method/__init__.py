"""The four-step start method's rules, as pure functions over what a runner measured.

Read top to bottom, one module per step and per rule family:

- ``inputs``: the user's settings, the workload's facts, the runner protocol, the LR at a global batch.
- ``ceiling``: step 1, the memory ceiling (the probe search and its fitted memory model).
- ``start``: step 2, the starting value (global batch first, then over the devices).
- ``health``: how every trial and sweep run trained (learned, unstable, flat, oom), judged once.
- ``trial``: step 3, the short trial (double / halve / stop; mixed precision before halving).
- ``candidates`` and ``sweep``: step 4, the comparison sweep's runs and its three-sentence rule.
- ``precision``: what runs in which precision; mixed precision before accumulation.
- ``lr``: LR scaling and warmup, and the bound past what was validated.
- ``validated``: what "validated" means for a (global batch, LR), which every rule that needs the word reads.
- ``noise`` and ``goodput``: the gradient noise scale and the batch it and the step times suggest.
- ``plan``: the data-parallel plan for the target cluster, its LR and warmup, and its warnings.

Nothing here imports the runner, the session, the launcher, the CLI or the app: ``advisor.session`` drives
these decisions with the real runner, and tests drive them with a stub runner in milliseconds. Every answer
carries its reason. The names below are the package's public surface.
"""

from __future__ import annotations

from .candidates import SUBSET_SWEEP, SweepOutcome, sweep_candidates, sweep_run_settings, sweep_samples
from .inputs import (MIN_SWEEP_STEPS, SWEEP_EVAL_POINTS, Decide, MethodSettings, Runner, WorkloadInfo, lr_and_warmup,
                     lr_for, warmup_for)
from .noise import noise_estimate, noise_summary
from .plan import NOISE_MARGIN, heterogeneous_devices_note, make_plan, validated_global
from .precision import (MIXED_PRECISIONS, PrecisionChoice, accumulation_for, choose_precision,
                        mixed_before_accumulation)
from .caps import data_cap
from .start import start_value
from .trial import HIGH_WATER, TrialOutcome, short_trial, trained_cap
from .validated import nearest_validated_lr

__all__ = [
    "HIGH_WATER", "MIN_SWEEP_STEPS", "MIXED_PRECISIONS", "NOISE_MARGIN", "SUBSET_SWEEP", "SWEEP_EVAL_POINTS",
    "Decide", "MethodSettings", "PrecisionChoice", "Runner", "SweepOutcome", "TrialOutcome",
    "WorkloadInfo", "accumulation_for", "choose_precision", "data_cap", "heterogeneous_devices_note",
    "lr_and_warmup", "lr_for", "make_plan", "mixed_before_accumulation", "nearest_validated_lr", "noise_estimate",
    "noise_summary", "short_trial", "start_value", "sweep_candidates", "sweep_run_settings", "sweep_samples", "trained_cap", "validated_global",
    "warmup_for",
]
