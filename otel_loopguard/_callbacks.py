"""The user's callbacks: ``on_decision`` and the signature hooks, each contained.

``LoopEngine`` inherits :class:`Callbacks`: ``notify`` hands a decision to ``on_decision``,
and the ``signature`` and ``result_signature`` hooks give a call's or a result's signature in
place of the built-in one. What a callback raises, or a hook's answer that is not a string, is
counted in ``callback_errors`` and never reaches the app.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from otel_loopguard._run_state import RunState
from otel_loopguard.signature import ResultInfo, digest
from otel_loopguard.types import Decision

__all__ = ["Callbacks"]

_CONTAINED: Final = (Exception, SystemExit)
"""What a user callback may raise without it reaching the app: a ``sys.exit()`` in a callback
called from ``span.end()`` must not end the span's thread or skip the downstream processor
(KeyboardInterrupt still goes through)."""


class Callbacks:
    """``LoopEngine``'s calls of the user's callbacks (a base class: they share its state)."""

    signature: Callable[[str, Any], str] | None
    result_signature: Callable[[str, Any], str] | None
    on_decision: Callable[[Decision], object] | None
    callback_errors: int
    _in_callback: threading.local

    def _custom_call_sig(self, tool: str, arguments: Any, builtin: str) -> str:
        """Return the call signature from the ``signature`` hook (``builtin`` if it fails)."""
        text = self._hook_text(self.signature, tool, arguments)
        return builtin if text is None else digest(tool + "\x00custom\x00" + text)

    def _custom_result_info(self, tool: str, result: Any, info: ResultInfo) -> ResultInfo:
        """Return ``info`` with the digest of the ``result_signature`` hook's text."""
        text = self._hook_text(self.result_signature, tool, result)
        if text is None:
            return info
        return ResultInfo(digest=digest("\x00custom\x00" + text), error=info.error,
                          in_progress=info.in_progress, empty=info.empty)

    def _hook_text(self, hook: Callable[[str, Any], str] | None, tool: str,
                   value: Any) -> str | None:
        """Return what a signature hook gives for ``value``.

        None, counted in ``callback_errors``, when it raises or gives something else than a
        string.
        """
        try:
            text = hook(tool, value)  # type: ignore[misc]  # set when this is called
        except _CONTAINED:
            text = None
        if isinstance(text, str):
            return text
        self.callback_errors += 1
        return None

    def notify(self, run: RunState, decision: Decision) -> None:
        """Hand ``decision`` of ``run`` to ``on_decision``, containing what it raises.

        The engine calls it for every decision above continue; an enforce-mode guard calls it
        for a call it blocks before the call runs (that call never reaches ``process``). While
        the callback runs, the run cannot be fed again from that thread (``LoopGuardError``,
        counted with the callback's errors when it escapes the callback), and a callback that
        feeds another run is not called back for that nested decision.
        """
        if self.on_decision is None or getattr(self._in_callback, "active", False):
            return
        self._in_callback.active = True
        previous, run.notifying = run.notifying, threading.get_ident()
        try:
            self.on_decision(decision)
        except _CONTAINED:
            self.callback_errors += 1
        finally:
            run.notifying = previous
            self._in_callback.active = False
