"""An example tool set for `toolnexus run-code` and `toolnexus sdk`: a small notes service.

Reads are marked read-only (they overlap); `save_note` is not (it runs alone, in order). Each
tool sleeps a little, like a real service, so the timeline shows what ran together.
"""

from __future__ import annotations

import asyncio

from toolnexus import ToolHints, tool

DOCS = {
    "scheduling": "Reads overlap up to a cap; anything not known to be safe runs alone.",
    "code-mode": "A program calls tools as functions; its calls go through the same lane.",
    "sandbox": "Programs run in Monty (Python) or a permission-less Deno process (JavaScript).",
    "audit": "Every sub-call is logged in the session without touching model history.",
}
NOTES: list[str] = []


@tool(hints=ToolHints(read_only=True))
async def search_docs(query: str) -> list[str]:
    """Find documents whose name or text mentions the query.

    Args:
        query: Words to look for.
    """
    await asyncio.sleep(0.05)
    words = query.lower().split()
    return sorted(k for k, v in DOCS.items() if any(w in k or w in v.lower() for w in words))


@tool(hints=ToolHints(read_only=True))
async def read_doc(name: str) -> str:
    """Read one document.

    Args:
        name: A name returned by search_docs.
    """
    await asyncio.sleep(0.2)
    if name not in DOCS:
        raise KeyError(f"no document named {name!r}")
    return DOCS[name]


@tool
async def save_note(text: str) -> str:
    """Save a note (not read-only: it runs alone, after every earlier call).

    Args:
        text: The note.
    """
    await asyncio.sleep(0.05)
    NOTES.append(text)
    return f"saved note {len(NOTES)}"


TOOLS = [search_docs, read_doc, save_note]
