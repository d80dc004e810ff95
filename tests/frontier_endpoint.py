"""A scripted model endpoint on 127.0.0.1 that plays the rules of 2026's frontier endpoints.

Like ``fake_provider.FakeProvider`` it is a real HTTP server (JSON and SSE) that the official
``openai`` and ``anthropic`` SDKs talk to, but each profile *enforces* what the real server
checks when a tool loop sends the conversation back, and answers a broken request with the real
server's status, error text and body shape:

* ``anthropic-thinking`` (Messages; default model ``claude-opus-5-5``, adaptive thinking only):
  every response carries ``thinking`` blocks (and a ``redacted_thinking`` one) signed with an
  HMAC over (the thinking text, the model, hashes of the canonical JSON of everything before the
  block: ``system``, ``tools``, the earlier messages and the earlier blocks of its own message);
  interleaved thinking before each ``tool_use``; streamed as ``thinking_delta`` pieces (cut in
  UTF-16 code units, so a piece may end halfway through an emoji, as on Chat Completions) and
  one ``signature_delta`` just before ``content_block_stop``. On every request, each replayed
  thinking block is checked (missing signature, bad signature, prefix changed: "bound to a
  different conversation", naming what changed), and a final assistant message holding
  ``tool_use`` must start with a thinking block.
* ``anthropic-cache`` (Messages; default model ``claude-haiku-5-5``, thinking only when asked):
  the same rules, with the emphasis on prompt caching: at most 4 ``cache_control`` markers
  (top-level included), TTLs non-increasing in ``tools`` -> ``system`` -> ``messages`` order,
  and ``cache_creation_input_tokens`` / ``cache_read_input_tokens`` from a prefix-hash store
  with a 20-block lookback (JSON, and ``message_start`` usage when streaming).
* ``gemini-openai`` (Chat Completions): the first tool call of each step carries
  ``extra_content.google.thought_signature``; missing or altered on replay is Gemini's 400, its
  body a JSON array.
* ``openrouter-reasoning`` (Chat Completions): ``reasoning`` and ``reasoning_details`` on the
  message, streamed as many ``reasoning.text`` fragments plus a signature-only piece sharing
  their ``index``; missing, fragmented or altered details on replay are the upstream's 400
  wrapped in ``metadata.raw`` (Claude's signature error for ``anthropic/`` models, Gemini's
  thought-signature error for ``google/`` ones).
* ``deepseek`` (Chat Completions): ``reasoning_content`` on the message; a tool-call turn sent
  back without it is a 400.
* ``vllm`` (Chat Completions): ``reasoning`` on the message; nothing is refused, but
  :attr:`FrontierEndpoint.reasoning_returned` records, per request, whether each tool-call turn
  came back with its reasoning.

Every Chat Completions profile also checks tool-call/tool-message pairing and reports
``prompt_tokens_details.cached_tokens``; every Messages profile checks ``tool_use`` /
``tool_result`` pairing, the id pattern of ``tool_use`` and ``tool_result`` blocks and
non-empty text blocks, and refuses a forced ``tool_choice`` on a model that only thinks
adaptively. Every cache marker counts, on a block inside a ``tool_result``'s content too. An
image the real API would refuse (`provider_images`) is its 400, with its text.

Responses are scripted with :class:`Step` (the endpoint makes the ids, the thinking and the
signatures itself), and every request body is recorded, append-only, in
:attr:`FrontierEndpoint.requests` (:attr:`FrontierEndpoint.raw_requests` keeps the bytes).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import itertools
import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from provider_images import anthropic_image_error
from toolnexus import ToolHints, create_client
from toolnexus import tool as as_tool
from toolnexus.client import RunResult

ANTHROPIC_PROFILES = ("anthropic-thinking", "anthropic-cache")
OPENAI_PROFILES = ("gemini-openai", "openrouter-reasoning", "deepseek", "vllm")
PROFILES = ANTHROPIC_PROFILES + OPENAI_PROFILES

DEFAULT_MODELS = {
    "anthropic-thinking": "claude-opus-5-5",
    "anthropic-cache": "claude-haiku-5-5",
    "gemini-openai": "gemini-3.5-pro",
    "openrouter-reasoning": "anthropic/claude-sonnet-5-5",
    "deepseek": "deepseek-v4",
    "vllm": "Qwen/Qwen3.6-35B",
}

ADAPTIVE_ONLY = frozenset(
    {"claude-opus-5-5", "claude-sonnet-5-5", "claude-fable-5-1", "claude-mythos-5-1"}
)
"""Models whose thinking cannot be turned off, and which refuse a forced ``tool_choice``."""

MAX_BREAKPOINTS = 4
LOOKBACK = 20
TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
SERVER_TOOL_ID = re.compile(r"^srvtoolu_[a-zA-Z0-9_]+$")

# The real servers' texts (Anthropic Messages, OpenAI Chat Completions, Gemini, OpenRouter,
# DeepSeek), verbatim; ``{}`` fields are the parts that name the request's own content. Where no
# real text is known (CHANGED_TOOLS, CHANGED_MESSAGES, INVALID_REDACTED, PAUSE_NOT_RESUMED) the
# wording is this endpoint's own, in the same style.
EXPECTED_THINKING = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`."
    " When `thinking` is enabled, a final `assistant` message must start with a thinking block "
    "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
    "include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
    "Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
INVALID_SIGNATURE = "messages.{i}.content.{k}: Invalid `signature` in `thinking` block"
INVALID_REDACTED = "messages.{i}.content.{k}: Invalid `data` in `redacted_thinking` block"
SIGNATURE_REQUIRED = "messages.{i}.content.{k}.thinking.signature: Field required"
BOUND_ELSEWHERE = (
    "messages.{i}.content.{k}: Invalid `signature` in `thinking` block. The block is bound to a "
    "different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_"
    'behavior` to "drop_block". That setting requires the `thinking-binding-controls-2026-08-01`'
    " value in the `anthropic-beta` header. {what}"
)
CHANGED_SYSTEM = "The `system` prompt differs from the one this block was created with."
CHANGED_TOOLS = "The `tools` differ from the ones this block was created with."
CHANGED_MESSAGES = "The messages before this block differ from the ones it was created with."
CHANGED_BLOCKS = (
    "The `thinking` block that preceded this one when it was created is missing from this request."
)
TOOL_USE_UNANSWERED = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "{ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message."
)
TOOL_RESULT_UNEXPECTED = (
    "messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
TOOL_USE_ID = "messages.{i}.content.{k}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
TOOL_RESULT_ID = (
    "messages.{i}.content.{k}.tool_result.tool_use_id: String should match pattern "
    "'^[a-zA-Z0-9_-]+$'"
)
SERVER_TOOL_USE_ID = (
    "messages.{i}.content.{k}.server_tool_use.id: String should match pattern "
    "'^srvtoolu_[a-zA-Z0-9_]+$'"
)
EMPTY_TEXT = "messages: text content blocks must be non-empty"
EMPTY_MESSAGE = (
    "messages.{i}: all messages must have non-empty content except for the optional final "
    "assistant message"
)
FORCED_TOOL = 'tool_choice: type "tool" and "any" are not supported for this model.'
THINKING_OFF = (
    '"thinking.type.{kind}" is not supported for this model. Use "thinking.type.adaptive" and '
    '"output_config.effort" to control thinking behavior.'
)
TOO_MANY_BREAKPOINTS = "A maximum of 4 blocks with cache_control may be provided. Found {n}."
TTL_ORDER = (
    "{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
    "cache_control block. Note that blocks are processed in the following order: `tools`, "
    "`system`, `messages`."
)
PAUSE_NOT_RESUMED = (
    "messages.{i}: a turn that stopped with `pause_turn` is continued by sending its assistant "
    "content back unchanged as the final message."
)
TOOL_CALLS_UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
GEMINI_MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
OPENROUTER_GEMINI = (
    "Gemini models require OpenRouter reasoning details to be preserved in each request. Please "
    "refer to our docs: https://openrouter.ai/docs/guides/best-practices/reasoning-tokens"
    "#preserving-reasoning-blocks. Upstream error: {upstream}"
)
DEEPSEEK_MISSING = "The `reasoning_content` in the thinking mode must be passed back to the API."

REFUSAL_DETAILS = {
    "type": "refusal",
    "category": "cyber",
    "explanation": "The request asks for working malware.",
}


@dataclass
class Step:
    """One scripted model response; the endpoint makes ids, thinking and signatures.

    Attributes:
        text: The assistant's text.
        calls: ``(tool name, arguments)`` per tool call, in order.
        thinking: The reasoning text (``""``: Anthropic's ``display: "omitted"``, an empty
            thinking block that still carries its signature).
        stop: A stop or finish reason other than the natural one: Anthropic ``refusal``,
            ``pause_turn`` (a web search under way; with no ``text``, an empty paused turn),
            ``model_context_window_exceeded``; Chat Completions ``content_filter``,
            OpenRouter's ``error``.
        stop_details: With ``stop="refusal"``: the ``stop_details`` sent (default: a ``cyber``
            refusal with an explanation).
        status: Answer with this HTTP error status instead, whatever was asked (a failing
            server, not a broken rule: recorded in ``failures``, not ``rejected``).
    """

    text: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    thinking: str = "I should look at what the tools return before I answer."
    stop: str | None = None
    stop_details: dict[str, Any] | None = None
    status: int | None = None


class Rejected(Exception):
    """A request the endpoint refuses: the status and the body the real server sends."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(json.dumps(body))
        self.status = status
        self.body = body


