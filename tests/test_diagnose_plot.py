"""`advisor diagnose --plot` and `--fail-on`: the picture of the curves read, each finding marked where it starts,
in the terminal and in a file (.html, .svg, .txt); and which findings fail a CI job. Real corpus logs through the
real reader, detectors and CLI; nothing mocked."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.diagnose import diagnose
from advisor.diagnose.plot import picture_of, render_svg, render_text
from advisor.diagnose.records import Point

LOGS = Path(__file__).resolve().parent / "corpus" / "logs"
OVERFIT_STEPS = LOGS / "hf_overfit_trainer_state.json"  # overfitting (a warning), validation best at step 56
OVERFIT_EPOCHS = LOGS / "hf_overfit.log"  # the same run's printed log: epochs only, best at epoch 7
DIVERGED = LOGS / "real_nanogpt_nan.log"  # an error: the loss became nan at step 3010
OOM_ONLY = LOGS / "real4_dfaker_bfc_oom.log"  # an error with no metric point at all
HEALTHY = LOGS / "hf_healthy.log"
SVG = "{http://www.w3.org/2000/svg}"
ANSI = re.compile(r"\x1b\[")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["diagnose", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def one_paragraph(err: str) -> str:
    text = err.strip()
    assert text.startswith("advisor: ") and "\n" not in text and "Traceback" not in text, err
    return text


def svg_root(text: str) -> ET.Element:
    return ET.fromstring(text[text.index("<svg"):text.index("</svg>") + len("</svg>")])


def mark_lines(root: ET.Element) -> dict[str, float]:
    """kind -> pixel x of its mark's line."""
    return {g.get("data-kind"): float(g.find(f"{SVG}line").get("x1")) for g in root.iter(f"{SVG}g")
            if g.get("class") == "mark"}


# ------------------------------------------------------------------ the model


@pytest.mark.parametrize("log, axis, kind, start", [(OVERFIT_STEPS, "step", "overfitting", 56.0),
                                                    (OVERFIT_EPOCHS, "epoch", "overfitting", 7.0),
                                                    (DIVERGED, "step", "diverged", 3010.0)])
def test_each_finding_is_marked_where_its_evidence_says_it_starts(log, axis, kind, start):
    report = diagnose([str(log)]).reports[0]
    picture = picture_of(report)
    assert picture.x_axis == axis
    assert [(m.kind, m.x) for m in picture.marks] == [(kind, start)]
    assert picture.marks[0].where == f"{axis} {start:g}"


def test_the_mark_sits_on_the_validation_point_where_overfitting_starts():
    """In pixels: the overfitting mark's line passes through the drawn validation point at its best (step 56)."""
    report = diagnose([str(OVERFIT_STEPS)]).reports[0]
    best = report.findings[0].evidence["val_best_at"]
    root = svg_root(render_svg([picture_of(report)]))
    circles = [(float(c.get("cx")), float(c.get("cy"))) for c in root.iter(f"{SVG}circle")]
    validation = next(c for c in picture_of(report).curves if c.stage == "val")
    index = validation.xs.index(float(best["step"]))
    line_x = mark_lines(root)["overfitting"]
    assert any(abs(cx - line_x) < 0.05 for cx, _ in circles)
    # and that point is the lowest validation point drawn (largest y in pixels)
    val_circles = circles[-len(validation.xs):]
    assert abs(val_circles[index][0] - line_x) < 0.05
    assert val_circles[index][1] == max(cy for _, cy in val_circles)


def test_per_step_and_per_epoch_points_are_two_curves_and_a_keyed_series_reads_the_same():
    step_points = [Point(line=i, name="train_loss", value=2.0 - i / 100, step=i, cadence="step") for i in range(1, 50)]
    epoch_points = [Point(line=25 * e, name="train_loss", value=1.8 - e / 10, epoch=e, cadence="epoch")
                    for e in (1, 2)]

    class Report:
        source, findings = "stub.log", []
        series = {"train_loss": sorted(step_points + epoch_points, key=lambda p: p.line)}

    labels = [c.label for c in picture_of(Report).curves]
    assert labels == ["train loss (per epoch)", "train loss (per step)"]
    # the epoch means have no step of their own: drawn at the step their line reached, and said so
    epoch_curve = picture_of(Report).curves[0]
    assert epoch_curve.xs == [25.0, 49.0]
    assert any("without a step of their own" in note for note in picture_of(Report).notes)
    # keyed (metric, stage, cadence), as diagnose.curves keys them: the same curves, accuracy left out
    Report.series = {("loss", "train", "step"): step_points, ("loss", "train", "epoch"): epoch_points,
                     ("acc", "val", "epoch"): [Point(line=30, name="val_acc", value=0.5, epoch=1)]}
    assert [c.label for c in picture_of(Report).curves] == labels


