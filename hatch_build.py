"""Build hook: compile the optional C accelerator into the wheel, when a compiler is at hand.

``otel_loopguard/signature/_accel.c`` speeds up the signatures of results and arguments (see
``otel_loopguard/signature/_native.py``). The package is complete without it: when there is no C
compiler or no Python headers, or ``OTEL_LOOPGUARD_PURE_PYTHON=1`` is set, or on Windows, the hook
says so in one line and the wheel stays pure Python. Editable installs import the sources and use
the Python path.
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

SOURCE = Path("otel_loopguard/signature/_accel.c")
MODULE = "otel_loopguard/signature/_accel"


def build_extension(source: Path, out_dir: Path) -> Path:
    """Compile ``source`` into a CPython extension module in ``out_dir`` and return its path.

    Raises:
        RuntimeError: with the compiler's message, when it cannot be built here.
    """
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = out_dir / ("_accel" + suffix)
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
    """Adds the compiled accelerator to a standard wheel; pure Python when it cannot."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile the accelerator for a standard wheel (not for sdists or editable installs)."""
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get("OTEL_LOOPGUARD_PURE_PYTHON", "") not in ("", "0") or \
                sys.platform == "win32":
            return
        out_dir = Path(tempfile.mkdtemp(prefix="otel-loopguard-build-"))
        try:
            built = build_extension(Path(self.root) / SOURCE, out_dir)
        except RuntimeError as exc:
            print(f"otel-loopguard: C accelerator not built, the wheel is pure Python ({exc})",
                  file=sys.stderr)
            return
        build_data["force_include"][str(built)] = f"{MODULE}{built.name[len('_accel'):]}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
