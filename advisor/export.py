"""`advisor export RECIPE --to TARGET`: the recipe as the configuration another launcher reads.

Which targets a recipe offers, and how each is rendered, is its adapter's (``exports`` and ``export_block``,
advisor/adapters.py); the generic formats every adapter gets (DeepSpeed JSON, Accelerate YAML, a torchrun
line) are advisor/export_formats.py's, whose names stay importable from here. An adapter that is not installed
here exports the generic formats with a note saying so.
"""

from __future__ import annotations

from .adapters import GENERIC_EXPORTS, AdapterBase, ExportTarget, LaunchSpec, load_adapter, recipe_adapter_name
from .errors import AdapterError, ExportError
from . import export_formats
from .export_formats import (ACCELERATE_CONFIG_NAME, deepspeed_config, deepspeed_hostfile,  # noqa: F401
                             export_accelerate, export_deepspeed, export_torchrun, layerwise_zero_problem,
                             recipe_numbers)
from .recipe import RecipeDocument

TARGETS = tuple(target.name for target in GENERIC_EXPORTS)  # what an adapter's recipes offer unless it says


def recipe_adapter(data: dict | RecipeDocument) -> tuple[AdapterBase, list[str]]:
    """The adapter the recipe was planned with, and a note when it is not installed here: then the generic
    exports, with nothing of its own."""
    name = recipe_adapter_name(data)
    try:
        return load_adapter(name), []
    except AdapterError as exc:
        generic = AdapterBase()
        generic.name = name
        return generic, [f"The recipe's adapter {name!r} is not usable here, so the export is the generic one, "
                         f"without any setting of its own (install it and export again for those): {exc}"]


def recipe_export_targets(data: dict | RecipeDocument) -> dict[str, ExportTarget]:
    """The targets `advisor export --to` offers for this recipe: its adapter's, by name."""
    return {target.name: target for target in recipe_adapter(data)[0].exports}


def export_recipe(recipe: dict | RecipeDocument, target: str) -> tuple[str, list[str]]:
    """(text, notes) for ``target``, rendered by the recipe's adapter; notes say what the text could not carry."""
    doc = RecipeDocument.of(recipe)
    adapter, notes = recipe_adapter(doc)
    offered = [t.name for t in adapter.exports]
    if target not in offered:
        raise ExportError(f"Unknown export target {target!r}: choose one of {', '.join(offered)} (the targets of "
                          f"the recipe's adapter {adapter.name!r}).")
    text, own = adapter.export_block(doc.data, target)  # an adapter's hooks get the recipe as parsed TOML
    return text, own + notes


def recipe_launch_spec(recipe: dict | RecipeDocument, script: str = "train.py",
                       adapter: AdapterBase | None = None) -> LaunchSpec:
    """The recipe's plan as a LaunchSpec (export_formats.recipe_launch_spec), through its own adapter unless
    ``adapter`` is given."""
    doc = RecipeDocument.of(recipe)
    return export_formats.recipe_launch_spec(doc, script, adapter or recipe_adapter(doc)[0])


def accelerate_launch_line(recipe: dict | RecipeDocument, config_path: str = ACCELERATE_CONFIG_NAME,
                           script: str = "train.py", adapter: AdapterBase | None = None) -> list[str]:
    """How the Accelerate export is run (export_formats.accelerate_launch_line), through the recipe's own adapter
    unless ``adapter`` is given."""
    doc = RecipeDocument.of(recipe)
    return export_formats.accelerate_launch_line(doc, config_path, script, adapter or recipe_adapter(doc)[0])