def test_an_explosion_is_drawn_on_a_log_axis():
    points = [Point(line=i, name="train_loss", value=v, step=i) for i, v in enumerate([4.5, 4.4, 4.5e10, 1.9e20,
                                                                                         2.3, 1.9, 2.1], 1)]

    class Report:
        source, findings, series = "stub.log", [], {"train_loss": points}

    picture = picture_of(Report)
    assert picture.log_y
    ET.fromstring(render_svg([picture]))  # the log axis renders
    drawing = render_text(picture, 80, 18)
    assert re.search(r"^1e\d+┤", drawing, re.M) and not re.search(r"\d{8}", drawing)  # decades, not every digit


# ------------------------------------------------------------------ files


@pytest.mark.parametrize("suffix", [".svg", ".html"])
def test_the_picture_file_is_valid_self_contained_and_marks_each_finding(tmp_path, capsys, suffix):
    target = tmp_path / f"curves{suffix}"
    code, _, err = run(capsys, OVERFIT_STEPS, DIVERGED, "--plot", target)
    assert code == 1 and f"picture written to {target}" in err
    text = target.read_text(encoding="utf-8")
    if suffix == ".svg":
        root = ET.fromstring(text)  # the whole file is one XML document
    else:
        assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
        root = svg_root(text)
        assert not re.search(r"<script|<link|\bsrc=|\bhref=|@import|url\(", text, re.I), "fetches something"
    assert root.tag == f"{SVG}svg"
    assert set(mark_lines(root)) == {"overfitting", "diverged"}
    labels = {p.get("data-label") for p in root.iter(f"{SVG}polyline")}
    assert {"train loss", "validation loss"} <= labels
    assert "[1] warning overfitting at step 56" in text and "[1] error diverged at step 3010" in text


def test_the_text_file_is_the_terminal_drawing_without_colour(tmp_path, capsys):
    target = tmp_path / "curves.txt"
    code, _, _ = run(capsys, OVERFIT_EPOCHS, "--plot", target)
    text = target.read_text(encoding="utf-8")
    assert code == 1 and not ANSI.search(text)
    assert "[1] warning overfitting at epoch 7" in text and "validation loss" in text and "┤" in text


def test_without_colour_the_curves_differ_by_their_marks(tmp_path, capsys):
    """Braille for training, dots for validation, however many points each has (60 here)."""
    log = tmp_path / "run.log"
    log.write_text("".join(f"Epoch {e}: train_loss={2 / e:.4f} val_loss={2.1 / e:.4f}\n" for e in range(1, 61)))
    target = tmp_path / "curves.txt"
    run(capsys, log, "--plot", target)
    text = target.read_text(encoding="utf-8")
    assert "⢕⢕ train loss" in text and "•• validation loss" in text, text  # the legend shows each curve's mark


def test_a_drawing_of_a_run_in_a_deep_folder_keeps_its_name_in_the_title(tmp_path, capsys):
    """plotext drops a title wider than the plot: the two drawings of lightning_logs/mnist_cnn/version_0 and
    version_1 (long paths) came out unnamed and alike. The title keeps the path's end."""
    folder = tmp_path / ("a-folder-with-a-long-name-" * 3) / "lightning_logs"
    for version in (0, 1):
        run_dir = folder / f"version_{version}"
        run_dir.mkdir(parents=True)
        (run_dir / "train.log").write_text(
            "".join(f"Epoch {e}: train_loss={2 / e:.4f} val_loss={2.1 / e:.4f}\n" for e in range(1, 31)))
    target = tmp_path / "curves.txt"
    run(capsys, folder, "--plot", target)
    titles = [line.strip() for line in target.read_text(encoding="utf-8").splitlines() if ": loss" in line]
    assert titles == ["…/lightning_logs/version_0: loss", "…/lightning_logs/version_1: loss"]


