"""The world corpus (tests/corpus/world): real files and run folders labelled before any detector read them.

These tests check the labels are well-formed and that the tune split is scored and printed by
bench/diagnose_world.py. They assert no score: the held-back split is the lead's to score once (then a threshold
on it belongs here), and the tune split is for tuning.
"""

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest

from advisor.diagnose import KINDS

REPO = Path(__file__).resolve().parent.parent
WORLD = REPO / "tests" / "corpus" / "world"
LABELS = tomllib.loads((WORLD / "labels.toml").read_text())["entries"]
COMMIT = re.compile(r"^github:[\w.-]+/[\w.-]+ .+ @ [0-9a-f]{40}$")
SCORED_ONCE_BATCHES = (1, 2)  # their held-back part was scored once, 23/30 (README), then read to learn from (spent)
FRESH_BATCH = 3  # held back whole (split.py FRESH_BATCHES): labelled before any detector read it, scored once: 37/45
UNSCORED_BATCH = 4  # held back whole as well, collected after batch 3 was scored; scored once: 28/41 (spent since)
NEW_BATCH = 5  # held back whole, collected after batch 4 was scored; scored once: 31/50 (README)
SIXTH_BATCH = 6  # held back whole, collected after batch 5 was scored; scored once: 27/31 (README)
SEVENTH_BATCH = 7  # held back whole, collected after batch 6 was scored; scored once: 39/51 (README)
EIGHTH_BATCH = 8  # held back whole, collected after batch 7 was scored; scored once: 25/32 (README)
NINTH_BATCH = 9  # held back whole, collected after batch 8 was scored; scored once: 30/39 (README)
TENTH_BATCH = 10  # held back whole, collected after batch 9 was scored; scored once: 27/37 (README)
ELEVENTH_BATCH = 11  # held back whole, collected after batch 10 was scored; scored once: 29/36 (README)
TWELFTH_BATCH = 12  # held back whole, collected after batch 11 was scored; scored once: 24/30 (README)
THIRTEENTH_BATCH = 13  # held back whole, collected after batch 12 was scored; scored once: 28/37 (README)
FOURTEENTH_BATCH = 14  # held back whole, collected after batch 13 was scored; scored once: 23/36 (README)
FIFTEENTH_BATCH = 15  # held back whole, collected after batch 14 was scored; scored once: 24/37 (COMMON notes)
SIXTEENTH_BATCH = 16  # held back whole, collected after batch 15 was scored; scored once: 21/36 (README)
SEVENTEENTH_BATCH = 17  # held back whole, collected after batch 16 was scored; scored once: 19/32 (README)
EIGHTEENTH_BATCH = 18  # held back whole, collected after batch 17 was scored; scored once: 15/30 (README)
NINETEENTH_BATCH = 19  # held back whole, collected after batch 18 was scored; scored once: 19/31 (README)
TWENTIETH_BATCH = 20  # held back whole, collected after batch 19 landed; scored once: 24/34 (README)
TWENTY_FIRST_BATCH = 21  # held back whole, collected after batch 20 was scored; scored once: 20/33 (README)
TWENTY_SECOND_BATCH = 22  # held back whole, collected after batch 21 was scored; scored once: 25/39 (README)
TWENTY_THIRD_BATCH = 23  # held back whole, collected after batch 22 was scored; scored once: 23/37 (README)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_every_entry_exists_with_a_source_a_split_and_known_kinds():
    assert len(LABELS) >= 60, "issue 37 asks for at least 60 real files and run folders"
    problems = []
    for name, entry in LABELS.items():
        path = WORLD / name
        if not path.exists():
            problems.append(f"{name}: missing")
        if not set(entry["kinds"]) <= set(KINDS):
            problems.append(f"{name}: unknown kinds {set(entry['kinds']) - set(KINDS)}")
        if entry["split"] not in ("tune", "holdout"):
            problems.append(f"{name}: split {entry['split']!r}")
        source = entry.get("source", "")
        if not (COMMIT.match(source) or source.startswith("generated: tests/corpus/world/generate.py --only ")):
            problems.append(f"{name}: source {source!r} is neither a repository path at a commit nor generate.py")
        if not entry.get("why", "").strip() or not entry.get("format", "").strip():
            problems.append(f"{name}: no why or no format")
        if name.startswith("gen-") and _size(WORLD / name.split("/")[0]) >= 200 * 1024:
            problems.append(f"{name}: generated folder over 200 KB")
    assert not problems, problems


def test_both_parts_hold_every_kind_with_three_entries_or_more():
    for kind in (*KINDS, None):
        parts = [e["split"] for e in LABELS.values() if (kind in e["kinds"] if kind else not e["kinds"])]
        if len(parts) >= 3:
            assert {"tune", "holdout"} <= set(parts), f"{kind or 'healthy'}: {parts}"


def test_the_recorded_split_is_the_seeded_draw():
    split = _load("world_split", WORLD / "split.py")
    drawn = split.draw(LABELS)
    moved = {name: (e["split"], drawn[name]) for name, e in LABELS.items() if e["split"] != drawn[name]}
    assert not moved, f"entries moved by hand between tune and holdout: {moved}"


def test_the_bench_scores_and_prints_the_tune_split(capsys):
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate("tune", LABELS)
    text = bench.report("tune", outcomes)
    with capsys.disabled():
        print("\n" + text)
    assert len(outcomes) == sum(e["split"] == "tune" for e in LABELS.values())
    assert all(o.unreadable or o.found is not None for o in outcomes)
    for kind in KINDS:
        assert re.search(rf"^{re.escape(kind)}\s", text, re.M), f"no row for {kind}"
    assert "unreadable:" in text and "false alarm" in text


