"""A request the receiver refuses: its HTTP status and gRPC code, and the error body.

Shared by the HTTP and gRPC front ends, the receiver's admission and the request decoders:
every refusal is a :class:`RequestError` carrying the HTTP status and gRPC code the OTLP
specification asks for, and a message naming the problem.
"""

from __future__ import annotations

import json
from typing import Final

__all__ = ["GRPC_CODES", "RequestError", "error_body", "invalid"]

GRPC_CODES: Final = {"CANCELLED": 1, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
                     "RESOURCE_EXHAUSTED": 8,
                     "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
                     "UNAUTHENTICATED": 16}
"""The ``google.rpc.Code`` values used in error bodies and gRPC statuses."""


class RequestError(Exception):
    """A request the receiver refuses, with its HTTP status, gRPC code and message."""

    def __init__(self, http_status: int, grpc_code: str, message: str, *,
                 retry_after_seconds: float | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.grpc_code = grpc_code
        """Name of a ``grpc.StatusCode`` (a key of ``GRPC_CODES``)."""
        self.message = message
        self.retry_after_seconds = retry_after_seconds


def invalid(message: str) -> RequestError:
    """Return the error for a request that can never be accepted (HTTP 400, INVALID_ARGUMENT)."""
    return RequestError(400, "INVALID_ARGUMENT", message)


def error_body(error: RequestError, *, as_json: bool) -> bytes:
    """Return a ``google.rpc.Status`` body describing ``error`` (OTLP/HTTP 4xx and 5xx)."""
    code = GRPC_CODES.get(error.grpc_code, 2)
    if as_json:
        return json.dumps({"code": code, "message": error.message}).encode()
    try:
        # googleapis-common-protos comes with the OTLP exporters; it ships no type hints.
        from google.rpc import status_pb2  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - googleapis-common-protos comes with the exporters
        return error.message.encode()
    data: bytes = status_pb2.Status(code=code, message=error.message).SerializeToString()
    return data
