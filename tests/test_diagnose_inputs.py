"""Inputs `advisor diagnose` cannot read say why in one paragraph, exit 2 (in-process: milliseconds)."""

from __future__ import annotations

from advisor.cli import main


def test_a_truncated_trainer_state_json_is_called_cut_off_not_empty(tmp_path, capsys):
    path = tmp_path / "ts3.json"
    path.write_text('{"log_history": [{"step":10, "loss": 2.\n')
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err
    assert "it is empty" not in err and "Traceback" not in err
    assert "trainer_state.json" in err and "cut off" in err and "line 1" in err
    assert "complete file" in err and "training log" in err


def test_malformed_trainer_state_json_names_where_parsing_stopped(tmp_path, capsys):
    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": [{"step": 10, "loss": 2.5} {"step": 20}]}\n')
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err
    assert "malformed" in err and "line 1, column 44" in err and "it is empty" not in err


def test_a_genuinely_empty_file_still_says_it_is_empty(tmp_path, capsys):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert main(["diagnose", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "empty.log: it is empty" in err and "hf-trainer" in err  # the known formats, as for any log


def test_a_trainer_state_json_whose_log_history_is_not_a_list_is_unreadable_not_a_traceback(tmp_path, capsys):
    """Found walking bad inputs: `{"log_history": 5}` raised TypeError from the reader (exit 1, a traceback)."""
    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": 5}')
    assert main(["diagnose", str(path)]) == 2
    assert "nothing readable" in capsys.readouterr().err


def test_an_unreadable_file_beside_a_readable_one_is_named_not_dropped(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text("".join(f"step {i} loss {2.0 / (i + 1):.4f}\n" for i in range(40)))
    (tmp_path / "empty.log").write_text("")
    code = main(["diagnose", str(log), str(tmp_path / "empty.log")])
    captured = capsys.readouterr()
    assert code in (0, 1) and "train.log: 40 lines" in captured.out
    assert f"advisor: {tmp_path / 'empty.log'} was not read (it is empty)" in captured.err
