"""What a trace file holds, judged from its first bytes: OTLP/JSON, protobuf, or neither.

* Text that starts with ``{`` or ``[`` is OTLP/JSON. (Only content that starts with a newline
  can also be protobuf: then it is JSON when it holds no control character that JSON text
  cannot hold, or when its first line is a whole JSON value.)
* Binary content that starts with the tag of ``resource_spans`` (``0x0a``) is one serialized
  ``ExportTraceServiceRequest`` (or, if it does not parse and later lines start like JSON, JSON
  Lines after a damaged line).
* Binary content whose first 4 bytes are a plausible big-endian length followed by the start
  of a message (protobuf, JSON, or a compressed message) is the Collector's ``format: proto``
  framing.
* Anything else in which a later line starts with ``{`` or ``[`` is JSON Lines whose first
  line is damaged: it is read line by line, so that the damaged lines are reported one by one
  and the good ones are still read.
"""

from __future__ import annotations

import enum
import json
import re
import struct
from typing import Final

from otel_loopguard.replay._compressed import GZIP_MAGIC, ZSTD_MAGIC

__all__ = ["FRAME_HEADER", "MAX_FRAME_BYTES", "SNIFF_BYTES", "WIDE_SNIFF_BYTES", "Content",
           "content_of", "has_json_lines", "needs_wide_look", "unrecognised"]

SNIFF_BYTES: Final = 512
WIDE_SNIFF_BYTES: Final = 1 << 16
"""How far to look for a good JSON line after a damaged first one."""
FRAME_HEADER: Final = struct.Struct(">I")
MAX_FRAME_BYTES: Final = 1 << 28
"""Larger length prefixes mean the content is not framed protobuf (text starts above 500 MB)."""
_UTF8_BOM: Final = b"\xef\xbb\xbf"
_JSON_SPACE: Final = b" \t\r\n"
_CONTROL_RE: Final = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_PROTO_REQUEST_TAG: Final = b"\n"
"""First byte of any non-empty ``ExportTraceServiceRequest``: field 1, length-delimited."""
_MESSAGE_STARTS: Final = (b"\n", b"{", ZSTD_MAGIC, GZIP_MAGIC)
_LATER_JSON_LINE_RE: Final = re.compile(rb"\n[ \t\r]*[\[{]")
_UNRECOGNISED: Final = "unrecognised content: neither OTLP/JSON nor OTLP protobuf"


class Content(enum.Enum):
    """What the reader makes of a file."""

    JSON = "json"
    PROTO_REQUEST = "proto"
    PROTO_FRAMED = "framed"
    UNKNOWN = "unknown"


def needs_wide_look(head: bytes) -> bool:
    """Return True when more than ``head`` may change the verdict (a long damaged first line)."""
    return len(head) >= SNIFF_BYTES and content_of(head) in (Content.UNKNOWN,
                                                              Content.PROTO_REQUEST)


def content_of(head: bytes) -> Content:
    """Return what the content starting with ``head`` is (pass more bytes to see further)."""
    text = head.removeprefix(_UTF8_BOM).lstrip(_JSON_SPACE)
    if not text or (text[:1] in (b"{", b"[") and _json_text(head, text)):
        return Content.JSON
    if head.startswith(_PROTO_REQUEST_TAG):
        return Content.PROTO_REQUEST
    if _plausible_frame(head):
        return Content.PROTO_FRAMED
    if has_json_lines(head):
        return Content.JSON
    return Content.UNKNOWN


def has_json_lines(head: bytes) -> bool:
    """Return True when a line after the first starts a JSON value (``{`` or ``[``).

    Such a line must be JSON, or the start of a document that goes on past its line (a
    pretty-printed one) or past ``head``: binary files (an executable, an image) hold a
    newline then ``{`` or ``[`` here and there, followed by bytes no JSON holds, and are not
    JSON Lines. Protobuf holds such bytes too (a tag, then a length of 91 or 123): for content
    taken as a protobuf request, this only says what to try when it does not parse.
    """
    for match in _LATER_JSON_LINE_RE.finditer(head):
        start = match.end() - 1
        end = head.find(b"\n", start)
        if _starts_json(head[start:end if end >= 0 else len(head)].rstrip()):
            return True
    return False


def _starts_json(line: bytes) -> bool:
    """Return True when ``line`` is JSON, or JSON cut short at its end."""
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(exc.doc)
    except RecursionError:  # nested too deep to tell: taken as JSON
        return True
    except ValueError:  # not UTF-8 text
        return False
    return True


def _json_text(head: bytes, text: bytes) -> bool:
    """Return True when ``text``, which starts like JSON, is not a protobuf request."""
    if not head.startswith(_PROTO_REQUEST_TAG) or _CONTROL_RE.search(text) is None:
        return True
    first, newline, _ = text.partition(b"\n")
    return bool(newline) and _is_json(first)


def unrecognised(head: bytes) -> str:
    """Return the error message for content that is neither JSON nor protobuf."""
    if head and not head.strip(b"\x00"):
        return f"{_UNRECOGNISED} (it starts with zero bytes only)"
    return _UNRECOGNISED


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def _plausible_frame(head: bytes) -> bool:
    if len(head) <= FRAME_HEADER.size:
        return False
    (size,) = FRAME_HEADER.unpack_from(head)
    body = head[FRAME_HEADER.size:]
    return 0 < size <= MAX_FRAME_BYTES and body.startswith(_MESSAGE_STARTS)
