"""The Setup's form becomes settings through the engine (advisor.settings): the DeepSpeed ZeRO stage, a target
cluster and a plugin's declared option are fields, checked, run and recorded; stub runner, no processes."""

from __future__ import annotations

import pytest

from tui_stub import screen_text, stub_app, start_walk, wait_for

pytestmark = pytest.mark.timeout(180)


async def wait_for_adapter_fields(pilot, adapter: str, field: str):
    # Mounted, not only in the DOM: a Select set before its own label mounted raises NoMatches (seen on a loaded CI).
    app = pilot.app
    await wait_for(pilot, lambda: app.screen.query_one("#adapter").value == adapter
                   and app.screen.options_mounted_for == adapter, what=f"the {adapter} adapter's fields")
    assert app.screen.query(f"#{field}")


async def test_the_setup_sets_the_zero_stage_and_a_target_cluster():
    from advisor.settings import plan_command

    app = stub_app(adapter="deepspeed")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_adapter_fields(pilot, "deepspeed", "adapter-option-zero_stage")
        app.screen.query_one("#adapter-option-zero_stage").value = "3"
        app.screen.query_one("#nodes").value = "2"
        app.screen.query_one("#gpus-per-node").value = "4"
        app.screen.query_one("#sweep-seeds").value = "2"  # under More settings: every labelled option is a field
        await start_walk(pilot)
        assert app.settings.world_size == 8 and app.settings.nodes == 2 and app.settings.nproc == 2
        assert app.settings.sweep_seeds == 2
        assert app.session.runner.options["zero_stage"] == 3  # what the probes run and the recipe records
        command = " ".join(plan_command(app.plan_options))  # the Recipe screen's headless twin of this walk
        assert "--adapter deepspeed" in command and "--nodes 2 --gpus-per-node 4 --zero-stage 3" in command
        assert "--sweep-seeds 2" in command


async def test_a_plugins_option_is_an_app_field_checked_and_recorded(plugins):  # noqa: F811
    app = stub_app(adapter="single", nproc=1)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_adapter_fields(pilot, "single", "adapter-option-threads")
        assert "intra-op CPU threads" in " ".join(str(s.render()) for s in app.screen.query("#adapter-options Static"))
        app.screen.query_one("#adapter-option-threads").value = "2"
        await start_walk(pilot)
        assert app.session.runner.options == {"threads": 2} and app.plan_options["adapter_options"] == {"threads": "2"}


async def test_a_bad_value_and_an_impossible_cluster_are_named_on_the_setup():
    app = stub_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: screen_text(app, "#workload-status").strip() and "checking" not in screen_text(
            app, "#workload-status"), what="the workload check")
        from advisor.tui.screens.setup import FORM_OPTIONS

        # The form has a field for every option the declaration labels (advisor/options.py), and reads each.
        assert all(app.screen.query(f"#{option.field_id}") for option in FORM_OPTIONS)
        assert {option.name for option in FORM_OPTIONS} <= set(app.screen.plan_options())
        for field, value, expected in (("headroom", "lots", "must be a number, not 'lots'"),
                                       ("nodes", "0", "must be at least 1, not 0"),
                                       ("sweep-seeds", "0", '"Sweep seeds" must be 1 or more paired seeds')):
            app.screen.query_one(f"#{field}").value = value
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: expected in screen_text(app, ".error-panel"), what=f"the {field} error")
            assert app.session is None
            app.screen.query_one(f"#{field}").value = ""
