"""The OTLP/gRPC front end of ``serve``: ``opentelemetry.proto.collector.trace.v1.TraceService``.

The service is registered as a generic handler that receives the raw request bytes, rather
than through ``add_TraceServiceServicer_to_server``: grpcio answers a message it cannot
deserialize with ``INTERNAL``, while OTLP asks for ``INVALID_ARGUMENT`` and a message, which
only our own decoding can give. grpcio enforces the size cap (``RESOURCE_EXHAUSTED``) and
handles gzip itself.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import (  # type: ignore[import-untyped]  # googleapis-common-protos: no hints
    error_details_pb2,
    status_pb2,
)

from otel_loopguard.otlp._request import GRPC_CODES, RequestError, decode_protobuf, success_body

if TYPE_CHECKING:
    from otel_loopguard.receiver import LoopGuardReceiver

__all__ = ["start_grpc_server"]

SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"


def start_grpc_server(receiver: LoopGuardReceiver, host: str, port: int) -> tuple[Any, int]:
    """Start the OTLP/gRPC server on ``host:port`` (0 picks a free port).

    Returns:
        The ``grpc.Server`` and the bound port.

    Raises:
        OSError: when the address cannot be bound.
    """
    options = receiver.options
    server = grpc.server(
        ThreadPoolExecutor(max_workers=options.grpc_workers,
                           thread_name_prefix="loopguard-serve-grpc"),
        options=[("grpc.max_receive_message_length", options.max_request_bytes),
                 ("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=options.grpc_workers * 4)
    handler = grpc.method_handlers_generic_handler(
        SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(_Export(receiver))})
    server.add_generic_rpc_handlers((handler,))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise OSError(f"cannot bind OTLP/gRPC to {address}: {exc}") from None
    if not bound:
        raise OSError(f"cannot bind OTLP/gRPC to {address}")
    server.start()
    return server, bound


class _Export:
    """The ``Export`` method: raw request bytes in, raw response bytes out."""

    def __init__(self, receiver: LoopGuardReceiver) -> None:
        self.receiver = receiver

    def __call__(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        authorization = None
        for key, value in context.invocation_metadata():
            if key == "authorization":
                authorization = value if isinstance(value, str) else None
        try:
            decoded = self.receiver.handle("grpc", authorization,
                                           lambda: decode_protobuf(request))
        except RequestError as error:
            if error.retry_after_seconds:
                context.set_trailing_metadata(_retry_metadata(error))
            context.abort(grpc.StatusCode[error.grpc_code], error.message)
        return success_body(decoded, as_json=False)


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
