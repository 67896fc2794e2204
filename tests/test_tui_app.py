"""The app against a stub runner: the walk, going back and redoing, explanations, saving, Diagnose.

Real processes run only in tests/test_tui_real.py; here every step takes milliseconds.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from tui_stub import CHECK_TIMEOUT, cut_cells, run_step, screen_text, stub_app, wait_for, walk_to

from advisor.recipe import check_recipe

pytestmark = pytest.mark.timeout(300)
ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)  # five tests' blocks in one walk: minutes on a loaded 2-core machine
async def test_a_finished_plan_asks_before_a_redo_saves_over_a_recipe_replans_for_a_target_and_asks_at_quit(
        tmp_path, monkeypatch):
    """One walk to the Recipe screen, then what a finished plan does, block by block: the walk; redoing a step of
    an unsaved plan (asked first: Esc keeps the plan, Discard redoes); a re-plan for another GPU; saving over an
    older recipe (asked first, kept as .bak, recorded in the history); a global target replans and clearing it goes back; quitting an unsaved plan (asked: Esc
    cancels, then the palette's Quit and Save writes it, over the file only once confirmed). Each block was its
    own test, each with its own walk (10-60 s of rendering apiece on this machine)."""
    from advisor.history import read_history
    from advisor.tui.screens.help import UnsavedPlanScreen

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ADVISOR_HISTORY", raising=False)  # the history beside the saved recipe, as a user's
    (tmp_path / "recipes").mkdir()
    existing = tmp_path / "recipes" / "digits-mlp.toml"
    existing.write_text("# an older recipe\n")
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        # -- the walk runs every step
        await walk_to(pilot, "recipe")
        await wait_for(pilot, lambda: "recipe" in app.done, what="the plan")
        assert app.done == {"setup", "ceiling", "start", "trial", "sweep", "recipe"}
        assert app.screen.query_one("#path").value == "recipes/digits-mlp.toml"

        # -- redoing a step of an unsaved plan asks first; Esc keeps the plan, Discard redoes the step
        # (Redo, r on a step's screen, resets every later step.)
        plan = app.session.result
        app.action_goto("sweep")
        await wait_for(pilot, lambda: app.screen.name == "sweep", what="the Sweep screen")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, UnsavedPlanScreen), what="the question")
        assert "redo the " + app.get_screen("sweep").TITLE.lower() in screen_text(app, "Static")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.name == "sweep", what="back on the Sweep screen")
        assert app.running is None and "recipe" in app.done and app.session.result is plan
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, UnsavedPlanScreen), what="the question again")
        await pilot.press("d")
        await wait_for(pilot, lambda: "recipe" not in app.done, what="the plan discarded")
        await wait_for(pilot, lambda: app.running is None and "sweep" in app.done, what="the sweep redone")
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.name == "recipe" and "recipe" in app.done, what="the plan again")

        # -- the Recipe screen re-plans for another GPU (issue 17: the engine's table, estimates labelled)
        await pilot.press("g")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ReplanScreen", what="the re-plan dialog")
        await pilot.press(*"a100-80gb")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "Re-plan of" in screen_text(app, "#replan-table"), what="the table")
        table = screen_text(app, "#replan-table")
        assert "A100 80GB" in table and "estimate" in table and "bf16" in table
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.name == "recipe", what="the recipe screen")

        # -- saving over an existing recipe asks first and keeps a backup, and records the plan in the history
        # beside the recipe (issue 17)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="the question")
        await pilot.press("n")  # keep it
        await pilot.pause(0.2)
        assert existing.read_text() == "# an older recipe\n"
        assert "Not saved" in screen_text(app, "#saved")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: "Saved" in screen_text(app, "#saved"), what="the save")
        assert (tmp_path / "recipes" / "digits-mlp.toml.bak").read_text() == "# an older recipe\n"
        saved = screen_text(app, "#saved")
        assert "advisor plan --workload digits-mlp --adapter ddp --nproc 2 --device-memory 128MiB" in saved
        assert "--out recipes/digits-mlp.toml" in saved and "--force" in saved
        data = check_recipe(existing)
        result = app.session.result
        assert data["batch"]["per_device"] == result.plan.per_device
        assert data["batch"]["global"] == result.plan.global_batch
        assert data["method"]["sweep_choice"] == app.session.sweep_outcome.chosen
        assert data["provenance"]["command"].startswith("advisor plan --workload digits-mlp")
        rows = read_history(tmp_path / "recipes" / ".history.jsonl").rows
        assert [r["kind"] for r in rows].count("plan") == 1 and any(r["kind"] == "sweep" for r in rows)
        assert rows[-1]["per_device"] == app.session.result.plan.per_device
        assert "history" in screen_text(app, "#saved")

        # -- a global target on the Recipe screen replans, and clearing it goes back
        picked = app.session.result.plan.global_batch
        app.screen.query_one("#global-batch").value = "512"
        await pilot.press("r")
        await wait_for(pilot, lambda: "recipe" in app.done and app.session.result.plan.global_batch == 512,
                       what="the new plan")
        plan = app.session.result.plan
        assert plan.per_device * plan.world_size * plan.accumulation_steps == 512
        assert "--global-batch 512" in " ".join(app.screen.headless_command("x.toml"))
        app.screen.query_one("#global-batch").value = ""
        await pilot.press("r")
        await wait_for(pilot, lambda: "recipe" in app.done and app.session.result.plan.global_batch != 512,
                       what="the plan again")
        assert app.session.result.plan.global_batch == picked

        # -- quitting with an unsaved plan (the replan above) asks save, discard or cancel: Esc cancels; the
        # palette's Quit asks again, and Save writes it (over the file only once confirmed), then quits
        plan = app.session.result
        written = existing.stat().st_mtime_ns
        app.screen.query_one("#path").focus()  # in a field: ctrl+q still quits
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, UnsavedPlanScreen), what="the question")
        await pilot.press("escape")  # cancel: nothing lost
        await wait_for(pilot, lambda: app.screen.name == "recipe", what="back on the Recipe screen")
        assert app.return_code is None and app.session.result is plan and "recipe" in app.done
        assert app.screen.unsaved and existing.stat().st_mtime_ns == written
        await app.run_action("quit")  # as the command palette's Quit calls it
        await wait_for(pilot, lambda: isinstance(app.screen, UnsavedPlanScreen), what="the question again")
        await pilot.press("s")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="replace it?")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.return_code is not None, what="the quit")
    assert existing.stat().st_mtime_ns != written  # written as the Recipe screen's save writes it
    assert check_recipe(existing)["batch"]["global"] == plan.plan.global_batch


async def test_steps_are_locked_until_the_earlier_ones_are_done():
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("tab")  # off the workload field, so digits reach the app
        await pilot.press("5")
        await pilot.pause(0.2)
        assert app.screen.name == "setup"


async def test_a_number_explains_itself():
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await walk_to(pilot, "ceiling")
        await pilot.press("r")
        await wait_for(pilot, lambda: "ceiling" in app.done, what="the ceiling")
        numbers = app.screen.query_one("#numbers")
        numbers.table.focus()
        await pilot.pause(0.1)
        assert "headroom" in screen_text(app, "#numbers .why").lower()  # the highlighted row says why below it
        await pilot.press("e")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ExplainScreen", what="the explanation")
        assert "Ceiling per device" in app.screen.title_text
        assert "headroom" in app.screen.text.lower()
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert app.screen.name == "ceiling"


async def test_question_mark_opens_help():
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("tab", "question_mark")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "HelpScreen", what="help")
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert app.screen.name == "setup"


async def test_a_probe_that_fails_shows_its_error_and_the_app_goes_on():
    app = stub_app(runner_kwargs={"fail_probe_at": 100})
    async with app.run_test(size=(120, 40)) as pilot:
        await walk_to(pilot, "ceiling")
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running is None and app.screen.query_one(".error-panel").has_class("shown"),
                       what="the failure")
        error = screen_text(app, ".error-panel")
        assert "Memory ceiling failed" in error and "shape '[-1, 3]' is invalid" in error
        assert "ceiling" not in app.done and app.is_running
        assert app.screen.query_one("#run").disabled is False  # r runs it again


async def test_a_workload_that_fails_to_import_is_reported_on_setup(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_package_anywhere\n\ndef workload():\n    pass\n")
    app = stub_app(workload=f"{broken}:workload")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "checking" not in screen_text(app, "#workload-status"), CHECK_TIMEOUT, "the check")
        status = screen_text(app, "#workload-status")
        assert "Cannot import the workload module" in status and "no_such_package_anywhere" in status
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.screen.query_one(".error-panel").has_class("shown"), what="the refusal")
        assert "no_such_package_anywhere" in screen_text(app, ".error-panel")
        assert app.session is None and app.screen.name == "setup"
        # Fixing the field and pressing Enter is enough: the accepted value is checked.
        field = app.screen.query_one("#workload")
        field.value = "digits-mlp"
        field.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: "✓" in screen_text(app, "#workload-status"), CHECK_TIMEOUT, "the good workload")


async def test_a_malformed_workload_spec_is_flagged_as_you_type():
    app = stub_app(workload="no-such-builtin")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        assert "not a built-in" in screen_text(app, "#workload-status")


async def test_diagnose_shows_the_finding_its_evidence_and_actions():
    from advisor.tui.app import create_app

    log = ROOT / "tests" / "corpus" / "logs" / "torchrun_oom_rank1.log"
    app = create_app(diagnose_logs=[str(log)])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.name == "diagnose" and app.screen.findings, what="the findings")
        assert app.screen.findings[0][1].kind == "oom"
        assert "Out of memory" in screen_text(app, "#summary")
        evidence = screen_text(app, "#evidence")
        assert "line 77" in evidence and "DefaultCPUAllocator: can't allocate" in evidence  # the quoted OOM line
        assert "1." in screen_text(app, "#actions")


async def test_the_overfitting_plot_shows_the_validation_loss_beside_the_training_loss():
    from advisor.tui.app import create_app

    app = create_app(diagnose_logs=[str(ROOT / "tests" / "corpus" / "logs" / "hf_overfit.log")])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.name == "diagnose" and app.screen.findings, what="the findings")
        kinds = [finding.kind for _, finding, _ in app.screen.findings]
        app.screen.query_one("#findings").highlighted = kinds.index("overfitting")
        await pilot.pause(0.2)
        chart = app.screen.query_one("#curve")
        assert not chart.has_class("hidden")
        # the picture `advisor diagnose --plot` draws: both curves, the finding marked where it starts, and named
        assert {"train loss", "validation loss"} <= {curve.label for curve in chart.picture.curves}
        mark = chart.picture.marks[chart.highlight - 1]
        assert (mark.kind, mark.where) == ("overfitting", "epoch 7")
        assert "1 overfitting" in chart.plt.build()


async def test_a_healthy_run_shows_its_curves_and_a_log_without_curves_says_so():
    from advisor.tui.app import create_app

    logs = ROOT / "tests" / "corpus" / "logs"
    app = create_app(diagnose_logs=[str(logs / "hf_healthy.log")])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.name == "diagnose" and "healthy" in screen_text(app, "#summary"),
                       what="the verdict")
        chart = app.screen.query_one("#curve")
        assert not chart.has_class("hidden") and chart.picture.curves and not chart.picture.marks
    app = create_app(diagnose_logs=[str(logs / "real4_dfaker_bfc_oom.log")])  # an OOM line, no metric
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.name == "diagnose" and app.screen.findings, what="the findings")
        await pilot.pause(0.2)
        assert app.screen.query_one("#curve").has_class("hidden")
        assert "no training or validation loss" in screen_text(app, "#evidence")


async def test_diagnose_names_a_missing_log():
    from advisor.tui.app import create_app

    app = create_app(diagnose_logs=["/nonexistent/run.log"])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(".error-panel").has_class("shown"), what="the error")
        assert "no such log file" in screen_text(app, ".error-panel")


def test_bare_advisor_and_advisor_tui_open_the_app(monkeypatch):
    from advisor import cli

    opened = []
    monkeypatch.setattr(cli, "cmd_tui", lambda args: opened.append(args) or 0)
    assert cli.main([]) == 0
    assert cli.main(["tui", "--workload", "digits-cnn", "--nproc", "2", "--device-memory", "1GiB"]) == 0
    assert cli.main(["--workload", "digits-mlp", "--adapter", "ddp"]) == 0
    assert cli.main(["diagnose", "run.log", "--tui"]) == 0
    assert [getattr(a, "workload", None) for a in opened[:3]] == [None, "digits-cnn", "digits-mlp"]
    assert opened[1].device_memory == "1GiB" and opened[1].nproc == 2
    assert opened[3].logs == ["run.log"]


def test_the_cli_prefill_reaches_the_setup_form():
    from advisor.tui.app import Prefill
    from advisor import cli

    args = cli.build_parser().parse_args(["tui", "--workload", "digits-cnn", "--nproc", "3", "--device-memory", "2GiB"])
    prefill = Prefill.from_args(args)
    assert prefill == Prefill("digits-cnn", None, 3, "2GiB", None, None)


async def test_a_probe_row_explains_itself_and_a_number_has_a_hover_tooltip():
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await walk_to(pilot, "ceiling")
        await pilot.press("r")
        await wait_for(pilot, lambda: "ceiling" in app.done, what="the ceiling")
        probes = app.screen.query_one("#probes")
        probes.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ExplainScreen", what="the explanation")
        assert "Probe at batch 2" in app.screen.title_text and "stub tracker" in app.screen.text
        await pilot.press("escape")
        await pilot.pause(0.1)
        table = app.screen.query_one("#numbers").table
        await pilot.hover(table, offset=(2, 0))
        await pilot.pause(0.1)
        assert table.tooltip and "headroom" in str(table.tooltip).lower()


async def test_setup_runs_the_workload_check_so_a_nan_loss_is_named_before_anything_starts():
    # The same check as `advisor workloads --check`: it imports fine, but its first loss is NaN.
    app = stub_app(workload=f"{ROOT / 'tests' / 'workloads' / 'mistakes.py'}:nan_at_step_one")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "checking" not in screen_text(app, "#workload-status"), CHECK_TIMEOUT, "the check")
        assert "loss is nan at step 1" in screen_text(app, "#workload-status")
        assert app.screen.workload is None


def test_the_ceiling_screen_says_the_cap_not_memory_set_a_ceiling_no_probe_ran_out_at():
    """Regression: with a data cap and no OOM the numbers said 'memory that really fits 128 MiB' (the budget;
    the peak was a few MiB) and showed a headroom that played no part."""
    from advisor.method.ceiling import ProbeTrial, search_ceiling
    from advisor.tui.screens.ceiling import ceiling_numbers

    def tiny_model(batch, purpose):  # 2 MiB + 3 KiB a sample: a 128 MiB budget is never reached below 719
        return ProbeTrial(batch, "ok", 2 * 2**20 + 3 * 2**10 * batch, 1.0, purpose=purpose)

    capped = search_ceiling(tiny_model, 128 * 2**20, 0.15, max_batch=719, cap_reason="the training set's share")
    rows = {label: (value, why) for label, value, why in ceiling_numbers(capped, None)}
    assert rows["Set by"][0] == "the cap, not memory" and "the training set's share" in rows["Set by"][1]
    assert rows["Memory that really fits"][0] == "not reached" and "no part" in rows["Headroom"][0]

    def big_model(batch, purpose):  # memory sets this one: the numbers keep the edge and the headroom
        return ProbeTrial(batch, "ok" if batch <= 100 else "oom", 2**20 * batch if batch <= 100 else None, 1.0,
                          purpose=purpose)

    bounded = search_ceiling(big_model, 128 * 2**20, 0.15, max_batch=719, cap_reason="the training set's share")
    rows = {label: value for label, value, _ in ceiling_numbers(bounded, None)}
    assert "Set by" not in rows and rows["Memory that really fits"].endswith("MiB") and rows["Headroom"] == "15%"


async def test_starting_value_enter_applies_the_typed_value_and_enter_explains_one_number_after_another():
    from advisor.tui.screens.help import ExplainScreen

    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await walk_to(pilot, "start")
        await run_step(pilot, "start")
        intro = screen_text(app, ".intro")
        assert "then r" not in intro and "press Enter" in intro  # r typed into the field is a digit's neighbour
        # The cap shown is the one the trial and the sweep stop at (1438 samples: 10 steps per epoch up to 71 per
        # device), not the ceiling's 151 that the trial would then contradict
        numbers = app.screen.query_one("#numbers DataTable")
        cap = next(row for row in map(numbers.get_row_at, range(numbers.row_count)) if row[0] == "Per-device cap")
        assert cap[1] == str(app.session.cap.value) == "71"
        app.screen.query_one("#per-device").focus()
        await pilot.press("1", "6", "enter")
        await wait_for(pilot, lambda: "start" in app.done and app.session.start.per_device == 16, what="16 applied")
        app.screen.query_one("#numbers DataTable").focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), what="the explanation")
        assert app.screen.title_text.startswith("Starting value per device")
        await pilot.press("escape")
        await pilot.pause(0.2)
        await pilot.press("down", "enter")  # the next number, not the next step
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), what="the second explanation")
        assert app.screen.title_text.startswith("Per-device cap")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.screen.name == "start"


async def test_the_builtin_list_starts_on_the_current_workload_and_says_what_enter_picked():
    app = stub_app(workload="digits-mlp")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "✓" in screen_text(app, "#workload-status"), CHECK_TIMEOUT, "the check")
        assert "Enter" not in str(app.screen.query_one("#start").label)  # Enter in the list does not start
        listing = app.screen.query_one("#builtins")
        names = list(app.screen.builtins)
        assert listing.highlighted == names.index("digits-mlp")
        listing.focus()
        await pilot.press("enter")  # on the current value: nothing swapped, and it says so
        await pilot.pause(0.2)
        assert app.screen.query_one("#workload").value == "digits-mlp"
        assert any("digits-mlp (unchanged)" in n.message for n in app._notifications)
        listing.focus()
        other = next(i for i, name in enumerate(names) if name != "digits-mlp")
        listing.highlighted = other
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.screen.query_one("#workload").value == names[other]
        assert any(f"{names[other]} (was digits-mlp)" in n.message for n in app._notifications)


async def test_setup_errors_name_the_form_fields_and_every_problem_at_once():
    app = stub_app(device_memory="lots")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "✓" in screen_text(app, "#workload-status"), CHECK_TIMEOUT, "the check")
        app.screen.query_one("#base-lr").value = "-1"
        app.screen.query_one("#nproc").value = "0"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.screen.query_one(".error-panel").has_class("shown"), what="the refusal")
        error = screen_text(app, ".error-panel")
        # The unreadable memory no longer hides the rest: all three are named, by their labels.
        assert "Memory per device" in error and "'lots'" in error
        assert '"Processes" must be at least 1' in error
        assert '"LR used today" must be positive' in error
        assert "--" not in error, error
        assert error.count("Cannot start") == 1, error  # the title, not the CLI paragraph's lead as well


def test_no_internal_words_in_the_engines_user_facing_strings():
    """The app shows the engine's messages: no "the brief", no "DOMAIN 3" (docstrings and comments may)."""
    import ast
    import re

    found = []
    for path in (ROOT / "advisor").rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and re.search(r"\bthe brief\b|\bDOMAIN\b", node.value)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]}")
    assert found == []


