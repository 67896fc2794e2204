"""The public Workload API: how a user points the advisor at their own model.

A workload spec is a built-in name (``digits-cnn``), ``package.module:function``
or ``path/to/file.py:function``; the function takes no arguments and returns a
:class:`Workload`. Resolving one imports user code, so it happens only when a
command is asked to run that workload, never when a recipe is read.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from .errors import WorkloadError
# The record itself lives below the loader (an integration builds one without importing the loader); its names
# stay importable from here, where users and the workers have always found them.
from .workload_record import (HIGHER_IS_BETTER_WORDS, LOSS_METRIC, LOWER_IS_BETTER_WORDS, Workload,  # noqa: F401
                              check_scalar_loss, is_iterable_dataset, metric_direction)


def _builtin_table() -> dict[str, tuple[str, str]]:
    from .workloads import BUILTINS

    return BUILTINS


def builtin_names() -> dict[str, str]:
    """Built-in workload name -> one-line description, without building anything."""
    return {name: desc for name, (_, desc) in _builtin_table().items()}


def _did_you_mean(spec: str, builtins: dict) -> str:
    """A sentence naming the likely intended spec (a built-in one typo away, or a file's functions), or ""."""
    import difflib

    close = difflib.get_close_matches(spec, list(builtins), n=1, cutoff=0.75)
    if close:
        return f"Did you mean {close[0]!r}? "
    path = Path(spec).expanduser()
    if spec.endswith(".py") or path.is_file():
        functions = _top_level_functions(path)
        if functions:
            likely = next((f for f in functions if "workload" in f), functions[0])
            return (f"A workload file is named with its function, 'file.py:function': did you mean "
                    f"'{spec}:{likely}'? (it defines {', '.join(functions[:8])}) ")
        return "A workload file is named with its function: 'file.py:function'. "
    return ""


def _top_level_functions(path: Path) -> list[str]:
    """The functions a file defines, read without running it (a syntax error or a missing file: none)."""
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]


def load_workload_function(spec: str) -> Callable[[], Any]:
    builtins = _builtin_table()
    if spec in builtins:
        target = builtins[spec][0]
    elif ":" in spec:
        target = spec
    else:
        raise WorkloadError(f"Unknown workload {spec!r}. {_did_you_mean(spec, builtins)}Use a built-in "
                            f"({', '.join(builtins)}; see `advisor workloads`), 'package.module:function', or "
                            "'path/to/file.py:function'.")
    location, _, func_name = target.rpartition(":")
    if not location or not func_name:
        raise WorkloadError(f"The workload spec {spec!r} needs the form 'module:function' or 'file.py:function'.")
    _refuse_a_path_that_is_no_module(location, func_name, spec)
    try:
        if location.endswith(".py") or "/" in location:
            path = Path(location).expanduser().resolve()
            if not path.is_file():
                raise WorkloadError(f"The workload file {location!r} does not exist. Check the path in {spec!r}.")
            mod_name = f"_advisor_workload_{abs(hash(str(path)))}"
            # As `python file.py` does: the file's own folder first on sys.path, so it imports its siblings.
            if str(path.parent) not in sys.path:
                sys.path.insert(0, str(path.parent))
            module_spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[mod_name] = module
            module_spec.loader.exec_module(module)
        else:
            # As `python -m` would: a module in the current folder imports (the `advisor` script's own folder,
            # not the user's, is first on sys.path); the workers get the same folder on PYTHONPATH.
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(location)
    except WorkloadError:
        raise
    except ModuleNotFoundError as exc:
        raise WorkloadError(
            f"Cannot import the workload module for {spec!r}: {exc}. Run from the directory that holds the "
            "package, add it to PYTHONPATH, or install the missing dependency."
        ) from None
    except Exception as exc:  # user code can raise anything while importing
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{last.filename}:{last.lineno}"
        if isinstance(exc, SyntaxError) and exc.filename:  # the traceback ends in importlib, not the user's line
            where = f"{exc.filename}:{exc.lineno}"
        raise WorkloadError(
            f"Importing the workload {spec!r} failed with {type(exc).__name__}: {exc} "
            f"(at {where}). Fix the error in that file and run again."
        ) from None
    func = getattr(module, func_name, None)
    if func is None:
        public = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise WorkloadError(
            f"The module for {spec!r} has no function {func_name!r}. Callables it defines: "
            f"{', '.join(public[:12]) or 'none'}."
        )
    if not callable(func):
        raise WorkloadError(f"{spec!r} names {type(func).__name__} {func_name!r}, which is not callable.")
    return func


