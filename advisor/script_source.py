"""What the engine reads from a user's training script without running it: the job's name for it and its imports.

Imported by the script door (advisor/door.py) and the fork server (advisor/probe_server.py), so it imports no
other module of the project.
"""

from __future__ import annotations

from pathlib import Path

SCRIPT_WORKLOAD_PREFIX = "script:"  # a job's workload field names the script it runs: "script:train.py"


def installed_imports(script: Path) -> list[str]:
    """The modules ``script`` imports at its top level (inside top-level ``try`` and ``if`` blocks too) that come
    from installed packages, not from the script's own folder: what a fork server imports once for every job
    (torch, transformers, accelerate), so no job pays for them again. The user's own modules are left out: their
    top-level code runs in each job, as in a fresh process. Read with ``ast``, never by running the script."""
    import ast
    import importlib.util

    try:
        tree = ast.parse(script.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    body = list(tree.body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, (ast.Try, ast.If)):
            body[:0] = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
    own_folder = script.resolve().parent
    found = []
    for name in dict.fromkeys(names):
        try:
            spec = importlib.util.find_spec(name.partition(".")[0])
        except (ImportError, ValueError):
            continue
        origin = getattr(spec, "origin", None) if spec else None
        if origin and own_folder not in Path(origin).resolve().parents:
            found.append(name)
    return found