SLOW_WORKLOAD = """
import os
import time
from pathlib import Path

Path(os.environ["PID_DIR"], f"{os.getpid()}.pid").write_text("")  # the check's process, for the test
time.sleep(120)  # a workload that tokenises or downloads at import


def workload():
    raise AssertionError("never reached")
"""


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_workload_check_runs_once_per_accepted_value_in_a_process_that_cancel_kills(tmp_path,
                                                                                           monkeypatch):
    import advisor.workload_check as workload_check

    checked = []
    real = workload_check.check_in_process
    monkeypatch.setattr(workload_check, "check_in_process", lambda spec, **kw: checked.append(spec) or real(spec, **kw))
    monkeypatch.setenv("PID_DIR", str(tmp_path))
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW_WORKLOAD)
    spec = f"{slow}:workload"
    app = stub_app(workload=spec)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: list(tmp_path.glob("*.pid")), CHECK_TIMEOUT, "the check's process")
        first = int(next(tmp_path.glob("*.pid")).stem)
        assert first != os.getpid() and checked == [spec]  # a child process, not the UI's
        await pilot.press("end", "x")  # an edit cancels the running check: its process is killed
        await wait_for(pilot, lambda: not _alive(first), 15, "the cancelled check's process to end")
        await pilot.press("backspace")  # edits only: no check until the value is accepted
        await pilot.pause(0.5)
        assert checked == [spec] and "Enter" in screen_text(app, "#workload-status")
        await pilot.press("enter")  # Enter on a value not yet checked checks it; it does not start
        await wait_for(pilot, lambda: len(list(tmp_path.glob("*.pid"))) == 2, CHECK_TIMEOUT, "the second check")
        second = next(int(p.stem) for p in tmp_path.glob("*.pid") if int(p.stem) != first)
        assert checked == [spec, spec] and app.screen.name == "setup"
    # Quitting the app while a check runs leaves no orphan.
    deadline = time.monotonic() + 15
    while _alive(second) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not _alive(second)



