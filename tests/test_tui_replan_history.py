"""The app's parts of issue 17 against the stub runner: the Recipe screen re-plans for another GPU (the engine's
table, estimates labelled) and records the saved plan in the history; the Setup shows what the history knows."""

from __future__ import annotations

import json

import pytest
from tui_stub import screen_text, stub_app, wait_for


pytestmark = pytest.mark.timeout(180)


# The Recipe screen's re-plan for another GPU and the history its save records are blocks of the fast tier's one
# walk to a finished plan: tests/test_tui_app.py::test_a_finished_plan_asks_before_a_redo_saves_over_a_recipe_...


async def test_setup_shows_what_the_history_knows_about_the_workload(tmp_path, monkeypatch):
    path = tmp_path / "h.jsonl"
    monkeypatch.setenv("ADVISOR_HISTORY", str(path))
    row = {"v": 1, "time": "2026-11-30T06:54:34+00:00", "kind": "sweep", "workload": {"name": "digits-mlp",
           "train_size": 1438}, "device": {"type": "cpu", "name": "cpu", "memory_bytes": 2**27}, "adapter": "ddp",
           "per_device": 32, "world_size": 2, "accumulation": 1, "global_batch": 64, "status": "ok",
           "val_metric": 0.961, "throughput": 900.0}
    path.write_text(json.dumps(row) + "\n")
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "History" in screen_text(app, "#workload-status"), what="the history line")
        text = screen_text(app, "#workload-status")
        assert "1 run(s) of digits-mlp" in text and "best single sweep run (one seed; not the advice): global 64" in text and "0.961" in text
