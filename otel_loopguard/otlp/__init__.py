"""OTLP trace data to ``SpanRecord``: OTLP/JSON, OTLP protobuf and the SDK's own spans.

Shared by ``check`` (trace files), ``serve`` (export requests) and the live processor (SDK
spans). ``_request`` decodes whole export requests (size caps, decompression, partial success);
``_fast`` and ``_reference`` decode the spans in them; ``_reference.span_record_from_readable``
and ``raw_attributes`` are the one place that reads the SDK's private span fields.
"""

from __future__ import annotations

__all__: list[str] = []
