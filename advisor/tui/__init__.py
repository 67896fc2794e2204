"""The Textual app: `advisor` walks the user through the four steps and writes the recipe.

Nothing in the engine imports this package; it imports the engine. `advisor.tui.app.create_app`
is the one factory the CLI and the tests use.
"""
