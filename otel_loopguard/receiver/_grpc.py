"""The OTLP/gRPC front end of ``serve``: ``opentelemetry.proto.collector.trace.v1.TraceService``.

An asyncio gRPC server on a thread of its own, so a call waiting for its request message costs
a coroutine, not a thread: decoding runs on ``grpc_workers`` threads once a message is there.
The bearer token is checked from the call's metadata before the message is read, and so is
room in ``max_bytes_in_flight`` (a message's worth, shared with HTTP), a call gets
``request_timeout_seconds`` to send its message, and when ``4 * grpc_workers`` calls are open
the one that has waited longest for its message is refused to make room, so calls that never
send one cannot keep real exporters out.

The service is registered as a generic handler that receives the raw request bytes, rather
than through ``add_TraceServiceServicer_to_server``: grpcio answers a message it cannot
deserialize with ``INTERNAL``, while OTLP asks for ``INVALID_ARGUMENT`` and a message, which
only our own decoding can give. It is a stream-unary handler, the only kind that runs before
the message has arrived (a unary client sends exactly one message either way). grpcio enforces
the size cap (``RESOURCE_EXHAUSTED``) and handles gzip itself.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import (  # type: ignore[import-untyped]  # googleapis-common-protos: no hints
    error_details_pb2,
    status_pb2,
)

from otel_loopguard.otlp._request import (
    Decoded,
    RequestError,
    decode_protobuf,
    decode_protobuf_logs,
    success_body,
)
from otel_loopguard.otlp._request_error import GRPC_CODES, invalid

if TYPE_CHECKING:
    from otel_loopguard.receiver import LoopGuardReceiver, Reservation

__all__ = ["start_grpc_server"]

SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE: Final = "opentelemetry.proto.collector.logs.v1.LogsService"
_STOP_SECONDS: Final = 30.0
_CANCELLED: Final = RequestError(499, "CANCELLED", "the call ended before its message was read")
"""How a call grpcio ended before its message was read is counted (``cancelled``): never sent."""


def start_grpc_server(receiver: LoopGuardReceiver, host: str, port: int,
                      ) -> tuple[GrpcServer, int]:
    """Start the OTLP/gRPC server on ``host:port`` (0 picks a free port).

    Returns:
        The server (``stop()`` stops it) and the bound port.

    Raises:
        OSError: when the address cannot be bound.
    """
    server = GrpcServer(receiver)
    return server, server.start(host, port)


class GrpcServer:
    """The ``grpc.aio`` server, its event loop thread and its decoding threads."""

    def __init__(self, receiver: LoopGuardReceiver) -> None:
        """Prepare the loop and the threads; nothing listens until ``start``."""
        self.receiver = receiver
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="loopguard-serve-grpc-loop")
        self._pool = ThreadPoolExecutor(max_workers=receiver.options.grpc_workers,
                                        thread_name_prefix="loopguard-serve-grpc")
        self._server: Any = None

    def start(self, host: str, port: int) -> int:
        """Bind and start; return the bound port.

        Raises:
            OSError: when the address cannot be bound.
        """
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self._start(host, port), self._loop).result()
        except BaseException:
            self.stop()
            raise

    async def _start(self, host: str, port: int) -> int:
        options = self.receiver.options
        self._server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", options.max_request_bytes),
            ("grpc.so_reuseport", 0), ("grpc.http2.bdp_probe", 0)])
        export = _Export(self.receiver, self._pool)
        handlers = tuple(grpc.method_handlers_generic_handler(service, {
            "Export": grpc.stream_unary_rpc_method_handler(partial(export.export, logs=logs))})
            for service, logs in ((SERVICE, False), (LOGS_SERVICE, True)))
        self._server.add_generic_rpc_handlers(handlers)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if port:
            _check_free(host, port, address)
        try:
            bound = self._server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"cannot bind OTLP/gRPC to {address}: {exc}") from None
        if not bound:
            raise OSError(f"cannot bind OTLP/gRPC to {address}")
        await self._server.start()
        return int(bound)

    def stop(self) -> None:
        """Stop at once (calls still open are cancelled), then the loop and the threads."""
        if self._server is not None and self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._server.stop(None), self._loop).result(
                _STOP_SECONDS)
        self._server = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_STOP_SECONDS)
        self._pool.shutdown(wait=True)
        if not self._loop.is_running():
            self._loop.close()


def _check_free(host: str, port: int, address: str) -> None:
    """Bind ``host:port`` for a moment, as grpcio would (``SO_REUSEADDR``), and let it go.

    grpcio's own failure to bind is a line of its C core's log on stderr (outside the log
    format chosen) and an error that names no reason; this one says why in one line.

    Raises:
        OSError: without an errno, its message naming the address and the reason.
    """
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except OSError as exc:  # a name that does not resolve
        raise OSError(f"cannot listen on {address} (OTLP/gRPC): {exc.strerror or exc}") from None
    failed: list[OSError] = []
    for family, kind, proto, _, where in found:  # each address grpcio would bind
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(where)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                failed = [exc]
                break
            failed.append(exc)  # another family may still serve (no IPv6 here, say)
    if failed and (len(failed) == len(found) or failed[0].errno == errno.EADDRINUSE):
        raise OSError(f"cannot listen on {address} (OTLP/gRPC): "
                      f"{failed[0].strerror or failed[0]}")


class _Export:
    """The ``Export`` method: raw request bytes in, raw response bytes out.

    Runs on the event loop thread; only decoding goes to the thread pool. ``_waiting`` and
    ``_calls`` are touched on the loop thread only, so they need no lock.
    """

    def __init__(self, receiver: LoopGuardReceiver, pool: ThreadPoolExecutor) -> None:
        self.receiver = receiver
        self.pool = pool
        self.timeout = receiver.options.request_timeout_seconds
        self.max_calls = 4 * receiver.options.grpc_workers
        self.max_message = receiver.options.max_request_bytes
        self._calls = 0
        self._waiting: OrderedDict[int, tuple[asyncio.Future[None], Reservation]] = \
            OrderedDict()
        """Calls still waiting for their message, oldest first: their eviction futures and
        their shares of the bytes in flight (given back at once when evicted)."""

    async def export(self, requests: Any, context: grpc.aio.ServicerContext, *,
                     logs: bool = False) -> bytes:
        """Answer one ``Export`` call (of the trace or, with ``logs``, the logs service).

        The two services share the call limit, the timeout and the bytes in flight.
        """
        authorization = _authorization(context)
        held = self.receiver.reservation()
        try:
            self.receiver.authorize(authorization)  # before the message is read
            if self._calls >= self.max_calls and not self._evict_oldest():
                raise self.receiver.busy(f"{self._calls} OTLP/gRPC calls open")
            self._reserve_message(held)
        except RequestError as error:
            self.receiver.refused("grpc", error)
            await self._abort(context, error)
        self._calls += 1
        try:
            decoded = await self._receive(requests, context, authorization, held, logs)
        except RequestError as error:  # counted where it was raised
            held.release()
            # Its traceback's frames hold the message, and grpcio keeps the abort's exception
            # (whose context this is) in a reference cycle: without the frames, the message
            # is freed now, not at the next full garbage collection (a queue-full burst of
            # 429s would otherwise hold far more than max_bytes_in_flight).
            error.__traceback__ = None
            await self._abort(context, error)
        finally:
            self._calls -= 1
        return success_body(decoded, as_json=False, logs=logs)

    async def _receive(self, requests: Any, context: grpc.aio.ServicerContext,
                       authorization: str | None, held: Reservation, logs: bool) -> Decoded:
        """Read the call's message, then authorize, admit, decode and queue it on the pool.

        A call that ends before its message is read (its client cancelled it or its deadline
        passed, or grpcio refused a message over ``max_request_bytes``) is cancelled here: its
        share of the bytes in flight is given back, or every such call would keep a message's
        worth for good, until nothing more is admitted. Once the message is handed to the
        pool, ``handle`` gives it back or hands it to the queued batch.
        """
        try:
            message = await self._message(requests, context, held)
            self._resize(held, len(message))
        except asyncio.CancelledError:
            held.release()
            # grpcio ended the call before its message was read: it refused a message over
            # max_request_bytes, or the client cancelled; it does not say which
            self.receiver.refused("grpc", _CANCELLED)
            raise
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, partial(
            self._handle, authorization, message, held, logs))

    def _reserve_message(self, held: Reservation) -> None:
        """Take a whole message's worth of bytes in flight before the message is read.

        grpcio reads a message only when asked for it, and its size is known only then, so
        the largest a message may be is taken. When the bytes in flight are all taken, the
        call that has waited longest for its message is refused to make room (so stalled
        calls cannot keep real exporters out); without one, this call is refused.

        Raises:
            RequestError: 429 / RESOURCE_EXHAUSTED when there is no room.
        """
        try:
            held.take(self.max_message)
        except RequestError:
            if not self._evict_oldest():
                raise
            held.take(self.max_message)

    def _resize(self, held: Reservation, size: int) -> None:
        """Hold ``size`` bytes for the message read: give back what it did not need.

        Raises:
            RequestError: 429 / RESOURCE_EXHAUSTED when the call was evicted as its message
                arrived (its share given back) and there is no room for it now.
        """
        try:
            held.take(size - held.held)
        except RequestError as error:
            self.receiver.refused("grpc", error)
            raise

    def _handle(self, authorization: str | None, message: bytes, held: Reservation,
                logs: bool) -> Decoded:
        forwarding = self.receiver.forwarding
        agents = self.receiver.agents

        def decode(reserve: Callable[[int], None]) -> Decoded:
            if logs:
                return decode_protobuf_logs(message, agents, forward=forwarding)
            return decode_protobuf(message, payloads=forwarding)

        return self.receiver.handle("grpc", authorization, decode, held=held)

    async def _message(self, requests: Any, context: grpc.aio.ServicerContext,
                       held: Reservation) -> bytes:
        """Return the call's request message, waiting at most ``timeout`` seconds for it.

        Raises:
            RequestError: DEADLINE_EXCEEDED after the timeout, RESOURCE_EXHAUSTED when the call
                was evicted to make room, INVALID_ARGUMENT when the client sent no message.
        """
        loop = asyncio.get_running_loop()
        evicted: asyncio.Future[None] = loop.create_future()
        key = id(evicted)
        self._waiting[key] = (evicted, held)
        read = asyncio.ensure_future(requests.__anext__())
        read.add_done_callback(_retrieved)  # a call cancelled as it reads ends in an exception
        try:
            await asyncio.wait((read, evicted), timeout=self.timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waiting.pop(key, None)
            if not read.done():
                read.cancel()
        if not read.done() or read.cancelled():
            error = self.receiver.busy("too many OTLP/gRPC calls waiting for their request "
                                       "message; this one waited longest") if evicted.done() \
                else RequestError(408, "DEADLINE_EXCEEDED", "no request message within "
                                  f"{self.timeout:g} s")
            self.receiver.refused("grpc", error)
            raise error
        try:
            message: bytes = read.result()
        except StopAsyncIteration:
            error = invalid("Export needs one request message")
            self.receiver.refused("grpc", error)
            raise error from None
        # grpcio's request iterator is an async generator that keeps the message it yielded
        # in a reference cycle (generator, its frame, the iterator) that only the cyclic
        # garbage collector frees: closed now, the message goes with the call's last use.
        await requests.__aiter__().aclose()
        return message

    def _evict_oldest(self) -> bool:
        """Refuse the call that has waited longest for its message; False if none waits."""
        if not self._waiting:
            return False
        _, (evicted, held) = self._waiting.popitem(last=False)
        evicted.set_result(None)
        held.release()
        return True

    async def _abort(self, context: grpc.aio.ServicerContext, error: RequestError) -> None:
        if error.retry_after_seconds:
            context.set_trailing_metadata(_retry_metadata(error))
        await context.abort(grpc.StatusCode[error.grpc_code], error.message)


def _retrieved(read: asyncio.Future[Any]) -> None:
    """Take the outcome of a message read nobody awaits any more (else asyncio logs it)."""
    if not read.cancelled():
        read.exception()


def _authorization(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return value if isinstance(value, str) else None
    return None


def _retry_metadata(error: RequestError) -> tuple[tuple[str, bytes], ...]:
    """Return trailing metadata carrying a ``google.rpc.RetryInfo``.

    Sent twice: as ``google.rpc.retryinfo-bin``, which the Python OTLP exporter reads, and
    inside the ``google.rpc.Status`` details (``grpc-status-details-bin``), which the Go
    exporter of the Collector reads.
    """
    seconds = int(error.retry_after_seconds or 0)
    info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=seconds))
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=GRPC_CODES[error.grpc_code], message=error.message,
                               details=[detail])
    return (("google.rpc.retryinfo-bin", info.SerializeToString()),
            ("grpc-status-details-bin", status.SerializeToString()))
