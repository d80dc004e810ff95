"""What an MCP tool call returns: every content part, whole, under MCP's own field names.

A ``CallToolResult`` holds a list of content parts (text, image, audio, ``resource_link``,
embedded resource), each with optional ``annotations`` and ``_meta``, and optionally a
``structuredContent`` value. `call_value` turns it into the value a caller (a program, the
host) receives, dropping nothing:

* ``structuredContent`` given: that value (a plain value sent wrapped as ``{"result": v}`` is
  unwrapped); when the content parts hold more than a mirror of it (`unmirrored`), or the
  result has ``_meta``, the whole result is in the outcome's metadata under ``"mcp"``, and
  what a model reads is the value, then those parts (`notes`);
* one plain text part and nothing else: its text, as a string;
* anything else: a [`ContentParts`][toolnexus.tools.mcp.ContentParts], a list of the parts as
  dicts, each exactly ``part.model_dump(by_alias=True, exclude_none=True)`` (``mimeType``,
  ``_meta``, ``annotations``, ...).

What a model reads of a ``ContentParts`` is `ContentParts.model_text`: the text parts as they
are and one line for every other part, naming its type, media type, size and URI (an image is
never inlined as base64 text). Model styles whose tool results take images (Anthropic's
``tool_result`` image blocks, the Responses API's ``function_call_output`` parts) may send
the images themselves: `ContentParts.images` lists them.
"""

from __future__ import annotations

import binascii
import json
from typing import Any

__all__ = [
    "CONTENT_RESULT_SCHEMA",
    "IMAGE_TYPES",
    "MAX_IMAGE_BYTES_FOR_MODEL",
    "ContentParts",
    "call_value",
    "describe_part",
    "image_problem",
    "notes",
    "unmirrored",
]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The media types of images the providers take in a tool result (Anthropic, Responses)."""

MAX_IMAGE_BYTES_FOR_MODEL = 5 * 1024 * 1024
"""Images whose base64 data is longer than this reach a model as their one-line description
only: Anthropic refuses a larger image (its limit is on the base64 text, so about 3.75 MiB of
image), and one refused image fails the whole request."""

CONTENT_RESULT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {
            "type": "array",
            "description": "MCP content parts, each a dict with MCP's field names",
            "items": {
                "type": "object",
                "properties": {
                    "type": {
                        "type": "string",
                        "enum": ["text", "image", "audio", "resource_link", "resource"],
                    },
                    "text": {"type": "string"},
                    "data": {"type": "string", "description": "base64 (image, audio)"},
                    "mimeType": {"type": "string"},
                    "uri": {"type": "string"},
                    "name": {"type": "string"},
                    "resource": {"type": "object"},
                    "annotations": {"type": "object"},
                    "_meta": {"type": "object"},
                },
                "required": ["type"],
            },
        },
    ]
}
"""The result type of an MCP tool without an ``outputSchema``: its text, or its content parts
(what the Code Mode SDK says the call returns)."""


class ContentParts(list[dict[str, Any]]):
    """An MCP tool's content parts, each a dict with MCP's field names (a plain list to a
    program). What a model reads of it is `model_text`."""

    def model_text(self) -> str:
        """The text parts as they are, every other part as one line (`describe_part`)."""
        return "\n".join(
            part["text"]
            if part.get("type") == "text" and isinstance(part.get("text"), str)
            else describe_part(part)
            for part in self
        )

    def images(self) -> list[tuple[int, dict[str, Any]]]:
        """``(index, part)`` of each image part a model may be shown as an image (one that
        `image_problem` finds nothing wrong with)."""
        return [
            (index, part)
            for index, part in enumerate(self)
            if part.get("type") == "image" and image_problem(part) is None
        ]

    def model_blocks(self, tool: str) -> list[tuple[str, str, str]] | None:
        """What a model whose tool results take images reads, in order: ``("text", text,
        "")`` and ``("image", media_type, base64_data)`` pieces (adjacent texts joined, other
        parts as their `describe_part` line). An image part a provider would refuse is its
        line and why it was not shown, naming ``tool`` (the tool that sent it): one bad image
        would otherwise fail the whole request. ``None`` when no part is an image (the result
        is then `model_text`)."""
        if not any(part.get("type") == "image" for part in self):
            return None
        pieces: list[tuple[str, str, str]] = []
        texts: list[str] = []
        for part in self:
            problem = image_problem(part) if part.get("type") == "image" else None
            if part.get("type") == "image" and problem is None:
                if texts:
                    pieces.append(("text", "\n".join(texts), ""))
                    texts = []
                pieces.append(("image", part["mimeType"], part["data"]))
            elif part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif problem is not None:
                texts.append(f"{describe_part(part)} not shown: {problem} (sent by {tool!r})")
            else:
                texts.append(describe_part(part))
        if texts:
            pieces.append(("text", "\n".join(texts), ""))
        return pieces


_MAGIC: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),  # and "WEBP" at offset 8
}
"""How each of `IMAGE_TYPES` starts: the providers decode the image and refuse one whose bytes
are not of its stated type."""


def _decoded(data: Any) -> bytes | None:
    """The bytes of ``data`` when it is strict base64 text (standard alphabet, padded, nothing
    else), else ``None``: all of it is checked, in one pass in C."""
    if not isinstance(data, str):
        return None
    try:
        return binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):  # ValueError: characters outside ASCII
        return None


def _of_type(media_type: str, data: bytes) -> bool:
    if media_type == "image/webp" and data[8:12] != b"WEBP":
        return False
    return data.startswith(_MAGIC[media_type])


def image_problem(part: dict[str, Any]) -> str | None:
    """Why an image part cannot be sent to a model as an image, or ``None`` when it can: a
    media type outside `IMAGE_TYPES`, base64 text longer than `MAX_IMAGE_BYTES_FOR_MODEL`, data
    that is not strict base64 (all of it is checked), empty data, or bytes that do not start as
    their media type's format does (a provider refuses each of these, failing the request)."""
    media_type = part.get("mimeType")
    if media_type not in IMAGE_TYPES:
        shown = str(media_type)[:100] if isinstance(media_type, str) else "none"
        return f"its media type ({shown}) is not one of {', '.join(sorted(IMAGE_TYPES))}"
    text = part.get("data")
    if isinstance(text, str) and len(text) > MAX_IMAGE_BYTES_FOR_MODEL:
        limit = _size(MAX_IMAGE_BYTES_FOR_MODEL)
        return f"its base64 data is {_size(len(text))}, more than the {limit} allowed"
    data = _decoded(text)
    if data is None:
        return "its data is not base64"
    if not data:
        return "its data is empty"
    if not _of_type(str(media_type), data):
        return f"its data is not a {str(media_type).removeprefix('image/').upper()} image"
    return None


