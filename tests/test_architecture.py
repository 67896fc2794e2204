"""Architecture rules. Each runs in a fresh interpreter, so nothing this test session
already imported can hide a violation, and each checks that it had something to check
(the UI library really is installed, the import guard really blocks), so none can pass
vacuously.

- The engine (every module of ``advisor`` but the CLI and the Textual app) imports no UI.
- The adapter registry lists names without importing a plugin.
- ``advisor.load_recipe`` reads a real recipe without torch, the workload or the adapter.
- ``advisor diagnose`` and ``advisor check`` never import torch.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from advisor.adapters import available_adapters

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "digits-cnn.toml"
CORPUS_LOG = ROOT / "tests" / "corpus" / "logs" / "torchrun_oom_rank1.log"
UI_PACKAGES = ("textual", "rich")
# The parts of the advisor package that may import a UI: the Textual app and the command line.
NOT_ENGINE = ("advisor.cli", "advisor.tui")

MARK = "@@result@@ "
# A sys.meta_path finder: records every import of a blocked module (and its submodules) and
# refuses it. The record catches an import that the code under test tried and swallowed.
GUARD = """
import sys

class ImportGuard:
    def __init__(self, blocked):
        self.blocked = tuple(blocked)
        self.hits = []

    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in self.blocked):
            self.hits.append(name)
            raise ImportError(f"import guard: {name} must not be imported here")
        return None
"""


def run_probe(code: str, tmp_path: Path, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter (outside the source tree); it prints MARK + JSON last."""
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0, f"probe failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    assert lines, f"probe printed no result:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len(MARK):])


def is_engine(name: str) -> bool:
    return not any(name == part or name.startswith(part + ".") for part in NOT_ENGINE)


def engine_modules_on_disk() -> set[str]:
    """Every module file under advisor/, as a module name, less the CLI and the Textual app."""
    names = set()
    for path in (ROOT / "advisor").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
    return {n for n in names if is_engine(n)}


def test_the_engine_imports_no_ui_even_with_textual_installed(tmp_path):
    for ui in UI_PACKAGES:
        assert importlib.util.find_spec(ui) is not None, f"{ui} is not installed, so this test would prove nothing"
    code = f"""
import importlib, json, pkgutil, sys
NOT_ENGINE = {NOT_ENGINE!r}
imported = []

def walk(path, prefix):
    # pkgutil.walk_packages would import advisor.tui to look inside it; descend by hand instead.
    for info in pkgutil.iter_modules(path, prefix):
        if any(info.name == p or info.name.startswith(p + ".") for p in NOT_ENGINE):
            continue
        module = importlib.import_module(info.name)
        imported.append(info.name)
        if info.ispkg:
            walk(module.__path__, info.name + ".")

import advisor
imported.append("advisor")
walk(advisor.__path__, "advisor.")
ui = sorted(m for m in sys.modules if m.split(".")[0] in {UI_PACKAGES!r})
print({MARK!r} + json.dumps({{"imported": imported, "ui": ui}}))
"""
    result = run_probe(code, tmp_path)
    # Every engine module was imported (the walk missed none) ...
    assert set(result["imported"]) == engine_modules_on_disk()
    assert {"advisor.method", "advisor.method.ceiling", "advisor.diagnose.scan", "advisor.workloads.digits"} <= set(
        result["imported"])
    # ... and none of them pulled in a UI library.
    assert result["ui"] == [], f"engine modules imported UI modules: {result['ui'][:10]}"


def test_the_registry_lists_adapters_without_importing_them(tmp_path):
    code = f"""
import json, sys
from advisor.adapters import available_adapters
found = available_adapters()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("advisor_adapters", "torch"))
print({MARK!r} + json.dumps({{"found": found, "loaded": loaded}}))
"""
    result = run_probe(code, tmp_path)
    assert result["found"]["ddp"] == "advisor_adapters.ddp:DDPAdapter"
    assert result["loaded"] == [], f"listing adapters imported {result['loaded']}"


def test_load_recipe_reads_a_real_recipe_without_torch_the_workload_or_the_adapter(tmp_path):
    data = tomllib.loads(RECIPE.read_text(encoding="utf-8"))
    adapter_module = available_adapters()[data["inputs"]["adapter"]].split(":")[0]
    blocked = {"torch", "numpy", "sklearn", "advisor.workload", "advisor.workloads",
               adapter_module, adapter_module.split(".")[0]}
    spec = data["workload"]["spec"]
    if ":" in spec and "/" not in spec and not spec.split(":")[0].endswith(".py"):
        blocked.add(spec.split(":")[0])  # a user workload named as module:function
    code = GUARD + f"""
import json
guard = ImportGuard({sorted(blocked)!r})
sys.meta_path.insert(0, guard)
import advisor
recipe = advisor.load_recipe({str(RECIPE)!r})
hits = list(guard.hits)
try:  # the guard really blocks
    import {adapter_module}
    guard_works = False
except ImportError:
    guard_works = True
b, lr = recipe.batch, recipe.lr
print({MARK!r} + json.dumps({{
    "hits": hits, "guard_works": guard_works,
    "batch": {{"per_device": b.per_device, "world_size": b.world_size,
               "accumulation_steps": b.accumulation_steps, "global": b.global_}},
    "lr": {{"value": lr.value, "base": lr.base, "base_global_batch": lr.base_global_batch, "rule": lr.rule}},
    "warmup_steps": recipe.warmup.steps,
}}))
"""
    result = run_probe(code, tmp_path)
    assert result["guard_works"]
    assert result["hits"] == [], f"load_recipe tried to import {result['hits']}"
    assert result["batch"] == {k: data["batch"][k] for k in ("per_device", "world_size", "accumulation_steps", "global")}
    assert result["lr"] == {k: data["lr"][k] for k in ("value", "base", "base_global_batch", "rule")}
    assert result["warmup_steps"] == data["warmup"]["steps"]