def test_the_report_counts_labels_marked_a_judgement_call_apart():
    """A label whose `why` names another reading is scored by its label like any other, and counted apart too."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    contested_right = bench.Outcome("a", set(), "csv", judgement_call=True)
    contested_wrong = bench.Outcome("b", {"overfitting"}, "csv", judgement_call=True)
    clear = [bench.Outcome(n, set(), "csv") for n in "cde"] + [bench.Outcome("f", {"diverged"}, "csv")]
    text = bench.report(None, [contested_right, contested_wrong, *clear])
    assert "right (readable, primary kinds exactly the labels): 4 of 6" in text
    assert "labels marked a judgement call: 1 of 2; the other labels: 3 of 4 (0.75)" in text
    (marked,) = bench.evaluate(None, {"x": {"kinds": [], "split": "tune", "why": "flat (judgement call: ...)"}})
    assert marked.judgement_call


def test_an_entry_the_tool_cannot_read_or_crashes_on_counts_as_wrong(tmp_path, monkeypatch):
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    empty = tmp_path / "empty.log"
    empty.write_text("")
    labels = {str(tmp_path / "missing.log"): {"kinds": ["overfitting"], "split": "tune"},
              str(empty): {"kinds": [], "split": "tune"}}
    outcomes = bench.evaluate("tune", labels)
    assert [bool(o.unreadable) for o in outcomes] == [True, True] and not any(o.right for o in outcomes)
    assert bench.score(outcomes)["overfitting"] == (1, 0, 0, 1)

    import advisor.cli

    def crash(argv):
        raise RuntimeError("a reader bug")

    monkeypatch.setattr(advisor.cli, "main", crash)
    (outcome,) = bench.evaluate("tune", {str(empty): {"kinds": [], "split": "tune"}})
    assert outcome.unreadable == "RuntimeError: a reader bug" and not outcome.right


def test_the_calibration_check_scores_batches_1_to_6_and_7_to_13_and_never_a_later_batch(tmp_path, monkeypatch):
    # `--calibration-check`: a rule change is calibrated on batches 1-6 and checked on 7-13 (all spent); a later
    # batch (14, spent but not in the check; 15, held back whole, the lead's to score once) is never judged by it, even
    # when labels.toml holds it.
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    judged = []
    monkeypatch.setattr(bench, "judge", lambda name, entry: judged.append(entry["batch"]) or bench.Outcome(
        name, set(entry["kinds"]), "text-log"))
    labels = {f"e{b}": {"kinds": [], "split": "holdout", "batch": b} for b in range(1, 16)}
    text = bench.calibration_check(labels)
    assert sorted(judged) == list(range(1, 14)), judged
    assert "calibration (batches 1-6): 6 of 6 right" in text and "check (batches 7-13): 7 of 7 right" in text
    assert "by batch: 7 1/1, 8 1/1, 9 1/1, 10 1/1, 11 1/1, 12 1/1, 13 1/1" in text  # read to write rules, apart


@pytest.mark.parametrize("batch", [FRESH_BATCH, UNSCORED_BATCH, NEW_BATCH, SIXTH_BATCH, SEVENTH_BATCH, EIGHTH_BATCH,
                                   NINTH_BATCH, TENTH_BATCH, ELEVENTH_BATCH, TWELFTH_BATCH,
                                   THIRTEENTH_BATCH, FOURTEENTH_BATCH, FIFTEENTH_BATCH, SIXTEENTH_BATCH,
                                   SEVENTEENTH_BATCH,
                                   EIGHTEENTH_BATCH, NINETEENTH_BATCH, TWENTIETH_BATCH,
                                   TWENTY_FIRST_BATCH, TWENTY_SECOND_BATCH, TWENTY_THIRD_BATCH])
def test_the_fresh_batch_is_held_back_whole_and_the_bench_selects_it_without_judging_it(capsys, batch):
    """Batch 3 was collected after batches 1-2's held-back part was spent, batch 4 after batch 3 was scored: each is
    held back whole, at least 30 entries, a third of them healthy. The bench picks a batch by its number and says
    which it scored; nothing here runs a detector on it (the lead scores it once with
    `bench/diagnose_world.py --batch N`)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    fresh = bench.selected(LABELS, None, (batch,))
    assert len(fresh) >= 30 and {e["split"] for e in fresh.values()} == {"holdout"}
    assert sum(not e["kinds"] for e in fresh.values()) * 3 >= len(fresh), "at least a third healthy"
    assert len(bench.selected(LABELS, "holdout", SCORED_ONCE_BATCHES)) == 30, "the part scored once is 30 entries"
    assert not set(fresh) & set(bench.selected(LABELS, "tune", None)), f"nothing of batch {batch} is tuned on"
    header = bench.report("holdout", [], (batch,)).splitlines()[0]
    assert header == f"advisor diagnose on the world corpus, split 'holdout', batch {batch}: 0 entries"
    assert bench.main(["--batch", "99"]) == 2 and "no batch [99]" in capsys.readouterr().err


@pytest.mark.parametrize("batch", [UNSCORED_BATCH, NEW_BATCH, SIXTH_BATCH, SEVENTH_BATCH, EIGHTH_BATCH, NINTH_BATCH,
                                   TENTH_BATCH, ELEVENTH_BATCH, TWELFTH_BATCH, THIRTEENTH_BATCH,
                                   FOURTEENTH_BATCH, FIFTEENTH_BATCH, SIXTEENTH_BATCH, SEVENTEENTH_BATCH,
                                   EIGHTEENTH_BATCH, NINETEENTH_BATCH, TWENTIETH_BATCH,
                                   TWENTY_FIRST_BATCH, TWENTY_SECOND_BATCH, TWENTY_THIRD_BATCH])
def test_the_unscored_batch_has_new_sources_and_no_entry_of_an_earlier_batch(batch):
    """Batches 4 to 10 are new material: no repository file or generated run already in an earlier batch."""
    earlier = {e["source"] for e in LABELS.values() if e.get("batch", 1) < batch}
    earlier_repos = {s.split()[0] for s in earlier if s.startswith("github:")}
    fresh = {n: e for n, e in LABELS.items() if e.get("batch", 1) == batch}
    assert not [n for n, e in fresh.items() if e["source"] in earlier]
    assert not [n for n, e in fresh.items() if e["source"].split()[0] in earlier_repos], "a repository used before"