def _decoded_size(data: Any) -> int | None:
    """The byte size of base64 ``data`` (``None``: not base64 text)."""
    decoded = _decoded(data)
    return None if decoded is None else len(decoded)


def _size(count: int) -> str:
    return f"{count:,} bytes" if count < 10_000 else f"{count / 1024:,.0f} KiB"


def describe_part(part: dict[str, Any]) -> str:
    """One line for a non-text content part: its type, media type, size and URI, e.g.
    ``[image image/png, 1,024 bytes]`` or ``[resource_link file:///etc/passwd, text/plain;
    not fetched]``."""
    kind = str(part.get("type", "unknown"))
    facts = []
    resource = part.get("resource") if kind == "resource" else None
    source = resource if isinstance(resource, dict) else part
    uri = source.get("uri")
    if isinstance(uri, str):
        facts.append(uri[:300])
    mime = source.get("mimeType")
    if isinstance(mime, str):
        facts.append(mime[:100])
    if isinstance(source.get("data"), str):
        size = _decoded_size(source["data"])
        facts.append(_size(size) if size is not None else "data that is not base64")
    elif isinstance(source.get("blob"), str):
        size = _decoded_size(source["blob"])
        facts.append(_size(size) if size is not None else "data that is not base64")
    elif isinstance(source.get("text"), str):
        facts.append(f"{len(source['text']):,} characters of text")
    if isinstance(source.get("size"), int):
        facts.append(f"size {source['size']:,} bytes")
    if kind == "resource_link":
        facts.append("not fetched")
    line = f"[{kind}{' ' if facts else ''}{', '.join(facts)}]"
    if kind == "resource" and isinstance(source.get("text"), str):
        return f"{line}\n{source['text']}"
    return line


