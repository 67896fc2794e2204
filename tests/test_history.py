"""The ledger across runs: append-only JSON lines that survive crashes and concurrent writers, `advisor history`,
and the next plan starting from it (stub runners: milliseconds)."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.adapters import load_adapter
from advisor.cli import main
from advisor.device import HostDevices
from advisor.history import (HistoryRecorder, Known, append_row, read_history, run_context)
from advisor.session import Session, validate_setup
from helpers import settings
from helpers import WarmupStubRunner

REPO = Path(__file__).resolve().parents[1]


def _writer(path: str, worker: int, count: int) -> None:
    for i in range(count):
        append_row(path, {"kind": "trial", "worker": worker, "i": i, "pad": "x" * 3000})


def test_concurrent_writers_never_interleave_rows(tmp_path):
    path = str(tmp_path / ".history.jsonl")
    procs = [multiprocessing.Process(target=_writer, args=(path, w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    read = read_history(path)
    assert read.skipped == 0 and len(read.rows) == 160
    assert {(r["worker"], r["i"]) for r in read.rows} == {(w, i) for w in range(4) for i in range(40)}


def test_a_row_torn_by_a_crash_is_left_out_and_the_next_append_starts_a_fresh_line(tmp_path):
    path = tmp_path / ".history.jsonl"
    append_row(path, {"kind": "plan", "n": 1})
    # A writer killed mid-write leaves part of a line, without its newline.
    with open(path, "ab") as handle:
        handle.write(b'{"kind":"trial","n":2,"peak_by')
    append_row(path, {"kind": "sweep", "n": 3})
    read = read_history(path)
    assert [r["n"] for r in read.rows] == [1, 3] and read.skipped == 1
    # A real crash: a writer process killed at once leaves only whole rows (or one torn tail, skipped).
    code = ("import sys; sys.path.insert(0, %r)\nfrom advisor.history import append_row\n"
            "for i in range(100000): append_row(%r, {'kind': 'trial', 'i': i, 'pad': 'y' * 5000})" % (str(REPO), str(path)))
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        proc.wait(timeout=1.5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    append_row(path, {"kind": "plan", "n": 4})
    read = read_history(path)
    assert read.skipped <= 2 and read.rows[-1] == {"kind": "plan", "n": 4}
    assert all(r["kind"] in ("plan", "trial", "sweep") for r in read.rows)


def test_advisor_history_prints_the_repositorys_own_runs(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("ADVISOR_HISTORY", raising=False)
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "digits-cnn" in out and "samples/s" in out and "val metric" in out and "0.978" in out
    assert "recipes/.history.jsonl" in out
    assert main(["history", "--workload", "digits-cnn", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["kind"] for r in rows} >= {"plan", "sweep", "trial"}
    for row in rows:  # DOMAIN 7's columns
        for key in ("workload", "host", "device", "adapter", "precision", "per_device", "accumulation",
                    "global_batch", "lr"):
            assert key in row


def test_history_import_is_idempotent_and_a_missing_file_is_explained(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    assert main(["history", "--history", str(path)]) == 2
    assert "No history at" in capsys.readouterr().err
    recipe = str(REPO / "recipes" / "digits-cnn.toml")
    assert main(["history", "--history", str(path), "--import", recipe]) == 0
    from advisor.recipe import read_recipe_data

    runs = [e for e in read_recipe_data(recipe)[0]["ledger"] if e["phase"] in ("trial", "sweep")]
    assert runs and len(read_history(path).rows) == len(runs) + 1  # its trial and sweep runs, then the plan
    assert main(["history", "--history", str(path), "--import", recipe]) == 0
    assert len(read_history(path).rows) == len(runs) + 1  # the second import adds nothing
    sibling = str(REPO / "recipes" / "digits-cnn.measurements.toml")  # what `--import recipes/*.toml` also names
    assert main(["history", "--history", str(path), "--import", sibling, recipe]) == 0
    assert len(read_history(path).rows) == len(runs) + 1 and "imported with its recipe" in capsys.readouterr().err


def _plan(runner, path, known=None, **kw):
    adapter = load_adapter("ddp")
    s = settings(**kw)
    setup = validate_setup(s, adapter, HostDevices("cpu"))
    recorder = HistoryRecorder(path, run_context(s, setup), lambda: runner.model_info)
    session = Session(adapter, s, setup, recorder, runner=runner, known=known)
    result = session.run_all()
    recorder.plan(result)
    return session, result, recorder


def probes(runner):
    return [c for c in runner.calls if c[0] == "probe"]


def test_a_second_plan_with_history_probes_3x_less_and_reaches_the_same_ceiling(tmp_path):
    path = tmp_path / ".history.jsonl"
    first_runner = WarmupStubRunner()
    first, first_result, recorder = _plan(first_runner, path)
    rows = read_history(path).rows
    assert [r["kind"] for r in rows].count("plan") == 1 and any(r["kind"] == "sweep" for r in rows)
    known = Known.select(rows, run_context(first.settings, first.setup).workload,
                         run_context(first.settings, first.setup).device, "ddp")
    assert known
    second_runner = WarmupStubRunner()
    second, second_result, _ = _plan(second_runner, path, known=known)
    assert second_result.ceiling.per_device_max == first_result.ceiling.per_device_max
    assert len(probes(first_runner)) >= 3 * len(probes(second_runner)), (probes(first_runner), probes(second_runner))
    assert "from the history" in second_result.ceiling.reason
    # The trial starts at the best known value, and sweep points measured at the same settings are not re-run.
    assert second.start.per_device == first_result.sweep_choice and "history" in second.start.reason
    reused = [r for r in second_result.ledger if r.phase == "sweep" and "reused from the history" in r.note]
    assert reused and not [c for c in second_runner.calls if c[0] == "sweep" and c[1] in {r.per_device for r in reused}]
    assert second_result.sweep_choice == first_result.sweep_choice
    rows = read_history(path).rows
    assert any(r.get("reused_from") for r in rows)  # the ledger says which were reused


def test_history_of_another_budget_or_a_moved_edge_falls_back_to_the_search(tmp_path):
    path = tmp_path / ".history.jsonl"
    first_runner = WarmupStubRunner()
    first, first_result, _ = _plan(first_runner, path)
    context = run_context(first.settings, first.setup)
    rows = read_history(path).rows
    other_budget = dict(context.device, memory_bytes=context.device["memory_bytes"] * 2)
    assert not Known.select(rows, context.workload, other_budget, "ddp").ceiling_seed("fp32", other_budget["memory_bytes"])
    # The same budget, but the model grew: the known ceiling no longer fits, so the search runs (reusing that probe).
    grown = WarmupStubRunner(per_sample=2 * 2**20)
    second, second_result, _ = _plan(grown, path, known=Known.select(rows, context.workload, context.device, "ddp"))
    fresh = WarmupStubRunner(per_sample=2 * 2**20)
    _, fresh_result, _ = _plan(fresh, tmp_path / "other.jsonl")
    assert second_result.ceiling.per_device_max == fresh_result.ceiling.per_device_max


def test_a_history_from_another_machine_never_seeds_this_ones_plan(tmp_path):
    """Regression (issue 25): the committed history, recorded on another machine, made a fresh clone's first plan
    do one confirming probe instead of a search. Rows carry the host's fingerprint; another one (or none, as
    rows written before it existed) is another device class."""
    from advisor.history import host_fingerprint

    path = tmp_path / ".history.jsonl"
    first, _, _ = _plan(WarmupStubRunner(), path)
    context = run_context(first.settings, first.setup)
    rows = read_history(path).rows
    assert context.device["host_fingerprint"] == host_fingerprint(first.setup.host)
    assert all(r["device"]["host_fingerprint"] == context.device["host_fingerprint"] for r in rows)
    assert Known.select(rows, context.workload, context.device, "ddp")  # this machine's own: used
    elsewhere = [dict(r, device=dict(r["device"], host_fingerprint="0123456789abcdef")) for r in rows]
    assert not Known.select(elsewhere, context.workload, context.device, "ddp")
    unmarked = [dict(r, device={k: v for k, v in r["device"].items() if k != "host_fingerprint"}) for r in rows]
    assert not Known.select(unmarked, context.workload, context.device, "ddp")


def test_plan_reads_the_history_unless_fresh_and_records_next_to_its_recipe(tmp_path, monkeypatch):
    import argparse

    from advisor.cli import StderrProgress, _plan_history

    monkeypatch.delenv("ADVISOR_HISTORY", raising=False)  # this test is about the default: next to the recipe
    out = tmp_path / "recipes" / "w.toml"
    runner = WarmupStubRunner()
    first, _, _ = _plan(runner, out.parent / ".history.jsonl")
    lines = []

    class Lines(StderrProgress):
        def line(self, text):
            lines.append(text)

    def args(**kw):
        base = dict(history=None, fresh=False, no_history=False)
        base.update(kw)
        return argparse.Namespace(**base)

    known, recorder = _plan_history(args(), first.settings, first.setup, out, Lines(stream=open(__file__)))
    assert known and recorder.path == out.parent / ".history.jsonl" and "--fresh ignores them" in lines[-1]
    known, recorder = _plan_history(args(fresh=True), first.settings, first.setup, out, Lines(stream=open(__file__)))
    assert known is None and recorder is not None  # --fresh still records
    assert _plan_history(args(no_history=True), first.settings, first.setup, out, Lines(stream=open(__file__))) \
        == (None, None)
    assert _plan_history(args(), first.settings, first.setup, None, Lines(stream=open(__file__))) == (None, None)


def test_a_history_seeded_ceiling_says_the_cap_set_it_when_the_cap_binds():
    """Regression (issue 25, seen in a fresh clone's second `make run`): "Keeping 15% headroom below 1024 MiB gives
    719" when the training set's share (719) had set it and memory would allow far more."""
    from advisor.history import seeded_ceiling
    from advisor.method.ceiling import ProbeTrial

    seed = {"fixed_bytes": 2**20, "per_sample_bytes": 2**19, "largest_ok": 719, "smallest_oom": None,
            "time": "2026-12-03"}
    fits = lambda batch, purpose: ProbeTrial(batch, "ok", 2**20 + batch * 2**19, 0.01, purpose)  # noqa: E731
    found, why = seeded_ceiling(fits, seed, 2**30, 0.15, 719)
    assert found is not None and found.per_device_max == 719 and why == ""
    assert "The cap of 719 binds" in found.reason and "Keeping" not in found.reason
    edge = lambda batch, purpose: (fits(batch, purpose) if batch <= 110  # noqa: E731
                                   else ProbeTrial(batch, "oom", None, 0.01, purpose))
    tight, _ = seeded_ceiling(edge, dict(seed, largest_ok=100, smallest_oom=120), 60 * 2**20, 0.15, 719)
    assert tight is not None and "Keeping 15% headroom" in tight.reason  # memory set it: the headroom is the reason


def test_history_without_the_default_file_names_the_histories_here(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ADVISOR_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".history.jsonl").write_text("")  # `advisor plan --out r.toml` here writes it next to r.toml
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / ".history.jsonl").write_text("")
    assert main(["history"]) == 2
    err = capsys.readouterr().err
    assert "No history at recipes/.history.jsonl" in err
    assert "--history .history.jsonl" in err and "runs/.history.jsonl" in err


