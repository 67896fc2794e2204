"""`advisor replan` against real probes: the digits recipe (measured under 1 GiB) re-planned for 512 MiB and
2 GiB gives a ceiling whose real probe fits under that budget and sits within one probe step (the ceiling
search's 10% confirm step) of what a fresh search finds there. Real 1-process probes, no stubs."""

from __future__ import annotations

import math

import pytest

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.method import MethodSettings
from advisor.recipe import read_recipe_data
from advisor.replan import ReplanTarget, confirm, replan, with_confirmation
from advisor.session import Session, validate_setup
from helpers import REPO

pytestmark = [pytest.mark.distributed, pytest.mark.slow, pytest.mark.usefixtures("no_leftover_processes")]
MIB = 2**20
RECIPE = REPO / "recipes" / "digits-cnn.toml"


@pytest.mark.parametrize("budget_mib", [512, 2048])
def test_digits_replan_fits_and_is_within_one_probe_step_of_a_fresh_plan(budget_mib):
    data, _ = read_recipe_data(RECIPE)
    assert data["ceiling"]["budget_bytes"] == 1024 * MIB and data["ceiling"]["per_sample_bytes"] > 0
    budget = budget_mib * MIB
    # One process: the data cap (1438 samples) then leaves memory, not the data, to bind at 512 MiB.
    target = ReplanTarget(budget, "--device-memory", None, "cpu", nproc=1)
    estimate = replan(data, str(RECIPE), target)
    outcome = confirm(estimate, str(REPO), run_trial=False)
    result = with_confirmation(data, str(RECIPE), target, estimate, outcome)
    probes = outcome["rows"]
    assert probes[-1]["status"] == "ok" and probes[-1]["per_device"] == outcome["largest_ran"]
    assert result.per_device_max <= outcome["largest_ran"] and result.plan.per_device <= result.per_device_max
    ddp = load_adapter("ddp")
    settings = MethodSettings(workload="digits-cnn", adapter_name="ddp", nproc=1, device="cpu",
                              memory_budget_bytes=budget, workdir=str(REPO))
    with Session(ddp, settings, validate_setup(settings, ddp, HostDevices("cpu"))) as session:
        fresh = session.ceiling()
    step = max(1, math.ceil(0.1 * max(fresh.per_device_max, result.per_device_max)))
    print(f"{budget_mib} MiB: estimate {outcome['probe_batch']}, confirm probes {[(p['per_device'], p['status']) for p in probes]}, "
          f"re-plan {result.per_device_max}, fresh {fresh.per_device_max} after {len(fresh.trials)} probes")
    assert abs(result.per_device_max - fresh.per_device_max) <= step
    assert len(probes) < len(fresh.trials)
