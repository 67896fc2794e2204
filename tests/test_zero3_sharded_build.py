"""A model bigger than one device is planned under ZeRO-3: built sharded (``deepspeed.zero.Init``), probed with the
full world size, with DeepSpeed's gather and reduce sizes at a fraction of the model, and a recipe that says which
world size the ceiling holds for."""

import pytest

from advisor.adapters import load_adapter
from advisor.device import HostDevices
from advisor.export import deepspeed_config
from advisor.method import MethodSettings
from advisor.session import Session, validate_setup
from helpers import REPO, TEST_WORKLOADS
from helpers import deepspeed_accepts
from tui_stub import EventStubRunner

MIB = 2**20
ZERO3_SIZES = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_max_live_parameters",
               "stage3_max_reuse_distance", "sub_group_size")


def test_zero3_config_gathers_a_fraction_of_the_model_and_deepspeed_reads_it():
    """DeepSpeed's defaults would keep a model under a billion parameters gathered whole (and its 5e8-element
    reduce buffer is allocated up front): at stage 3 every size is a share of the model, read by DeepSpeed's own
    config class; a model above DeepSpeed's defaults keeps them."""
    parameters = 8_422_914  # tests/workloads/wide_mlp.py:deep_workload
    config = deepspeed_config(4, 1, 8, "sgd", 0.01, 0, "fp32", 3, "cpu", parameters=parameters)
    zero = deepspeed_accepts(config, 8).zero_config
    sizes = {"reduce_bucket_size": zero.reduce_bucket_size, "stage3_prefetch_bucket_size": zero.prefetch_bucket_size,
             "stage3_max_live_parameters": zero.max_live_parameters,
             "stage3_max_reuse_distance": zero.max_reuse_distance, "sub_group_size": zero.sub_group_size}
    assert all(0 < size <= parameters // 8 for size in sizes.values()), sizes
    huge = deepspeed_accepts(deepspeed_config(1, 1, 8, "sgd", 0.01, 0, "fp32", 3, "cpu", parameters=70 * 10**9), 8)
    assert huge.zero_config.max_live_parameters == 10**9 and huge.zero_config.prefetch_bucket_size == 5 * 10**7
    assert huge.zero_config.reduce_bucket_size == 5 * 10**8 and huge.zero_config.sub_group_size == 10**9


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_zero_0_to_2_configs_are_unchanged(stage):
    config = deepspeed_config(4, 1, 2, "sgd", 0.01, 0, "fp32", stage, "cpu", parameters=8_422_914)
    assert config["zero_optimization"] == {"stage": stage, "reduce_bucket_size": 8_422_914,
                                           "allgather_bucket_size": 8_422_914}


def test_the_recipe_names_the_probe_world_size_and_that_fewer_devices_need_more_memory():
    """Stub runner (no processes) whose probes ran on all 8 processes, as the DeepSpeed adapter's do at ZeRO >= 1."""
    from advisor.report import build_recipe

    class ShardedProbes(EventStubRunner):
        def probe(self, batch, purpose, precision="fp32"):
            trial = super().probe(batch, purpose, precision)
            self.ledger[-1].world_size = self.nproc
            return trial

    adapter = load_adapter("deepspeed")
    settings = MethodSettings(workload="digits-mlp", adapter_name="deepspeed", nproc=8, device="cpu",
                              memory_budget_bytes=128 * MIB, trial_steps=4, sweep_steps=4,
                              adapter_options={"zero_stage": 3})
    setup = validate_setup(settings, adapter, HostDevices("cpu", cpu_count=8))
    runner = ShardedProbes(lambda event: None, nproc=8)
    runner.options = setup.adapter_options
    assert adapter.probe_processes(8, setup.adapter_options) == 8
    data = build_recipe(Session(adapter, settings, setup, runner=runner).run_all())
    assert data["ceiling"]["probe_world_size"] == 8
    said = data["adapter"]["probe_world_size"]
    assert "probe_world_size" in said and "smaller world needs more memory" in said and "parameters" in said


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.usefixtures("no_leftover_processes")
def test_zero3_plans_a_model_whose_parameters_exceed_the_device_on_8_processes():
    """32 MiB of parameters, 24 MiB per device. On 8 processes each holds 1/8 of the parameters, their fp32 copy
    and their gradients (12 MiB) plus a layer or two gathered at a time, so a ceiling exists. Before: the model was
    built whole on every rank and DeepSpeed's default sizes gathered all of it for each forward, so even a batch
    of 1 ran out of memory ("shrink the model").

    One probe proves it: max_batch 2 leaves the search only its first fit batch. Every probe starts 8 DeepSpeed
    ranks (process group, sharded build, engine) on this host's cores, 20-30 s each; at max_batch 8 the search
    also bracketed the edge (OOM at 8 and 5, fits at 3 and 4: five probes, ~130 s), which says nothing more
    about sharding."""
    spec = f"{TEST_WORKLOADS / 'wide_mlp.py'}:deep_workload"
    adapter = load_adapter("deepspeed")
    settings = MethodSettings(workload=spec, adapter_name="deepspeed", nproc=8, device="cpu",
                              memory_budget_bytes=24 * MIB, workdir=str(REPO), max_batch=2, trial_timeout_s=400,
                              idle_timeout_s=180, collective_timeout_s=120, adapter_options={"zero_stage": 3})
    with Session(adapter, settings, validate_setup(settings, adapter, HostDevices("cpu", cpu_count=8))) as session:
        ceiling = session.ceiling()

    parameters = session.runner.model_info["parameters"]
    assert parameters * 4 > settings.memory_budget_bytes  # the fp32 parameters alone exceed one device
    assert ceiling.per_device_max >= 1
    assert {row.world_size for row in session.runner.ledger} == {8}  # probed with the full world size
    # Built under deepspeed.zero.Init: rank 0 never held more than its eighth of the parameters.
    assert session.runner.model_info["built_bytes"] <= parameters * 4 // 8 + 64 * 1024
    fitted = [t for t in ceiling.trials if t.status == "ok"]
    assert fitted and all(t.peak_bytes < settings.memory_budget_bytes for t in fitted)
    assert "zero3_parameter_shards (computed)" in fitted[-1].breakdown