def assert_the_sweep_table_shows_every_digit_and_the_scores_the_rule_read(app) -> None:
    # Throughput up to five digits (samples/s 14347 showed as 1434 at 120x40; val acc as `0.` at 80x24).
    table = app.screen.query_one("#runs")
    assert table.row_count >= 2
    throughputs = [table.get_row_at(i)[6] for i in range(table.row_count)]
    assert any(len(value) >= 5 for value in throughputs), throughputs  # the case that was cut
    assert cut_cells(table) == []
    assert cut_cells(app.screen.query_one("#numbers DataTable")) == []  # "val acc 0.750", not "val acc 0.7"
    # The score column is what the rule read: each candidate's mean in the verdict (and its reason) is the mean
    # of its seeds' cells, not of their end values (the stub's curves still rise, so the two differ).
    column = [str(c.label) for c in table.columns.values()].index("score")
    cells = {}
    for i in range(table.row_count):
        row = table.get_row_at(i)
        if "timing" not in str(row[7]):
            cells.setdefault(int(row[0]), []).append(float(row[column]))
    verdict = app.session.sweep_outcome.verdict
    assert cells and {c.per_device: pytest.approx(c.mean, abs=1e-3) for c in verdict.candidates
                      if c.status == "ok"} == {b: sum(v) / len(v) for b, v in cells.items()}
    assert all(r.val_metric not in cells[r.per_device] for r in app.session.sweep_outcome.rows)
    numbers = app.screen.query_one("#numbers DataTable")  # and the Numbers panel gives each candidate that mean
    shown = {str(numbers.get_row_at(i)[0]): str(numbers.get_row_at(i)[1]) for i in range(numbers.row_count)}
    assert {f"{c.per_device}/device": f"score {verdict.fmt(c.mean)}" for c in verdict.candidates} == {
        label: value for label, value in shown.items() if label.endswith("/device")}