def test_plot_alone_draws_in_the_terminal_after_the_report(capsys):
    code, out, _ = run(capsys, OVERFIT_EPOCHS, "--plot")
    assert code == 1
    assert out.index("[warning] overfitting") < out.index("┤") < out.index("[1] warning overfitting at epoch 7")
    assert not ANSI.search(out)  # not a terminal here: no colour codes


def test_a_log_without_metric_points_gives_a_message_not_an_empty_picture(tmp_path, capsys):
    target = tmp_path / "curves.html"
    code, out, err = run(capsys, OOM_ONLY, "--plot", target)
    assert code == 2 and "[error] oom" in out  # the diagnosis is still given
    message = one_paragraph(err)
    assert "no training or validation loss" in message and "Nothing was written" in message
    assert not target.exists()


@pytest.mark.parametrize("case", ["extension", "existing", "missing-folder", "directory", "log-taken-as-file"])
def test_a_bad_plot_path_is_refused_before_reading(tmp_path, capsys, case):
    existing = tmp_path / "old.svg"
    existing.write_text("keep me")
    (tmp_path / "pictures.svg").mkdir()
    argv = {"extension": [OVERFIT_EPOCHS, "--plot", tmp_path / "curves.png"],
            "existing": [OVERFIT_EPOCHS, "--plot", existing],
            "missing-folder": [OVERFIT_EPOCHS, "--plot", tmp_path / "no" / "such" / "curves.svg"],
            "directory": [OVERFIT_EPOCHS, "--plot", tmp_path / "pictures.svg"],
            "log-taken-as-file": ["--plot", OVERFIT_EPOCHS]}[case]
    code, out, err = run(capsys, *argv)
    message = one_paragraph(err)
    assert code == 2 and out == ""
    expected = {"extension": "ends in .html, .svg or .txt", "existing": "--force", "missing-folder": "mkdir -p",
                "directory": "is a directory", "log-taken-as-file": "--plot`"}[case]
    assert expected in message and "Nothing was read" in message
    assert existing.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.svg", "pictures.svg"]


def test_force_replaces_the_picture_and_keeps_the_old_one(tmp_path, capsys):
    target = tmp_path / "curves.svg"
    target.write_text("old")
    code, _, err = run(capsys, OVERFIT_EPOCHS, "--plot", target, "--force")
    assert code == 1 and "kept as" in err
    ET.fromstring(target.read_text())
    assert (tmp_path / "curves.svg.bak").read_text() == "old"


# ------------------------------------------------------------------ --fail-on


@pytest.mark.parametrize("fail_on, healthy, warning, error", [("warning", 0, 1, 1), ("error", 0, 0, 1),
                                                               ("never", 0, 0, 0)])
def test_fail_on_decides_which_findings_exit_1(capsys, fail_on, healthy, warning, error):
    codes = [run(capsys, log, "--fail-on", fail_on)[0] for log in (HEALTHY, OVERFIT_EPOCHS, OOM_ONLY)]
    assert codes == [healthy, warning, error]


def test_fail_on_defaults_to_warning_and_never_hides_unreadable_input(tmp_path, capsys):
    assert run(capsys, OVERFIT_EPOCHS)[0] == 1  # today's exit codes
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert run(capsys, empty, "--fail-on", "never")[0] == 2


@pytest.mark.parametrize("fail_on, expected", [("warning", 1), ("error", 0)])
def test_fail_on_applies_to_watch(capsys, fail_on, expected):
    code, _, _ = run(capsys, OVERFIT_EPOCHS, "--watch", "--watch-seconds", "0.2", "--interval", "0.05",
                     "--fail-on", fail_on)
    assert code == expected


def test_the_cli_offers_the_choices_the_rule_knows():
    from advisor.cli import FAIL_ON_CHOICES
    from advisor.diagnose import FAIL_ON

    assert set(FAIL_ON_CHOICES) == set(FAIL_ON)


@pytest.mark.parametrize("argv, expected", [(["--plot", "--json"], "--json keeps standard output"),
                                            (["--plot", "--watch", "--watch-seconds", "0.1"], "--watch follows a log")])
def test_plot_with_options_it_cannot_serve_is_refused(capsys, argv, expected):
    code, out, err = run(capsys, OVERFIT_EPOCHS, *argv)
    assert code == 2 and out == "" and expected in one_paragraph(err)
