"""Every layer ships: the image copies each top-level package and the wheel includes it,
so a package added to the layer contract cannot be left out of either."""

import re
import tomllib

from tests.architecture.import_graph import ROOT, layers

PACKAGES = {name for layer in layers() for name in layer if (ROOT / name).is_dir()}


def test_the_image_copies_every_package():
    copied = set(re.findall(r"^COPY (\w+) \1$", (ROOT / "Dockerfile").read_text(), re.M))
    assert PACKAGES - copied == set()


def test_the_wheel_includes_every_package():
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    included = {pattern.rstrip("*") for pattern in found["packages"]["find"]["include"]}
    assert PACKAGES - included == set()
