"""One snapshot per screen at a fixed terminal size, driven by the stub runner so every number is
the same on every run. Update them with `pytest tests/test_tui_snapshots.py --snapshot-update`
after a deliberate change, and look at the new SVGs before committing them."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from tui_stub import CHECK_TIMEOUT, run_step, screen_text, stub_app, wait_for, walk_to

pytestmark = pytest.mark.timeout(400)
SIZE = (120, 40)
CORPUS_LOG = Path(__file__).resolve().parent / "corpus" / "logs" / "hf_overfit.log"


@pytest.fixture(autouse=True)
def frozen_step_clock(monkeypatch):
    """Screens print how long a step took ("Done in 0 s"); on a loaded machine a stub step can take a second.
    A frozen clock keeps that text, and so the pictures, the same on every run."""
    import types

    import advisor.tui.screens.base as base

    monkeypatch.setattr(base, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))


async def steady(pilot, screen: str) -> None:
    """No blinking cursor, and the screen the test is about (the plugin takes a picture of whatever shows)."""
    from textual.widgets import Input

    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False
    # Until two pictures 0.3 s apart agree: on a loaded machine a table may still be re-laid out with its
    # final widths after a fixed pause (seen: the ceiling table's header one cell narrower).
    def picture() -> str:
        return re.sub(r"terminal-[-\w]+", "", pilot.app.export_screenshot())

    deadline = time.monotonic() + 20
    before = picture()
    while True:
        await pilot.pause(0.3)
        now = picture()
        if now == before or time.monotonic() > deadline:
            break
        before = now
    assert pilot.app.screen.name == screen, f"on {pilot.app.screen.name}, not {screen}"


def at_step(step: str, run: bool = True):
    async def run_before(pilot) -> None:
        await pilot.pause()
        await walk_to(pilot, step)
        if run:
            await run_step(pilot, step)
        await steady(pilot, step)

    return run_before


async def setup_checked(pilot) -> None:
    await pilot.pause()
    await wait_for(pilot, lambda: "✓" in screen_text(pilot.app, "#workload-status"), CHECK_TIMEOUT, "the check")
    await steady(pilot, "setup")


def test_setup_screen(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SIZE, run_before=setup_checked)


@pytest.mark.slow  # its 80x24 picture, the tighter layout, is in the fast tier
def test_memory_ceiling_screen(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SIZE, run_before=at_step("ceiling"))


@pytest.mark.slow  # its 80x24 picture, the tighter layout, is in the fast tier
def test_starting_value_screen(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SIZE, run_before=at_step("start"))


def test_trial_run_screen(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SIZE, run_before=at_step("trial"))


@pytest.mark.slow  # its 80x24 picture, the tighter layout, is in the fast tier
def test_sweep_screen(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SIZE, run_before=at_step("sweep"))


def test_sweep_screen_at_80x24(snap_compare):
    """The smallest supported terminal: the runs table still shows every digit (tests/test_tui_app.py reads it)."""
    assert snap_compare(stub_app(runner_kwargs={"saturate": 100_000, "rate": 250}), terminal_size=(80, 24),
                        run_before=at_step("sweep"))


SMALL = (80, 24)  # the smallest supported terminal: labels wrap or shorten, every value shows whole


def test_setup_screen_at_80x24(snap_compare):
    """Every step of the step bar shows at 80 columns (steps 5 and 6 were cut off)."""
    assert snap_compare(stub_app(), terminal_size=SMALL, run_before=setup_checked)


def test_memory_ceiling_screen_at_80x24(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SMALL, run_before=at_step("ceiling"))


def test_starting_value_screen_at_80x24(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SMALL, run_before=at_step("start"))


def test_recipe_screen_at_80x24(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SMALL, run_before=at_step("recipe"))


@pytest.mark.slow  # its 80x24 picture, the tighter layout, is in the fast tier
def test_recipe_screen(snap_compare):
    assert snap_compare(stub_app(), terminal_size=SIZE, run_before=at_step("recipe"))


async def findings_shown(pilot) -> None:
    await pilot.pause()
    await wait_for(pilot, lambda: bool(pilot.app.screen.findings), what="the findings")
    await steady(pilot, "diagnose")


def diagnose_app():
    from advisor.tui.app import create_app

    log = str(CORPUS_LOG.relative_to(Path.cwd())) if CORPUS_LOG.is_relative_to(Path.cwd()) else str(CORPUS_LOG)
    return create_app(diagnose_logs=[log])


def test_diagnose_screen(snap_compare):
    """The finding, and the log's curves with the finding marked where it starts (what `--plot` draws)."""
    assert snap_compare(diagnose_app(), terminal_size=SIZE, run_before=findings_shown)


def test_diagnose_screen_at_80x24(snap_compare):
    assert snap_compare(diagnose_app(), terminal_size=SMALL, run_before=findings_shown)


def test_help_screen(snap_compare):
    async def help_open(pilot) -> None:
        await setup_checked(pilot)
        await pilot.press("tab", "question_mark")
        await pilot.pause(0.3)
        assert pilot.app.screen.__class__.__name__ == "HelpScreen"

    assert snap_compare(stub_app(), terminal_size=SIZE, run_before=help_open)


def snapshot_rows(name: str) -> list[str]:
    """A committed snapshot read back as the terminal's text rows (each span placed at its column)."""
    import html

    svg = (Path(__file__).resolve().parent / "__snapshots__" / "test_tui_snapshots" / f"{name}.svg").read_text()
    spans: dict[float, list[tuple[float, str]]] = {}
    for x, y, text in re.findall(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        spans.setdefault(float(y), []).append((float(x), html.unescape(text).replace("\xa0", " ")))
    rows = []
    for y in sorted(spans):
        row = ""
        for x, text in sorted(spans[y]):
            row = row.ljust(round(x / 12.2)) + text  # 12.2 px a cell in the plugin's SVG
        rows.append(row)
    return rows


def test_the_diagnose_picture_at_80x24_shows_whole():
    """The committed 80x24 picture: the chart whole (its mark, its last tick, its axis name) and no row wider than
    the terminal."""
    rows = snapshot_rows("test_diagnose_screen_at_80x24")
    text = "\n".join(rows)
    assert "1 overfitting" in text and "40.0" in text and re.search(r"^\W+epoch\s*$", text, re.M)
    assert max(len(row.rstrip()) for row in rows) <= 80