def test_a_run_reused_from_the_history_reads_the_samples_per_s_it_was_measured_at():
    """The history keeps the rules' samples/s and the data wait behind it: a reused sweep run must not compare
    faster than it ran (the row kept the step time alone, and the wait was lost)."""
    from advisor.history import RunContext, record_from_row, run_row
    from advisor.ledger import TrialRecord

    record = TrialRecord("sweep", 16, 2, 1, 32, "ok", 3.0, lr=0.01, steps=100, step_seconds=0.010,
                         data_seconds=0.006, throughput=3200.0)
    row = run_row(RunContext({"name": "w"}, {"type": "cpu"}, "ddp"), record)
    again = record_from_row(row)
    assert again.samples_per_s == pytest.approx(record.samples_per_s) == pytest.approx(2000.0)
    assert row["throughput"] == pytest.approx(2000.0)  # what `advisor history` shows under samples/s


def test_history_rows_say_whether_a_plan_was_validated_and_how_long_its_sweep_ran(tmp_path):
    """Issue 38: `advisor history` showed a NOT VALIDATED plan like any other, and not how long its sweep ran."""
    from advisor.history import render_history, rows_from_recipe
    from advisor.recipe import read_recipe_data

    path = tmp_path / "h.jsonl"
    runner = WarmupStubRunner()
    _, result, _ = _plan(runner, path)
    plan = read_history(path).rows[-1]
    sweeps = [r for r in result.ledger if r.phase == "sweep"]
    assert plan["kind"] == "plan" and plan["validated"] is True
    assert plan["sweep_runs"] == len(sweeps) > 0
    assert plan["sweep_seconds"] == pytest.approx(sum(r.seconds for r in sweeps))
    text = render_history(read_history(path))
    header, rule, *rows = text.splitlines()
    assert "sweep" in header.split()
    assert f"{len(sweeps)} runs" in rows[-3]  # the plan's row (a blank line and the footer follow)
    append_row(path, {**plan, "validated": False})
    assert "plan (NOT VALIDATED)" in render_history(read_history(path))
    data = read_recipe_data(str(REPO / "recipes" / "digits-cnn.toml"))[0]
    imported = rows_from_recipe(data, "recipes/digits-cnn.toml")[-1]
    assert imported["validated"] is True and imported["sweep_runs"] == sum(
        1 for e in data["ledger"] if e["phase"] == "sweep")
    data["warnings"] = [{"code": "no-candidate-learned", "message": "..."}, *data.get("warnings", [])]
    assert rows_from_recipe(data, "x.toml")[-1]["validated"] is False


def test_the_setups_history_line_labels_the_plan_and_the_single_best_run_apart():
    """Issue 38: the Setup's history line named the best single sweep run as if it were the plan. It says the
    latest plan is the plan (validated or not) and the best run is one seed's run, not the advice."""
    from advisor.history import HistoryRead, summary_for

    base = {"workload": {"name": "w"}, "device": {"type": "cpu"}}
    rows = [{**base, "kind": "sweep", "per_device": 32, "global_batch": 64, "val_metric": 0.95, "seed": 2},
            {**base, "kind": "plan", "per_device": 8, "world_size": 2, "global_batch": 16, "validated": False,
             "ceiling": {"per_device_max": 100, "budget_bytes": 1 << 30}}]
    text = summary_for(HistoryRead(rows, 0, "h.jsonl"), "w")
    assert "latest plan (NOT VALIDATED): 8 x 2" in text, text
    assert "best single sweep run (one seed; not the advice): global 64" in text, text
