"""OTLP trace data to ``SpanRecord``: OTLP/JSON, OTLP protobuf and the SDK's own spans.

Shared by ``check`` (trace files), ``serve`` (export requests and forwarding) and the live
processor (SDK spans). One decoder per format: ``_json`` and ``_proto`` turn an export request
into records in one pass, keeping the good spans and counting the malformed ones (with the
field path of the first), and accept only what OTLP protobuf can hold (``_spans``), so whatever
they accept can be forwarded; asked for payloads, they also build the SDK span ``serve``
forwards (``_sdk.readable_span``). ``_request`` decodes whole requests for ``serve`` (size caps,
decompression, HTTP and gRPC statuses). ``_sdk.span_record_from_readable`` and
``raw_attributes`` read the SDK's private span fields, as the processor's two hooks do inline
(see ``_sdk``).
"""

from __future__ import annotations

__all__: list[str] = []
