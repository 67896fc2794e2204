"""Recipe round trip, atomic no-clobber writes, and `advisor check` on broken recipes."""

import sys

import pytest

import advisor
from advisor.cli import main
from advisor.errors import RecipeError
from advisor.recipe import check_recipe, dumps_recipe, load_recipe, write_recipe


def minimal(**batch):
    data = {
        "schema_version": 1,
        "batch": {"per_device": 16, "world_size": 4, "accumulation_steps": 2, "global": 128},
        "lr": {"value": 0.1, "base": 0.1, "base_global_batch": 128, "rule": "unchanged"},
        "warmup": {"steps": 50, "epochs": 1.0},
        "precision": {"mode": "bf16"},
        "normalization": {"sync_batchnorm": True},
        "workload": {"spec": "mypkg.train:workload"},
        "ledger": [{"phase": "trial", "per_device": 16, "status": "ok", "loss_curve": [2.3, 1.2]}],
    }
    data["batch"].update(batch)
    return data


def test_round_trip(tmp_path):
    path = tmp_path / "r.toml"
    write_recipe(minimal(), path)
    recipe = advisor.load_recipe(path)
    assert (recipe.batch.per_device, recipe.batch.world_size, recipe.batch.accumulation_steps,
            recipe.batch.global_) == (16, 4, 2, 128)
    assert recipe.lr.value == 0.1 and recipe.lr.rule == "unchanged" and recipe.warmup.steps == 50
    assert recipe.precision == "bf16" and recipe.sync_batchnorm
    assert recipe.data["ledger"][0]["loss_curve"] == [2.3, 1.2]


def test_existing_recipe_is_never_overwritten_without_force(tmp_path):
    path = tmp_path / "r.toml"
    write_recipe(minimal(), path)
    before = path.read_text()
    with pytest.raises(RecipeError, match="--force"):
        write_recipe(minimal(per_device=8, accumulation_steps=4), path)
    assert path.read_text() == before
    backup = write_recipe(minimal(per_device=8, accumulation_steps=4), path, force=True)
    assert backup.read_text() == before
    assert load_recipe(path).batch.per_device == 8
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_replaced_recipes_backup_keeps_its_own_measurements(tmp_path):
    """Issue 38: NAME.toml.bak named NAME.measurements.toml, which the new recipe had replaced, so `explain` on the
    backup silently lost every measurement. The replaced sibling is kept as NAME.measurements.toml.bak and a
    recipe's digest finds whichever of the two it was written with."""
    path = tmp_path / "r.toml"
    old = minimal()
    write_recipe(old, path)
    new = minimal(per_device=8, accumulation_steps=4)
    new["ledger"][0]["loss_curve"] = [9.0, 8.0]
    backup = write_recipe(new, path, force=True)
    kept = check_recipe(backup)
    assert "missing" not in kept["measurements"], kept["measurements"]
    assert kept["ledger"][0]["loss_curve"] == [2.3, 1.2]
    assert check_recipe(path)["ledger"][0]["loss_curve"] == [9.0, 8.0]