def _batch_by_source(batch: int) -> tuple[dict, list[str], list[str]]:
    """A batch's entries, and the names of those copied from a commit and of those generated here."""
    fresh = {n: e for n, e in LABELS.items() if e.get("batch", 1) == batch}
    committed = [n for n, e in fresh.items() if COMMIT.match(e["source"])]
    generated = [n for n, e in fresh.items() if e["source"].startswith("generated: ")]
    return fresh, committed, generated


def test_the_seventh_batch_holds_committed_files_and_runs_trained_here_in_new_formats():
    """Batch 7 (issue 37) asks for at least 20 files committed in public repositories and at least 20 runs really
    trained here, each kind of writer present; nothing here reads the entries' curves."""
    fresh, committed, generated = _batch_by_source(SEVENTH_BATCH)
    assert len(committed) >= 20 and len(generated) >= 20, (len(committed), len(generated))
    writers = {e["format"] for n, e in fresh.items() if n in generated}
    assert {"summarywriter-dir", "lightning-tb-dir", "lightning-csv-dir", "hf-output-dir", "keras-csv", "text-log"} <= writers
    assert {"oom", "crash"} <= {k for e in fresh.values() for k in e["kinds"]}


def test_the_eighth_batch_is_mostly_committed_files_with_a_few_runs_trained_here():
    """Batch 8 (issue 37) asks for at least 22 files committed in public repositories and at most 8 runs really
    trained here (on a task no earlier batch used), with a crash among them; nothing here reads the entries' curves."""
    fresh, committed, generated = _batch_by_source(EIGHTH_BATCH)
    assert len(committed) >= 22 and 1 <= len(generated) <= 8, (len(committed), len(generated))
    assert len(committed) + len(generated) == len(fresh)
    assert all(n.startswith("gen-sp-") for n in generated), "batch 8 trains on the spirals task only"
    assert "crash" in {k for n in generated for k in fresh[n]["kinds"]}


def test_the_ninth_batch_is_mostly_committed_files_with_a_few_runs_trained_here():
    """Batch 9 (issue 37) asks for at least 24 files committed in public repositories and at most 10 runs really
    trained here (on a task no earlier batch used), with an oom among the runs; a third or more of it healthy but not
    much more than half, and a third or more of its committed files not healthy (committed logs of sick runs, not only
    healthy ones); nothing here reads the entries' curves."""
    fresh, committed, generated = _batch_by_source(NINTH_BATCH)
    assert len(committed) >= 24 and 1 <= len(generated) <= 10, (len(committed), len(generated))
    assert len(committed) + len(generated) == len(fresh)
    assert all(n.startswith("gen-ts-") for n in generated), "batch 9 trains on the series-forecasting task only"
    assert "oom" in {k for n in generated for k in fresh[n]["kinds"]}
    healthy = sum(not e["kinds"] for e in fresh.values())
    assert 3 * healthy >= len(fresh) and healthy <= 0.55 * len(fresh), (healthy, len(fresh))
    assert 3 * sum(bool(fresh[n]["kinds"]) for n in committed) >= len(committed)


def test_the_tenth_batch_is_mostly_committed_files_with_a_few_runs_trained_here():
    """Batch 10 (issue 37) asks for at least 28 files committed in public repositories and at most 8 runs really
    trained here (on a task no earlier batch used), with a crash among the runs; 36 to 42 entries, 35-55% of them
    healthy, and a third or more of its committed files not healthy; nothing here reads the entries' curves (the lead
    scores it once: `python bench/diagnose_world.py --batch 10`)."""
    fresh, committed, generated = _batch_by_source(TENTH_BATCH)
    assert len(committed) >= 28 and 1 <= len(generated) <= 8, (len(committed), len(generated))
    assert len(committed) + len(generated) == len(fresh) and 36 <= len(fresh) <= 42, len(fresh)
    assert all(n.startswith("gen-mf-") for n in generated), "batch 10 trains on the rating-model task only"
    assert "crash" in {k for n in generated for k in fresh[n]["kinds"]}
    healthy = sum(not e["kinds"] for e in fresh.values())
    assert 0.35 * len(fresh) <= healthy <= 0.55 * len(fresh), (healthy, len(fresh))
    assert 3 * sum(bool(fresh[n]["kinds"]) for n in committed) >= len(committed)
    assert all(_size(WORLD / n.split("/")[0]) < 200 * 1024 for n in fresh), "every folder < 200 KB"


def test_the_eleventh_batch_is_mostly_committed_files_from_new_repositories():
    """Batch 11 asks for at least 30 files committed in public repositories none of batches 1-10 used (at most 2
    entries from any one repository) and at most 6 runs really trained here (on a task no earlier batch used); 36 to
    42 entries, 35-55% of them healthy, a third or more of its committed files not healthy and every folder < 200 KB;
    nothing here reads the entries' curves (the lead scores it once: `python bench/diagnose_world.py --batch 11`)."""
    fresh, committed, generated = _batch_by_source(ELEVENTH_BATCH)
    assert len(committed) >= 30 and len(generated) <= 6, (len(committed), len(generated))
    assert len(committed) + len(generated) == len(fresh) and 36 <= len(fresh) <= 42, len(fresh)
    repos = [fresh[n]["source"].split()[0] for n in committed]
    assert max(repos.count(r) for r in repos) <= 2, "at most 2 entries per repository"
    earlier = {e["source"].split()[0].lower() for e in LABELS.values() if e.get("batch", 1) < ELEVENTH_BATCH}
    assert not {r.lower() for r in repos} & earlier, "a repository used before"
    healthy = sum(not e["kinds"] for e in fresh.values())
    assert 0.35 * len(fresh) <= healthy <= 0.55 * len(fresh), (healthy, len(fresh))
    assert 3 * sum(bool(fresh[n]["kinds"]) for n in committed) >= len(committed)
    assert all(_size(WORLD / n.split("/")[0]) < 200 * 1024 for n in fresh), "every folder < 200 KB"


