"""The set-up checklist returns typed problems; the CLI's paragraph and the app's words are both rendered from them."""

from __future__ import annotations

import pytest

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.method import MethodSettings
from advisor.settings import settings_from_options
from advisor.setup_checks import Flag, Problem, SetupRefused, refusal_text, validate_setup

MIB = 2**20


def _refused(**kw) -> SetupRefused:
    base = dict(workload="digits-mlp", adapter_name="ddp", nproc=2, device="cpu", memory_budget_bytes=64 * MIB)
    base.update(kw)
    with pytest.raises(SetupRefused) as caught:
        validate_setup(MethodSettings(**base), load_adapter("ddp"), HostDevices("cpu", cpu_count=4,
                                                                                physical_memory=8 * 2**30))
    return caught.value


def test_every_problem_is_typed_in_order_and_the_paragraph_is_rendered_from_them():
    refused = _refused(nproc=0, memory_budget_bytes=0, headroom=1.5, base_lr=-1.0, sweep_seeds=0,
                       workload="no_such_module_anywhere:make")
    codes = [p.code for p in refused.problems]
    assert codes == ["nproc-below-one", "no-memory-budget", "headroom-range", "sweep-seeds-below-one",
                     "base-lr-not-positive", "workload-unresolved"]
    assert str(refused) == refusal_text(refused.problems)
    assert str(refused).startswith("Cannot start the plan: --nproc must be at least 1, not 0; the device memory "
                                   "budget must be larger than zero (--device-memory SIZE); --headroom must be")
    assert str(refused).endswith(". Nothing was run.")
    assert refused.problems[0].options == ["--nproc"] and refused.problems[1].options == ["--device-memory"]


def test_a_front_end_names_the_options_its_own_way_from_the_same_problems():
    from advisor.tui.screens.setup import field_words

    refused = _refused(nproc=40, base_lr=-1.0)  # 40 processes on 4 cores: past 4 per core
    app = refusal_text(refused.problems, field_words)
    assert '"Processes" 40 on this CPU host' in app and 'use "Processes" 16 or fewer' in app
    assert '"LR used today" must be positive' in app and "--nproc" not in app and "--base-lr" not in app
    assert "--nodes" not in refused.problems[0].text(field_words)  # "Target nodes" is a field too
    missing = Problem("no-base-lr", ("no LR",), (Flag("--base-lr", verb="pass"), " and ",
                                                 Flag("--base-batch", metavar="N")))
    assert missing.text() == "no LR: pass --base-lr and --base-batch N"
    assert missing.text(field_words) == 'no LR: fill in "LR used today" and "Batch used today"'
    assert Problem("x", (Flag("--sweep-extensions"), " must be 0 or more")).text(field_words) == "--sweep-extensions must be 0 or more"


def test_an_options_unreadable_value_is_a_typed_problem_with_its_own_paragraph():
    with pytest.raises(SetupRefused) as caught:
        settings_from_options({"headroom": "lots", "device_memory": "64MiB"}, HostDevices("cpu"))
    assert str(caught.value) == "--headroom must be a number, not 'lots'."
    assert caught.value.problems[0].options == ["--headroom"]


def test_an_infinite_base_lr_or_run_length_is_refused_before_anything_runs():
    """`advisor plan --base-lr inf` passed the positive check and ran a whole plan (exit 3 after ~90 s), and
    `--epochs inf` was taken as a run length; both are refused with the rest of the set-up problems."""
    refused = _refused(base_lr=float("inf"), run_epochs=float("inf"))
    assert [p.code for p in refused.problems] == ["base-lr-not-positive", "epochs-not-positive"]
    assert "--base-lr must be positive and finite, not inf" in str(refused)
    assert "--epochs must be positive and finite (the length of the planned run), not inf" in str(refused)
