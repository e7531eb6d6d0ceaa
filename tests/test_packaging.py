"""Packaging: one version source and a typed package."""

from __future__ import annotations

import json
import sys
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path

import pytest

import otel_loopguard

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@pytest.fixture(name="installed_version")
def _installed_version() -> str:
    try:
        return version("otel-loopguard")
    except PackageNotFoundError:
        pytest.skip("otel-loopguard is not installed (source tree only)")


class TestVersion:
    def test_matches_metadata(self, installed_version: str) -> None:
        """``__version__`` is the installed distribution's version."""
        assert otel_loopguard.__version__ == installed_version

    def test_metadata_matches_pyproject(self, installed_version: str) -> None:
        """The installed version is the one set in ``pyproject.toml``, the single source."""
        if not PYPROJECT.exists():
            pytest.skip("no pyproject.toml next to the tests")
        declared = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"]
        assert installed_version == declared

    def test_no_hardcoded_version(self) -> None:
        """The package source sets no ``__version__`` literal; it comes from the metadata."""
        source = Path(otel_loopguard.__file__).read_text(encoding="utf-8")
        assert "__version__ =" not in source


class TestTyped:
    def test_py_typed_in_package_dir(self) -> None:
        """``py.typed`` sits in the package directory, so type checkers use the inline hints."""
        assert (Path(otel_loopguard.__file__).parent / "py.typed").is_file()

    def test_py_typed_in_distribution(self, installed_version: str) -> None:
        """The installed distribution lists ``otel_loopguard/py.typed`` among its files."""
        dist = distribution("otel-loopguard")
        direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
        if direct_url.get("dir_info", {}).get("editable"):
            pytest.skip("editable install: the package files stay in the source tree")
        files = dist.files or []
        assert any(str(f).replace("\\", "/") == "otel_loopguard/py.typed" for f in files)
