"""Where a ``serve`` process spends its CPU, by thread and by part: ``profile_serve --breakdown``.

Imported by ``profile_serve``'s serve launcher before ``serve`` starts, in the serve process.
It wraps, with per-thread CPU time (``time.thread_time``, immune to waiting for the CPU or the
GIL): every Python thread's ``run`` (grouped by kind: HTTP connections, gRPC decoding pool,
gRPC event loop, the intake worker), the decoders, ``StreamingChecker.add``/``poll``/``flush``
(the intake), ``GET`` requests (the benchmark's polls of ``/metrics``) and every garbage
collection (``gc.callbacks``). At exit it writes the seconds of each to the JSON file named by
``PROFILE_SERVE_BREAKDOWN``. Threads of gRPC's C core are not Python threads: the process's
total minus the threads' sum is them, start-up and shutdown.
"""

from __future__ import annotations

import atexit
import collections
import functools
import gc
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

_SECONDS: collections.Counter[str] = collections.Counter()
_LOCK = threading.Lock()


def _add(part: str, seconds: float) -> None:
    with _LOCK:
        _SECONDS[part] += seconds


def _kind(name: str) -> str:
    if "process_request_thread" in name:
        return "thread: HTTP connections"
    if name.startswith("loopguard-serve-grpc_"):
        return "thread: gRPC decoding pool"
    return f"thread: {name}"


def _timed(owner: Any, attribute: str, part: str) -> None:
    original: Callable[..., Any] = getattr(owner, attribute)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            _add(part, time.thread_time() - start)

    setattr(owner, attribute, timed)


def install(out: str) -> None:
    """Wrap what is measured; write the seconds to ``out`` when the process exits."""
    from otel_loopguard.receiver import _grpc, _http
    from otel_loopguard.receiver._stream import StreamingChecker

    run = threading.Thread.run

    def counted_run(self: threading.Thread) -> None:
        try:
            run(self)
        finally:
            _add(_kind(self.name), time.thread_time())

    threading.Thread.run = counted_run  # type: ignore[method-assign]
    _timed(_http, "decode_protobuf", "part: decode (HTTP)")
    _timed(_grpc, "decode_protobuf", "part: decode (gRPC)")
    _timed(_http._Handler, "do_GET", "part: GET /metrics (the benchmark's polls)")
    for name in ("add", "poll", "flush"):
        _timed(StreamingChecker, name, "part: intake (StreamingChecker add, poll, flush)")
    started: dict[int, float] = {}

    def collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[threading.get_ident()] = time.thread_time()
        else:
            begun = started.pop(threading.get_ident(), time.thread_time())
            _add(f"part: garbage collection, generation {info['generation']}",
                 time.thread_time() - begun)

    gc.callbacks.append(collection)

    def dump() -> None:
        _add("process", time.process_time())
        with open(out, "w") as file:
            json.dump(dict(_SECONDS), file)

    atexit.register(dump)


if os.environ.get("PROFILE_SERVE_BREAKDOWN"):
    install(os.environ["PROFILE_SERVE_BREAKDOWN"])
