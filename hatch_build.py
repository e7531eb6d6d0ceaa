"""Build hook: compile the optional C accelerators into the wheel, when a compiler is at hand.

``EXTENSIONS`` lists them: ``otel_loopguard/signature/_accel.c`` speeds up the signatures of
results and arguments (see ``otel_loopguard/signature/_native.py``), ``otel_loopguard/otlp/_wire.c``
decodes OTLP protobuf trace requests (see ``otel_loopguard/otlp/_proto.py``) and makes the span
records of OTLP/JSON ones (``otel_loopguard/otlp/_json.py``), and ``otel_loopguard/_span_end.c``
does the live processor's reading of each span that ends and keeps blank model spans aside
(``otel_loopguard/adapters/__init__.py``, ``otel_loopguard/processor/_deferred.py``), and
``otel_loopguard/kinds/_reader.c`` reads shell command lines (``ShellReader.analyze`` in
``otel_loopguard/kinds/_shell.py``). The package is
complete without them: each one that cannot be built (no C compiler, no Python headers, a compiler
error) is left out with a one-line notice and its Python path is used; with none built, or with
``LOOPGUARD_PURE_PYTHON=1`` set, or on Windows, the wheel is pure Python. Editable installs
import the sources and use the Python paths.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

EXTENSIONS: tuple[Path, ...] = (Path("otel_loopguard/signature/_accel.c"),
                               Path("otel_loopguard/otlp/_wire.c"),
                               Path("otel_loopguard/_span_end.c"),
                               Path("otel_loopguard/kinds/_reader.c"))
"""The C sources, each compiled into the extension module of its name next to it."""


def build_extension(source: Path, out_dir: Path) -> Path:
    """Compile ``source`` into the CPython extension module of its name in ``out_dir``.

    Returns:
        The path of the compiled module, e.g. ``out_dir/_wire.cpython-311-x86_64-linux-gnu.so``.

    Raises:
        RuntimeError: with the compiler's message, when it cannot be built here.
    """
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = out_dir / (source.stem + suffix)
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").exists():
        raise RuntimeError(f"no Python.h in {include} (install the Python headers)")
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    link = ["-shared"] + (["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else [])
    command = [*cc, "-O2", "-fPIC", "-std=c99", "-Wall", f"-I{include}", *link,
               str(source), "-o", str(target)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"{cc[0]}: {exc}") from exc
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()[:1]
        raise RuntimeError(f"{cc[0]} failed: {first[0] if first else done.returncode}")
    return target


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # imported by the tests, outside a build
    BuildHookInterface = object  # type: ignore[assignment,misc]


class AcceleratorHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Adds the compiled accelerators to a standard wheel; pure Python when none can be."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile the accelerators for a standard wheel (not for sdists or editable installs)."""
        if self.target_name != "wheel" or version == "editable":
            return
        if sys.platform == "win32" or any(  # otel_loopguard._native.PURE_PYTHON_VARIABLES
                os.environ.get(name, "") not in ("", "0")
                for name in ("LOOPGUARD_PURE_PYTHON", "OTEL_LOOPGUARD_PURE_PYTHON")):
            return
        out_dir = Path(tempfile.mkdtemp(prefix="otel-loopguard-build-"))
        for source in EXTENSIONS:
            try:
                built = build_extension(Path(self.root) / source, out_dir)
            except RuntimeError as exc:
                print(f"otel-loopguard: C accelerator {source.stem} not built, its Python path "
                      f"is used ({exc})", file=sys.stderr)
                continue
            build_data["force_include"][str(built)] = str(source.with_name(built.name))
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