@pytest.mark.parametrize("size", [pytest.param((120, 40), marks=pytest.mark.slow), (80, 24)])  # 80x24, the tighter, in the fast tier
async def test_every_step_screens_tables_show_every_value_whole_and_the_sweeps_scores_at_both_sizes(size):
    # Cut before: the probe table's `time` at 80x24, the Starting value's task table ("start / de", its
    # source column) at 120x40, the Trial's fixed-width columns (samples/s 32000, `ok`), the numbers panes'
    # values ("128.0" for 128.0 MiB) at 80x24. Labels may wrap or shorten; values never.
    # One walk checks every step screen as it is done (a walk per screen would cost a minute more), and on the
    # Sweep screen the five-digit throughputs and the scores the rule read.
    from textual.widgets import DataTable

    from advisor.tui.app import STEP_NAMES

    app = stub_app(runner_kwargs={"saturate": 100_000, "rate": 250})  # five-digit samples/s
    cut = {}
    async with app.run_test(size=size) as pilot:
        await walk_to(pilot, "ceiling")
        for step in STEP_NAMES[1:]:
            await run_step(pilot, step)
            tables = list(app.screen.query(DataTable))
            assert tables and all(table.row_count for table in tables), (step, [t.row_count for t in tables])
            for table in tables:
                cut[f"{step} #{table.id or table.parent.id}"] = cut_cells(table)
            if step == "sweep":
                assert_the_sweep_table_shows_every_digit_and_the_scores_the_rule_read(app)
            if step != STEP_NAMES[-1]:
                await pilot.press("n")
                await wait_for(pilot, lambda: app.screen.name != step, what=f"leaving {step}")
    assert set(cut) >= {"ceiling #probes", "ceiling #numbers", "start #tasks", "start #numbers", "trial #runs",
                        "trial #numbers", "sweep #runs", "recipe #numbers"}
    assert cut == dict.fromkeys(cut, [])