def _committed_from_new_repositories(batch: int, fewest: int, most: int) -> dict:
    """What batches 12-20 share, asserted: ``fewest`` to ``most`` entries, every one a file committed in a public
    repository (no run trained here), at most 2 from any one repository and none from a repository an earlier batch
    used (checked case-insensitively), 30-60% of them healthy, every folder < 200 KB. The batch's entries."""
    fresh, committed, generated = _batch_by_source(batch)
    assert len(committed) >= fewest and not generated, (len(committed), len(generated))
    assert len(committed) == len(fresh) and fewest <= len(fresh) <= most, len(fresh)
    repos = [fresh[n]["source"].split()[0].lower() for n in committed]
    assert max(repos.count(r) for r in repos) <= 2, "at most 2 entries per repository"
    earlier = {e["source"].split()[0].lower() for e in LABELS.values() if e.get("batch", 1) < batch}
    assert not set(repos) & earlier, "a repository used before"
    healthy = sum(not e["kinds"] for e in fresh.values())
    assert 0.30 * len(fresh) <= healthy <= 0.60 * len(fresh), (healthy, len(fresh))
    assert all(_size(WORLD / n.split("/")[0]) < 200 * 1024 for n in fresh), "every folder < 200 KB"
    return fresh


def test_the_twelfth_batch_is_committed_files_from_new_repositories():
    """Batch 12 asks for at least 24 files committed in public repositories none of batches 1-11 used (at most 2
    entries from any one repository, every repository checked case-insensitively) and no run trained here; 24 to 35
    entries, 30-60% of them healthy, a third or more not healthy and every folder < 200 KB; nothing here reads the
    entries' curves (the lead scores it once: `python bench/diagnose_world.py --batch 12`)."""
    fresh = _committed_from_new_repositories(TWELFTH_BATCH, 24, 35)
    assert 3 * sum(bool(e["kinds"]) for e in fresh.values()) >= len(fresh)


def test_the_thirteenth_batch_is_committed_files_from_new_repositories_in_varied_formats_and_kinds():
    """Batch 13 asks for about 36 files committed in public repositories none of batches 1-12 used (at most 2
    entries from any one repository, checked case-insensitively) and no run trained here, in varied formats (no more
    than 8 of any one) and kinds (a crash, an oom and at least five other not-healthy kinds among them); 30-60% of it
    healthy and every folder < 200 KB; nothing here reads the entries' curves (the lead scores it once:
    `python bench/diagnose_world.py --batch 13`)."""
    fresh = _committed_from_new_repositories(THIRTEENTH_BATCH, 30, 42)
    formats = [e["format"] for e in fresh.values()]
    assert len(set(formats)) >= 8 and max(formats.count(f) for f in formats) <= 8, sorted(formats)
    kinds = {k for e in fresh.values() for k in e["kinds"]}
    assert {"crash", "oom"} <= kinds and len(kinds) >= 7, kinds


# The floors of each batch's kinds: (not-learning, diverged, slow-convergence, jitter or periodic, overfitting, crash,
# oom). Batches 14-16 asked for the kinds earlier fresh batches held too few of (5, 3, 3, 3, besides overfitting, a
# crash and an oom); batches 17-23's collectors found fewer failing runs than that aim in the time given, and
# their floors are what they hold (README, batches 17-23).
NEW_REPOSITORY_BATCH_FLOORS = {
    FOURTEENTH_BATCH: (5, 3, 3, 3, 1, 1, 1),
    FIFTEENTH_BATCH: (5, 3, 3, 3, 2, 1, 1),
    SIXTEENTH_BATCH: (5, 3, 3, 3, 2, 1, 1),
    SEVENTEENTH_BATCH: (3, 2, 3, 3, 1, 1, 0),
    EIGHTEENTH_BATCH: (5, 1, 2, 2, 2, 1, 0),
    NINETEENTH_BATCH: (3, 0, 6, 2, 2, 2, 0),
    TWENTIETH_BATCH: (6, 2, 2, 2, 5, 2, 0),
    TWENTY_FIRST_BATCH: (4, 0, 2, 4, 3, 2, 0),
    TWENTY_SECOND_BATCH: (4, 3, 3, 3, 4, 2, 0),
    TWENTY_THIRD_BATCH: (2, 0, 2, 6, 7, 2, 0),
}


@pytest.mark.parametrize("batch", sorted(NEW_REPOSITORY_BATCH_FLOORS))
def test_batches_14_on_are_committed_files_from_new_repositories_in_varied_formats_and_kinds(batch):
    """Each of batches 14-23 holds 30-42 files committed in public repositories no earlier batch used (at most 2 entries
    from any one repository, checked case-insensitively) and no run trained here, in 8 or more formats (no more than 8
    of any one), its kinds at the floors above, 30-60% of it healthy and every folder < 200 KB. Nothing here reads the
    entries' curves and no score is asserted: the lead scores each batch once (`python bench/diagnose_world.py
    --batch N`), and the guards below keep those scores."""
    fresh = _committed_from_new_repositories(batch, 30, 42)
    formats = [e["format"] for e in fresh.values()]
    assert len(set(formats)) >= 8 and max(formats.count(f) for f in formats) <= 8, sorted(formats)
    labelled = {k for e in LABELS.values() for k in e["kinds"]}
    count = {k: sum(k in e["kinds"] for e in fresh.values()) for k in labelled}
    found = (count["not-learning"], count["diverged"], count["slow-convergence"],
             count["oscillation-jitter"] + count["oscillation-periodic"], count["overfitting"], count["crash"],
             count["oom"])
    assert all(n >= floor for n, floor in zip(found, NEW_REPOSITORY_BATCH_FLOORS[batch])), (found, count)


