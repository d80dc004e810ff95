"""Text shaping shared across the library."""

from __future__ import annotations

__all__ = ["clip_middle", "clip_middle_bytes"]


def clip_middle(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its head and tail around a marker.

    Why both ends: the start of a command's output or a traceback says what ran, the end says
    how it ended; the middle is what a model can best do without.
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… ({len(text) - 2 * half} characters cut) …\n{text[-half:]}"


def clip_middle_bytes(text: str, limit: int) -> str:
    """``text`` when its UTF-8 fits in ``limit`` bytes, else its head and tail around a marker
    that says how many bytes were cut; the whole, marker included, fits in ``limit`` bytes
    (``limit`` of at least 64), and no character is split."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    marker_room = 48  # "\n… (N bytes cut) …\n" for any N a str can hold
    half = max((limit - marker_room) // 2, 0)
    head = data[:half].decode("utf-8", "ignore")
    tail = data[len(data) - half :].decode("utf-8", "ignore")
    cut = (
        len(data)
        - len(head.encode("utf-8", "surrogatepass"))
        - len(tail.encode("utf-8", "surrogatepass"))
    )
    return f"{head}\n… ({cut} bytes cut) …\n{tail}"