class Failing(Rejected):
    """A scripted server failure (``Step.status``)."""


def anthropic_error(message: str) -> Rejected:
    return Rejected(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    )


def openai_error(message: str, param: str | None = None, code: str | None = None) -> Rejected:
    return Rejected(
        400,
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": code,
            }
        },
    )


def gemini_error(message: str) -> Rejected:
    """Gemini's OpenAI-compatible endpoint answers with a JSON *array* of errors."""
    return Rejected(
        400, [{"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}]
    )


def openrouter_error(raw: str, provider: str) -> Rejected:
    """OpenRouter wraps the upstream's answer, as text, in ``metadata.raw``."""
    return Rejected(
        400,
        {
            "error": {
                "message": "Provider returned error",
                "code": 400,
                "metadata": {"raw": raw, "provider_name": provider},
            }
        },
    )


# ---------------------------------------------------------------------------------------------
# canonical JSON and hashes


def _clean(value: Any) -> Any:
    """``value`` without ``cache_control`` markers and null fields (neither is content)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k != "cache_control" and v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def canonical(value: Any) -> str:
    """Sorted-key, compact JSON of ``value`` without cache markers and nulls."""
    return json.dumps(_clean(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()[:32]


def _blocks(content: Any) -> list[Any]:
    """A message's (or ``system``'s) content as a list of blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


@dataclass
class _Merged:
    """Consecutive messages of one role, read as the API reads them: one message."""

    role: str
    blocks: list[Any]
    where: list[tuple[int, int]]  # (message index, block index) of each block, as sent


def _merged(messages: list[dict[str, Any]]) -> list[_Merged]:
    out: list[_Merged] = []
    for i, message in enumerate(messages):
        blocks = _blocks(message.get("content"))
        where = [(i, k) for k in range(len(blocks))]
        if out and out[-1].role == message.get("role"):
            out[-1].blocks += blocks
            out[-1].where += where
        else:
            out.append(_Merged(str(message.get("role")), blocks, where))
    return out


def _prefix_hashes(body: dict[str, Any], merged: list[_Merged], m: int, k: int) -> dict[str, str]:
    """The four hashes a thinking block at ``merged[m].blocks[k]`` is bound to."""
    return {
        "system": digest(_blocks(body.get("system"))),
        "tools": digest(body.get("tools") or []),
        "messages": digest([[x.role, x.blocks] for x in merged[:m]]),
        "blocks": digest(merged[m].blocks[:k]),
    }


class Signer:
    """Makes and checks the opaque signatures (HMAC-SHA256 under a per-endpoint key)."""

    def __init__(self) -> None:
        self.key = secrets.token_bytes(32)

    def mac(self, payload: Any) -> str:
        return hmac.new(self.key, canonical(payload).encode(), hashlib.sha256).hexdigest()

    def seal(self, payload: dict[str, Any]) -> str:
        sealed = {**payload, "mac": self.mac(payload)}
        return base64.b64encode(canonical(sealed).encode()).decode()

    def open(self, token: Any) -> dict[str, Any] | None:
        """The payload of a token this signer made and nobody altered; else ``None``."""
        if not isinstance(token, str) or not token:
            return None
        try:
            sealed = json.loads(base64.b64decode(token.encode(), validate=True))
        except (binascii.Error, ValueError):
            return None
        if not isinstance(sealed, dict) or "mac" not in sealed:
            return None
        mac = sealed.pop("mac")
        if not isinstance(mac, str) or not hmac.compare_digest(mac, self.mac(sealed)):
            return None
        return sealed


# ---------------------------------------------------------------------------------------------
# the server


class FrontierEndpoint:
    """The scripted endpoint of one profile (see the module docstring).

    Attributes:
        requests: Every request body, in arrival order (append-only), refused ones included.
        raw_requests: The bytes of each request body.
        rejected: ``(status, body)`` of every request the endpoint refused, in order.
        failures: The status of every scripted failure answered (``Step.status``), in order.
        answered: The body of every request that got a scripted answer, in order.
        issued: Each assistant turn as the endpoint sent it (the Anthropic ``content`` list, or
            the Chat Completions ``message``), in order.
        cache_reports: The cache figures each answer reported: ``(read, write)`` for Messages,
            ``(cached, None)`` for Chat Completions.
        reasoning_returned: ``vllm``: per answered request, for each earlier tool-call turn in
            it, whether its ``reasoning`` came back exactly as sent.
    """

    def __init__(self, profile: str, *, model: str | None = None) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; one of {PROFILES}")
        self.profile = profile
        self.model = model or DEFAULT_MODELS[profile]
        self.style = "anthropic" if profile in ANTHROPIC_PROFILES else "openai"
        self.steps: list[Step] = []
        self.requests: list[dict[str, Any]] = []
        self.raw_requests: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.rejected: list[tuple[int, Any]] = []
        self.failures: list[int] = []
        self.answered: list[dict[str, Any]] = []
        self.issued: list[Any] = []
        self.cache_reports: list[tuple[int, int | None]] = []
        self.reasoning_returned: list[list[bool]] = []
        self.signer = Signer()
        self.paused: list[Any] | None = None  # the content of a pause_turn awaiting its replay
        self._cache: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                body = json.loads(raw or b"{}")
                expected = "/messages" if endpoint.style == "anthropic" else "/chat/completions"
                with endpoint._lock:  # one request at a time: the script is a sequence
                    endpoint.requests.append(body)
                    endpoint.raw_requests.append(raw)
                    endpoint.headers.append(dict(self.headers))
                    if not self.path.endswith(expected):
                        self._send(404, {"error": {"message": f"no route {self.path}"}})
                        return
                    try:
                        answer = endpoint.answer(body)
                    except Failing as failure:
                        endpoint.failures.append(failure.status)
                        self._send(failure.status, failure.body)
                        return
                    except Rejected as rejection:
                        endpoint.rejected.append((rejection.status, rejection.body))
                        self._send(rejection.status, rejection.body)
                        return
                    endpoint.answered.append(body)
                if body.get("stream"):
                    self._stream(answer)
                else:
                    self._send(200, answer)

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, answer: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                events = (
                    anthropic_events(answer)
                    if endpoint.style == "anthropic"
                    else openai_events(answer, endpoint.profile)
                )
                for event in events:
                    self.wfile.write(event.encode())
                    self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to give ``create_client`` (``…/v1`` for Chat Completions profiles)."""
        host, port = self._server.server_address[:2]
        root = f"http://{host!s}:{port}"
        return root if self.style == "anthropic" else root + "/v1"

    def script(self, *steps: Step) -> FrontierEndpoint:
        self.steps.extend(steps)
        return self

    def start(self) -> FrontierEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FrontierEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):04d}"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """Check ``body`` against the profile's rules (raising :class:`Rejected`) and make the
        next scripted answer."""
        if self.steps and self.steps[0].status is not None:
            status = int(self.steps.pop(0).status or 0)
            raise Failing(status, {"type": "error", "error": {"type": "api_error", "message": "x"}})
        if self.style == "anthropic":
            check_anthropic(self, body)
            return self._anthropic_answer(body)
        check_openai(self, body)
        return self._openai_answer(body)

    def _next_step(self) -> Step:
        return self.steps.pop(0) if self.steps else Step(text="(no more steps)")

    # -- Anthropic Messages -------------------------------------------------------------------

    def _thinking_on(self, body: dict[str, Any]) -> bool:
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") in ("adaptive", "enabled"):
            return True
        return body.get("model") in ADAPTIVE_ONLY  # thinking that cannot be turned off

    def _anthropic_answer(self, body: dict[str, Any]) -> dict[str, Any]:
        step = self._next_step()
        model = str(body.get("model"))
        thinking = self._thinking_on(body)
        merged = _merged(body.get("messages", []))
        if merged and merged[-1].role == "assistant":  # a paused turn continues in place
            m, before = len(merged) - 1, list(merged[-1].blocks)
        else:
            m, before = len(merged), []
            merged.append(_Merged("assistant", [], []))
        content: list[dict[str, Any]] = []

        def add(block: dict[str, Any]) -> None:
            content.append(block)
            merged[m].blocks = before + content

        def think(text: str) -> None:
            merged[m].blocks = before + content
            bound = _prefix_hashes(body, merged, m, len(before) + len(content))
            payload = {"model": model, "text": digest(text), **bound}
            add({"type": "thinking", "thinking": text, "signature": self.signer.seal(payload)})

        def redacted() -> None:
            merged[m].blocks = before + content
            bound = _prefix_hashes(body, merged, m, len(before) + len(content))
            add({"type": "redacted_thinking", "data": self.signer.seal({"model": model, **bound})})

        stop = step.stop
        if thinking:
            think(step.thinking)
        if stop == "pause_turn" and step.text:  # without text: an empty paused turn
            search = self.new_id("srvtoolu_")
            add(
                {
                    "type": "server_tool_use",
                    "id": search,
                    "name": "web_search",
                    "input": {"query": step.text or "weather"},
                }
            )
            add(
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": search,
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://example.org/weather",
                            "title": "Weather",
                            "encrypted_content": self.signer.seal({"page": search}),
                            "page_age": None,
                        }
                    ],
                }
            )
        else:
            if thinking and step.calls:
                redacted()
            if step.text:
                add({"type": "text", "text": step.text})
            for name, args in step.calls:
                if thinking:
                    think(f"Next I call {name}.")
                add({"type": "tool_use", "id": self.new_id("toolu_"), "name": name, "input": args})
        if stop is None:
            stop = "tool_use" if step.calls else "end_turn"
        self.paused = content if stop == "pause_turn" else None
        self.issued.append(content)
        message: dict[str, Any] = {
            "id": self.new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self._anthropic_usage(body, content),
        }
        if stop == "refusal":
            message["stop_details"] = step.stop_details or REFUSAL_DETAILS
        return message

    def _anthropic_usage(self, body: dict[str, Any], content: list[Any]) -> dict[str, int]:
        """Token figures from a prefix-hash store: a breakpoint reads the longest cached prefix
        ending at it or at one of the 20 blocks before it, and writes what it adds."""
        blocks: list[tuple[Any, bool]] = []  # (block, has a breakpoint) in render order
        for tool in body.get("tools") or []:
            blocks.append((tool, "cache_control" in tool))
        for block in _blocks(body.get("system")):
            blocks.append((block, isinstance(block, dict) and "cache_control" in block))
        for message in body.get("messages", []):
            for block in _blocks(message.get("content")):
                blocks.append(
                    ({"role": message.get("role"), **_as_dict(block)}, "cache_control" in block)
                )
        hashes, tokens, running, total = [], [], hashlib.sha256(), 0
        for block, _ in blocks:
            text = canonical(block)
            running.update(text.encode())
            hashes.append(running.copy().hexdigest())
            total += max(1, len(text) // 4)
            tokens.append(total)
        marks = [j for j, (_, marked) in enumerate(blocks) if marked]
        if "cache_control" in body and blocks:
            marks.append(len(blocks) - 1)
        read = 0
        for mark in marks:
            for j in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if hashes[j] in self._cache:
                    read = max(read, tokens[j])
                    break
        last = max(marks, default=None)
        write = max(0, tokens[last] - read) if last is not None else 0
        self._cache.update(hashes[j] for j in marks)
        self.cache_reports.append((read, write))
        return {
            "input_tokens": total - read - write,
            "output_tokens": max(1, len(canonical(content)) // 4),
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }

    # -- Chat Completions -----------------------------------------------------------------------

    def _openai_answer(self, body: dict[str, Any]) -> dict[str, Any]:
        step = self._next_step()
        model = str(body.get("model"))
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
        calls = []
        for n, (name, args) in enumerate(step.calls):
            call: dict[str, Any] = {
                "id": self.new_id("call_"),
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            if self.profile == "gemini-openai" and n == 0:
                call["extra_content"] = {"google": {"thought_signature": self._call_seal(call)}}
            calls.append(call)
        if calls:
            message["tool_calls"] = calls
        if self.profile == "openrouter-reasoning":
            message["reasoning"] = step.thinking
            fmt = "google-gemini-v1" if model.startswith("google/") else "anthropic-claude-v1"
            text_entry: dict[str, Any] = {
                "type": "reasoning.text",
                "text": step.thinking,
                "format": fmt,
                "index": 0,
            }
            if fmt == "anthropic-claude-v1":
                text_entry["signature"] = self.signer.seal({"text": digest(step.thinking)})
            message["reasoning_details"] = [text_entry]
            if fmt == "google-gemini-v1" and calls:
                message["reasoning_details"].append(
                    {
                        "type": "reasoning.encrypted",
                        "data": self._call_seal(calls[0]),
                        "id": calls[0]["id"],
                        "format": fmt,
                        "index": 1,
                    }
                )
        elif self.profile == "deepseek":
            message["reasoning_content"] = step.thinking
        elif self.profile == "vllm":
            message["reasoning"] = step.thinking
        finish = step.stop or ("tool_calls" if calls else "stop")
        self.issued.append(message)
        prompt, cached = self._openai_cache(body)
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if finish == "error":
            choice["native_finish_reason"] = "MALFORMED_FUNCTION_CALL"
        completion = max(1, len(canonical(message)) // 4)
        return {
            "id": self.new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }

    def _call_seal(self, call: dict[str, Any]) -> str:
        return self.signer.seal({"call": digest([call["id"], call["function"]])})

    def _openai_cache(self, body: dict[str, Any]) -> tuple[int, int]:
        """Automatic prefix caching: the longest run of leading messages (after the tools)
        that an earlier request already sent is read from the cache."""
        items: list[Any] = [body.get("tools") or [], *body.get("messages", [])]
        running, total, cached, contiguous = hashlib.sha256(), 0, 0, True
        for item in items:
            text = canonical(item)
            running.update(text.encode())
            total += max(1, len(text) // 4)
            key = running.copy().hexdigest()
            contiguous = contiguous and key in self._cache
            if contiguous:
                cached = total
            self._cache.add(key)
        self.cache_reports.append((cached, None))
        return total, cached


def _as_dict(block: Any) -> dict[str, Any]:
    return block if isinstance(block, dict) else {"value": block}


# ---------------------------------------------------------------------------------------------
# the rules


def check_anthropic(endpoint: FrontierEndpoint, body: dict[str, Any]) -> None:
    """Raise the Messages API's 400 for the first rule ``body`` breaks."""
    model = body.get("model")
    messages: list[dict[str, Any]] = body.get("messages", [])
    thinking = body.get("thinking")
    if (
        model in ADAPTIVE_ONLY
        and isinstance(thinking, dict)
        and thinking.get("type") in ("disabled", "enabled")
    ):
        raise anthropic_error(THINKING_OFF.format(kind=thinking["type"]))
    choice = body.get("tool_choice")
    if (
        model in ADAPTIVE_ONLY
        and isinstance(choice, dict)
        and choice.get("type") in ("any", "tool")
    ):
        raise anthropic_error(FORCED_TOOL)
    _check_cache_markers(body)
    image_problem = anthropic_image_error(body)
    if image_problem is not None:
        raise anthropic_error(image_problem)
    for i, message in enumerate(messages):
        content = message.get("content")
        if content in ("", []) and not (i == len(messages) - 1 and message["role"] == "assistant"):
            raise anthropic_error(EMPTY_MESSAGE.format(i=i))
        for k, block in enumerate(_blocks(content)):
            if block.get("type") == "text" and not block.get("text"):
                raise anthropic_error(EMPTY_TEXT)
            if block.get("type") == "tool_use" and not TOOL_ID.match(str(block.get("id", ""))):
                raise anthropic_error(TOOL_USE_ID.format(i=i, k=k))
            if block.get("type") == "tool_result" and not TOOL_ID.match(
                str(block.get("tool_use_id", ""))
            ):
                raise anthropic_error(TOOL_RESULT_ID.format(i=i, k=k))
            if block.get("type") == "server_tool_use" and not SERVER_TOOL_ID.match(
                str(block.get("id", ""))
            ):
                raise anthropic_error(SERVER_TOOL_USE_ID.format(i=i, k=k))
    _check_pairing(messages)
    if endpoint.paused is not None:
        last = messages[-1] if messages else {}
        if last.get("role") != "assistant" or canonical(
            _blocks(last.get("content"))[-len(endpoint.paused) :]
        ) != canonical(endpoint.paused):
            raise anthropic_error(PAUSE_NOT_RESUMED.format(i=len(messages) - 1))
    if endpoint._thinking_on(body):
        _check_thinking(endpoint, body)


def _check_cache_markers(body: dict[str, Any]) -> None:
    marks: list[tuple[str, str]] = []  # (path, ttl) in processing order
    for t, tool in enumerate(body.get("tools") or []):
        if "cache_control" in tool:
            marks.append((f"tools.{t}", tool["cache_control"].get("ttl", "5m")))
    system = body.get("system")
    if isinstance(system, list):
        for s, block in enumerate(system):
            if "cache_control" in block:
                marks.append((f"system.{s}", block["cache_control"].get("ttl", "5m")))
    for i, message in enumerate(body.get("messages", [])):
        _nested_marks(message.get("content"), f"messages.{i}.content", marks)
    found = len(marks) + (1 if "cache_control" in body else 0)
    if found > MAX_BREAKPOINTS:
        raise anthropic_error(TOO_MANY_BREAKPOINTS.format(n=found))
    seen_short = False
    for path, ttl in marks:
        if ttl == "1h" and seen_short:
            raise anthropic_error(TTL_ORDER.format(path=path))
        seen_short = seen_short or ttl == "5m"


def _nested_marks(content: Any, path: str, marks: list[tuple[str, str]]) -> None:
    """The markers on a message's blocks and on the blocks inside them (a ``tool_result``'s
    content): the API counts every block that carries one."""
    if not isinstance(content, list):
        return
    for k, block in enumerate(content):
        if isinstance(block, dict):
            if "cache_control" in block:
                marks.append((f"{path}.{k}", block["cache_control"].get("ttl", "5m")))
            _nested_marks(block.get("content"), f"{path}.{k}.content", marks)


def _check_pairing(messages: list[dict[str, Any]]) -> None:
    for i, message in enumerate(messages):
        blocks = _blocks(message.get("content"))
        if message.get("role") == "assistant":
            ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if not ids:
                continue
            following = messages[i + 1] if i + 1 < len(messages) else None
            if following is None:
                continue  # a final assistant message (prefill) has nothing after it yet
            answered = {
                b.get("tool_use_id")
                for b in _blocks(following.get("content"))
                if following.get("role") == "user" and b.get("type") == "tool_result"
            }
            missing = [x for x in ids if x not in answered]
            if missing:
                raise anthropic_error(TOOL_USE_UNANSWERED.format(i=i, ids=", ".join(missing)))
        elif message.get("role") == "user":
            previous = messages[i - 1] if i > 0 else {}
            asked = {
                b.get("id")
                for b in _blocks(previous.get("content"))
                if previous.get("role") == "assistant" and b.get("type") == "tool_use"
            }
            for k, block in enumerate(blocks):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in asked:
                    raise anthropic_error(
                        TOOL_RESULT_UNEXPECTED.format(i=i, k=k, id=block.get("tool_use_id"))
                    )


def _check_thinking(endpoint: FrontierEndpoint, body: dict[str, Any]) -> None:
    messages: list[dict[str, Any]] = body.get("messages", [])
    model = body.get("model")
    # the final assistant message of a tool loop must start with a thinking block
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            blocks = _blocks(messages[i].get("content"))
            if any(b.get("type") == "tool_use" for b in blocks):
                first = blocks[0].get("type")
                if first not in ("thinking", "redacted_thinking"):
                    raise anthropic_error(EXPECTED_THINKING.format(i=i, found=first))
            break
    # every replayed block: signed by us, unaltered, bound to the same prefix
    merged = _merged(messages)
    for m, turn in enumerate(merged):
        if turn.role != "assistant":
            continue
        for k, block in enumerate(turn.blocks):
            kind = block.get("type")
            if kind not in ("thinking", "redacted_thinking"):
                continue
            i, j = turn.where[k]
            if kind == "thinking":
                if "signature" not in block:
                    raise anthropic_error(SIGNATURE_REQUIRED.format(i=i, k=j))
                payload = endpoint.signer.open(block["signature"])
                if payload is None or payload["text"] != digest(block.get("thinking", "")):
                    raise anthropic_error(INVALID_SIGNATURE.format(i=i, k=j))
            else:
                payload = endpoint.signer.open(block.get("data"))
                if payload is None:
                    raise anthropic_error(INVALID_REDACTED.format(i=i, k=j))
            if payload["model"] != model:
                continue  # a block the model cannot read is dropped silently
            now = _prefix_hashes(body, merged, m, k)
            for part, what in (
                ("system", CHANGED_SYSTEM),
                ("tools", CHANGED_TOOLS),
                ("messages", CHANGED_MESSAGES),
                ("blocks", CHANGED_BLOCKS),
            ):
                if now[part] != payload[part]:
                    raise anthropic_error(BOUND_ELSEWHERE.format(i=i, k=j, what=what))


def check_openai(endpoint: FrontierEndpoint, body: dict[str, Any]) -> None:
    """Raise the Chat Completions endpoint's 400 for the first rule ``body`` breaks."""
    messages: list[dict[str, Any]] = body.get("messages", [])
    for i, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        ids = [c.get("id") for c in message["tool_calls"]]
        answered, n = set(), i + 1
        while n < len(messages) and messages[n].get("role") == "tool":
            answered.add(messages[n].get("tool_call_id"))
            n += 1
        missing = [x for x in ids if x not in answered]
        if missing:
            raise openai_error(
                TOOL_CALLS_UNANSWERED.format(ids=", ".join(map(str, missing))),
                param=f"messages.[{n}].role",
            )
    model = str(body.get("model"))
    returned: list[bool] = []
    position = 0
    for i, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        position += 1
        calls = message["tool_calls"]
        first = calls[0]
        name = first.get("function", {}).get("name")
        if endpoint.profile == "gemini-openai":
            signature = (
                (first.get("extra_content") or {}).get("google", {}).get("thought_signature")
            )
            if not _call_signed(endpoint, first, signature):
                raise gemini_error(GEMINI_MISSING.format(name=name, position=i))
        elif endpoint.profile == "openrouter-reasoning":
            _check_reasoning_details(endpoint, model, i, message)
        elif endpoint.profile == "deepseek":
            if message.get("reasoning_content") is None:
                raise openai_error(DEEPSEEK_MISSING, code="invalid_request_error")
        elif endpoint.profile == "vllm":
            sent = _issued_for(endpoint, first.get("id"))
            returned.append(sent is not None and message.get("reasoning") == sent.get("reasoning"))
    if endpoint.profile == "vllm":
        endpoint.reasoning_returned.append(returned)


def _issued_for(endpoint: FrontierEndpoint, call_id: Any) -> dict[str, Any] | None:
    for message in endpoint.issued:
        if any(c["id"] == call_id for c in message.get("tool_calls") or []):
            result: dict[str, Any] = message
            return result
    return None


def _call_signed(endpoint: FrontierEndpoint, call: dict[str, Any], signature: Any) -> bool:
    payload = endpoint.signer.open(signature)
    wanted = digest([call.get("id"), call.get("function")])
    return payload is not None and payload.get("call") == wanted


def _check_reasoning_details(
    endpoint: FrontierEndpoint, model: str, i: int, message: dict[str, Any]
) -> None:
    details = message.get("reasoning_details")
    first = message["tool_calls"][0]
    name = first.get("function", {}).get("name")
    if model.startswith("google/"):
        encrypted = [
            d
            for d in details or []
            if isinstance(d, dict) and d.get("type") == "reasoning.encrypted"
        ]
        if not any(
            d.get("id") == first.get("id") and _call_signed(endpoint, first, d.get("data"))
            for d in encrypted
        ):
            upstream = json.dumps(
                {
                    "error": {
                        "code": 400,
                        "message": GEMINI_MISSING.format(name=name, position=i),
                        "status": "INVALID_ARGUMENT",
                    }
                }
            )
            raise openrouter_error(OPENROUTER_GEMINI.format(upstream=upstream), "Google AI Studio")
        return
    if not details:  # OpenRouter turns thinking off for the turn, which the model refuses
        raw = json.dumps(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": THINKING_OFF.format(kind="disabled"),
                },
            }
        )
        raise openrouter_error(raw, "Anthropic")
    texts = [d for d in details if isinstance(d, dict) and d.get("type") == "reasoning.text"]
    indexes = [d.get("index") for d in texts]
    valid = len(indexes) == len(set(indexes)) and all(
        (payload := endpoint.signer.open(d.get("signature"))) is not None
        and payload.get("text") == digest(d.get("text", ""))
        for d in texts
    )
    if not valid:
        raw = json.dumps(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": INVALID_SIGNATURE.format(i=i, k=0),
                },
            }
        )
        raise openrouter_error(raw, "Anthropic")


