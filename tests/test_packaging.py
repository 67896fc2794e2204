"""What users install must be what is tested: build a wheel the way pip does and read it.

.ci/wheel-check goes further (a fresh venv, the installed `advisor` run); this is the
quick check that every package, including ones not written yet, ends up in the wheel.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("advisor", "adapters", "pyproject.toml", "setup.py", "README.md")
# adapters/ installs as advisor_adapters (package-dir in pyproject.toml).
INSTALLED_AS = {"advisor": "advisor", "adapters": "advisor_adapters"}


def build_wheel(src: Path, out: Path) -> tuple[Path, str]:
    """PEP 517 build_wheel with setuptools in a subprocess; returns the wheel and everything it printed."""
    code = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-W", "default", "-c", code, str(out)], cwd=src, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / proc.stdout.strip().splitlines()[-1], proc.stdout + proc.stderr


def test_the_wheel_holds_every_package_and_its_data_and_building_does_not_warn(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    # Packages that do not exist yet must ship too, with their stylesheets.
    for pkg in ("advisor/tui", "advisor/tui/widgets", "adapters/extra"):
        (src / pkg).mkdir(parents=True, exist_ok=True)
        (src / pkg / "__init__.py").write_text("")
    (src / "advisor/tui/app.tcss").write_text("Screen { }\n")
    (src / "advisor/tui/widgets/chart.tcss").write_text("Chart { }\n")

    wheel, output = build_wheel(src, tmp_path / "dist")
    for warning in ("Deprecat", "BuildBackendWarning", "SetuptoolsWarning"):
        assert warning not in output, f"building the wheel warned:\n{output}"

    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for folder, installed in INSTALLED_AS.items():
        for path in (src / folder).rglob("*"):
            if path.suffix in (".py", ".tcss"):
                expected.add(installed + "/" + path.relative_to(src / folder).as_posix())
    assert "advisor/diagnose/__init__.py" in expected and "advisor/tui/widgets/chart.tcss" in expected
    missing = sorted(expected - names)
    assert not missing, f"the wheel lacks {missing}"
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"advisor", "advisor_adapters"}, top_level

    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    for requirement in ("textual>=1.0", "textual-plotext>=1.0", "plotext>=5.2"):
        assert f"Requires-Dist: {requirement}" in metadata
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "advisor = advisor.cli:main" in entry_points and "ddp = advisor_adapters.ddp:DDPAdapter" in entry_points


# torch APIs the engine calls, and the torch release that introduced each (from torch's history).
TORCH_APIS_NEEDED = {
    ("torch.distributed._tools.mem_tracker", "MemTracker"): (2, 5),  # advisor/memory.py: CPU peak memory
    ("torch.amp", "GradScaler"): (2, 3),  # advisor/worker.py: torch.amp.GradScaler("cuda") under fp16
}


def test_the_declared_torch_range_covers_what_the_engine_calls():
    import importlib
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_req = next(Requirement(d) for d in dependencies if Requirement(d).name == "torch")
    floors = [Version(s.version) for s in torch_req.specifier if s.operator == ">="]
    assert floors and not torch_req.specifier.contains("3.0"), torch_req
    needed = max(TORCH_APIS_NEEDED.values())
    assert floors[0].release[:2] >= needed, f"{torch_req} admits torch older than {needed}, which lacks an API used"
    for (module, name) in TORCH_APIS_NEEDED:
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"
    assert torch_req.specifier.contains("2.13.0")  # what the Makefile and .ci install and test