# -- the script door in the Setup (issue 14): which of workload / script, and a script the door refuses --------

PLAIN_LINE = "plain_loop.py --batch-size {per_device} --steps {steps} --lr {lr} --warmup {warmup}"


@pytest.mark.parametrize("workload,script,message", [
    ("digits-mlp", PLAIN_LINE, "Both a workload (digits-mlp) and a script are given"),
    ("", "", "Neither a workload nor a script is given"),
], ids=["both", "neither"])
async def test_setup_takes_a_workload_or_a_script_not_both_nor_neither(workload, script, message, tmp_path,
                                                                      monkeypatch):
    monkeypatch.chdir(ROOT / "tests" / "door_scripts")
    app = stub_app(workload=workload, script=script)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.1)
        app.screen.query_one("#workload").value = workload  # the Prefill's default workload, cleared
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.screen.query_one(".error-panel").has_class("shown"), what="the error")
        error = screen_text(app, ".error-panel")
        assert message in error
        assert ("Clear the Workload field to measure your script" if script else "or your training script's "
                "command line in the Script field") in error
        assert app.session is None and app.screen.name == "setup"


async def test_a_script_the_door_cannot_set_gets_the_clis_message_in_the_app(tmp_path, monkeypatch):
    from advisor.door import BOTH_FORMS

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("import torch\nprint('training')\n")
    app = stub_app(workload="", script="train.py --batch-size 32")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "cannot tell" in screen_text(app, "#script-status"), what="the field's check")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.screen.query_one(".error-panel").has_class("shown"), what="the error")
        error = screen_text(app, ".error-panel")
        assert "cannot tell how to set the batch size of train.py" in error and "Nothing was run" in error
        assert "type the part after `--` (SCRIPT ARGS) into the Script field" in error
        # the CLI's own examples, flags and all (not turned into field labels)
        assert BOTH_FORMS.splitlines()[1].strip() in error and "--device-memory 8GiB" in error
        assert "Traceback" not in error and app.session is None


async def test_the_script_field_says_how_the_advisor_sets_the_batch(monkeypatch):
    monkeypatch.chdir(ROOT / "tests" / "door_scripts")
    app = stub_app(workload="", script=PLAIN_LINE)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "✓" in screen_text(app, "#script-status"), what="the field's check")
        assert "placeholders in the arguments: lr, per_device, steps, warmup" in screen_text(app, "#script-status")
        assert "the script below is measured" in screen_text(app, "#workload-status")
        field = app.screen.query_one("#script")
        field.value = "plain_loop.py --steps {steps}"
        field.focus()
        await pilot.press("enter")  # Enter checks: refused, nothing starts
        await wait_for(pilot, lambda: "not {per_device}" in screen_text(app, "#script-status"), what="the refusal")
        assert app.session is None and app.screen.name == "setup"


def test_the_apps_command_for_a_script_is_advisor_plan_with_the_script_after_dashes():
    import shlex

    from advisor.settings import plan_command

    command = plan_command({"workload": None, "nproc": "2", "device_memory": "256MiB"}, "recipes/plain_loop.toml",
                           script=shlex.split(PLAIN_LINE))
    assert "--workload" not in command
    assert shlex.join(command) == ("advisor plan --adapter ddp --nproc 2 --device-memory 256MiB --out "
                                   "recipes/plain_loop.toml -- plain_loop.py --batch-size '{per_device}' --steps "
                                   "'{steps}' --lr '{lr}' --warmup '{warmup}'")


def test_advisor_dash_dash_script_opens_the_app_with_the_script_filled_in(monkeypatch):
    from advisor import cli

    opened = []
    monkeypatch.setattr(cli, "cmd_tui", lambda args: opened.append(args) or 0)
    assert cli.main(["--nproc", "2", "--", "train.py", "--lr", "{lr}"]) == 0
    assert cli.main(["tui", "--", "train.py", "--x", "a b"]) == 0
    assert [a.script_command for a in opened] == [["train.py", "--lr", "{lr}"], ["train.py", "--x", "a b"]]
    assert opened[0].nproc == 2


async def test_a_table_header_follows_columns_that_new_rows_widened():
    # Seen in CI: the Sweep screen's header painted at its labels' widths, off the values below. Textual widens
    # columns on idle after add_row; its row and cell caches key on an update count that only a change of the
    # widget's own size bumps, and our tables span the screen. Painting before the idle is that race, made
    # deterministic here.
    from textual.app import App

    from advisor.tui.widgets import GrowingTable

    class One(App):
        CSS = "GrowingTable { width: 100%; height: 6; }"

        def compose(self):
            yield GrowingTable(id="t", header_height=1)

    async with One().run_test(size=(60, 8)) as pilot:
        table = pilot.app.query_one(GrowingTable)
        table.add_columns("a", "b")
        await pilot.pause()
        table.add_row("1234567", "x")
        table.render_line(0), table.render_line(1)  # painted before the widths change
        await pilot.pause(0.2)
        header, row = ("".join(s.text for s in table.render_line(y)) for y in (0, 1))
        assert header.index("b") == row.index("x") > row.index("1234567"), (header, row)


# -- the app's traps (issue 25): keys in a field, quitting an unsaved plan, Start, the step bar, Diagnose ----------

async def test_global_keys_never_type_into_a_field_and_digits_in_a_field_type_rather_than_jump():
    from advisor.tui.app import AdvisorApp
    from advisor.tui.screens.help import HelpScreen

    # Every global key is classified here: a new one fails this line until it is.
    acting = {"question_mark", "f1", "ctrl+q"}  # act in a field too, never typed
    typing = {str(n) for n in range(1, 7)}  # a field takes them (a workload name, a batch); elsewhere they jump
    declared = {key for binding in AdvisorApp.BINDINGS for key in binding.key.split(",")}
    assert declared == acting | typing
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        field = app.screen.query_one("#workload")
        await wait_for(pilot, lambda: app.screen.focused is field, what="the workload field's focus")
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what=f"help on {key}")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen.name == "setup", what="help closed")
            assert field.value == "digits-mlp", key
        field.focus()
        await pilot.press("end", "2")
        await pilot.pause(0.2)
        assert field.value == "digits-mlp2" and app.screen.name == "setup"
        assert not any("needs" in n.message for n in app._notifications)  # no jump was tried