@pytest.mark.parametrize("args, expected_rc", [
    (["diagnose", str(CORPUS_LOG)], 1),  # 1: it has findings (an OOM on rank 1)
    (["check", str(RECIPE)], 0),
    (["explain", str(RECIPE)], 0),
], ids=["diagnose", "check", "explain"])
def test_diagnose_and_check_never_import_torch(tmp_path, args, expected_rc):
    assert importlib.util.find_spec("torch") is not None, "torch is not installed, so this test would prove nothing"
    code = f"""
import json, sys
from advisor.cli import main
rc = main({args!r})
print({MARK!r} + json.dumps({{"rc": rc, "torch": sorted(m for m in sys.modules if m.split(".")[0] == "torch")[:5]}}))
"""
    result = run_probe(code, tmp_path)
    assert result["rc"] == expected_rc
    assert result["torch"] == [], f"advisor {args[0]} imported torch"


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (absolute, and relative resolved against its package), read from its AST."""
    import ast

    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)  # `from advisor import cli`
    return names


def forbidden_imports(files, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for path in files:
        hits = sorted(m for m in imported_modules(path) if any(m == f or m.startswith(f + ".") for f in forbidden))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


def test_the_app_imports_nothing_from_the_cli():
    """The app builds settings through the engine (advisor.settings), never through the CLI's argument parser."""
    files = sorted((ROOT / "advisor" / "tui").rglob("*.py"))
    assert len(files) > 5 and imported_modules(ROOT / "advisor" / "tui" / "app.py")  # something to check
    assert forbidden_imports(files, ("advisor.cli",)) == {}


def test_the_engine_files_import_no_ui_app_or_cli():
    """The same rule as the fresh-interpreter walk, read from every engine file's source, function-level imports
    included (the walk only sees what importing a module runs)."""
    files = [p for p in sorted((ROOT / "advisor").rglob("*.py"))
             if not any(p.is_relative_to(ROOT / "advisor" / part) for part in ("tui", "cli.py"))]
    assert len(files) > 20
    assert forbidden_imports(files, ("textual", "rich", "advisor.tui", "advisor.cli")) == {}


def test_the_method_package_decides_without_running_anything():
    """advisor/method is the four steps' rules, read top to bottom: nothing in it imports the runner, the session,
    the launcher, the history, the CLI or the app (its decisions take what a runner measured, so stubs test them in
    ms; the history's reuse reaches step 4 as a runner, advisor.history_reuse)."""
    files = sorted((ROOT / "advisor" / "method").rglob("*.py"))
    assert len(files) >= 2 and imported_modules(ROOT / "advisor" / "method" / "sweep.py")
    assert forbidden_imports(files, ("advisor.runner", "advisor.session", "advisor.launch", "advisor.probe_server",
                                     "advisor.history", "advisor.history_reuse", "advisor.setup_checks",
                                     "advisor.cli", "advisor.tui", "textual")) == {}


def project_modules() -> dict[str, Path]:
    """Every module of the project, by the name it is imported as: advisor.*, and adapters/ as advisor_adapters.*"""
    modules = {}
    for folder, package in ((ROOT / "advisor", "advisor"), (ROOT / "adapters", "advisor_adapters")):
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def import_edges(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The project modules ``name`` imports, anywhere in the file (function-level imports too), each with the line
    of its first import. ``from package import module`` names the module, not the package's __init__."""
    import ast

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        # A package a module lives in is initialised before the module runs (`from . import __version__`): no circle.
        if target in modules and target != name and not name.startswith(target + "."):
            edges.setdefault(target, line)

    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                 and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING") for inner in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in type_only:  # `if TYPE_CHECKING:` names a type for annotations and never runs
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            submodules = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules]
            for target in submodules:
                add(target, node.lineno)
            if len(submodules) < len(node.names):  # names defined in the module (or its __init__) itself
                add(source, node.lineno)
    return edges


def import_circles() -> list[list[str]]:
    """The import graph's circles: each strongly connected group of two or more modules (Tarjan), sorted."""
    modules = project_modules()
    graph = {name: import_edges(name, path, modules) for name, path in modules.items()}
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(groups), graph, modules


def test_no_import_circle_among_the_projects_modules():
    """No module reaches itself through imports, function-level ones included (a deferred import hides a circle
    from Python, not from a reader): each layer imports only the ones below it."""
    circles, graph, modules = import_circles()
    assert len(modules) > 80 and graph["advisor.export"] and graph["advisor_adapters.deepspeed"]  # read something
    described = []
    for group in circles:
        inside = [f"{a} -> {b} ({modules[a].relative_to(ROOT)}:{line})" for a in group
                  for b, line in sorted(graph[a].items()) if b in group]
        described.append("circle of " + ", ".join(group) + ":\n    " + "\n    ".join(inside))
    assert circles == [], "\n".join(described)


def test_the_circle_finder_finds_a_circle():
    """The finder itself: a function-level import back from a module it imports is a circle."""
    modules = project_modules()
    assert "advisor.recipe" in import_edges("advisor.explain", modules["advisor.explain"], modules)
    assert "advisor_adapters.accelerate" in import_edges("advisor_adapters.deepspeed",
                                                         modules["advisor_adapters.deepspeed"], modules)
