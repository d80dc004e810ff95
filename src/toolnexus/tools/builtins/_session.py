"""``todowrite`` and ``question``: tools about the conversation rather than the machine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from toolnexus.tools._decorator import tool
from toolnexus.tools._hooks import maybe_await
from toolnexus.tools._tool import Tool, ToolHints

__all__ = ["QuestionHandler", "Todo", "session_tools"]

QuestionHandler = Callable[[list[str]], "Sequence[str] | Awaitable[Sequence[str]]"]
"""``handler(questions) -> answers``, sync or async: one answer per question, in order."""

SAFE = ToolHints(read_only=True, destructive=False, idempotent=False, open_world=False)
MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class Todo(BaseModel):
    """One item of the run's todo list."""

    content: str
    status: Literal["pending", "in_progress", "completed"]


def session_tools(question_handler: QuestionHandler | None) -> list[Tool]:
    """``todowrite`` (with its own list) and ``question`` (asking ``question_handler``)."""
    current: list[Todo] = []

    @tool(name="todowrite", hints=SAFE)
    def todowrite(todos: list[Todo]) -> str:
        """Replace the todo list of this run and show it.

        Args:
            todos: Every item, in order, each with content and status (pending, in_progress,
                completed).
        """
        current[:] = todos
        if not current:
            return "the todo list is empty"
        return "\n".join(f"{MARKS[t.status]} {t.content}" for t in current)

    @tool(name="question", hints=SAFE)
    async def question(questions: list[str]) -> list[str]:
        """Ask the user one or more questions and wait for the answers.

        Args:
            questions: The questions, each a complete sentence.
        """
        if question_handler is None:
            raise RuntimeError(
                "question is not configured: the host must pass question_handler= to "
                "builtin_tools to answer questions"
            )
        answers: Any = await maybe_await(question_handler(list(questions)))
        return [str(a) for a in answers]

    return [todowrite, question]
