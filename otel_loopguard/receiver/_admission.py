"""A request's way in: its bearer token, and its share of the bytes in flight."""

from __future__ import annotations

import hmac
import threading
from typing import Protocol

__all__ = ["Reservation", "bearer_matches"]


def bearer_matches(token: str, authorization: str | bytes | None) -> bool:
    """Return whether ``authorization`` is ``Bearer <token>`` (constant-time compare).

    Bytes as they came off the wire (HTTP header values are bytes, so a UTF-8 token matches),
    or text (gRPC metadata).
    """
    raw = authorization.encode() if isinstance(authorization, str) else authorization or b""
    scheme, _, credentials = raw.strip().partition(b" ")
    given = credentials.strip() if scheme.lower() == b"bearer" else b""
    return hmac.compare_digest(given, token.encode())


class _BytesInFlight(Protocol):
    """The receiver's count of the bytes in flight, which a reservation takes from."""

    def _take_bytes(self, size: int) -> None: ...


class Reservation:
    """One request's share of ``max_bytes_in_flight``; taken on any thread, given back once.

    Thread-safe through the receiver's byte lock (a request uses its own from one thread at
    a time, but a gRPC call can be evicted, and its share given back, from the event loop).
    """

    __slots__ = ("_lock", "_receiver", "held")

    def __init__(self, receiver: _BytesInFlight) -> None:
        self._receiver = receiver
        self._lock = threading.Lock()
        self.held = 0
        """Bytes taken and not yet given back or handed over."""

    def take(self, size: int) -> None:
        """Take ``size`` more bytes (negative gives back).

        Raises:
            RequestError: 429 / RESOURCE_EXHAUSTED when they would pass the limit.
        """
        with self._lock:
            self._receiver._take_bytes(size)
            self.held += size

    def hand_over(self) -> int:
        """Return the bytes held and stop tracking them here (the queued batch carries them)."""
        with self._lock:
            held, self.held = self.held, 0
        return held

    def release(self) -> None:
        """Give back whatever is held; safe to call twice."""
        self._receiver._take_bytes(-self.hand_over())
