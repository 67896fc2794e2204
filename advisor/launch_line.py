"""Launch lines for the user's training: the plan's numbers as a LaunchSpec, rendered as script arguments, a
torchrun line and one shell line. The one renderer of launch lines (the recipe, the summary, every export and
every adapter's ``launch_command``); plain strings, no adapter and no recipe."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LaunchSpec:
    """What a launch line for the user's training needs to say."""

    nproc_per_node: int
    nodes: int
    per_device: int
    accumulation_steps: int
    lr: float
    warmup_steps: int
    precision: str
    env: dict = field(default_factory=dict)
    script: str = "train.py"
    optimizer: str | None = None  # with its hyper-parameters, passed to the script as the probes ran them
    optimizer_hyperparameters: dict = field(default_factory=dict)


def env_prefix(env: dict) -> list[str]:
    """``env K=V ...`` in front of a command, so a copied launch line carries the settings."""
    return ["env", *(f"{k}={v}" for k, v in sorted(env.items()))] if env else []


def training_args(spec: LaunchSpec) -> list[str]:
    """The plan's numbers as arguments to the user's script, the same for every launcher."""
    args = [f"--batch-size={spec.per_device}", f"--accumulation-steps={spec.accumulation_steps}",
            f"--lr={spec.lr:.6g}", f"--warmup-steps={spec.warmup_steps}", f"--precision={spec.precision}"]
    if spec.optimizer:
        args += optimizer_args(spec.optimizer, spec.optimizer_hyperparameters)
    return args


def optimizer_args(optimizer: str, hyperparameters: dict | None) -> list[str]:
    """The optimizer and its hyper-parameters as script arguments (``--weight-decay=0.05``, ``--betas=0.9,0.999``)."""
    args = [f"--optimizer={optimizer}"]
    for key, value in (hyperparameters or {}).items():
        text = ",".join(f"{v:g}" for v in value) if isinstance(value, (list, tuple)) else f"{value:g}"
        args.append(f"--{key.replace('_', '-')}={text}")
    return args


def torchrun_launch_line(spec: LaunchSpec) -> list[str]:
    if spec.nodes > 1:
        where = [f"--nnodes={spec.nodes}", "--node-rank=$NODE_RANK", "--rdzv-backend=c10d",
                 "--rdzv-endpoint=$MASTER_ADDR:29500"]
    else:
        where = ["--standalone", "--nnodes=1"]
    return [*env_prefix(spec.env), "torchrun", *where, f"--nproc-per-node={spec.nproc_per_node}", spec.script,
            *training_args(spec)]


# A $NAME in a launch argument is each node's own value (NODE_RANK, MASTER_ADDR): the shell fills it in.
_SHELL_VARIABLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")


def shell_line(argv: list[str]) -> str:
    """argv as one line to paste into a shell: the one renderer of launch lines (recipe, summary, exports).

    Everything is quoted where the shell needs it except ``$NAME`` references, which stay outside quotes
    so that each node's shell expands them (``shlex.join`` would pass them on literally).
    """
    return " ".join(_shell_word(arg) for arg in argv)


def _shell_word(arg: str) -> str:
    if not arg:
        return "''"
    parts, start = [], 0
    for match in _SHELL_VARIABLE.finditer(arg):
        name = match.group().strip("${}")
        following = arg[match.end():match.end() + 1]
        parts.append(shlex.quote(arg[start:match.start()]) if match.start() > start else "")
        # ${NAME} where a name character follows, so the shell does not read a longer name.
        parts.append(f"${{{name}}}" if re.match(r"[A-Za-z0-9_]", following) else f"${name}")
        start = match.end()
    if start < len(arg):
        parts.append(shlex.quote(arg[start:]))
    return "".join(parts)