# ---------------------------------------------------------------------------------------------
# streaming


def _sse(data: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def _pieces(text: str, size: int) -> list[str]:
    return [text[n : n + size] for n in range(0, len(text), size)]


def _units(text: str) -> str:
    """``text`` as UTF-16 code units (each character past U+FFFF as its two surrogates): the
    endpoints count streamed reasoning in these, so a piece may end halfway through an emoji,
    and each piece's JSON then holds a lone surrogate (``"\\ud83d"``), as real servers send."""
    return "".join(
        c
        if ord(c) < 0x10000
        else chr(0xD800 + ((ord(c) - 0x10000) >> 10)) + chr(0xDC00 + ((ord(c) - 0x10000) & 0x3FF))
        for c in text
    )


def anthropic_events(message: dict[str, Any]) -> list[str]:
    """The Messages SSE stream of ``message``: usage (cache figures included) in
    ``message_start``, thinking as ``thinking_delta`` pieces and one ``signature_delta`` just
    before ``content_block_stop``, the stop reason (and ``stop_details``) on ``message_delta``."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    start.pop("stop_details", None)
    events = [_sse({"type": "message_start", "message": start}, "message_start")]

    def delta(index: int, payload: dict[str, Any]) -> str:
        return _sse(
            {"type": "content_block_delta", "index": index, "delta": payload},
            "content_block_delta",
        )

    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "text":
            opening = {"type": "text", "text": ""}
        elif kind == "tool_use":
            opening = {**block, "input": {}}
        else:
            opening = block  # redacted_thinking, server tool blocks: whole at the start
        events.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": opening},
                "content_block_start",
            )
        )
        if kind == "thinking":
            for piece in _pieces(_units(block["thinking"]), 9):
                events.append(delta(index, {"type": "thinking_delta", "thinking": piece}))
            events.append(
                delta(index, {"type": "signature_delta", "signature": block["signature"]})
            )
        elif kind == "text":
            for piece in _pieces(block["text"], 5):
                events.append(delta(index, {"type": "text_delta", "text": piece}))
        elif kind == "tool_use":
            for piece in _pieces(json.dumps(block["input"]), 7):
                events.append(delta(index, {"type": "input_json_delta", "partial_json": piece}))
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    ending: dict[str, Any] = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    if "stop_details" in message:
        ending["stop_details"] = message["stop_details"]
    events.append(
        _sse(
            {
                "type": "message_delta",
                "delta": ending,
                "usage": {"output_tokens": usage["output_tokens"]},
            },
            "message_delta",
        )
    )
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


def openai_events(completion: dict[str, Any], profile: str) -> list[str]:
    """The Chat Completions SSE stream of ``completion``: reasoning first (``reasoning`` /
    ``reasoning_content`` pieces; OpenRouter's ``reasoning_details`` as many ``reasoning.text``
    fragments and then a signature-only piece with the same ``index``), the text, the tool calls
    (Gemini's ``extra_content`` on the first delta of its call), the finish reason, the usage."""
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        return _sse(
            {
                "id": completion["id"],
                "object": "chat.completion.chunk",
                "created": 0,
                "model": completion["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **extra}],
            }
        )

    events = [chunk({"role": "assistant", "content": ""})]
    for key in ("reasoning_content", "reasoning"):
        if key in message and profile != "openrouter-reasoning":
            events += [chunk({key: piece}) for piece in _pieces(_units(message[key]), 6)]
    for detail in message.get("reasoning_details", []):
        if detail["type"] == "reasoning.text":
            pieces = _pieces(_units(detail["text"]), 6) or [""]
            for n, piece in enumerate(pieces):
                fragment = {"type": "reasoning.text", "text": piece}
                fragment.update(format=detail["format"], index=detail["index"])
                delta: dict[str, Any] = {"reasoning_details": [fragment]}
                delta["reasoning"] = piece
                if n == 0:
                    delta["role"] = "assistant"
                events.append(chunk(delta))
            if "signature" in detail:
                signature = {
                    "type": "reasoning.text",
                    "signature": detail["signature"],
                    "format": detail["format"],
                    "index": detail["index"],
                }
                events.append(chunk({"reasoning_details": [signature]}))
        else:
            events.append(chunk({"reasoning_details": [detail]}))
    if message.get("content"):
        events += [chunk({"content": piece}) for piece in _pieces(message["content"], 5)]
    for index, call in enumerate(message.get("tool_calls") or []):
        opening: dict[str, Any] = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        if "extra_content" in call:
            opening["extra_content"] = call["extra_content"]
        events.append(chunk({"tool_calls": [opening]}))
        for piece in _pieces(call["function"]["arguments"], 7):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    extra = {k: v for k, v in choice.items() if k == "native_finish_reason"}
    events.append(chunk({}, choice["finish_reason"], **extra))
    events.append(
        _sse(
            {
                "id": completion["id"],
                "object": "chat.completion.chunk",
                "created": 0,
                "model": completion["model"],
                "choices": [],
                "usage": completion["usage"],
            }
        )
    )
    events.append("data: [DONE]\n\n")
    return events


# ---------------------------------------------------------------------------------------------
# what the tests share


def replayed(issued: Any, style: str) -> Any:
    """An issued assistant turn as the client keeps it in ``RunResult.messages``: Anthropic
    content blocks as they are; a Chat Completions message without its null fields (a null
    ``content`` becomes ``""``: servers refuse null on input)."""
    if style == "anthropic":
        return {"role": "assistant", "content": issued}
    message = {k: v for k, v in issued.items() if v is not None}
    message.setdefault("content", "")
    return message


def unmarked(value: Any) -> Any:
    """``value`` without its ``cache_control`` markers."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def _skip(text: str, i: int) -> int:
    """The index of the next token after ``i`` (past whitespace, commas and colons)."""
    while text[i] in " \t\r\n,:":
        i += 1
    return i


def json_members(text: str) -> dict[str, str]:
    """The members of the JSON object ``text``: each value's exact text, as it was sent."""
    decoder, members = json.JSONDecoder(), {}
    i = _skip(text, text.index("{") + 1)
    while text[i] != "}":
        key, i = decoder.raw_decode(text, i)
        start = _skip(text, i)
        _, i = decoder.raw_decode(text, start)
        members[key] = text[start:i]
        i = _skip(text, i)
    return members


def json_elements(text: str) -> list[str]:
    """The elements of the JSON array ``text``: each one's exact text, as it was sent."""
    decoder, elements = json.JSONDecoder(), []
    i = _skip(text, text.index("[") + 1)
    while text[i] != "]":
        start = i
        _, i = decoder.raw_decode(text, start)
        elements.append(text[start:i])
        i = _skip(text, i)
    return elements


def fixed_parts(raw: bytes, style: str) -> tuple[str, str]:
    """A request's system prompt and tools, the exact bytes sent (from the raw body): the
    parts an append-only client never changes within a run."""
    members = json_members(raw.decode())
    if style == "anthropic":
        system = members.get("system", "")
    else:
        messages = json_elements(members["messages"])
        system = ",".join(m for m in messages if json.loads(m).get("role") == "system")
    return system, members.get("tools", "")


def start(endpoints: list[FrontierEndpoint], profile: str, **options: Any) -> FrontierEndpoint:
    """Start an endpoint playing ``profile``, kept in ``endpoints`` (the fixture of that name
    stops them all when the test ends)."""
    endpoint = FrontierEndpoint(profile, **options).start()
    endpoints.append(endpoint)
    return endpoint


@as_tool(hints=ToolHints(read_only=True))
def lookup(city: str) -> str:
    """Look up the weather in a city."""
    return f"{city}: sunny"


@as_tool(hints=ToolHints(read_only=True))
def humidity(city: str) -> str:
    """Look up the humidity in a city."""
    return f"{city}: 40%"


def client_for(server: FrontierEndpoint, **options: Any) -> Any:
    """A client of the endpoint's style; Anthropic thinking on, as a caller turns it on."""
    if server.style == "anthropic":
        options.setdefault("request_params", {"thinking": {"type": "adaptive"}})
    options.setdefault("code_mode", "native")
    options.setdefault("system_prompt", "You answer weather questions briefly.")
    return create_client(
        base_url=server.url,
        style=server.style,
        model=server.model,
        api_key="none",
        retries=0,
        **options,
    )


async def run(client: Any, prompt: str, *, stream: bool, **kwargs: Any) -> RunResult:
    if not stream:
        result: RunResult = await client.run(prompt, **kwargs)
        return result
    done: RunResult | None = None
    async for event in client.stream(prompt, **kwargs):
        if event.type == "done":
            done = event.result
    assert done is not None
    return done


def assistant_turns(result: RunResult) -> list[dict[str, Any]]:
    return [m for m in result.messages if m.get("role") == "assistant"]


def assert_carried_on(server: FrontierEndpoint, result: RunResult, turns: int) -> None:
    """Every request was accepted, every assistant turn is kept as the endpoint sent it, and
    the system prompt and tools were the same bytes on every request of the run."""
    assert server.rejected == []
    assert len(server.answered) == turns
    assert assistant_turns(result) == [replayed(t, server.style) for t in server.issued]
    first = fixed_parts(server.raw_requests[0], server.style)
    assert first[0] and first[1]  # both were sent
    assert all(fixed_parts(raw, server.style) == first for raw in server.raw_requests)
    if server.profile == "vllm":  # the one endpoint that does not refuse: it records
        assert server.reasoning_returned == [[True] * n for n in range(turns)]