def _assert_scored_once_part_holds(outcomes, entries: int, at_least_right: int, unreadable_at_most: int = 0,
                                   false_alarms_at_most: int = 0) -> None:
    """What a part scored once keeps: its size, no more unreadable entries than it had (none, unless it was scored
    with some), no more error-level findings on healthy runs than it had (none, unless a fix is still owed), and no
    fewer right than it scored."""
    assert len(outcomes) == entries
    assert len([o.name for o in outcomes if o.unreadable]) <= unreadable_at_most, [o.name for o in outcomes if o.unreadable]
    alarms = [o.name for o in outcomes if not o.expected and o.error_level]
    assert len(alarms) <= false_alarms_at_most, alarms
    assert sum(o.right for o in outcomes) >= at_least_right


def test_the_tune_part_keeps_what_it_scores():
    """The tune part of batches 1-2 (47 entries, tuned on from the start): 45 right before dx-rules11, then 46 (a
    training loss stuck to its printed digits for its whole second half is not learning at any level: the
    LSTM regressor at MSE 0.2500). A floor, like the held-back parts' guards."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate("tune", LABELS, SCORED_ONCE_BATCHES)
    _assert_scored_once_part_holds(outcomes, 47, 46)


def test_the_held_back_part_keeps_what_it_scored_once():
    """The holdout part of batches 1-2 was scored once, by the lead, after the readers and rules landed (main
    3723682, 19:52 UTC): 23 of 30 right, every entry read, no error-level finding on a healthy run
    (tests/corpus/world/README.md). Below the issue's 90%: this guards against falling back, it does not claim the
    target. Its misses were read after that score to improve the rules (dx-rules: 28 of 30 then), so it is spent:
    this guards the 28 against falling back. Batch 3 is guarded below."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate("holdout", LABELS, SCORED_ONCE_BATCHES)
    _assert_scored_once_part_holds(outcomes, 30, 30)  # 29 since dx-rules5, 30 since dx-rules9 (2026-12-07)


def test_the_fresh_batch_keeps_what_it_scored_once():
    """Batch 3 (45 entries, held back whole) was scored once by the lead after the rules of this round landed
    (main 1dd111e, 22:36 UTC, load 13): 37 of 45 right (0.82), every entry read, no error-level finding on any of
    its 17 healthy runs. Below the issue's 90%: this guards against falling back, it does not claim the target."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (FRESH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 45, 44)  # read to learn from since: 43, then 44 (2026-12-07)


def test_the_second_fresh_batch_keeps_what_it_scored_once():
    """Batch 4 (41 entries, held back whole, collected while batch 3's misses were being learned from) was scored
    once by the lead after that round landed (main e6df457, 22:58 UTC, load 14): 28 of 41 right (0.68), every
    entry read, and ONE error-level false alarm: a YOLOv5 run whose validation losses were nan at 1 epoch of 150
    was called diverged. That rule was then fixed in general (a validation pass that recovered, with training
    finite, is no divergence: tests/test_diagnose_rules.py), so batch 4 is spent; this guards the 28 and the fix.
    Far below the issue's 90%: it does not claim the target."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (UNSCORED_BATCH,))
    _assert_scored_once_part_holds(outcomes, 41, 38)  # read to learn from since (dx-rules5): 37, dx-rules9: 38


def test_the_third_fresh_batch_keeps_what_it_scored_once():
    """Batch 5 (50 entries, held back whole: 21 files committed in public repositories none of batches 1-4 used,
    29 runs trained here on three new tasks with the real libraries' writers) was labelled by a helper who never ran
    a detector on it, and scored once by the lead after the rules of the 2026-12-07 round landed (main, 02:19 UTC,
    load 7): 31 of 50 right (0.62), every entry read, no error-level finding on its 19 healthy runs. Far below the
    issue's 90%: this guards against falling back, it does not claim the target. Scored against runmedic 0.1.1 (26)
    and trainspotter 0.2.6 (17) in the same hour (bench/diagnose_peers.py)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (NEW_BATCH,))
    # Read to learn from since: 35 (dx-rules6), 40 (dx-rules7), 42 (dx-rules8), 43 (dx-rules9).
    _assert_scored_once_part_holds(outcomes, 50, 43)


def test_the_fourth_fresh_batch_keeps_what_it_scored_once():
    """Batch 6 (31 entries, held back whole: 11 files committed in public repositories none of batches 1-5 used,
    20 runs trained here on two new tasks) was labelled by a helper who never ran a detector on it, and scored once
    by the lead after dx-rules6 (which learned from batch 5) landed (main, 02:34 UTC, load 5.5): 27 of 31 right
    (0.87), no finding at all on its 14 healthy runs, one entry unreadable (a two-line Keras-style CSV without an
    epoch column). Below the issue's 90%: this guards against falling back, it does not claim the target.
    runmedic 0.1.1: 22, trainspotter 0.2.6: 10 on the same entries (bench/diagnose_peers.py). Read to learn from
    since (dx-rules7): 28, guarded."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (SIXTH_BATCH,))
    assert len(outcomes) == 31 and not [o.name for o in outcomes if not o.expected and o.error_level]
    assert sum(o.right for o in outcomes) >= 28


def test_the_fifth_fresh_batch_keeps_what_it_scored_once():
    """Batch 7 (51 entries, held back whole: 26 files committed in public repositories none of batches 1-6 used,
    25 runs trained here on four new tasks) was labelled by a helper who never ran a detector on it, and scored once
    by the lead after dx-rules7 (which learned from batches 5 and 6) landed (main 7c59000, 05:31 UTC, load 12):
    39 of 51 right (0.76), no error-level finding on its 25 healthy runs (2 with a warning), two entries unreadable
    (a CSVLogger file whose lines end in two carriage returns, read as empty; a darknet console log read as
    binary). Below the issue's 90%: this guards against falling back, it does not claim the target. runmedic 0.1.1:
    31, trainspotter 0.2.6: 16 on the same entries (bench/diagnose_peers.py). dx-rules7 saw two of its label lines
    in a commit subject (after its periodic rule was committed); its score is given as measured. Spent since:
    dx-rules8 read its misses and raised the count this guards (line ends, NUL gaps, darknet lines, per-epoch
    losses thrown around, mAP never above 0, short logs' rise under 5% flat,
    3 evaluations settled at their best, an early fall measured from the first epochs, Keras epoch lines,
    a repeated pattern at 5% of the level: 50)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (SEVENTH_BATCH,))
    assert len(outcomes) == 51 and not [o.name for o in outcomes if not o.expected and o.error_level]
    assert sum(o.right for o in outcomes) >= 51  # 51 since dx-rules9 (both losses worse than their start)


def test_the_sixth_fresh_batch_keeps_what_it_scored_once():
    """Batch 8 (32 entries, held back whole: 26 files committed in public repositories none of batches 1-7 used,
    6 runs trained here on a new task) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after dx-rules8 (which learned from batch 7) landed (main 64fb28b, 05:54 UTC, load 6.8): 25 of 32 right
    (0.78), every entry read, no error-level finding on its 24 healthy runs (2 with a warning-level finding).
    Below the issue's 90%: this guards against falling back, it does not claim the target. runmedic 0.1.1: 23,
    trainspotter 0.2.6: 21 on the same entries (bench/diagnose_peers.py). Spent since: dx-rules9 read its misses
    and raised the count this guards (a sustained validation rise on a fine-tune, a loss creep while the mAP ends at
    its best, a loss gap off a jumping validation, short jitter beside a settled validation, epoch means at ln 2
    beside a periodic swing, 8 epochs too early for slow: 30)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (EIGHTH_BATCH,))
    # Read to learn from since (dx-rules9): 30, dx-rules10: 31.
    _assert_scored_once_part_holds(outcomes, 32, 31)


