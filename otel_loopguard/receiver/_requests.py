"""The receiver's intake of export requests, on the HTTP and gRPC servers' threads.

``LoopGuardReceiver`` inherits :class:`RequestIntake`: a request is authorized (its bearer
token), admitted (not shutting down, room in the queue, the forwarding buffer and the bytes in
flight), decoded and queued for the worker, and counted by outcome.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

from otel_loopguard.coding_agents import AgentRecords
from otel_loopguard.otlp._request import Decoded, RequestError
from otel_loopguard.receiver._admission import Reservation, bearer_matches
from otel_loopguard.receiver._state import ReceiverState

__all__ = ["RequestIntake"]

_OUTCOMES: Final = {400: "invalid", 401: "unauthenticated", 408: "timeout", 411: "invalid",
                    413: "too_large", 415: "unsupported", 429: "throttled", 500: "internal",
                    499: "cancelled", 501: "unsupported", 503: "unavailable"}


class RequestIntake(ReceiverState):
    """``LoopGuardReceiver``'s intake, called by the HTTP and gRPC servers on their threads.

    A base class: the attributes it declares are the receiver's.
    """

    log_forwarder: Any
    agents: AgentRecords
    _draining: bool
    _inflight: int
    _inflight_cond: threading.Condition
    _bytes_in_flight: int
    _bytes_lock: threading.Lock

    def handle(self, protocol: str, authorization: str | bytes | None,
               decode: Callable[[Callable[[int], None]], Decoded], *,
               held: Reservation | None = None) -> Decoded:
        """Authorize, admit, decode and queue one export request.

        ``decode(reserve)`` reads and decodes the request; it calls ``reserve(n)`` before it
        holds ``n`` more bytes (the body, then its decompressed form), which raises 429 /
        RESOURCE_EXHAUSTED when the bytes in flight would pass ``max_bytes_in_flight``
        (``reserve(-n)`` gives ``n`` back). What is reserved stays taken while the decoded
        batch waits in the queue, and is given back when the worker has taken it in (or when
        the request is refused).

        Args:
            protocol: ``http`` or ``grpc``, for the metrics.
            authorization: the ``Authorization`` value sent, if any.
            decode: reads and decodes the request.
            held: bytes the front end reserved already (gRPC reserves a message's worth
                before it reads the message); handed over to this request.

        Raises:
            RequestError: with the HTTP status and gRPC code to answer.
        """
        reservation = held if held is not None else self.reservation()
        with self._tracked():
            try:
                self.authorize(authorization)
                self._admit()
                decoded = self._decoded(decode, reservation.take)
                decoded.held_bytes = reservation.hand_over()
                self._enqueue(decoded)
            except RequestError as error:
                reservation.release()
                self.refused(protocol, error)
                raise
            except BaseException:
                reservation.release()
                raise
        counters = self._counters
        counters.requests.labels(protocol, "partial" if decoded.rejected else "ok").inc()
        if decoded.logs:  # log records, not spans: the records made of them are loopguard's
            counters.log_records.labels("accepted").inc(decoded.accepted_log_records)
            if decoded.rejected:
                counters.log_records.labels("rejected").inc(decoded.rejected)
            return decoded
        counters.spans.labels("accepted").inc(len(decoded.spans) - decoded.made)
        if decoded.rejected:
            counters.spans.labels("rejected").inc(decoded.rejected)
        return decoded

    def reservation(self) -> Reservation:
        """Return an empty share of ``max_bytes_in_flight`` for one request."""
        return Reservation(self)

    def _take_bytes(self, size: int) -> None:
        """Count ``size`` more bytes in flight (negative gives back); refuse past the limit."""
        with self._bytes_lock:
            if size > 0 and self._bytes_in_flight + size > self.options.max_bytes_in_flight:
                raise self.busy(f"{self._bytes_in_flight} bytes of requests in flight "
                                f"(limit {self.options.max_bytes_in_flight})")
            self._bytes_in_flight += size

    @property
    def bytes_in_flight(self) -> int:
        """Return the request bytes being read, decoded or waiting for the worker."""
        return self._bytes_in_flight

    def _decoded(self, decode: Callable[[Callable[[int], None]], Decoded],
                 reserve: Callable[[int], None]) -> Decoded:
        """Return ``decode(reserve)``; a bug in it is a 500 / INTERNAL answer.

        Not a dropped connection: the bug is contained and counted like any internal error.
        """
        try:
            return decode(reserve)
        except (RequestError, TimeoutError, OSError):
            raise
        except Exception as exc:
            self.guard.handle("intake", exc)
            raise RequestError(500, "INTERNAL", "internal error while decoding the request "
                               "(counted in loopguard_internal_errors_total)") from None

    def refused(self, protocol: str, error: RequestError) -> None:
        """Count a request answered with ``error``.

        ``handle`` counts its own; the front ends call this for what they refuse before it.
        """
        self._counters.requests.labels(protocol, _OUTCOMES.get(error.http_status, "error")).inc()

    def authorize(self, authorization: str | bytes | None) -> None:
        """Check an ``Authorization`` value against the token (constant-time compare).

        Args:
            authorization: the header's value; bytes as they came off the wire (HTTP header
                values are bytes, so a UTF-8 token matches), or text (gRPC metadata).

        Raises:
            RequestError: 401 / UNAUTHENTICATED when a token is required and not matched.
        """
        token = self.options.token
        if token is not None and not bearer_matches(token, authorization):
            raise RequestError(401, "UNAUTHENTICATED", "missing or wrong bearer token "
                               "(send 'Authorization: Bearer <token>')")

    def _admit(self) -> None:
        if self._draining:
            raise RequestError(503, "UNAVAILABLE", "shutting down; send to another instance",
                               retry_after_seconds=self.options.retry_after_seconds)
        if self._queue.full():
            raise self.busy(f"intake queue full ({self.options.max_queue} batches)")
        if self.forwarder is not None and self.forwarder.full:
            raise self.busy("forwarding buffer full (the downstream is slow or unreachable; "
                            f"{self.options.forward_buffer_bytes} bytes waiting)")

    def busy(self, why: str) -> RequestError:
        """Return the backpressure answer (429 / RESOURCE_EXHAUSTED with a retry delay)."""
        return RequestError(429, "RESOURCE_EXHAUSTED",
                            f"{why}; retry after {self.options.retry_after_seconds} s",
                            retry_after_seconds=self.options.retry_after_seconds)

    def _enqueue(self, decoded: Decoded) -> None:
        """Queue a decoded request for the worker; forward a logs request once it is accepted.

        A logs request is forwarded as it came (at once, not after its check), but only once
        nothing can refuse it any more: forwarded and then answered 429, it would reach the
        downstream twice when the sender retries.
        """
        if decoded.logs and decoded.forward_body is not None \
                and self.log_forwarder is not None and self.log_forwarder.full:
            # refused: the sender keeps it and retries (accepted, it would be dropped)
            self._take_bytes(-decoded.held_bytes)
            raise self.busy("log forwarding queue full (the downstream is slow or "
                            "unreachable)")
        if decoded.logs:  # every span of it is a record of an event
            decoded.made = len(decoded.spans)
        else:
            copies = self.agents.from_spans(decoded.spans)  # coding agents' tool spans
            if copies:
                decoded.made = len(copies)
                decoded.spans += copies
                if decoded.payloads is not None:
                    decoded.payloads += [None] * len(copies)
        if not decoded.spans:
            self._take_bytes(-decoded.held_bytes)
            self._forward_logs(decoded)
            return
        decoded.received_ns = self._clock()
        if self._journal is not None:
            self._journal.accept(len(decoded.spans))  # before it is acknowledged
        try:
            self._queue.put_nowait(decoded)
        except queue.Full:
            self._take_bytes(-decoded.held_bytes)
            if self._journal is not None:
                self._journal.accept(-len(decoded.spans))
            raise self.busy(f"intake queue full ({self.options.max_queue} batches)") from None
        self._forward_logs(decoded)

    def _forward_logs(self, decoded: Decoded) -> None:
        """Hand an accepted logs request to the log forwarder, if it forwards one."""
        if decoded.forward_body is not None and self.log_forwarder is not None:
            self.log_forwarder.send(decoded.forward_body, decoded.log_records)

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        with self._inflight_cond:
            self._inflight += 1
        try:
            yield
        finally:
            with self._inflight_cond:
                self._inflight -= 1
                self._inflight_cond.notify_all()
