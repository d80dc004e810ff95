"""Carrying a conversation on from a session log (one saved, loaded, or interrupted)."""

from __future__ import annotations

from typing import Any

from toolnexus.session import Session
from toolnexus.session.events import tool_result

__all__ = ["INTERRUPTED", "transcript"]

INTERRUPTED = (
    "no result was recorded for this call: the run was interrupted before it finished, so it "
    "may or may not have taken effect; check before calling it again"
)


def transcript(session: Session) -> list[dict[str, Any]]:
    """The session's transcript as provider-neutral messages, every tool call answered.

    A call that has no ``tool_result`` (the run stopped while it ran, or before it was
    recorded) is answered honestly with `INTERRUPTED`, marked as an error, right after
    the results its turn does have; that answer is appended to the session too, so the log
    and what the model is shown agree.
    """
    messages = session.messages()
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    out: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] != "tool" and missing:  # the turn's results end here
            out.extend(missing)
            missing = []
        out.append(message)
        if message["role"] == "assistant":
            for call in message.get("tool_calls") or []:
                if call.get("id") not in answered:
                    answer = tool_result(call.get("id"), call.get("name"), INTERRUPTED, True)
                    session.append(*answer)
                    missing.append({"role": "tool", **answer.data})
    out.extend(missing)
    return out