def test_recipes_are_written_readable_by_others_and_a_replaced_one_keeps_its_mode(tmp_path):
    import os
    import stat

    old_umask = os.umask(0o022)
    try:
        path = tmp_path / "r.toml"
        write_recipe(minimal(), path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o644  # like any file a user commits, not mkstemp's 0600
        path.chmod(0o664)  # a committed example keeps its mode when `make run` rewrites it with --force
        write_recipe(minimal(per_device=8, accumulation_steps=4), path, force=True)
        assert stat.S_IMODE(path.stat().st_mode) == 0o664
        os.umask(0o077)  # the user's umask still decides for a new file
        private = tmp_path / "private.toml"
        write_recipe(minimal(), private)
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
    finally:
        os.umask(old_umask)


def test_an_invalid_recipe_is_not_written(tmp_path):
    path = tmp_path / "r.toml"
    with pytest.raises(RecipeError, match="batch.global"):
        write_recipe(minimal(**{"global": 100}), path)
    assert not path.exists() and not list(tmp_path.iterdir())


def test_loading_never_imports_what_the_recipe_names(tmp_path):
    marker = tmp_path / "imported"
    (tmp_path / "evil_workload.py").write_text(f"open({str(marker)!r}, 'w').write('x')\ndef workload(): pass\n")
    data = minimal()
    data["workload"]["spec"] = f"{tmp_path / 'evil_workload.py'}:workload"
    path = tmp_path / "r.toml"
    path.write_text(dumps_recipe(data))
    sys.path.insert(0, str(tmp_path))
    try:
        load_recipe(path)
        assert main(["check", str(path)]) == 0
    finally:
        sys.path.remove(str(tmp_path))
    assert not marker.exists()


BROKEN = {
    "syntax": ("schema_version = 1\n[batch]\nper_device = 16\nworld_size = = 4\n", "line 4"),
    "missing key": ("schema_version = 1\n[batch]\nper_device = 16\nworld_size = 4\nglobal = 64\n"
                    "[lr]\nvalue = 0.1\nbase = 0.1\nbase_global_batch = 64\nrule = 'unchanged'\n"
                    "[warmup]\nsteps = 0\n", "accumulation_steps"),
    "wrong type": ("schema_version = 1\n[batch]\nper_device = '16'\nworld_size = 4\naccumulation_steps = 1\n"
                   "global = 64\n[lr]\nvalue = 0.1\nbase = 0.1\nbase_global_batch = 64\nrule = 'unchanged'\n"
                   "[warmup]\nsteps = 0\n", "line 3"),
    "inconsistent": ("schema_version = 1\n[batch]\nper_device = 16\nworld_size = 4\naccumulation_steps = 1\n"
                     "global = 128\n[lr]\nvalue = 0.1\nbase = 0.1\nbase_global_batch = 64\nrule = 'linear'\n"
                     "[warmup]\nsteps = 0\n", "line 6"),
    "bad rule": ("schema_version = 1\n[batch]\nper_device = 16\nworld_size = 4\naccumulation_steps = 1\n"
                 "global = 64\n[lr]\nvalue = 0.1\nbase = 0.1\nbase_global_batch = 64\nrule = 'cubic'\n"
                 "[warmup]\nsteps = 0\n", "lr.rule"),
    "infinite lr": ("schema_version = 1\n[batch]\nper_device = 16\nworld_size = 4\naccumulation_steps = 1\n"
                    "global = 64\n[lr]\nvalue = inf\nbase = 0.1\nbase_global_batch = 64\nrule = 'linear'\n"
                    "[warmup]\nsteps = 0\n", "line 8: 'lr.value' must be positive and finite, not inf"),
    "nan base lr": ("schema_version = 1\n[batch]\nper_device = 16\nworld_size = 4\naccumulation_steps = 1\n"
                    "global = 64\n[lr]\nvalue = 0.1\nbase = nan\nbase_global_batch = 64\nrule = 'linear'\n"
                    "[warmup]\nsteps = 0\n", "'lr.base' must be positive and finite, not nan"),
    "no version": ("[batch]\nper_device = 1\n", "schema_version"),
    "future version": ("schema_version = 99\n", "upgrade"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_check_reports_the_bad_key_and_line(tmp_path, capsys, case):
    text, expected = BROKEN[case]
    path = tmp_path / "broken.toml"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and str(path) in err
    assert "Traceback" not in err and err.count("\n") <= 2


def test_check_binary_and_missing_files(tmp_path, capsys):
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\x89PNG\x00\xff\xfe")
    assert main(["check", str(binary)]) == 2
    assert main(["check", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err
    assert "not a text file" in err and "no such recipe" in err


def test_a_folder_given_as_the_recipe_names_the_fix(tmp_path, capsys):
    """`advisor explain runs/` said only 'cannot read the recipe (Is a directory)'; now it names the recipes there."""
    (tmp_path / "digits.toml").write_text("schema_version = 2\n")
    (tmp_path / "digits.measurements.toml").write_text("")  # a recipe's sibling, not a recipe
    assert main(["explain", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path} is a folder; give the recipe file in it, such as {tmp_path / 'digits.toml'}" in err
    assert "measurements" not in err and err.count("\n") == 1


def test_committed_example_recipe_is_valid():
    from pathlib import Path

    recipes = sorted(p for p in (Path(__file__).parents[1] / "recipes").glob("*.toml")
                     if not p.name.endswith(".measurements.toml"))  # a recipe's sibling, not a recipe
    assert recipes, "recipes/ should hold at least one generated recipe"
    for path in recipes:
        data = check_recipe(path)
        assert data["provenance"]["tool"] == "batch-advisor" and data["ledger"]  # the sibling's, merged
        assert "missing" not in data.get("measurements", {})


def test_check_warns_when_a_hand_edit_changed_the_lr_but_kept_the_global_batch(tmp_path, capsys):
    data = minimal()
    data["lr"]["value"] = 0.05  # accumulation kept global 128, yet the LR was changed
    path = tmp_path / "edited.toml"
    path.write_text(dumps_recipe(data))
    assert main(["check", str(path)]) == 0
    err = capsys.readouterr().err
    assert "classic error" in err and "keep the LR at 0.1" in err


def test_check_warns_when_the_batch_changed_but_the_lr_rule_says_unchanged(tmp_path, capsys):
    data = minimal(per_device=32, accumulation_steps=2, **{"global": 256})
    path = tmp_path / "edited.toml"
    path.write_text(dumps_recipe(data))
    assert main(["check", str(path)]) == 0
    assert "scale the LR" in capsys.readouterr().err


def _stub_recipe(tmp_path, **settings_kw):
    """A recipe from a stub plan (2 processes, digits-cnn's facts), written as `advisor plan` writes it."""
    from helpers import swept_session

    from advisor.recipe import save_recipe
    from advisor.report import build_recipe

    session, _, _ = swept_session({8: 0.80, 16: 0.95, 32: 0.90}.__getitem__, centre=16, extensions=0, **settings_kw)
    path = tmp_path / "recipe.toml"
    save_recipe(build_recipe(session.finish()), path)
    return path


def test_check_strict_fails_a_not_validated_recipe_and_plain_check_warns(tmp_path, capsys):
    fallback = _edited(_stub_recipe(tmp_path), "method", "headline",
                       "No sweep candidate learned: check the base LR (0.1 at global batch 64).")
    assert main(["check", str(fallback)]) == 0
    assert "warning: NOT VALIDATED: No sweep candidate learned" in capsys.readouterr().err
    assert main(["check", "--strict", str(fallback)]) == 4
    assert main(["check", "--strict", str(_stub_recipe(tmp_path / "validated"))]) == 0


def _edited(path, table, key, value):
    import tomllib

    import tomli_w

    data = tomllib.loads(path.read_text())
    data[table][key] = value
    out = path.with_name(f"edited-{table}-{key}.toml")
    out.write_text(tomli_w.dumps(data))
    return out


def test_check_redoes_the_lr_and_warmup_from_the_recipes_own_rule_and_names_the_edit(tmp_path, capsys):
    """Regression (issue 25): `advisor check` accepted a recipe whose LR was edited by hand to 10x without a word,
    and blamed "changing both" when only the batch was edited."""
    import tomllib

    from advisor import cli
    from advisor.recipe_check import recipe_warnings

    path = _stub_recipe(tmp_path)
    data = tomllib.loads(path.read_text())
    assert recipe_warnings(data) == []  # the plan's own numbers are what its rule gives
    assert cli.main(["check", "--strict", str(path)]) == 0

    hand_lr = _edited(path, "lr", "value", data["lr"]["value"] * 10)
    assert cli.main(["check", str(hand_lr)]) == 0  # valid: a warning, not an error ...
    err = capsys.readouterr().err
    assert "lr.value" in err and "looks edited by hand" in err and "10x off" in err
    assert f"{data['lr']['value']:.4g}" in err  # ... with the value the rule gives
    assert cli.main(["check", "--strict", str(hand_lr)]) == cli.CHECK_STRICT_FAILED  # --strict: an error

    b = data["batch"]
    hand_batch = _edited(path, "batch", "per_device", b["per_device"] * 2)
    edited = tomllib.loads(hand_batch.read_text())
    edited["batch"]["global"] = b["global"] * 2
    hand_batch.write_text(__import__("tomli_w").dumps(edited))
    found = recipe_warnings(edited)
    assert any(w.startswith(f"the batch was edited: lr.value {data['lr']['value']:g} was scaled for global batch "
                            f"{b['global']}") for w in found)
    assert not any("Changing both" in w for w in found)  # the batch alone changed: no "changing both" blame

    hand_warmup = tomllib.loads(_edited(path, "warmup", "steps", data["warmup"]["steps"] + 100).read_text())
    assert [w for w in recipe_warnings(hand_warmup) if "warmup.steps looks edited by hand" in w]


def test_check_redoes_a_bounded_lr_too(tmp_path):
    """A plan whose global target lies past the validated batch bounds its LR (advisor.method.lr.
    bound_past_validated); the recipe records the bound's inputs, so check redoes it and finds no edit."""
    import tomllib

    from advisor.recipe_check import recipe_warnings

    path = _stub_recipe(tmp_path, global_batch=512, allow_few_steps=True)
    data = tomllib.loads(path.read_text())
    assert data["lr"]["capped"] and data["lr"]["bound_from_global"] < data["batch"]["global"]
    assert recipe_warnings(data) == []
    # Raised by hand to what the rules give without the bound: an edit, caught.
    from advisor.method.lr import scale_lr

    unbounded = scale_lr(data["lr"]["base"], data["lr"]["base_global_batch"], data["batch"]["global"],
                         data["lr"]["optimizer"]).value
    assert unbounded > data["lr"]["value"] * 1.01
    raised = tomllib.loads(_edited(path, "lr", "value", unbounded).read_text())
    assert [w for w in recipe_warnings(raised) if "looks edited by hand" in w and "bounded past" in w]


def test_the_summary_fits_one_screen_says_nothing_twice_and_points_to_the_reasons(tmp_path):
    """Issue 25: `make run` printed ~40 lines, the sweep's reason twice. The summary is the numbers, the sweep's
    verdict, the top warning's first sentence, the launch line and where the reasons are; `advisor explain` (and
    plan --explain) renders every reason from the same recipe data."""
    import tomllib

    from advisor import cli
    from advisor.explain import explain_text, summary_text

    path = _stub_recipe(tmp_path)
    data = tomllib.loads(path.read_text())
    data["warnings"] = [{"code": "first", "message": "Global batch 1.5 is odd. Second sentence."},
                        {"code": "second", "message": "Another warning."}]
    text = summary_text(data, str(path))
    lines = text.splitlines()
    assert len(lines) <= 20 and all(len(line) <= 240 for line in lines if not line.startswith("Launch:"))
    assert "Warning [first]: Global batch 1.5 is odd. (+1 more)" in lines
    assert f"advisor explain {path}" in text and data["method"]["sweep_reason"] not in text
    sweep = next(i for i, line in enumerate(lines) if line.startswith("Sweep: "))
    assert lines[sweep].startswith(f"Sweep: {data['method']['sweep']['pick']} per device, ")
    assert sweep >= len(lines) - 5  # the verdict sits with the launch line and the pointer to the reasons
    explained = explain_text(data)
    reasons = [data["method"]["sweep_reason"], data["lr"]["reason"], data["warmup"]["reason"],
               data["ceiling"]["reason"], "Another warning."]
    assert all(reasons)
    for reason in reasons:
        assert explained.count(reason) == 1
    assert cli.main(["explain", str(path)]) == 0


def test_the_recipe_holds_decisions_and_its_sibling_the_measurements_loaded_as_one_document(tmp_path):
    """Issue 25: the committed recipe was 1,209 lines, ~950 of them per-step ledger. Schema 2 writes the
    measurements (MEASUREMENTS) to NAME.measurements.toml, named in [measurements] with its digest; loading
    merges them back, so load_recipe, explain and history --import read one document. Schema 1 (inline) loads."""
    import tomllib

    import tomli_w

    from advisor.recipe import (SCHEMA_VERSION, load_recipe, measurements_path, read_recipe_data,
                                split_measurements)
    from advisor.recipe_check import recipe_warnings

    path = _stub_recipe(tmp_path)
    sibling = measurements_path(path)
    main = tomllib.loads(path.read_text())
    assert SCHEMA_VERSION == 2 and main["schema_version"] == 2 and sibling.exists()
    assert "ledger" not in main and "candidates_scored" not in main["method"]["sweep"]
    assert main["measurements"]["file"] == sibling.name and len(main["measurements"]["sha256"]) == 64
    whole = read_recipe_data(path)[0]
    assert whole["ledger"] and whole["method"]["sweep"]["candidates_scored"]
    assert load_recipe(path).data["ledger"] == whole["ledger"] and recipe_warnings(whole) == []
    # Decisions only: the main file is a fraction of the whole, and no measured table is left in it.
    assert len(path.read_text().splitlines()) < len(tomli_w.dumps(whole).splitlines()) / 2
    assert split_measurements(main)[1] == {}
    # A sibling that is missing or not the one written: the decisions still load, and the recipe says why.
    sibling.write_text(sibling.read_text() + "\n# edited\n")
    changed = read_recipe_data(path)[0]
    assert "ledger" not in changed and "not the file this recipe was written with" in changed["measurements"]["missing"]
    sibling.unlink()
    assert "could not be read" in load_recipe(path).data["measurements"]["missing"]
    # Schema 1, the ledger inline: loads as before.
    old = dict(whole, schema_version=1)
    old.pop("measurements")
    legacy = tmp_path / "legacy.toml"
    legacy.write_text(tomli_w.dumps(old))
    assert load_recipe(legacy).data["ledger"] == whole["ledger"]


@pytest.mark.parametrize("edit, message", [
    ([("fixed_bytes = 1272708", 'fixed_bytes = "big"')],
     r"line \d+: 'ceiling.fixed_bytes' must be a number, not str 'big'\. Fix the value of 'ceiling.fixed_bytes'"),
    ([("[adapter]\nname = \"ddp\"", "[adapter]\nname = 3")], r"line \d+: 'adapter.name' must be a string, not int 3"),
    ([("[inputs]\n", "[old_inputs]\n"), ("schema_version = 2\n", "schema_version = 2\ninputs = 5\n")],
     r"\[inputs\] must be a table, not int 5"),
])
def test_readers_get_the_recipe_typed_and_a_malformed_value_is_named_once(tmp_path, capsys, edit, message):
    """explain, export, replan and history read a recipe as typed tables (RecipeDocument): a value of the wrong
    type is named with its key and line when the recipe is read, not met later as a TypeError in a renderer."""
    import shutil
    from pathlib import Path

    from advisor.recipe import RecipeDocument, read_document

    source = Path(__file__).resolve().parents[1] / "recipes" / "digits-cnn.toml"
    doc = read_document(source)
    assert isinstance(doc, RecipeDocument) and RecipeDocument.of(doc) is doc
    assert (doc.batch.global_, doc.lr.rule, doc.ceiling.per_device_max, doc.adapter.name) == (
        doc.data["batch"]["global"], doc.data["lr"]["rule"], doc.data["ceiling"]["per_device_max"], "ddp")
    assert doc.optimizer.hyperparameters == {"momentum": 0.9, "weight_decay": 0.0}
    assert len(doc.ledger) == len(doc.data["ledger"]) > 0  # the sibling's measurements are part of the document
    shutil.copy(source.with_name("digits-cnn.measurements.toml"), tmp_path)
    text = source.read_text()
    for old, new in edit:
        assert old in text
        text = text.replace(old, new, 1)
    bad = tmp_path / "digits-cnn.toml"
    bad.write_text(text)
    with pytest.raises(RecipeError, match=message):
        read_document(bad)
    for command in (["explain", str(bad)], ["export", str(bad), "--to", "torchrun"], ["history", "--import", str(bad),
                                                                                     "--history", str(tmp_path / "h")]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_explain_says_a_recipe_was_measured_across_nodes(tmp_path):
    """A recipe of `advisor plan --nnodes 2 --nproc 1` (or the app on node 0): `advisor explain`'s first line said
    "2 x cpu", which reads as two CPUs on one host; it names the nodes and the processes on each, as
    [provenance.cluster] records them. A one-host recipe's line is unchanged."""
    import tomllib

    from advisor.explain import explain_text

    data = tomllib.loads(_stub_recipe(tmp_path).read_text())
    assert explain_text(data).splitlines()[0].startswith("Workload digits-mlp (image-classification), 2 x cpu, ")
    data["provenance"]["cluster"] = {"nodes": 2, "processes_per_node": 1, "world_size": 2,
                                     "rendezvous": "127.0.0.1:29556", "from": "flags"}
    first = explain_text(data).splitlines()[0]
    assert "2 nodes x 1 process(es) = 2 x cpu, measured across the nodes" in first, first
