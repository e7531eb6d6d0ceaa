"""The public surface: ``otel_loopguard.__all__``, and a sorted ``__all__`` per public module."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import otel_loopguard

PUBLIC_API = [
    "Action",
    "Checker",
    "ConfigError",
    "Decision",
    "Evidence",
    "Handoff",
    "LoopDetectedResult",
    "LoopEngine",
    "LoopGuardConfig",
    "LoopGuardError",
    "LoopGuardMetrics",
    "LoopGuardSpanProcessor",
    "ModelPrice",
    "Policy",
    "RunReport",
    "RunState",
    "SpanRecord",
    "ToolCall",
    "ToolGuard",
    "ToolLoopError",
    "ToolOverride",
    "TraceFileError",
    "install",
    "make_default_detectors",
    "start_metrics_server",
    "tool_signature",
]
"""Change this list only on purpose: it makes API changes visible in review."""


def _public_modules() -> list[str]:
    names = ["otel_loopguard"]
    for info in pkgutil.walk_packages(otel_loopguard.__path__, "otel_loopguard."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.append(info.name)
    return sorted(names)


def _isort_key(name: str) -> tuple[int, str]:
    """Order of ruff's RUF022 "isort-style": CONSTANTS, then Classes, then the rest."""
    if name.isupper():
        return 0, name
    return (1 if name[:1].isupper() else 2), name


class TestPackageAll:
    def test_snapshot(self) -> None:
        """``otel_loopguard.__all__`` is exactly the reviewed list."""
        assert otel_loopguard.__all__ == PUBLIC_API

    def test_every_name_resolves(self) -> None:
        """Every exported name is an attribute of the package."""
        for name in otel_loopguard.__all__:
            assert getattr(otel_loopguard, name) is not None

    def test_names_are_imported_on_first_use(self) -> None:
        """Each public name is the object of the module it lives in, listed once in the lazy
        map, which covers exactly ``__all__``."""
        sources = otel_loopguard._SOURCES
        listed = [name for names in sources.values() for name in names]
        assert sorted(listed) == sorted(otel_loopguard.__all__)
        for module, names in sources.items():
            for name in names:
                assert getattr(otel_loopguard, name) is getattr(
                    importlib.import_module(module), name)

    def test_dir_lists_public_names(self) -> None:
        """``dir()`` lists every public name, imported yet or not."""
        assert set(otel_loopguard.__all__) <= set(dir(otel_loopguard))

    def test_surface_stays_curated(self) -> None:
        """The curated surface stays around 20 names."""
        assert len(otel_loopguard.__all__) <= 30

    def test_version_is_lazy(self) -> None:
        """``__version__`` is served by the module ``__getattr__``, not listed in ``__all__``."""
        assert isinstance(otel_loopguard.__version__, str)
        assert "__version__" not in otel_loopguard.__all__

    def test_unknown_attribute(self) -> None:
        """A missing attribute raises ``AttributeError`` naming it."""
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = otel_loopguard.no_such_name


class TestModuleAll:
    @pytest.mark.parametrize("module", _public_modules())
    def test_all_is_sorted(self, module: str) -> None:
        """Every public module has an ``__all__`` sorted isort-style, without duplicates."""
        exported = importlib.import_module(module).__all__
        assert list(exported) == sorted(exported, key=_isort_key)
        assert len(set(exported)) == len(exported)

    @pytest.mark.parametrize("module", _public_modules())
    def test_all_names_exist(self, module: str) -> None:
        """Every name in a module's ``__all__`` is defined in it."""
        loaded = importlib.import_module(module)
        missing = [name for name in loaded.__all__ if not hasattr(loaded, name)]
        assert missing == []
