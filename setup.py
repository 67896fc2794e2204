"""Package discovery only; everything else is in pyproject.toml.

setuptools' ``packages.find`` names packages after their folders, and the
built-in adapters' folder ``adapters/`` installs as ``advisor_adapters``
(``package-dir`` in pyproject.toml), which ``find`` cannot express. So every
package under ``advisor/`` and ``adapters/`` is found here, and a new
subpackage (``advisor/tui/``, ``advisor/tui/widgets/``) ships without anyone
editing a list. tests/test_packaging.py builds a wheel to check it.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["advisor", "advisor.*"])
    + ["advisor_adapters"]
    + [f"advisor_adapters.{name}" for name in find_packages("adapters")],
)