def test_the_seventh_fresh_batch_keeps_what_it_scored_once():
    """Batch 9 (39 entries, held back whole: 32 files committed in public repositories none of batches 1-8 used,
    half of them not healthy, and 7 runs trained here on a new forecasting task) was labelled by a helper who never
    ran a detector on it, and scored once by the lead after dx-rules9 (which learned from batch 8) landed (main
    d2125e0, 12:16 UTC, load 0.0): 30 of 39 right (0.77), 1 unreadable (a UTF-16 text log), no error-level finding
    on its 17 healthy runs (2 with a warning-level finding). Below the issue's 90%: this guards against falling
    back, it does not claim the target. runmedic 0.1.1: 19, trainspotter 0.2.6: 14 on the same entries
    (bench/diagnose_peers.py; they could not read 7 and 14)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (NINTH_BATCH,))
    # Read to learn from since (dx-rules10): 31 (a UTF-16 log with a byte-order mark is text, none unreadable),
    # then 32 (a loss falling along a straight line is slow), 33 (a text log's appended sessions: the last judged),
    # 34 (a training loss repeating a few exact values is not learning), 35 (validation accuracy exactly 1/K),
    # 36 (no validation jitter while the validation accuracy still rises to its best), 37 (3 epochs, two rises),
    # 38 (a training loss that barely moved sets no floor for validation's slow target), then (dx-rules11) 39
    # (STEADY_PACE 0.5: a ConvLSTM whose creep eases to 0.58 of its first pace is slow).
    _assert_scored_once_part_holds(outcomes, 39, 39)


def test_the_eighth_fresh_batch_keeps_what_it_scored_once():
    """Batch 10 (37 entries, held back whole: 29 files committed in public repositories none of batches 1-9 used,
    13 of them not healthy, and 8 runs trained here on a new rating-factorisation task) was labelled by a helper who
    never ran a detector on it, and scored once by the lead after dx-rules11 landed (main b964acc, 14:48 UTC, load
    4.9 with three plans of a load test running): 27 of 37 right (0.73), 1 unreadable (a PowerShell capture), no
    error-level finding on its 17 healthy runs (2 with a warning-level finding). Below the issue's 90%: this guards
    against falling back, it does not claim the target. runmedic 0.1.1: 25, trainspotter 0.2.6: 12 on the same
    entries (bench/diagnose_peers.py; they could not read 3 and 13)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (TENTH_BATCH,))
    # Read to learn from since (dx-rules12): 28 (a loss stuck at 7x ln K with the accuracy at chance is not
    # learning: diverged needs 10x ln K), 29 (an exception name ending its wrapped line, "ImportError:", is a crash:
    # the PowerShell capture is read, none unreadable), 30 (a per-step file whose step counter starts again is
    # judged on its last session: the detectron2 metrics.json of six appended runs), 31 (a validation loss the same
    # to its printed digits at every evaluation from the start is not learning: the rating model at SGD 1e-4), 32
    # (validation at chance with its loss at ln K throughout is not learning, not overfitting, unless training fell
    # 30%: the 3-class Lightning run whose noisy batch accuracy read as learning), 33 (a train/validation accuracy
    # gap is no overfitting while the validation loss, down 30%+, is within 1% of its best at the end), 34 (a
    # jittery validation loss whose last three points sit 1.5x its best and 2x its noise above it has turned: the
    # river-discharge forecaster), 35 (step losses swinging by their level or more are jitter however calm
    # validation is: the rating model at batch 1).
    _assert_scored_once_part_holds(outcomes, 37, 35, unreadable_at_most=0)