ENVELOPE_META_KEYS = frozenset({"io.modelcontextprotocol/serverInfo"})
"""``_meta`` keys of a result that belong to the protocol's envelope, not to the tool's answer:
the server's name a 2026-07-28 server stamps on every result. They are left out of the value
and of its metadata, and a ``_meta`` holding only them counts as none."""


def _part(part: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = part.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1``, ``1`` is ``1.0``, key order does not count."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_json_equal, a, b))
    return type(a) is type(b) and a == b


def _mirrors(text: str, value: Any) -> bool:
    """Whether ``text`` serializes ``value``: it parses as JSON equal to it, or it is the
    string ``value`` itself."""
    if isinstance(value, str) and text == value:
        return True
    try:
        return _json_equal(json.loads(text), value)
    except (ValueError, RecursionError):
        return False


def unmirrored(parts: list[dict[str, Any]], structured: Any) -> ContentParts:
    """The content parts beside ``structured`` (a result's ``structuredContent``) that are not
    a mirror of it, in order: what a model would lose if it read ``structured`` alone.

    A text part mirrors it when its text parses as JSON equal to it (`_json_equal`), or, for
    ``{"result": v}``, equal to ``v`` or the string ``v`` itself; and text parts that hold a
    list ``v``'s items in order, one each, mirror it together (as the SDK's ``MCPServer``
    writes a list, nested lists flattened). Every other part (a text that says something else,
    an image) is kept.
    """
    views = [structured]
    wrapped = isinstance(structured, dict) and list(structured) == ["result"]
    if wrapped:
        views.append(structured["result"])
    items = _flattened(structured["result"]) if wrapped else None
    if items is not None and len(items) == len(parts):
        pairs = zip(parts, items, strict=True)
        if all(_is_text(part) and _mirrors(part["text"], v) for part, v in pairs):
            return ContentParts()
    return ContentParts(
        part
        for part in parts
        if not (_is_text(part) and any(_mirrors(part["text"], v) for v in views))
    )


def _flattened(value: Any) -> list[Any] | None:
    """The items of the list ``value``, nested lists' items in their place, as the SDK's
    ``MCPServer`` writes a list one content part per item; ``None`` for anything else."""
    if not isinstance(value, list):
        return None
    items: list[Any] = []
    stack = [iter(value)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            items.append(item)
        else:
            stack.pop()
    return items


def _is_text(part: dict[str, Any]) -> bool:
    return part.get("type") == "text" and isinstance(part.get("text"), str)


def notes(result: Any) -> str | None:
    """What a model reads after a successful result's ``structuredContent`` value: the
    `ContentParts.model_text` of its content parts that are not a mirror of it (`unmirrored`);
    ``None`` when there are none, or no ``structuredContent``, or the result is an error."""
    if result.is_error or result.structured_content is None:
        return None
    parts = [_part(part) for part in result.content or []]
    kept = unmirrored(parts, result.structured_content)
    return kept.model_text() if kept else None


def call_value(result: Any) -> tuple[Any, dict[str, Any] | None, bool]:
    """A ``CallToolResult`` as ``(value, metadata, is_error)``; see the module's docstring.

    An error result's value is its `ContentParts.model_text` (the message a model reads).
    """
    parts = ContentParts(_part(part) for part in result.content or [])
    texts_only = all(set(part) == {"type", "text"} and part["type"] == "text" for part in parts)
    plain_text = len(parts) == 1 and texts_only
    whole: dict[str, Any] | None = None
    meta = {k: v for k, v in (result.meta or {}).items() if k not in ENVELOPE_META_KEYS}
    structured = result.structured_content
    # the whole result travels in the metadata when the value leaves some of it out: content
    # parts beside structuredContent that are not a mirror of it (`unmirrored`), or _meta
    if meta or (structured is not None and unmirrored(parts, structured)):
        whole = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        whole.pop("resultType", None)
        whole.pop("_meta", None)
        if meta:
            whole["_meta"] = meta
    metadata = {"mcp": whole} if whole is not None else None
    if result.is_error:
        return parts.model_text() or "the MCP tool reported an error", metadata, True
    if structured is not None:
        if isinstance(structured, dict) and list(structured) == ["result"]:
            return structured["result"], metadata, False
        return structured, metadata, False
    if not parts:
        return "", metadata, False
    if plain_text:
        return parts[0]["text"], metadata, False
    return parts, metadata, False