def _refuse_a_path_that_is_no_module(location: str, func_name: str, spec: str) -> None:
    """`--workload train.log:workload` read 'No module named train', and a folder without __init__.py 'has no
    function': both are paths the user meant, so the message names what the path is and the form that works."""
    path = Path(location).expanduser()
    if path.is_dir() and not (path / "__init__.py").is_file() and not path.with_name(path.name + ".py").is_file():
        files = sorted(path.glob("*.py"))
        defining = next((f for f in files if func_name in _top_level_functions(f)), files[0] if files else None)
        example = f"{(defining or path / 'workload.py').as_posix()}:{func_name}"
        found = (f" (Python files there: {', '.join(f.name for f in files[:5])})" if files
                 else " (it holds no .py file)")
        raise WorkloadError(f"The workload {spec!r} names the folder {location!r}{found}: name the file that defines "
                            f"the function, for example {example!r}.")
    if path.is_file() and path.suffix != ".py":
        raise WorkloadError(f"The workload {spec!r} names {location!r}, a file that is not Python source (a workload "
                            "file ends in .py): name the .py file that defines the function, for example "
                            f"'workload.py:{func_name}' (`advisor init` writes one).")


def resolve_workload(spec: str) -> Workload:
    """Import and call the workload function; check what it returned."""
    func = load_workload_function(spec)
    try:
        result = func()
    except WorkloadError:  # an integration's own message (advisor.integrations) is already the clear one
        raise
    except Exception as exc:
        if isinstance(exc, ImportError) and "sklearn" in str(exc):
            raise WorkloadError(
                f"The workload {spec!r} needs scikit-learn for the digits data: pip install 'batch-advisor[examples]'."
            ) from None
        if isinstance(exc, ImportError) and getattr(exc, "name", None) in ("transformers", "timm", "lightning"):
            raise WorkloadError(
                f"The workload {spec!r} needs the {exc.name!r} package, which is not installed here: pip install "
                f"'batch-advisor[{exc.name}]' in the environment the advisor runs in."
            ) from None
        last = traceback.extract_tb(exc.__traceback__)[-1]
        raise WorkloadError(
            f"The workload function {spec!r} raised {type(exc).__name__}: {exc} (at {last.filename}:{last.lineno})."
        ) from None
    from .integrations.transformers import from_trainer, is_trainer  # imports no transformers

    if is_trainer(result):  # a Trainer built in this process (every worker calls the function anew)
        try:
            result = from_trainer(result)
        except WorkloadError:
            raise
        except Exception as exc:  # noqa: BLE001 - the Trainer's parts are user code
            last = traceback.extract_tb(exc.__traceback__)[-1]
            raise WorkloadError(f"Turning the Trainer of {spec!r} into a workload failed with {type(exc).__name__}: "
                                f"{exc} (at {last.filename}:{last.lineno}).") from None
    if not isinstance(result, Workload):
        raise WorkloadError(
            f"The workload function {spec!r} returned {type(result).__name__}, not advisor.Workload. "
            "Return Workload(name=..., build_model=..., train_data=..., val_data=..., loss_fn=..., task=...), "
            "or a transformers.Trainer."
        )
    return result.validate(spec)