def test_the_ninth_fresh_batch_keeps_what_it_scored_once():
    """Batch 11 (36 entries, held back whole: files committed in public repositories none of batches 1-10 used, 17
    of them not healthy, 8 of those not learning) was labelled by a helper who never ran a detector on it, and scored
    once by the lead after dx-rules12 (which learned from batch 10) landed (main cdd9745, 15:45 UTC, load 1.8 with
    the slow tier running): 29 of 36 right (0.81), none unreadable, no error-level finding on its 19 healthy runs (1
    with a warning-level finding). Below the issue's 90%: this guards against falling back, it does not claim the
    target. runmedic 0.1.1: 26, trainspotter 0.2.6: 19 on the same entries (bench/diagnose_peers.py). Spent since;
    dx-rules13 learned from it (a validation accuracy at chance with its loss at its start; validation curves judged
    without a training loss; training and validation losses that never left 3% of their start; allocator OOM
    retries the run trained past are a note; a training accuracy that never rose out of its first band): 36 of 36,
    guarded here."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (ELEVENTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 36, 36)


def test_the_tenth_fresh_batch_keeps_what_it_scored_once():
    """Batch 12 (30 entries, held back whole: files committed in public repositories none of batches 1-11 used, 13
    of them not healthy, 8 of those not learning) was labelled by a helper who never ran a detector on it, and scored
    once by the lead after dx-rules13 (which learned from batch 11) landed (main ca3c312, 16:24 UTC, load 0.1): 24 of
    30 right (0.80), none unreadable, no error-level finding on its 17 healthy runs (2 with a warning-level
    overfitting finding). Not-learning 6 of 8 (batches 9-11 first scored 1/3, 1/5, 2/8). Below the issue's 90%: this
    guards against falling back. runmedic 0.1.1: 16, trainspotter 0.2.6: 16 on the same entries. Spent since;
    dx-rules14 learned from it (a validation loss at ln K at every evaluation is not learning; a lone low evaluation
    of a noisy validation is no best to rise from; frozen weights repeating each batch's loss every epoch give no
    periodic swing; noisy steps of a loss still falling while validation improves are no jitter): 30 of 30, guarded
    here (a score after tuning on it, not a fresh one)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (TWELFTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 30, 30)


def test_the_eleventh_fresh_batch_keeps_what_it_scored_once():
    """Batch 13 (37 entries, held back whole: files committed in 36 public repositories none of batches 1-12 used, 20
    of them not healthy, in 12 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after dx-rules14 (which learned from batch 12) landed (main 13239f7, 18:24 UTC, load ~1): 28 of 37 right
    (0.76), none unreadable, no error-level finding on its 17 healthy runs (2 with a jitter finding). Below the
    issue's 90%: this guards against falling back. runmedic 0.1.1: 18, trainspotter 0.2.6: 17 on the same entries.
    Spent since; dx-rules15 learned from it (validation jitter judged against where the validation started too;
    a frozen validation loss is not learning without a training loss logged; epoch means held 10x above their best
    have diverged): 31 of 37, guarded here (a score after tuning on it, not a fresh one)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (THIRTEENTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 37, 31)


def test_the_twelfth_fresh_batch_keeps_what_it_scored_once():
    """Batch 14 (36 entries, held back whole: files committed in 35 public repositories none of batches 1-13 used, 20
    of them not healthy, 5 not learning, in 8 formats) was labelled by a helper who never ran a detector on it, and
    scored once by the lead after dx-rules15 (which learned from batch 13) landed (main e7c09ac, 19:42 UTC, load ~3):
    23 of 36 right (0.64), none unreadable, no error-level finding on its 16 healthy runs (2 with a warning-level
    overfitting finding). Below the issue's 90%: this guards against falling back. runmedic 0.1.1: 19, trainspotter
    0.2.6: 12 on the same entries. dx-rules16 (general rules calibrated on the odd batches, checked on the even ones,
    this one among them): 24 (a healthy Ultralytics classifier whose metrics/accuracy_top1 is now read as the
    validation accuracy still rising), guarded here (a score after reading it, not a fresh one). dx-rules17: 25 (a
    9-class run whose loss creeps while its validation accuracy gives back its gain, now not-learning; read before
    that rule was written)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (FOURTEENTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 36, 25)