async def test_start_runs_the_first_step_and_ctrl_r_reruns_a_step_from_its_field():
    from advisor.tui.screens.help import HelpScreen

    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "✓" in screen_text(app, "#workload-status"), CHECK_TIMEOUT, "the check")
        await pilot.press("ctrl+r")  # the README: checks everything and starts
        await wait_for(pilot, lambda: "ceiling" in app.done, CHECK_TIMEOUT, "the ceiling, run by Start alone")
        headroom = app.screen.query_one("#headroom")
        headroom.value = "0.3"
        headroom.focus()
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.name == "ceiling", what="help closed")
        assert headroom.value == "0.3"
        headroom.focus()
        await pilot.press("ctrl+r")  # r would type into the field; ctrl+r runs the step from there
        await wait_for(pilot, lambda: app.running is None and app.session.ceiling_result.headroom == 0.3,
                       what="the ceiling again")
        assert headroom.value == "0.3" and "ceiling" in app.done


# cancel-then-save (the question, Esc, the palette's Quit, a save) is the last block of the fast tier's walk above
@pytest.mark.slow
@pytest.mark.parametrize("answer", ["cancel-then-discard", "saved-before"])
async def test_quitting_with_an_unsaved_plan_asks_save_discard_or_cancel(answer, tmp_path, monkeypatch):
    from advisor.tui.screens.help import UnsavedPlanScreen

    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "recipes" / "digits-mlp.toml"
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await walk_to(pilot, "recipe")
        await wait_for(pilot, lambda: "recipe" in app.done, what="the plan")
        plan = app.session.result
        if answer == "saved-before":
            await pilot.press("ctrl+s")
            await wait_for(pilot, saved.exists, what="the save")
            app.screen.query_one("#path").focus()  # in a field: ctrl+q still quits
            await pilot.press("ctrl+q")  # nothing unsaved: no question
            await wait_for(pilot, lambda: app.return_code is not None, what="the quit")
            return
        app.screen.query_one("#path").focus()
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, UnsavedPlanScreen), what="the question")
        await pilot.press("escape")  # cancel: nothing lost
        await wait_for(pilot, lambda: app.screen.name == "recipe", what="back on the Recipe screen")
        assert app.return_code is None and app.session.result is plan and "recipe" in app.done
        assert app.screen.unsaved and not saved.exists()
        await app.run_action("quit")  # as the command palette's Quit calls it
        await wait_for(pilot, lambda: isinstance(app.screen, UnsavedPlanScreen), what="the question again")
        await pilot.press("d")
        await wait_for(pilot, lambda: app.return_code is not None, what="the quit")
    assert not saved.exists()


async def test_start_is_refused_with_the_checks_message_when_the_workload_check_failed():
    app = stub_app(workload=f"{ROOT / 'tests' / 'workloads' / 'mistakes.py'}:nan_at_step_one")
    async with app.run_test(size=(120, 40)) as pilot:
        setup = app.screen
        await wait_for(pilot, lambda: "nan at step 1" in screen_text(app, "#workload-status"), CHECK_TIMEOUT,
                       "the failed check")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.session is not None or setup.query_one(".error-panel").has_class("shown"),
                       CHECK_TIMEOUT, "the refusal")
        assert app.session is None and app.screen is setup
        error = screen_text(app, ".error-panel")
        assert "The workload check failed" in error and "loss is nan at step 1" in error


async def test_start_during_the_workload_check_waits_for_it_then_starts(monkeypatch):
    import threading

    import advisor.workload_check as workload_check

    gate = threading.Event()
    real = workload_check.check_in_process
    monkeypatch.setattr(workload_check, "check_in_process", lambda spec, **kw: gate.wait(60) and real(spec, **kw))
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "checking" in screen_text(app, "#workload-status"), what="the check")
        await pilot.press("ctrl+r")
        await pilot.pause(0.3)
        assert app.session is None and "Waiting for the workload check" in screen_text(app, "#status")
        gate.set()
        await wait_for(pilot, lambda: "ceiling" in app.done, CHECK_TIMEOUT, "the start once the check passed")


async def test_the_step_bar_shows_every_step_at_80_columns():
    from tui_stub import rendered_lines

    app = stub_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        bar = rendered_lines(app.screen.query_one("StepBar"))[0]
        for number, title in enumerate(("Setup", "Ceiling", "Start value", "Trial", "Sweep", "Recipe"), 1):
            assert f"{number} " in bar and title in bar, bar
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: "Memory ceiling" in rendered_lines(app.screen.query_one("StepBar"))[0],
                       what="the full titles at 120 columns")


@pytest.mark.parametrize("text,verdict,not_said", [
    ("Epoch 1 loss: 0.9\nEpoch 2 loss: 0.7\nEpoch 3 loss: 0.6\n", "Nothing conclusive", "healthy"),
    (None, "No problem found", "Nothing conclusive"),
], ids=["short", "healthy"])
async def test_diagnose_says_the_engines_verdict_not_healthy_for_every_log_without_a_finding(text, verdict, not_said,
                                                                                           tmp_path):
    from advisor.diagnose import diagnose_source
    from advisor.tui.app import create_app

    log = tmp_path / "run.log"
    if text is None:
        log = ROOT / "tests" / "corpus" / "logs" / "plain_healthy_brackets.log"
    else:
        log.write_text(text)
    report = diagnose_source(str(log))
    app = create_app(diagnose_logs=[str(log)])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.name == "diagnose" and screen_text(app, "#summary").strip(),
                       what="the verdict")
        summary = screen_text(app, "#summary")
        assert verdict in summary and not_said not in summary
        assert app.screen.query_one("#findings").display is False  # an empty list took half the width
        for needed in report.needed:  # what would let the other checks run, as the engine says it
            assert needed in summary.replace("\n", " ") or needed[:40] in summary


