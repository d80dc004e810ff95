"""The real providers' checks of the images a request carries, with their error texts, for the
loopback endpoints (``fake_provider``, ``responses_endpoint``, ``frontier_endpoint``).

A real provider decodes every image it is sent and refuses the whole request for one bad image,
so an endpoint that let them through would hide the failure a client meets in production.

* Anthropic Messages (an ``image`` block, at the top level of a message or inside a
  ``tool_result``): the media type must be one of four, the data not empty, at most 5 MB of
  base64 text (the limit is on the encoded text), strict base64, and the bytes must be of the
  stated type.
* OpenAI Responses (an ``input_image``'s ``data:`` URL, in a message or a
  ``function_call_output``): an image media type of the four, base64 that decodes, bytes that
  are an image of one of the four formats (the format is read from the bytes).

Each function returns the provider's message for the first bad image, or ``None``.
"""

from __future__ import annotations

import binascii
from typing import Any

ANTHROPIC_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
ANTHROPIC_MAX_BASE64 = 5 * 1024 * 1024
MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
OPENAI_NOT_AN_IMAGE = (
    "The image data you provided does not represent a valid image. Please check your input and "
    "try again with one of the supported image formats: ['image/jpeg', 'image/png', "
    "'image/gif', 'image/webp']."
)
OPENAI_BAD_BASE64 = "Invalid base64 image_url."


def _bytes(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        return None


def format_of(data: bytes) -> str | None:
    """The media type the bytes are, by their magic number (``None``: none of the four)."""
    for media_type, starts in MAGIC.items():
        if data.startswith(starts) and (media_type != "image/webp" or data[8:12] == b"WEBP"):
            return media_type
    return None


def _anthropic_image(source: Any, where: str) -> str | None:
    if not isinstance(source, dict) or source.get("type") != "base64":
        return None
    media_type, data = source.get("media_type"), source.get("data")
    if media_type not in ANTHROPIC_TYPES:
        return (
            f"{where}.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or "
            "'image/webp'"
        )
    if not data:
        return f"{where}: image cannot be empty"
    if len(data) > ANTHROPIC_MAX_BASE64:
        return f"{where}: image exceeds 5 MB maximum: {len(data)} bytes > 5242880 bytes"
    decoded = _bytes(data)
    if decoded is None:
        return f"{where}: invalid base64 data"
    if format_of(decoded) != media_type:
        return f"{where}.data: Image does not match the provided media type {media_type}"
    return None


def anthropic_image_error(body: dict[str, Any]) -> str | None:
    """The Messages API's 400 message for the first bad image block of ``body``."""
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            inner = block.get("content") if block.get("type") == "tool_result" else None
            nested = [
                (f"messages.{i}.content.{j}.tool_result.content.{k}", b)
                for k, b in enumerate(inner if isinstance(inner, list) else [])
            ]
            for where, image in [(f"messages.{i}.content.{j}", block), *nested]:
                if isinstance(image, dict) and image.get("type") == "image":
                    problem = _anthropic_image(image.get("source"), f"{where}.image.source.base64")
                    if problem is not None:
                        return problem
    return None


def _openai_image(url: Any, param: str) -> str | None:
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    head, _, data = url.partition(",")
    media_type = head.removeprefix("data:").removesuffix(";base64")
    if media_type not in MAGIC:
        return (
            f"Invalid '{param}'. Expected a base64-encoded data URL with an image MIME type "
            f"(e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got unsupported MIME type "
            f"'{media_type}'."
        )
    decoded = _bytes(data)
    if decoded is None:
        return OPENAI_BAD_BASE64
    if format_of(decoded) is None:
        return OPENAI_NOT_AN_IMAGE
    return None


def responses_image_error(items: list[Any]) -> tuple[str, str] | None:
    """The Responses API's 400 ``(message, param)`` for the first bad ``input_image`` of the
    request's input items."""
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        key = "output" if item.get("type") == "function_call_output" else "content"
        parts = item.get(key)
        for k, part in enumerate(parts if isinstance(parts, list) else []):
            if isinstance(part, dict) and part.get("type") == "input_image":
                param = f"input[{i}].{key}[{k}].image_url"
                problem = _openai_image(part.get("image_url"), param)
                if problem is not None:
                    return problem, param
    return None
