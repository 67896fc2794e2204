"""The adapter protocol: each adapter declares and owns its export targets and their rendering, its noise-scale
measurement, its advice for a model larger than one device and its launch line; the engine never asks which
adapter it talks to. The engine rule is checked by reading the engine's source (an AST walk, not a grep)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from advisor.adapters import (DEFAULT_ADAPTER, TORCHRUN_EXPORT, AdapterBase, BigModelAdvice, ExportTarget,
                              ShardingAdvice, recipe_adapter_name)
from advisor.errors import AdvisorError, ExportError
from helpers import REPO
from helpers import export_recipe_data

ROOT = Path(__file__).resolve().parents[1]
# The engine: every module of advisor/ and advisor/method/ (the adapters live in adapters/).
ENGINE = sorted([*ROOT.glob("advisor/*.py"), *ROOT.glob("advisor/method/*.py")])
# The built-in adapters' names (the package's own entry points) and the one issue 27 adds next.
BUILT_IN = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
               ["batch_advisor.adapters"])
ADAPTER_NAMES = BUILT_IN | {"fsdp"}


def _names_in(node: ast.AST) -> list[str]:
    """The adapter names ``node`` spells as string constants: itself, or the items of a literal tuple/list/set."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in ADAPTER_NAMES]


def name_branches(source: str) -> list[tuple[int, str]]:
    """(line, what) for every place ``source`` decides by an adapter's name: a comparison with one (``==``,
    ``!=``, ``in``, ``is``), a ``match`` case on one, a table keyed by one, or a fallback to one (``x or "ddp"``,
    ``.get(key, "ddp")``: the default adapter has one owner, advisor.adapters.DEFAULT_ADAPTER)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            names = [n for operand in (node.left, *node.comparators) for n in _names_in(operand)]
            found += [(node.lineno, f"compares with {n!r}") for n in names]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, f"matches {n!r}") for n in _names_in(node.value)]
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, f"a table keyed by {n!r}") for key in node.keys if key for n in _names_in(key)]
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            found += [(node.lineno, f"falls back to {n!r}") for n in _names_in(node.values[-1])]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and len(node.args) == 2):
            found += [(node.lineno, f"defaults to {n!r}") for n in _names_in(node.args[1])]
    return found


def test_the_engine_never_branches_on_an_adapters_name():
    assert len(ENGINE) > 30 and {"ddp", "accelerate", "deepspeed"} <= BUILT_IN  # something to check
    found = [f"{path.relative_to(ROOT)}:{line}: {what}: {path.read_text().splitlines()[line - 1].strip()}"
             for path in ENGINE for line, what in name_branches(path.read_text())]
    assert not found, ("The engine decides by an adapter's name; let the adapter declare it instead "
                       "(advisor/adapters.py, docs/plugins.md):\n" + "\n".join(found))


@pytest.mark.parametrize("snippet", [
    'if n["adapter"] == "deepspeed": pass',
    'if target != "accelerate": pass',
    'x = name in ("ddp", "accelerate")',
    'x = "deepspeed" == adapter.name',
    'name = data.get("adapter", {}).get("name") or "ddp"',
    'name = inputs.get("adapter", "ddp")',
    'RENDER = {"deepspeed": 1}',
    'match name:\n    case "fsdp":\n        pass',
])
def test_the_rule_catches_each_way_of_branching_on_a_name(snippet):
    assert name_branches(snippet), snippet  # the check above cannot pass vacuously


def test_names_used_as_data_are_not_branches():
    assert not name_branches('DEFAULT_ADAPTER = "ddp"\nT = ExportTarget("deepspeed", "a config")\n'
                             'if target == DEEPSPEED_EXPORT.name: pass')


def test_the_recipes_adapter_name_has_one_owner():
    assert recipe_adapter_name({"adapter": {"name": "deepspeed"}, "inputs": {"adapter": "ddp"}}) == "deepspeed"
    assert recipe_adapter_name({"inputs": {"adapter": "accelerate"}}) == "accelerate"
    assert recipe_adapter_name({}) == DEFAULT_ADAPTER == "ddp"


def test_adapters_json_lists_exports_noise_and_big_model_advice():
    run = subprocess.run([sys.executable, "-m", "advisor.cli", "adapters", "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rows = {row["name"]: row for row in json.loads(run.stdout)}
    for name in ("ddp", "accelerate", "deepspeed"):
        assert [t["name"] for t in rows[name]["exports"]] == ["deepspeed", "accelerate", "torchrun"], name
        assert all(t["summary"] for t in rows[name]["exports"])
    assert [t["name"] for t in rows["ddp"]["exports"] if t["hostfile"]] == ["deepspeed"]
    assert rows["ddp"]["noise"]["measured"] and "communication hook" in rows["ddp"]["noise"]["how"]
    assert rows["accelerate"]["noise"]["measured"]
    assert not rows["deepspeed"]["noise"]["measured"] and "unknown" in rows["deepspeed"]["noise"]["how"]
    assert rows["deepspeed"]["big_model"]["flags"] == "--zero-stage 3"
    assert rows["ddp"]["big_model"] is None and rows["accelerate"]["big_model"] is None
    text = subprocess.run([sys.executable, "-m", "advisor.cli", "adapters"], capture_output=True, text=True)
    assert "exports: --to deepspeed, accelerate, torchrun" in text.stdout and "noise scale: not measured" in text.stdout


class OwnExportAdapter(AdapterBase):
    """A plugin with a target of its own, a generic one, and advice for big models."""

    name = "own"
    summary = "test adapter"
    exports = (ExportTarget("slurm", "an sbatch script", hostfile="srun reads the node list"), TORCHRUN_EXPORT)
    big_model = BigModelAdvice("Own", "--shard", "shards everything", offload="OwnOffload")

    def command(self, job_path, nproc):
        return ["true"]

    def export_block(self, data, target):
        if target == "slurm":
            return f"#SBATCH --ntasks={data['batch']['world_size']}\n", ["a note of its own"]
        return super().export_block(data, target)


@pytest.fixture
def own_adapter(monkeypatch):
    import advisor.export

    real = advisor.export.load_adapter
    monkeypatch.setattr(advisor.export, "load_adapter", lambda name: OwnExportAdapter() if name == "own" else real(name))


def test_a_recipe_exports_to_its_adapters_targets_rendered_by_the_adapter(own_adapter, tmp_path, capsys):
    from advisor.cli import main
    from advisor.export import export_recipe
    from helpers import write_recipe_file

    data = export_recipe_data(adapter="own", device="cpu", world=2)
    assert export_recipe(data, "slurm") == ("#SBATCH --ntasks=2\n", ["a note of its own"])
    line, _ = export_recipe(data, "torchrun")  # the generic renderer, through AdapterBase
    assert line.startswith("env MALLOC_MMAP_THRESHOLD_=65536 torchrun") and "--nproc-per-node=2" in line
    with pytest.raises(ExportError, match="choose one of slurm, torchrun"):
        export_recipe(data, "deepspeed")  # not declared by this adapter
    path = write_recipe_file(tmp_path, data)
    assert main(["export", str(path), "--to", "torchrun", "--hostfile", str(tmp_path / "hosts")]) == 2
    assert "--hostfile goes with --to slurm (srun reads the node list)." in capsys.readouterr().err
    assert main(["export", str(path), "--to", "slurm", "--hostfile", str(tmp_path / "hosts")]) == 0
    assert (tmp_path / "hosts").read_text() == "node0 slots=2\n"


def test_a_recipe_whose_adapter_is_not_installed_gets_the_generic_exports_and_says_so():
    from advisor.export import export_recipe

    text, notes = export_recipe(export_recipe_data(adapter="not-installed", device="cpu", world=2), "torchrun")
    assert text.startswith("env MALLOC_MMAP_THRESHOLD_=65536 torchrun")
    assert any("'not-installed' is not usable here" in note for note in notes)


def test_the_big_model_advice_names_every_adapter_that_declares_one():
    from advisor.method.ceiling import ProbeTrial, search_ceiling

    sharding = ShardingAdvice((("deepspeed", BigModelAdvice("DeepSpeed", "--zero-stage 3", "partitions it",
                                                            offload="ZeRO-Offload")),
                               ("own", OwnExportAdapter.big_model)))

    def too_big(batch, purpose):
        return ProbeTrial(batch, "oom", None, 0.1, purpose, "the model itself does not fit: can't allocate memory")

    with pytest.raises(AdvisorError) as caught:
        search_ceiling(too_big, 2**20, sharding=sharding)
    advice = str(caught.value)
    assert ("(DeepSpeed --adapter deepspeed --zero-stage 3 partitions it; Own --adapter own --shard shards "
            "everything; more devices make each shard smaller)") in advice
    assert "CPU memory (ZeRO-Offload, OwnOffload)" in advice
    with pytest.raises(AdvisorError, match="no installed adapter declares"):
        search_ceiling(too_big, 2**20, sharding=ShardingAdvice())
    assert sharding.flags() == "--adapter deepspeed --zero-stage 3 or --adapter own --shard"


def test_the_example_plugin_implements_the_protocol(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "examples" / "single-process-plugin"))
    from advisor_single import SingleProcessAdapter

    import advisor.export
    from advisor.export import export_recipe

    real = advisor.export.load_adapter
    monkeypatch.setattr(advisor.export, "load_adapter",
                        lambda name: SingleProcessAdapter() if name == "single" else real(name))
    adapter = SingleProcessAdapter()
    assert [t.name for t in adapter.exports] == ["python", "torchrun"]
    assert not adapter.noise.measured and adapter.big_model is None
    data = export_recipe_data(adapter="single", device="cpu", world=1, accumulation=1)
    text, notes = export_recipe(data, "python")
    assert text.startswith("env MALLOC_MMAP_THRESHOLD_=65536 python train.py --batch-size=16") and notes == []
    assert "torchrun" in export_recipe(data, "torchrun")[0]


OLD_PLUGIN = '''
class OldCapabilities:
    """Declared before supports_bf16, supports_fp16, needs_cuda and noise_by_accumulation existed."""

    supports_lamb = True
    multi_process = False
    optimizers = ["sgd", "adam"]


class OldAdapter:
    name, summary, capabilities = "old", "written before the newer capability fields", OldCapabilities()

    def command(self, job_path, nproc):
        return ["true"]
'''


def test_a_plugin_declaring_capabilities_its_own_way_is_read_typed_with_the_defaults(tmp_path, monkeypatch):
    """load_adapter reads a plugin's capabilities once into the Capabilities dataclass, each field it lacks at its
    default, and the engine reads them typed (no getattr probing): the set-up checks and a session run with it."""
    from advisor.adapters import Capabilities, load_adapter
    from advisor.device import HostDevices
    from advisor.session import Session
    from advisor.setup_checks import SetupRefused, validate_setup
    from helpers import StubRunner, dist_info, settings

    site = tmp_path / "site"
    dist_info(site, "advisor_old", "old = advisor_old:OldAdapter")
    (site / "advisor_old.py").write_text(OLD_PLUGIN)
    monkeypatch.syspath_prepend(str(site))
    adapter = load_adapter("old")
    assert adapter.capabilities == Capabilities(supports_lamb=True, multi_process=False,
                                                optimizers=frozenset({"sgd", "adam"}))
    host = HostDevices("cpu")
    with pytest.raises(SetupRefused, match="cannot run the optimizer 'adamw'"):
        validate_setup(settings(nproc=1, adapter_name="old", optimizer="adamw"), adapter, host)
    s = settings(nproc=1, adapter_name="old", precision="bf16")  # supports_bf16: its default, True
    session = Session(adapter, s, validate_setup(s, adapter, host), runner=StubRunner(nproc=1, saturate=None))
    session.ceiling()
    session.choose_start(32)
    assert session.precision.measure == "bf16"
    assert session.trial().noise_run is None  # noise_by_accumulation: its default, False (no run with accumulation)


def capability_probes(source: str) -> list[int]:
    """Lines where ``source`` probes an adapter's capabilities (``getattr(x.capabilities, ...)``, ``hasattr``)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
            and node.args and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "capabilities"]


def test_the_engine_reads_capabilities_as_declared_never_by_probing():
    found = [f"{path.relative_to(ROOT)}:{line}" for path in ENGINE for line in capability_probes(path.read_text())]
    assert not found, "read the Capabilities field (load_adapter made it typed): " + ", ".join(found)