async def test_a_start_that_waited_for_the_check_and_is_then_refused_says_not_started(monkeypatch):
    # Seen in tmux: the status kept "Waiting for the workload check…" under the memory-per-device refusal.
    import threading

    import advisor.workload_check as workload_check

    gate = threading.Event()
    real = workload_check.check_in_process
    monkeypatch.setattr(workload_check, "check_in_process", lambda spec, **kw: gate.wait(60) and real(spec, **kw))
    app = stub_app(device_memory=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "checking" in screen_text(app, "#workload-status"), what="the check")
        await pilot.press("ctrl+r")
        await pilot.pause(0.3)
        gate.set()
        await wait_for(pilot, lambda: app.screen.query_one(".error-panel").has_class("shown"), CHECK_TIMEOUT,
                       "the refusal")
        assert "memory per device" in screen_text(app, ".error-panel")
        assert "Not started" in screen_text(app, "#status") and "Waiting" not in screen_text(app, "#status")
        assert app.screen.focused is app.screen.query_one("#device-memory") and app.session is None


@pytest.mark.timeout(600)  # four tests' blocks in one walk: minutes on a loaded 2-core machine
async def test_a_walk_with_a_new_headroom_and_start_then_n_before_a_run_the_progress_bar_notes_command_and_a_redo(
        tmp_path):
    """One 120x40 walk, block by block (each was its own test, with its own walk): a new headroom and a typed
    starting value; n before the Trial ran; the run progress bar; the sweep notes after the terminal shrinks; the
    reproduce command carries what the step screens changed; redoing an earlier step makes the later ones stale."""
    import shlex

    from textual.widgets import RichLog

    from advisor.cli import build_parser
    from advisor.settings import PLAN_OPTIONS
    from advisor.tui.widgets import RunProgress
    from tui_stub import rendered_lines

    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        # -- a new headroom on the Ceiling screen and a typed starting value (read back by the command below)
        await walk_to(pilot, "ceiling")
        await run_step(pilot, "ceiling")
        app.screen.query_one("#headroom").value = "0.25"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: "ceiling" in app.done and app.session.settings.headroom == 0.25,
                       what="the new headroom")
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.name == "start", what="the start screen")
        await run_step(pilot, "start")
        app.screen.query_one("#per-device").value = "16"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.session.start is not None and app.session.start.per_device == 16,
                       what="16 applied")
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.name == "trial", what="the trial screen")

        # -- n on a step that has not run (the Trial waits for r, while the Starting value ran by itself) said
        # nothing: a key that does nothing looks like a hung app
        assert app.screen.name == "trial" and "trial" not in app.done
        await pilot.press("n")
        await pilot.pause(0.2)
        assert app.screen.name == "trial" and "Run this step first" in screen_text(app, "#status")

        # -- the run progress bar shows only once a run has started: with no total, Textual's bar animates as if
        # work were under way, and on a step waiting for r it looked busy (seen in tmux on the Trial screen)
        bar = app.screen.query_one(RunProgress)
        assert not bar.visible and "trial" not in app.done
        await run_step(pilot, "trial")
        assert bar.visible and bar.percentage == 1.0
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.name == "sweep", what="the sweep screen")
        assert not app.screen.query_one(RunProgress).visible
        await run_step(pilot, "sweep")
        assert app.screen.query_one(RunProgress).visible

        # -- the sweep notes show their last line after the terminal shrinks. Seen in CI (the 80x24 Sweep
        # snapshot): the notes log scrolled to its end, then the layout shrank it and its last line sat below the
        # fold. Anchored, it keeps its end in view until the user scrolls up.
        notes = app.screen.query_one("#notes", RichLog)
        last = "".join(s.text for s in notes.lines[-1]).strip()
        wide = notes.size.width
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: notes.size.width < 60, what="the smaller layout")
        await pilot.pause(0.3)
        assert notes.max_scroll_y > 0  # the log is longer than its box: the case at hand
        # The log re-wraps to its new width: its last words are the last ones on screen
        shown = " ".join(rendered_lines(notes)).split()
        words = min(3, len(last.split()))  # the wide log's last line may hold fewer than three words
        assert shown[-words:] == last.split()[-words:], (last, rendered_lines(notes))
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: notes.size.width == wide, what="the 120x40 layout again")

        # -- Issue 38: after a new headroom and a typed starting value, the saved recipe had them but the
        # "reproduce it without the app" command and provenance.command did not (it gave another ceiling). The
        # command is rendered from the session's settings, so it says what the walk ran with (checked below the
        # walk: `advisor plan` reads it back to the same settings).
        await pilot.press("n")
        await wait_for(pilot, lambda: "recipe" in app.done, what="the plan")
        path = tmp_path / "r.toml"
        command = app.screen.headless_command(str(path))
        assert app.screen._save(str(path), force=False)

        # -- redoing an earlier step makes the later ones stale (the plan is saved: no question first)
        app.screen.set_focus(None)  # off the path field, so digits reach the app
        await pilot.press("2")  # back to the ceiling: a finished step can be revisited
        await wait_for(pilot, lambda: app.screen.name == "ceiling", what="the ceiling screen")
        headroom = app.screen.query_one("#headroom")
        headroom.value = "0.3"
        await pilot.press("r")
        await wait_for(pilot, lambda: "ceiling" in app.done and app.session.ceiling_result.headroom == 0.3,
                       what="the ceiling again")
        assert "trial" not in app.done and "start" not in app.done
        await pilot.press("4")  # the trial needs the starting value again
        await pilot.pause(0.2)
        assert app.screen.name == "ceiling"
        assert app.screen.query_one("#probes").row_count > 0
    text = " ".join(command)
    assert "--headroom 0.25" in text and "--start 16" in text, text
    assert check_recipe(path)["provenance"]["command"] == shlex.join(command)
    args = build_parser().parse_args(command[1:])
    assert args.headroom == 0.25 and args.start == 16
    assert "start" in PLAN_OPTIONS


# -- the Recipe screen and the step logs at 80x24 (a newcomer's tmux walk) -------------------------------------

def _log_text(log) -> list[str]:
    return ["".join(segment.text for segment in strip).rstrip() for strip in log.lines]


