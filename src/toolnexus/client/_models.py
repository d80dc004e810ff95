"""Models that run in this process: the seam for testing an agent built on toolnexus.

``FunctionModel(fn)`` answers each turn with ``fn(messages, tools)``; ``ScriptedModel(replies)``
answers with its replies in order. Either is accepted as ``create_client(model=...)`` with no
``base_url``, and the client then runs its whole loop (scheduling, Code Mode, hooks, budgets,
streaming events, usage) exactly as against a server, with no HTTP. Re-exported from
[`toolnexus.testing`][toolnexus.testing].
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import itertools
import json
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolnexus._json import dumps_plain, encodable_data
from toolnexus.client.styles._base import AssistantTurn, OnCall, OnText, Usage, WireOptions
from toolnexus.client.styles._openai import OpenAIStyle
from toolnexus.codemode import RUN_CODE_NAME, sdk_tools
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall
from toolnexus.tools import Tool

__all__ = ["FunctionModel", "InProcessStyle", "ModelReply", "ScriptedModel"]


@dataclass
class ModelReply:
    """One model turn, in full: text, tool calls and (optionally) what it cost.

    A function model may return this instead of a plain string (the final text) or a list of
    [`ToolCall`][toolnexus.scheduling.ToolCall] (call the tools); ``usage`` is then reported as
    given.
    """

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None


ModelFunction = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Any]
"""``fn(messages, tools)``, sync or async: ``messages`` in the OpenAI Chat Completions shape
(system, user, assistant with ``tool_calls``, ``tool`` results), ``tools`` as
``{"name", "description", "input_schema"}`` (``run_code``'s also has ``program_tools``, the
tools its programs may call, in the same shape, and ``language``). Returns a string, a list of
``ToolCall``s or a [`ModelReply`][toolnexus.testing.ModelReply]."""


def _encoded(value: list[dict[str, Any]]) -> str | None:
    """``value`` as JSON text (``json.dumps``'s defaults), or ``None`` when it is not JSON.

    Turns copy what a model is shown through this text (what a server would get; many times
    faster than ``copy.deepcopy`` on a long transcript), else through ``copy.deepcopy``, which
    follows cycles (`dumps_plain` does not look for them: a cycle ends in ``RecursionError``)."""
    try:
        return dumps_plain(value)
    except (TypeError, ValueError, RecursionError):
        return None


def _decoded(text: str) -> list[dict[str, Any]]:
    decoded: list[dict[str, Any]] = json.loads(text)
    return decoded


_LONE_SURROGATE_ESCAPE = "\\ud"
"""What every surrogate becomes in ``json.dumps``'s ASCII text (``\\udXXX``): text without it
holds no lone surrogate (a pair is written this way too, so its presence only means "look")."""


class FunctionModel:
    """A model whose every turn is ``fn(messages, tools)`` (sync or async).

    Args:
        fn: See `ModelFunction`.
        name: The model name in spans and errors.

    Example::

        def model(messages, tools):
            if messages[-1]["role"] == "user":
                return [ToolCall("c1", "lookup", {"city": "Oslo"})]
            return "Oslo is sunny."

        client = create_client(model=FunctionModel(model))
    """

    def __init__(self, fn: ModelFunction, *, name: str = "function-model") -> None:
        if not callable(fn):
            raise ConfigurationError(f"FunctionModel takes a function, got {fn!r}.")
        self.fn = fn
        self.name = name
        self._requests: list[list[dict[str, Any]]] = []
        self._unread: list[str | list[dict[str, Any]]] = []  # requests still as sent (text)

    @property
    def requests(self) -> list[list[dict[str, Any]]]:
        """The messages of every turn it was asked for, in order (for assertions).

        Each is kept as the JSON text it was copied through and decoded when first read here:
        most runs never read them, and decoding every turn's whole transcript a second time
        was a large share of an in-process run's cost per tool call.
        """
        if self._unread:
            self._requests.extend(
                _decoded(sent) if isinstance(sent, str) else sent for sent in self._unread
            )
            self._unread.clear()
        return self._requests

    async def reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        """The function's answer to one turn.

        The function gets copies of the messages and tools, as a server gets them over the
        wire: changing them changes nothing in the run. A sync function runs in a worker
        thread, so the client's ``turn_timeout`` holds for it as for an async one.
        """
        return await self._reply(messages, tools, _encoded(messages), _encoded(tools))

    async def _reply(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        text: str | None,
        tools_text: str | None,
    ) -> Any:
        """`reply`, given the JSON text of the messages and of the tools (``None`` when they
        are not JSON): the one encoding that copies them is also `InProcessStyle`'s check for
        lone surrogates and its token estimate."""
        if text is None:
            self._unread.append(copy.deepcopy(messages))
            shown = copy.deepcopy(messages)
        else:
            self._unread.append(text)
            shown = _decoded(text)
        offered = copy.deepcopy(tools) if tools_text is None else _decoded(tools_text)
        if inspect.iscoroutinefunction(self.fn):
            answer = self.fn(shown, offered)
        else:
            answer = await asyncio.to_thread(self.fn, shown, offered)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class ScriptedModel(FunctionModel):
    """A model that answers with ``replies`` in order, one per turn.

    Each reply is a string (the final text), a list of [`ToolCall`][toolnexus.scheduling.ToolCall],
    or a [`ModelReply`][toolnexus.testing.ModelReply]. Asked for more turns than it has replies, the
    run fails with a [`ConfigurationError`][toolnexus.errors.ConfigurationError] saying so (a test
    that expected fewer turns).
    """

    def __init__(self, replies: Sequence[Any], *, name: str = "scripted-model") -> None:
        self.replies = list(replies)
        self._next = 0
        super().__init__(self._scripted, name=name)

    async def _scripted(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Any:  # async: it never blocks, so it answers on the loop, in order
        if self._next >= len(self.replies):
            raise ConfigurationError(
                f"{self.name} has {len(self.replies)} replies and was asked for turn "
                f"{self._next + 1}; script one more reply (or expect fewer turns)."
            )
        self._next += 1
        return self.replies[self._next - 1]


_PROGRAM_KEYS = ("program_tools", "language")
"""What ``run_code``'s entry carries for an in-process model (see
`InProcessStyle.with_program_tools`)."""


def _estimate(text: str) -> int:
    """Tokens, estimated as one per four characters (what a tokenizer gives for English)."""
    return max(1, len(text) // 4) if text else 0


class InProcessStyle(OpenAIStyle):
    """The OpenAI wire shapes, answered by a [`FunctionModel`][toolnexus.testing.FunctionModel]
    instead of a server."""

    name = "in-process"
    keeps_state = False

    def __init__(
        self, model: FunctionModel, system_prompt: str | None, wire: WireOptions | None = None
    ) -> None:
        super().__init__(
            _no_sdk, model.name, system_prompt, {}, f"in-process:{model.name}", wire=wire
        )
        self.function_model = model

    async def sdk(self) -> Any:
        return None

    def with_program_tools(
        self, definitions: list[dict[str, Any]], granted: Sequence[Tool]
    ) -> list[dict[str, Any]]:
        """``definitions`` with ``run_code``'s entry also naming what its programs may call.

        A server reads the SDK in ``run_code``'s description; an in-process model is shown
        the same tools as data instead: ``program_tools`` (``{"name", "description",
        "input_schema"}`` each, the SDK's tools in its order) and ``language`` (the
        programs' language, ``"python"`` or ``"javascript"``).
        """
        out: list[dict[str, Any]] = []
        for definition in definitions:
            function = definition.get("function") or {}
            if function.get("name") == RUN_CODE_NAME:
                description = str(function.get("description", ""))
                language = "javascript" if "\n\n// JavaScript" in description else "python"
                function = {
                    **function,
                    "program_tools": [
                        {
                            "name": t.name,
                            "description": t.description,
                            "input_schema": copy.deepcopy(t.input_schema),
                        }
                        for t in sdk_tools(granted)
                    ],
                    "language": language,
                }
                definition = {**definition, "function": function}
            out.append(definition)
        return out

    def sendable(self, params: dict[str, Any]) -> dict[str, Any]:
        """The request as it is: `_answer` makes its strings sendable itself, from the one
        encoding that copies the messages for the model (a second pass over the whole
        transcript per turn, only to look for lone surrogates, was a large share of an
        in-process run's cost per tool call)."""
        return params

    async def aclose(self) -> None:
        return None

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        return await self._answer(params)

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        turn = await self._answer(params)
        for start in range(0, len(turn.text), 16):  # text arrives in pieces, as it streams
            await on_text(turn.text[start : start + 16])
        for call in turn.calls:
            await on_call(call)
        turn.streamed = True
        return turn

    async def _answer(self, params: dict[str, Any]) -> AssistantTurn:
        messages = params["messages"]
        tools = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"].get("parameters", {}),
                **{k: t["function"][k] for k in _PROGRAM_KEYS if k in t["function"]},
            }
            for t in params.get("tools", [])
        ]
        # what a server is sent: every string encodable (see Style.sendable)
        offered = _encoded(tools)
        if offered is not None and _LONE_SURROGATE_ESCAPE in offered:
            tools = encodable_data(tools)
            offered = _encoded(tools)
        model = self.function_model
        text: str | None = None
        if type(model).reply is FunctionModel.reply:  # not overridden: one encoding for all
            text = _encoded(messages)
            if text is not None and _LONE_SURROGATE_ESCAPE in text:
                messages = encodable_data(messages)
                text = _encoded(messages)
            answer = await model._reply(messages, tools, text, offered)
        else:
            messages = encodable_data(messages)
            answer = await model.reply(messages, tools)
        if isinstance(answer, str):
            answer = ModelReply(text=answer)
        elif isinstance(answer, list):
            answer = ModelReply(calls=answer)
        if not isinstance(answer, ModelReply) or not all(
            map(isinstance, answer.calls, itertools.repeat(ToolCall))
        ):
            raise ConfigurationError(
                f"{self.function_model.name} returned {answer!r}: return a string, a list of "
                "ToolCall, or a ModelReply."
            )
        turn = self._turn(
            answer.text, list(answer.calls), Usage(), "tool_calls" if answer.calls else "stop"
        )
        if answer.usage is not None:
            turn.usage = answer.usage
        else:  # the calls as the message sends them: their arguments are not written twice
            sent = [c["function"] for c in turn.message.get("tool_calls", ())]
            written = answer.text + "".join([f["name"] + f["arguments"] for f in sent])
            turn.usage = Usage(
                _estimate(text if text is not None else json.dumps(messages, default=str)),
                _estimate(written),
            )
        return turn


def _no_sdk(tls: ssl.SSLContext) -> Any:  # pragma: no cover - sdk() is overridden
    return None
