"""Stale build locks of torch's JIT extensions (what DeepSpeed's ops are built with).

torch builds an extension under a ``lock`` file (``torch.utils.file_baton.FileBaton``) and every other
process that needs it waits, silently and forever, until the file goes. A build killed midway (a cancelled
probe, a timeout, Ctrl-C) leaves the file behind, and from then on every DeepSpeed worker on the host hangs
at start-up. A lock is stale when no process is building in its folder: torch runs ninja with the build
folder as its working directory for the whole build.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

# A lock younger than this may belong to a build that has not started ninja yet (it writes build.ninja first).
FRESH_LOCK_S = 20.0


def extensions_root() -> Path:
    """Where torch builds extensions: $TORCH_EXTENSIONS_DIR, else torch_extensions in the user's cache folder
    (torch.utils.cpp_extension.get_default_build_root, computed without importing torch)."""
    given = os.environ.get("TORCH_EXTENSIONS_DIR")
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "torch_extensions"


def _building_dirs() -> set[str] | None:
    """Working directories of every process on this host, or None where /proc cannot tell."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    found = set()
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                found.add(os.path.realpath(os.readlink(entry / "cwd")))
            except OSError:
                pass  # gone, or another user's process: it cannot be building in our cache
    return found


def stale_build_locks(root: Path | None = None, now: float | None = None) -> list[Path]:
    """Lock files under ``root`` that no running build holds (oldest first); [] where that cannot be told."""
    root = root or extensions_root()
    if not root.is_dir():
        return []
    # torch's layout: ROOT/NAME/lock with $TORCH_EXTENSIONS_DIR, ROOT/py311_cpu/NAME/lock without.
    locks = [p for p in (*root.glob("*/lock"), *root.glob("*/*/lock")) if p.is_file()]
    now = time.time() if now is None else now
    old = [p for p in locks if now - p.stat().st_mtime > FRESH_LOCK_S]
    if not old:
        return []
    building = _building_dirs()
    if building is None:
        return []
    stale = [p for p in old if os.path.realpath(p.parent) not in building]
    return sorted(stale, key=lambda p: p.stat().st_mtime)


def stale_lock_message(locks: list[Path]) -> str:
    paths = " ".join(str(p) for p in locks)
    return (f"a stale build lock of torch's JIT extensions ({paths}), left by a build that was killed midway, "
            "makes every DeepSpeed worker on this host wait for it forever; no build is running in its folder, so "
            f"remove it: rm {paths}")


HEARTBEAT_S = 5.0


@contextlib.contextmanager
def heartbeat(what: str, every_s: float = HEARTBEAT_S):
    """Emit a "heartbeat" event every ``every_s`` seconds while the block runs (a JIT build of a DeepSpeed op
    prints nothing for minutes; any event resets the engine's idle timeout)."""
    from .worker import emit

    done = threading.Event()

    def beat():
        while not done.wait(every_s):
            stale = stale_build_locks()
            if stale:  # waiting on a lock nobody holds is no progress: stop beating so the idle timeout names it
                emit("stalled", what=what, message=stale_lock_message(stale))
                return
            emit("heartbeat", what=what)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