async def assert_the_log_rewraps_when_the_terminal_is_resized(pilot, log) -> None:
    """Seen in tmux: at 80x24 the Trial's decisions were cut mid-word ("under +10  │"), and widened to 150 columns
    they stayed wrapped at the narrow width. Every line fits the log's width at every size; the words stay.
    Starts and ends at 80x24."""
    await pilot.pause(0.3)
    words = " ".join(_log_text(log)).split()
    assert words

    def fits() -> bool:
        width = log.scrollable_content_region.width
        return all(len(line) <= width for line in _log_text(log))

    assert fits(), (log.scrollable_content_region.width, _log_text(log))
    narrow = log.scrollable_content_region.width
    await pilot.resize_terminal(150, 40)
    await wait_for(pilot, lambda: log.scrollable_content_region.width > narrow + 20, what="the wider layout")
    await pilot.pause(0.3)
    assert fits() and max(map(len, _log_text(log))) > narrow, _log_text(log)  # re-wrapped wider
    assert " ".join(_log_text(log)).split() == words
    await pilot.resize_terminal(80, 24)
    await wait_for(pilot, lambda: log.scrollable_content_region.width <= narrow, what="the narrow layout")
    await pilot.pause(0.3)
    assert fits(), (log.scrollable_content_region.width, _log_text(log))
    assert " ".join(_log_text(log)).split() == words


@pytest.mark.slow  # the Trial's log, in the fast tier's 80x24 walk below
async def test_the_sweep_notes_rewrap_their_lines_when_the_terminal_is_resized():
    app = stub_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await walk_to(pilot, "sweep")
        await run_step(pilot, "sweep")
        await assert_the_log_rewraps_when_the_terminal_is_resized(pilot, app.screen.query_one("#notes"))


async def test_at_80x24_the_trial_log_rewraps_a_finished_sweep_shows_its_pick_and_the_recipe_keeps_every_key(
        tmp_path, monkeypatch):
    """One walk at 80x24, a newcomer's tmux walk, block by block (each was its own test, with its own walk): the
    Trial's decisions rewrap when the terminal is resized; a finished sweep shows its pick; the Recipe screen keeps
    the preview, the whole path and every key after a save."""
    from textual.widgets import Footer

    from advisor.tui.screens.help import HelpScreen

    monkeypatch.chdir(tmp_path)
    app = stub_app()
    async with app.run_test(size=(80, 24)) as pilot:
        # -- the Trial's decisions log rewraps its lines when the terminal is resized
        await walk_to(pilot, "trial")
        await run_step(pilot, "trial")
        await assert_the_log_rewraps_when_the_terminal_is_resized(pilot, app.screen.query_one("#decisions"))
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.name == "sweep", what="the Sweep screen")

        # -- Issue 38: at 80x24, after the sweep its pick, notes and plot were below the fold, under the step's
        # intro and the runs' table. Once a step has run in a short terminal its intro folds away (Help shows it,
        # with the keys) and the sweep's table keeps room for the pick.
        intro = app.screen.query_one(".intro")
        assert intro.display and intro.region.height  # before the run: the rule is on screen
        await run_step(pilot, "sweep")
        await pilot.pause(0.3)
        numbers = app.screen.query_one("#numbers")
        actions = app.screen.query_one(".actions").region
        assert numbers.region.height >= 3 and numbers.region.y + 3 <= actions.y, (numbers.region, actions)
        rule = type(app.screen).INTRO
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        shown = " ".join(str(w.render()) for w in app.screen.query("Static"))
        assert rule.split(".")[1].strip()[:40] in shown.replace("\n", " ")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.name == "sweep", what="help closed")

        # -- the Recipe screen keeps the preview, the whole path and every key after a save. Seen in tmux: after
        # ctrl+s the save message squeezed the TOML preview to one line ("schema_version = 2"), the path showed as
        # "recipes/digi" (and "recipes/digits-mlp.tom" at 100x32), the footer ended "g Re-plan for an".
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.name == "recipe" and "recipe" in app.done, what="the plan")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "Saved" in screen_text(app, "#saved"), what="the save")
        await pilot.pause(0.3)
        screen = app.screen
        preview, path = screen.query_one("#preview"), screen.query_one("#path")
        assert preview.scrollable_content_region.height >= 4, preview.region  # several TOML lines, scrollable
        assert preview.max_scroll_y > 0
        assert path.value == "recipes/digits-mlp.toml"
        assert path.content_region.width > len(path.value), path.region  # the whole path, and the cursor
        saved = screen.query_one("#saved").parent  # the message scrolls in its box: the box is in view
        for widget in (preview, path, screen.query_one("#save"), saved):
            column = next(node for node in widget.ancestors if node.has_class("column"))
            assert column.region.contains_region(widget.region), (widget, widget.region, column.region)
        assert saved.size.height >= 3
        footer = screen.query_one(Footer)
        assert footer.virtual_size.width <= footer.size.width, footer.virtual_size  # no key cut off
        assert "Saved" in screen_text(app, "#saved").splitlines()[0]


async def test_a_sweep_where_nothing_learned_says_so_on_the_sweep_and_recipe_screens_at_80x24():
    """Issue 38: at 80x24 a sweep where nothing learned showed every row as `ok` and the Recipe screen no NOT
    VALIDATED banner. Each run's row shows the health verdict (flat, near chance), and the Recipe screen leads
    with what the summary leads with."""
    from tui_stub import all_rendered_lines

    app = stub_app({"at_chance": True})
    async with app.run_test(size=(80, 24)) as pilot:
        await walk_to(pilot, "sweep")
        await run_step(pilot, "sweep")
        assert app.session.sweep_outcome.failed
        rows = [row for row in all_rendered_lines(app.screen.query_one("#runs")) if row.strip()[:1].isdigit()]
        assert rows and not any(" ok" in row for row in rows), rows
        assert all("flat" in row or "chance" in row or "timing" in row for row in rows), rows
        assert not cut_cells(app.screen.query_one("#runs"))
        await pilot.press("n")
        await wait_for(pilot, lambda: "recipe" in app.done, what="the plan")
        status = app.screen.query_one("#status")
        assert "NOT VALIDATED" in str(status.render()) and status.region.bottom <= 24 and status.region.height


