"""Recipe dump: what every plan a pytest run finishes writes, so two trees can be diffed (issue 39: "the recipes
the stub-runner scenario tests produce are unchanged").

A pytest plugin. For each ``Session.finish`` a test calls it writes, under $RECIPE_DUMP:

- ``<test id>.<n>.toml``: the recipe (``dumps_recipe(build_recipe(result))``), as ``advisor plan`` writes it;
- ``<test id>.<n>.txt``: the explained summary (``human_summary(..., explain=True)``), then every event the
  session emitted, one ``repr`` a line.

Wall-clock numbers (timestamps, seconds, this checkout's path, the host) are masked, so two dumps of one tree are
byte-identical; what remains is what the rules decided. A refactor is behaviour-neutral for these scenarios when
``diff -r`` of the dumps before and after is empty.

    FILES="tests/test_method_decisions.py tests/test_sweep_rule.py tests/test_sweep_walk_and_seeds.py \\
      tests/test_same_answer.py tests/test_goodput.py tests/test_noise_stage.py tests/test_noise_accumulation.py \\
      tests/test_history.py tests/test_replan.py tests/test_gpu_memory_accounting.py tests/test_device_boundary.py \\
      tests/test_cli_inputs.py"      # the files the session carve compared; then tests/test_tui_app.py
    RECIPE_DUMP=/tmp/dump-after PYTHONPATH=bench:. python -m pytest -q -p recipe_dump -p no:cacheprovider $FILES
    mkdir /tmp/base && git archive BASE | tar -x -C /tmp/base      # the tree before (adapters/ importable as
    cd /tmp/base && RECIPE_DUMP=/tmp/dump-before PYTHONPATH=$OLDPWD/bench:. python -m pytest ... $FILES   # usual)
    diff -r /tmp/dump-before /tmp/dump-after

Checked on issue 39's audit: two dumps of one tree are identical (tests/test_method_decisions.py and
tests/test_sweep_rule.py: 40 files); with SweepPolicy.accuracy_margin 0.01 -> 0.011, 35 of them differ.

The real digits-cnn plan is not a pytest scenario. Carve5 compared it by replaying recipes/digits-cnn.toml's ledger
through Session (a runner answering every probe and run from the ledger's rows) on both trees; that script was not
kept. A fresh ``bench/same_answer.py`` plan on each tree also compares it, at minutes a plan and with run-to-run
noise.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

_current = {"test": "outside-a-test", "count": 0, "root": str(Path.cwd())}
# Wall-clock values: "key = 12.3" lines whose key says so, every value of a table named so ([method.step_seconds]),
# events' fields (StepFinished(..., seconds=0.00016)), ISO timestamps and "12 s" anywhere in the text.
_TIMED = r"(?:[\w.]*_)?(?:at|date|created|started|finished|hostname|host|pid)"
_TIMED_KEYS = re.compile(rf"^(\s*\"?{_TIMED}\"?\s*=\s*).*$", re.MULTILINE)
_TIMED_FIELDS = re.compile(r"\b(\w*seconds)=[-+\d.e]+")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)?")
_SECONDS = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|min)\b")


def mask(text: str) -> str:
    lines, timed_table = [], False
    for line in text.replace(_current["root"], "<repo>").splitlines():
        if line.startswith("["):
            timed_table = "seconds" in line
        elif timed_table and "=" in line:
            line = line.split("=", 1)[0] + "= <masked>"
        lines.append(line)
    text = _TIMESTAMP.sub("<time>", "\n".join(lines) + "\n")
    text = _TIMED_KEYS.sub(r"\1<masked>", text)
    text = _TIMED_FIELDS.sub(r"\1=<masked>", text)
    return _SECONDS.sub("<seconds>", text)


def _name() -> str:
    _current["count"] += 1
    safe = re.sub(r"[^\w.-]+", "_", _current["test"]).strip("_")[:180]
    return f"{safe}.{_current['count']}"


def pytest_configure(config):
    folder = os.environ.get("RECIPE_DUMP")
    if not folder:
        raise pytest.UsageError("recipe_dump: set RECIPE_DUMP to the folder to write into")
    _current["root"] = str(config.rootpath)  # the tree under test, masked as <repo>
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)

    from advisor import session as session_module
    from advisor.recipe import dumps_recipe
    from advisor.report import build_recipe, human_summary

    Session = session_module.Session
    finish, emit = Session.finish, Session._emit

    def recording_emit(self, event):
        self.__dict__.setdefault("_dumped_events", []).append(repr(event))
        return emit(self, event)

    def dumping_finish(self, *args, **kwargs):
        result = finish(self, *args, **kwargs)
        name = _name()
        recipe = build_recipe(result, argv=[])
        (out / f"{name}.toml").write_text(mask(dumps_recipe(recipe)))
        summary = human_summary(result, "recipe.toml", explain=True, recipe=recipe)
        events = "\n".join(self.__dict__.get("_dumped_events", []))
        (out / f"{name}.txt").write_text(mask(f"{summary}\n\n# events\n{events}\n"))
        return result

    Session._emit, Session.finish = recording_emit, dumping_finish


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _current["test"], _current["count"] = item.nodeid, 0
