"""The app's steps in order, and what the command line pre-fills: read by the app, its screens and widgets
(which therefore never import the app itself)."""

from __future__ import annotations

from dataclasses import dataclass

STEPS = (("setup", "Setup"), ("ceiling", "Memory ceiling"), ("start", "Starting value"), ("trial", "Trial run"),
         ("sweep", "Sweep"), ("recipe", "Recipe"))
STEP_NAMES = tuple(name for name, _ in STEPS)
STEP_TITLES = dict(STEPS)
HELP_KEYS = ("question_mark",)  # help even where a field has focus (the binding also takes f1)


@dataclass
class Prefill:
    """What the command line pre-fills on the Setup screen: one field a declared option with ``prefill`` help."""

    workload: str | None = None
    adapter: str | None = None
    nproc: int | None = None
    device_memory: str | None = None
    trial_steps: int | None = None
    sweep_steps: int | None = None
    script: str | None = None  # SCRIPT ARGS as one line (`advisor -- train.py ARGS`), instead of a workload

    @classmethod
    def from_args(cls, args, script: str | None = None) -> "Prefill":
        """What `advisor [tui]`'s pre-fill flags (the options declared with ``prefill``) say."""
        from ..options import PLAN_OPTION_TABLE

        return cls(**{o.name: getattr(args, o.name, None) for o in PLAN_OPTION_TABLE if o.prefill}, script=script)
