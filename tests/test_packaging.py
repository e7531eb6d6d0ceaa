"""Packaging: one version source and a typed package."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path
from typing import Any

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


ROOT = PYPROJECT.parent
EXTRA = re.compile(r"otel-loopguard\[([\w,-]+)\]")


def _pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


class TestMetadata:
    def test_license_file_is_the_apache_2_text(self) -> None:
        """LICENSE holds the full Apache License 2.0, the licence pyproject.toml declares."""
        text = (ROOT / "LICENSE").read_text(encoding="utf-8")
        assert _pyproject()["project"]["license"] == "Apache-2.0"
        assert "Apache License\n                           Version 2.0, January 2004" in text
        assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
        assert "END OF TERMS AND CONDITIONS" in text
        assert "APPENDIX: How to apply the Apache License to your work." in text
        assert _pyproject()["project"]["license-files"] == ["LICENSE"]

    def test_project_urls(self) -> None:
        """pyproject.toml names the home page, documentation, repository and issue tracker."""
        urls = _pyproject()["project"]["urls"]
        assert set(urls) == {"Homepage", "Documentation", "Repository", "Issues"}
        assert all(url.startswith("https://") for url in urls.values())

    def test_every_extra_named_exists(self) -> None:
        """Every ``otel-loopguard[extra]`` the docs, configs or messages name is declared."""
        declared = set(_pyproject()["project"].get("optional-dependencies", {}))
        paths = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
                 *(ROOT / "collector-config").iterdir(), *(ROOT / "otel_loopguard").rglob("*.py")]
        named = {(p.name, extra) for p in paths if p.is_file()
                 for group in EXTRA.findall(p.read_text(encoding="utf-8"))
                 for extra in group.split(",")}
        assert {(name, extra) for name, extra in named if extra not in declared} == set()


def _need_build() -> None:
    """Skip unless hatchling and the source tree are here to build from."""
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling is not installed (it is in the test dependency group)")
    if not PYPROJECT.exists():
        pytest.skip("no source tree next to the tests")


def _build_wheel(tmp_path: Path) -> Path:
    _need_build()
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("otel_loopguard-*.whl")
    return wheel


@pytest.fixture(name="wheel", scope="module")
def _wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


DASHBOARDS = ROOT / "dashboards"
ASSETS = ("alerts.yaml", "alerts_test.yaml", "loopguard.json")


def _build_sdist(tmp_path: Path) -> Path:
    _need_build()
    out = tmp_path / "dist"
    code = ("import sys, os; from hatchling.build import build_sdist; os.chdir(sys.argv[1]); "
            "print(build_sdist(sys.argv[2]))")
    subprocess.run([sys.executable, "-c", code, str(ROOT), str(out)], check=True,
                   capture_output=True, timeout=300)
    (sdist,) = out.glob("otel_loopguard-*.tar.gz")
    return sdist


@pytest.mark.slow
class TestWheel:
    def test_wheel_ships_copies_of_dashboards(self, wheel: Path) -> None:
        """The wheel's otel_loopguard/assets/ are byte for byte the files of dashboards/."""
        with zipfile.ZipFile(wheel) as archive:
            shipped = {n.removeprefix("otel_loopguard/assets/"): archive.read(n)
                       for n in archive.namelist() if n.startswith("otel_loopguard/assets/")}
        assert shipped == {name: (DASHBOARDS / name).read_bytes() for name in ASSETS}

    def test_sdist_carries_dashboards_and_builds_the_same_wheel_assets(
            self, tmp_path: Path) -> None:
        """The sdist holds dashboards/, and a wheel built from the sdist ships the same copies."""
        sdist = _build_sdist(tmp_path)
        with tarfile.open(sdist) as archive:
            top = archive.getnames()[0].split("/")[0]
            for name in ASSETS:
                member = archive.extractfile(f"{top}/dashboards/{name}")
                assert member is not None and member.read() == (DASHBOARDS / name).read_bytes()
            archive.extractall(tmp_path / "src", filter="data")
        out = tmp_path / "from-sdist"
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out), str(tmp_path / "src" / top)], check=True,
                       capture_output=True, timeout=300)
        (wheel,) = out.glob("otel_loopguard-*.whl")
        with zipfile.ZipFile(wheel) as built:
            for name in ASSETS:
                assert built.read(f"otel_loopguard/assets/{name}") == \
                    (DASHBOARDS / name).read_bytes()

    def test_wheel_contents(self, wheel: Path) -> None:
        """The wheel carries the assets, the licence, the typing marker and both entry points."""
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
            entry_points = archive.read(info).decode()
        for asset in ASSETS:
            assert f"otel_loopguard/assets/{asset}" in names
        assert "otel_loopguard/py.typed" in names
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
        assert "otel_loopguard = otel_loopguard._pytest_plugin" in entry_points
        assert "otel_loopguard = otel_loopguard.processor._auto:post_instrument" in entry_points

    def test_installed_wheel_writes_the_assets(self, wheel: Path, tmp_path: Path) -> None:
        """Installed from the wheel (outside the source tree), ``assets`` writes the dashboard
        and rules that the package ships."""
        site = tmp_path / "site"
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                        str(site), str(wheel)], check=True, capture_output=True, timeout=300)
        out = tmp_path / "out"
        code = ("import sys, otel_loopguard; from otel_loopguard.cli import main; "
                "print(otel_loopguard.__file__); sys.exit(main(['assets', '-o', sys.argv[1]]))")
        done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True,
                              text=True, timeout=120, check=True)
        assert done.stdout.splitlines()[0].startswith(str(site))
        for name in ASSETS:
            assert (out / name).read_bytes() == (DASHBOARDS / name).read_bytes()


def test_the_wheel_carries_the_accelerators_when_they_can_be_built(wheel: Path,
                                                                  tmp_path: Path) -> None:
    """With a compiler here the wheel holds every compiled module next to its source, else it
    is pure Python."""
    sys.path.insert(0, str(ROOT))
    try:
        from hatch_build import EXTENSIONS, build_extension
    finally:
        sys.path.remove(str(ROOT))
    try:
        for source in EXTENSIONS:
            build_extension(ROOT / source, tmp_path)
    except RuntimeError:
        assert wheel.name.endswith("-py3-none-any.whl")
        return
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    for source in EXTENSIONS:
        stem = f"{source.with_suffix('').as_posix()}."
        assert [n for n in names if n.startswith(stem) and not n.endswith(".c")], \
            f"the wheel lacks {source.stem}"
    assert "-py3-none-any" not in wheel.name


@pytest.mark.parametrize("env", [{"LOOPGUARD_PURE_PYTHON": "1"},
                                 {"CC": "/nonexistent/cc"}], ids=["on-request", "no-compiler"])
def test_a_pure_python_wheel_without_the_accelerator(tmp_path: Path, env: dict[str, str]) -> None:
    """Asked for, or without a compiler, the install still works: a pure-Python wheel."""
    _need_build()
    out = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-v", "-w", str(out), str(ROOT)], check=True,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    (wheel,) = out.glob("otel_loopguard-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    if "CC" in env:  # one notice per accelerator
        for name in ("_accel", "_wire", "_span_end", "_reader"):
            assert f"C accelerator {name} not built, its Python path is used (/nonexistent/cc:" \
                in done.stdout + done.stderr
