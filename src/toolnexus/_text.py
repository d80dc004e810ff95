"""Text shaping shared across the library."""

from __future__ import annotations

__all__ = ["clip_middle"]


def clip_middle(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its head and tail around a marker.

    Why both ends: the start of a command's output or a traceback says what ran, the end says
    how it ended; the middle is what a model can best do without.
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… ({len(text) - 2 * half} characters cut) …\n{text[-half:]}"
