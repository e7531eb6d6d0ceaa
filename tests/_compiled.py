"""The optional C accelerators as the tests use them: installed, else built from the source."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def compiled(source: str, tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """Return the extension module of ``source`` (e.g. ``otel_loopguard/otlp/_wire.c``).

    The installed one when there is one, else one compiled now (an editable install, a
    pure-Python wheel); skips the test only when this machine cannot compile it.
    """
    path = Path(source)
    name = ".".join(path.with_suffix("").parts)
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    sys.path.insert(0, str(ROOT))
    try:
        from hatch_build import build_extension
    finally:
        sys.path.remove(str(ROOT))
    try:
        built = build_extension(ROOT / path, tmp_path_factory.mktemp(path.stem))
    except RuntimeError as exc:
        pytest.skip(f"{path.stem} cannot be built here: {exc}")
    spec = importlib.util.spec_from_file_location(path.stem, built)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def memory_grown(run: Callable[[], object], repeats: int = 5) -> int:
    """Return how many bytes ``repeats`` more runs of ``run`` left allocated (tracemalloc),
    after one run to warm caches up and one traced run as the baseline."""
    run()
    tracemalloc.start()
    try:
        run()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(repeats):
            run()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
