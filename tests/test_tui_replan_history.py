"""The app's parts of issue 17 against the stub runner: the Recipe screen re-plans for another GPU (the engine's
table, estimates labelled) and records the saved plan in the history; the Setup shows what the history knows."""

from __future__ import annotations

import json

import pytest
from tui_stub import screen_text, stub_app, wait_for, walk_to

from advisor.history import read_history

pytestmark = pytest.mark.timeout(180)


async def test_recipe_screen_replans_for_another_gpu_and_saving_records_the_history(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ADVISOR_HISTORY", raising=False)
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await walk_to(pilot, "recipe")
        await wait_for(pilot, lambda: "recipe" in app.done, what="the plan")
        await pilot.press("g")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ReplanScreen", what="the re-plan dialog")
        await pilot.press(*"a100-80gb")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "Re-plan of" in screen_text(app, "#replan-table"), what="the table")
        table = screen_text(app, "#replan-table")
        assert "A100 80GB" in table and "estimate" in table and "bf16" in table
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.name == "recipe", what="the recipe screen")
        await pilot.press("ctrl+s")
        history = tmp_path / "recipes" / ".history.jsonl"
        await wait_for(pilot, lambda: history.exists(), what="the history")
        rows = read_history(history).rows
        assert [r["kind"] for r in rows].count("plan") == 1 and any(r["kind"] == "sweep" for r in rows)
        assert rows[-1]["per_device"] == app.session.result.plan.per_device
        assert "history" in screen_text(app, "#saved")


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