def test_the_thirteenth_fresh_batch_keeps_what_it_scored_once():
    """Batch 15 (37 entries, held back whole: files committed in 33 public repositories none of batches 1-14 used, 22
    of them not healthy, in 9 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after dx-rules16 landed (main 11366ec, 21:25 UTC, load ~1): 24 of 37 right (0.65), none unreadable, no
    error-level finding on its 15 healthy runs (3 with a primary finding). Below the issue's 90%: this guards against
    falling back. Spent since; dx-rules17 learned from it (a loss running off below zero has diverged; a training
    loss creeping beside a validation loss that fell by half is not slow; a creep whose validation accuracy keeps
    none of its gain is not learning): 27 of 37, guarded here (a score after tuning on it, not a fresh one)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (FIFTEENTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 37, 27)


def test_the_sixteenth_batch_keeps_what_it_scored_once():
    """Batch 16 (36 entries, held back whole: files committed in 29 public repositories none of batches 1-15 used, 20
    of them not healthy, in 9 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after dx-rules17 landed (main 7c0a687, 21:45 UTC, load ~3): 21 of 36 right (0.58), 2 unreadable (CSV
    logs with Spanish headers, Epoca/Perdua), one error-level finding on a healthy run (an Ultralytics detector
    called diverged). Below the issue's 90%: this guards against falling back. Spent since; dx-rules18 learned from
    it (a validation loss nan at every evaluation was not computed; metric names in other languages; a nan on a
    progress bar at 0/N is a placeholder; 'loss at epoch N is X'; a validation error cut by half, or a quality at a
    new best at the last of 3 evaluations, vetoes overfitting): 26 of 36, none unreadable, no error-level finding on
    a healthy run, guarded here (a score after tuning on it, not a fresh one)."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (SIXTEENTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 36, 26)


def test_the_seventeenth_batch_keeps_what_it_scored_once():
    """Batch 17 (32 entries, held back whole: files committed in 28 public repositories none of batches 1-16 used, 13
    of them not healthy, in 8 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after dx-rules18 landed (main 7c676ee, 22:04 UTC, load ~0.4): 19 of 32 right (0.59), none unreadable,
    one error-level finding on a healthy run (a PaiNN training log kept in a Markdown file, called not learning).
    Below the issue's 90%: this guards against falling back. Rules round 19 (dx-rules19) read its misses: the PaiNN
    log's loss, printed with 2 significant digits, is no longer taken as frozen (no false alarm left), a validation
    accuracy swinging by its whole gain no longer reads as "gain not kept", and a loss climbing steadily off its best
    is a slow divergence: 22 of 32."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (SEVENTEENTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 32, 22)


def test_the_eighteenth_batch_keeps_what_it_scored_once():
    """Batch 18 (30 entries, held back whole: files committed in 25 public repositories none of batches 1-17 used, 13
    of them not healthy, in 10 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after dx-rules19 landed (main 0b5a032, 22:21 UTC, load ~0.6): 15 of 30 right (0.50), 1 unreadable (a
    folder whose train_log.txt holds no metric the readers know), no error-level finding on its 17 healthy runs.
    runmedic was right on 17 of the same 30: the first fresh batch a peer scored higher on. This guards against
    falling back."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (EIGHTEENTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 30, 15, unreadable_at_most=1)


def test_the_nineteenth_batch_keeps_what_it_scored_once():
    """Batch 19 (31 entries, held back whole: files committed in 24 public repositories none of batches 1-18 used, 15
    of them not healthy, in 10 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after dx-rules20 landed (main 71a2fdf, 00:13 UTC, load ~2.5): 19 of 31 right (0.61; 6 of the 12 labels
    marked a judgement call, 13 of the other 19), none unreadable, one error-level finding on its 16 healthy runs
    (a YOLOv5 run whose validation losses were NaN at epochs 3-6 of 150 and finite after: called diverged). runmedic
    was right on 15 and trainspotter on 14 of the same 31. After that scoring, a validation loss non-finite at several
    evaluations and finite after the last of them is no divergence (as one such evaluation already was): 20 of 31,
    no error-level finding on a healthy run; and no periodic swing is read from epoch means (a neural ODE's healthy
    200 epochs, its loss falling 1000x): 21 of 31. This guards against falling back."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (NINETEENTH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 31, 21)


def test_the_twentieth_batch_keeps_what_it_scored_once():
    """Batch 20 (34 entries, held back whole: files committed in 30 public repositories none of batches 1-19 used, 19
    of them not healthy, in 11 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after batch 19's two rule fixes landed (main 87316df, 00:29 UTC, load ~1.7): 24 of 34 right (0.71; 5 of
    the 10 labels marked a judgement call, 19 of the other 24), none unreadable, no error-level finding on its 15
    healthy runs. runmedic was right on 14 and trainspotter on 15 of the same 34. After that scoring, Dice and IoU
    are read as validation scores and a validation measure that moved means the predictions changed (a segmentation
    whose pixel accuracy sat at the background share while its Dice rose was called not learning): 25 of 34. This
    guards against falling back."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (TWENTIETH_BATCH,))
    _assert_scored_once_part_holds(outcomes, 34, 25)


def test_the_twenty_first_batch_keeps_what_it_scored_once():
    """Batch 21 (33 entries, held back whole: files committed in 30 public repositories none of batches 1-20 used, 15
    of them not healthy, in 9 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after the fixes drawn from batches 18-20 and a newcomer's review landed (main 088cd7d, 00:49 UTC, load
    ~2.1 with the slow tier running): 20 of 33 right (0.61; 6 of the 13 labels marked a judgement call, 14 of the
    other 20), 1 unreadable (a Keras CSV with semicolons), no error-level finding on its 18 healthy runs. runmedic
    was right on 13 and trainspotter on 17 of the same 33. After that scoring, a CSV's fields may be separated by
    semicolons (decimal commas read) or tabs: 21 of 33, none unreadable. This guards against falling back."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (TWENTY_FIRST_BATCH,))
    _assert_scored_once_part_holds(outcomes, 33, 21)


def test_the_twenty_second_batch_keeps_what_it_scored_once():
    """Batch 22 (39 entries, held back whole: files committed in 36 public repositories none of batches 1-21 used, 19
    of them not healthy, in 10 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after batch 21's and the reviews' fixes landed (main b3c00b6, 01:01 UTC, load ~2.5 with the slow tier
    running): 25 of 39 right (0.64; 3 of the 13 labels marked a judgement call, 22 of the other 26), 1 unreadable (a
    text log of bare loss values), no error-level finding on its 20 healthy runs. runmedic was right on 19 and
    trainspotter on 15 of the same 39. After that scoring, lines of a loss and its step are a training loss: 26 of
    39, none unreadable; a validation loss bouncing beside a calm validation accuracy is no jitter: 27 of 39. This
    guards against falling back."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (TWENTY_SECOND_BATCH,))
    _assert_scored_once_part_holds(outcomes, 39, 27)


def test_the_twenty_third_batch_keeps_what_it_scored_once():
    """Batch 23 (37 entries, held back whole: files committed in 29 public repositories none of batches 1-22 used, 19
    of them not healthy, in 10 formats) was labelled by a helper who never ran a detector on it, and scored once by
    the lead after batch 22's fixes landed (main 05bf392, 01:16 UTC, load ~2.1 with the slow tier running): 23 of 37
    right (0.62; 7 of the 18 labels marked a judgement call, 16 of the other 19), 3 unreadable (two Lightning CSVs
    whose metric columns are empty, a wandb folder), one error-level finding on its 18 healthy runs (a Lua MNIST log
    called not learning). runmedic was right on 19 and trainspotter on 12 of the same 37. The error-level false
    alarm is let through here as scored, until a fix removes it; this guards against falling back."""
    bench = _load("diagnose_world", REPO / "bench" / "diagnose_world.py")
    outcomes = bench.evaluate(None, LABELS, (TWENTY_THIRD_BATCH,))
    _assert_scored_once_part_holds(outcomes, 37, 23, unreadable_at_most=3, false_alarms_at_most=1)
