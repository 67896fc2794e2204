"""`advisor plan ... -- SCRIPT ARGS` as a user runs it, for the tests of the script door (test_script_door) and of
the adapters that plan through it (test_fsdp_adapter): one helper, and one plan of the plain DDP loop that both
read (the conftest's session fixture ``plain_loop_door_plan``), so the slow tier launches it once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).parent / "door_scripts"
PLAIN_ARGS = ["--batch-size", "{per_device}", "--steps", "{steps}", "--lr", "{lr}", "--warmup", "{warmup}"]
# Base global 128: the trial starts at 64 per device, one doubling short of the data's cap (89), so it runs once;
# at LR 0.2 the sweep's runs learn (at 0.05 none did in 6-12 steps).
PLAIN_LOOP_OPTIONS = ("--device-memory", "256MiB", "--base-lr", "0.2", "--base-batch", "128")


def plan_through_door(out_dir: Path, script_argv: list[str], *options: str):
    """`advisor plan ... -- SCRIPT ARGS` in a subprocess (cwd tests/door_scripts); its process group is ended
    whatever happens. The recipe it wrote to ``out_dir``/recipe.toml (loaded).

    Every job through the door is a fresh launch of the script (seconds each), and the subject here is the door,
    not the sweep's rule (tested in test_method_decisions and test_cli_plan): no walk past a winning end (the
    door itself runs one seed per candidate: it cannot seed a script). 16 sweep steps: at 6, every candidate
    of the plain loop stayed flat, and a sweep where none learned exits 3."""
    from advisor.recipe import load_recipe

    out = Path(out_dir) / "recipe.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "advisor.cli", "plan", "--nproc", "2", "--trial-steps", "4", "--sweep-steps", "16",
            "--sweep-extensions", "0", "--no-history", "--out", str(out), *options, "--", *script_argv]
    proc = subprocess.Popen(argv, cwd=SCRIPTS, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=1500)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, err[-3000:]
    return load_recipe(out)
