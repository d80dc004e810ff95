"""``create_client``: a model endpoint plus the tool loop, configured once and checked up front."""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import dataclasses
import functools
import os
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, cast

from toolnexus._checks import positive_int
from toolnexus.client._endpoint import ClientStyle, Endpoint, Retries, Timeouts
from toolnexus.client._history import carried
from toolnexus.client._loop import LoopConfig, Meter, agent_loop, resume_loop
from toolnexus.client._models import FunctionModel, InProcessStyle
from toolnexus.client._output import Output, requested_output
from toolnexus.client._result import DoneEvent, RunResult, StreamEvent
from toolnexus.client._resume import transcript
from toolnexus.client._turn import RelayHandler
from toolnexus.client.styles import Style
from toolnexus.client.styles._base import CHOICE_WORDS, WireOptions
from toolnexus.client.styles._responses import ResponsesStyle
from toolnexus.codemode import (
    DEFAULT_SDK_THRESHOLD,
    ApprovalHandler,
    CodeMode,
    Execution,
    PermissionPolicy,
)
from toolnexus.codemode.runtimes import CodeRuntime
from toolnexus.errors import ConfigurationError, MissingExtraError
from toolnexus.session import Session
from toolnexus.tools import Guards, Tool, ToolHooks, Toolkit

__all__ = ["Client", "ClientStyle", "create_client"]

DEFAULT_MAX_TURNS = 10
# create_client's names for fields of an option object's parts: (the Endpoint field, its field)
_NESTED_NAMES = {
    "timeout": ("timeouts", "request"),
    "turn_timeout": ("timeouts", "turn"),
    "retry_timeouts": ("retries", "timeouts"),
}


def _api_key(explicit: str | None, style: str, variable: str | None = None) -> str:
    """The key: ``explicit``, else the provider's ``variable`` (a prefixed model name), else
    the first of the style's variables that is set."""
    if explicit:
        return explicit
    tried = (
        [variable]
        if variable is not None
        else [
            "OPENROUTER_API_KEY",
            "ANTHROPIC_API_KEY" if style == "anthropic" else "OPENAI_API_KEY",
        ]
    )
    for variable in tried:
        value = os.environ.get(variable)
        if value:
            return value
    raise ConfigurationError(
        f"no API key for the {style} style: pass api_key=, or set one of {', '.join(tried)} "
        "(a local server that needs no key accepts any value, e.g. api_key='none')."
    )


def _build_style(
    style: str,
    *,
    base_url: str,
    model: str,
    api_key: str,
    system_prompt: str | None,
    wire: WireOptions,
    request_params: dict[str, Any],
    prompt_cache: bool,
) -> Style:
    """The style object, making official SDK clients pointed at ``base_url``."""
    sdk_name = "anthropic" if style == "anthropic" else "openai"
    try:
        if style == "openai":
            from openai import AsyncOpenAI as sdk_class
            from openai import DefaultAsyncHttpxClient as http_class

            from toolnexus.client.styles._openai import OpenAIStyle as style_class
        elif style == "responses":
            from openai import AsyncOpenAI as sdk_class
            from openai import DefaultAsyncHttpxClient as http_class

            from toolnexus.client.styles._responses import (  # type: ignore[assignment]
                ResponsesStyle as style_class,
            )
        else:
            from anthropic import AsyncAnthropic as sdk_class  # type: ignore[assignment]
            from anthropic import DefaultAsyncHttpxClient as http_class

            from toolnexus.client.styles._anthropic import (  # type: ignore[assignment]
                AnthropicStyle as style_class,
            )
    except ImportError as exc:
        raise MissingExtraError(
            f"the {style} style (the official {sdk_name} SDK)", sdk_name
        ) from exc

    def connect(tls: ssl.SSLContext) -> Any:
        # max_retries=0: toolnexus decides what is worth a retry (client/styles/_errors.py)
        return sdk_class(
            base_url=base_url,
            api_key=api_key,
            max_retries=0,
            timeout=wire.timeout,
            http_client=http_class(verify=tls),
        )

    return style_class(
        connect, model, system_prompt, request_params, base_url, wire, prompt_cache=prompt_cache
    )


@dataclass
class Client:
    """A configured model endpoint and tool loop.

    Example::

        client = Client(
            Endpoint.parse("openai:gpt-4.1-mini"),
            execution=Execution(max_tool_concurrency=4),
            guards=Guards(permissions=PermissionPolicy(deny=["rm"])),
            system_prompt="Be brief.",
        )

    [`create_client`][toolnexus.client.create_client] builds the same from keywords. The
    attributes ``style_name``, ``model`` and ``base_url`` are the endpoint's as resolved.

    Raises:
        ConfigurationError: a bad option (named), or a missing key, before any request.
    """

    endpoint: Endpoint
    _: KW_ONLY
    execution: Execution = field(default_factory=Execution, repr=False)
    guards: Guards = field(default_factory=Guards, repr=False)
    system_prompt: str | None = field(default=None, repr=False)
    max_turns: int = field(default=DEFAULT_MAX_TURNS, repr=False)
    tools: Sequence[Tool] | None = field(default=None, repr=False)
    deps: Any = field(default=None, repr=False)
    relay_handler: RelayHandler | None = field(default=None, repr=False)
    tool_choice: str | None = field(default=None, repr=False)
    tool_choice_every_turn: bool = field(default=False, repr=False)
    fallback: Sequence[Endpoint | Client] = field(default=(), repr=False)
    style_name: ClientStyle = field(init=False)
    model: str = field(init=False)
    base_url: str = field(init=False)
    _config: LoopConfig = field(init=False, repr=False)
    _tools: list[Tool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, value, kind in (
            ("endpoint", self.endpoint, Endpoint),
            ("execution", self.execution, Execution),
            ("guards", self.guards, Guards),
        ):
            if not isinstance(value, kind):
                raise ConfigurationError(
                    f"Client {name} must be a toolnexus {kind.__name__}, got {value!r}; for "
                    "example Client(Endpoint.parse('openai:gpt-4.1-mini'), execution=Execution(), "
                    "guards=Guards())."
                )
        style = self.endpoint.resolved_style
        choice = self.tool_choice
        if choice is not None and not (isinstance(choice, str) and choice):
            raise ConfigurationError(
                f"create_client tool_choice must be {', '.join(CHOICE_WORDS)} or a tool's name, "
                f"got {choice!r}."
            )
        for other in self.fallback:
            other_style = (
                other.style_name
                if isinstance(other, Client)
                else other.resolved_style
                if isinstance(other, Endpoint)
                else None
            )
            if other_style != style:
                raise ConfigurationError(
                    f"create_client fallback takes endpoints (or clients) of the same style "
                    f"({style!r}), got {other!r}: the transcript is in that style's shape."
                )
        _check_forced_choice(style, choice, self.endpoint.request_params or {})
        built = _style_for(self.endpoint, self.system_prompt)
        self.style_name = style
        self.model = built.model
        self.base_url = built.base_url
        self._tools = list(self.tools or [])
        self._config = LoopConfig(
            style=built,
            mode=self.execution.mode,
            max_turns=positive_int("create_client max_turns", self.max_turns),
            max_concurrency=self.execution.cap,
            runtime=self.execution.runtime,
            guards=self.guards,
            deps=self.deps,
            tiers=self.execution.tool_tiers,
            relay_handler=self.relay_handler,
            tool_choice=choice,
            tool_choice_every_turn=bool(self.tool_choice_every_turn),
            fallback=tuple(
                other._config.style
                if isinstance(other, Client)
                else _style_for(other, self.system_prompt)
                for other in self.fallback
            ),
            hosted_call_timeout=self.execution.hosted_call_timeout,
            calls_timeout=self.execution.calls_timeout,
            sdk_threshold=self.execution.sdk_threshold,
            always_loaded=tuple(self.execution.always_loaded),
        )

    def derive(self, **changes: Any) -> Client:
        """A client for the same endpoint with some
        [`create_client`][toolnexus.client.create_client] options changed
        (another ``model``, ``system_prompt``, ``max_turns``, ``code_mode``, ...), everything
        else kept: ``dataclasses.replace`` on the client and its option objects. The names
        are create_client's, the option objects' fields, or ``endpoint``/``execution``/``guards``.

        Raises:
            ConfigurationError: an unknown option (named), or as
                [`create_client`][toolnexus.client.create_client] does.
        """
        derived = dataclasses.replace(self, **_replacements(self, changes))
        derived._config.request_gate = self._config.request_gate
        return derived

    def gated(self, gate: asyncio.Semaphore) -> Client:
        """This client with every model request waiting for ``gate`` (a shared cap)."""
        derived = copy.copy(self)
        derived._config = dataclasses.replace(self._config, request_gate=gate)
        return derived

    async def aclose(self) -> None:
        """Close this client's connections on the running event loop (a later run reopens).

        Runs reuse one SDK client per event loop, so connections stay warm between runs;
        close them when you are done, or use ``async with create_client(...) as client``.
        """
        await self._config.style.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def metered(self, meter: Meter) -> Client:
        """This client with its runs' spending checked by ``meter`` as it happens."""
        derived = copy.copy(self)
        derived._config = dataclasses.replace(self._config, meter=meter)
        return derived

    async def run(
        self,
        prompt: str,
        *,
        tools: Sequence[Tool] | Toolkit | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        session: Session | None = None,
        deps: Any = None,
        output_type: Any = None,
        output_retries: int = 1,
    ) -> RunResult:
        """Run the tool loop on ``prompt`` until the model answers or ``max_turns`` is reached.

        ``history`` (optional) is an earlier conversation in the provider's shape, as
        ``RunResult.messages`` holds it: sent as it is to a client of the same style (every
        provider field kept), rebuilt from its text and tool calls for another style (see
        the providers guide). ``session`` (optional) receives the run's events as they
        happen, so a caller that cancels the run still holds a transcript in which every
        tool call has a result.
        ``deps`` reaches every tool that takes a ``ctx`` as ``ctx.deps`` (a
        [`RunContext`][toolnexus.codemode.RunContext]), for this run only; without it, the client's
        ``deps``. ``output_type`` (a pydantic model, dataclass, TypedDict or scalar type) asks for a
        structured answer: the model hands it over through a ``final_result`` tool, it is
        validated (field errors go back to the model, at most ``output_retries`` times), and
        ``RunResult.output`` holds the typed value.

        Raises:
            ProviderError: the endpoint refused or failed a request (the run so far is in its
                ``partial``).
            ConfigurationError: a bad argument, before any request.
        """
        result: RunResult | None = None
        output = requested_output(output_type, output_retries)
        async for event in self._events(
            prompt, tools, history, session, deps, output, stream=False, watched=False
        ):
            if isinstance(event, DoneEvent):
                result = event.result
        assert result is not None
        return result

    def run_sync(
        self,
        prompt: str,
        *,
        tools: Sequence[Tool] | Toolkit | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        session: Session | None = None,
        deps: Any = None,
        output_type: Any = None,
        output_retries: int = 1,
    ) -> RunResult:
        """`run` for code that is not async (scripts, notebooks); blocks until done.

        Inside a running event loop (a Jupyter cell, an async function) the run goes to a
        thread with a loop of its own, so it works there too; in async code prefer
        ``await client.run(...)``, which does not block the loop.
        """
        run = functools.partial(
            self.run,
            prompt,
            tools=tools,
            history=history,
            session=session,
            deps=deps,
            output_type=output_type,
            output_retries=output_retries,
        )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(run())
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolnexus-run") as pool:
            return pool.submit(asyncio.run, run()).result()

    async def resume(self, result: RunResult, answers: Mapping[str, Any]) -> RunResult:
        """Continue a ``"pending"`` run with the host's answers to its relay calls.

        Args:
            result: The pending [`RunResult`][toolnexus.client.RunResult].
            answers: One answer per pending call, by call id (a value, a ``ToolResult``, or an
                ``Outcome``).

        Raises:
            ConfigurationError: the run is not pending, or an answer is missing.
            ProviderError: as for `run`.
        """
        run = result._run
        if result.status != "pending" or run is None:
            raise ConfigurationError("only a run with status 'pending' can be resumed.")
        final: RunResult | None = None
        async for event in resume_loop(run, answers, stream=False, watched=False):
            if isinstance(event, DoneEvent):
                final = event.result
        assert final is not None
        return final

    async def stream(
        self,
        prompt: str,
        *,
        tools: Sequence[Tool] | Toolkit | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        session: Session | None = None,
        deps: Any = None,
        output_type: Any = None,
        output_retries: int = 1,
    ) -> AsyncIterator[StreamEvent]:
        """Run the loop with streaming: text deltas, tool calls (announced as soon as their
        arguments are complete, when they also start), tool results in emitted order, usage,
        and finally [`DoneEvent`][toolnexus.client.DoneEvent] carrying the
        [`RunResult`][toolnexus.client.RunResult]."""
        output = requested_output(output_type, output_retries)
        async for event in self._events(prompt, tools, history, session, deps, output, stream=True):
            yield event

    async def _events(
        self,
        prompt: str,
        tools: Sequence[Tool] | Toolkit | None,
        history: Sequence[Mapping[str, Any]] | None,
        session: Session | None,
        deps: Any,
        output: Output | None,
        *,
        stream: bool,
        watched: bool = True,
    ) -> AsyncIterator[StreamEvent]:
        if not isinstance(prompt, str) or not prompt:
            raise ConfigurationError("prompt must be a non-empty string.")
        chosen = list(tools) if tools is not None else list(self._tools)
        for t in chosen:
            if not isinstance(t, Tool):
                raise ConfigurationError(
                    f"tools must be toolnexus Tools, got {t!r}; decorate functions with @tool."
                )
        past = carried(self._config.style, [dict(m) for m in history or []])
        if session is not None and not isinstance(session, Session):
            raise ConfigurationError(f"session must be a toolnexus Session, got {session!r}.")
        log = session if session is not None else Session()
        if history is None and session is not None and session.messages():
            # a session with a conversation in it (saved, loaded, interrupted): carry it on
            past = self._config.style.history(transcript(session))
        config = self._config if deps is None else dataclasses.replace(self._config, deps=deps)
        async for event in agent_loop(
            config, prompt, chosen, past, log, stream=stream, output=output, watched=watched
        ):
            yield event


def _check_forced_choice(style: str, choice: str | None, request_params: Mapping[str, Any]) -> None:
    """Refuse forcing a tool where the request turns Anthropic thinking on: the API refuses
    it (thinking models answer 400 to ``any`` and named choices), so say so before the run.

    Raises:
        ConfigurationError: naming the conflict and what to do instead.
    """
    if style != "anthropic" or choice in (None, "auto", "none"):
        return
    thinking = request_params.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") not in (None, "disabled"):
        raise ConfigurationError(
            f"create_client tool_choice={choice!r} forces a tool, which Anthropic refuses while "
            "thinking is on (request_params['thinking']); use tool_choice='auto' and say in the "
            "prompt which tool to call, or output_type= for a structured answer (it asks for "
            "its tool without forcing it)."
        )


def _cap(max_tool_concurrency: int | None, max_parallel: int | None) -> int | None:
    """The client's cap from its two names (the documented one and its synonym)."""
    if (
        max_tool_concurrency is not None
        and max_parallel is not None
        and max_tool_concurrency != max_parallel
    ):
        raise ConfigurationError(
            f"create_client got max_tool_concurrency={max_tool_concurrency!r} and "
            f"max_parallel={max_parallel!r}: they name the same cap; give one of them."
        )
    return max_parallel if max_tool_concurrency is None else max_tool_concurrency


def create_client(
    *,
    base_url: str | None = None,
    model: str | FunctionModel,
    style: str | None = None,
    api_key: str | None = None,
    max_parallel: int | None = None,
    code_mode: str | None = None,
    runtime: CodeRuntime | None = None,
    permissions: PermissionPolicy | None = None,
    approval_handler: ApprovalHandler | None = None,
    hooks: ToolHooks | None = None,
    system_prompt: str | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    retries: int = 2,
    timeout: float | None = 120.0,
    retry_timeouts: bool = False,
    turn_timeout: float | None = 600.0,
    tool_choice: str | None = None,
    tool_choice_every_turn: bool = False,
    fallback: Sequence[Client | Endpoint] = (),
    request_params: Mapping[str, Any] | None = None,
    prompt_cache: bool = True,
    store: bool = False,
    hosted_code: bool = False,
    hosted_call_timeout: float | None = 240.0,
    calls_timeout: float | None = 600.0,
    tools: Sequence[Tool] | None = None,
    deps: Any = None,
    tool_tiers: bool | None = None,
    relay_handler: RelayHandler | None = None,
    max_tool_concurrency: int | None = None,
    sdk_threshold: int = DEFAULT_SDK_THRESHOLD,
    always_loaded: Sequence[str] = (),
) -> Client:
    """A client for one model endpoint, with the tool loop around it.

    Example::

        client = create_client(model="openrouter:openai/gpt-4o-mini", max_tool_concurrency=4)
        result = await client.run("What is in notes.txt?", tools=[read_file])

    Args:
        base_url: The endpoint (``…/v1`` for OpenAI-style servers; the API root for Anthropic).
            Left out for an in-process model, and for a model name with a provider prefix
            (whose endpoint it then overrides).
        model: The model name the endpoint knows; or a provider and the name it knows,
            ``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"`` or
            ``"openrouter:openai/gpt-4o-mini"``: the prefix picks the style, the default
            ``base_url`` and the key's variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
            ``OPENROUTER_API_KEY``); or an in-process model from
            [`toolnexus.testing`][toolnexus.testing] (``FunctionModel``, ``ScriptedModel``,
            ``TestModel``; ``"test"`` is a ``TestModel()``): no HTTP, no key.
        style: ``"openai"`` (Chat Completions: OpenAI, OpenRouter, vLLM, Ollama, llama.cpp),
            ``"anthropic"`` (Messages) or ``"responses"`` (the OpenAI Responses API); default
            the prefix's, else ``"openai"``.
        api_key: Else the prefix's variable; with no prefix, ``OPENROUTER_API_KEY``, then
            ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``.
        max_parallel: A synonym of ``max_tool_concurrency``: the cap on overlapping safe
            calls (else the environment variable ``TOOLNEXUS_MAX_TOOL_CONCURRENCY``, else 10),
            under the name that [`run_batch`][toolnexus.scheduling.run_batch],
            ``toolnexus.temporal.run_batch``, [`run_program`][toolnexus.codemode.run_program]
            and the MCP gateway use.
        code_mode: ``"native"``, ``"code"`` or ``"both"`` (else ``TOOLNEXUS_CODE_MODE``, else
            ``"both"``).
        runtime: The Code Mode sandbox (default: the shared ``MontyRuntime``).
        permissions: The [`PermissionPolicy`][toolnexus.codemode.PermissionPolicy] in force.
        approval_handler: ``(tool_name, args) -> bool``, asked for calls that need approval.
        hooks: [`ToolHooks`][toolnexus.tools.ToolHooks] run around every call, sub-calls included.
        system_prompt: Sent as the system message.
        max_turns: Model round trips before the run stops as ``"incomplete"`` (default 10).
        retries: Retries of a request that failed with 408, 429, 502, 503, 504, 529 or a lost
            connection, with backoff and ``Retry-After`` (default 2). A 500 is not retried: it
            usually means the server cannot handle this request, and fails the same way again.
        timeout: Seconds to wait for the server (connecting, and between pieces of an answer;
            default 120). A timeout is not retried unless ``retry_timeouts``.
        retry_timeouts: Also retry requests that timed out (off: a busy single-slot server
            would queue the retry behind the abandoned generation).
        turn_timeout: Seconds one model turn may take in all, retries and streaming included
            (default 600): a stream that never ends is cut off. ``None``: no limit.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or the name of an offered tool;
            applied to the first turn of each run (later turns are ``"auto"``), checked against
            the tools the run offers. ``"auto"`` is sent whenever tools are offered, since some
            servers read a missing choice as ``"none"``.
        fallback: Other [`Endpoint`][toolnexus.client.Endpoint]s (same style, other models or
            URLs; a client stands for its endpoint, as configured) asked in order when a request
            fails for a reason that is not the request's fault: no answer, a 5xx, a rate limit
            after the retries. An endpoint is sent this client's ``system_prompt``. Recorded in
            ``RunResult.models`` and the session log.
        tool_choice_every_turn: Apply ``tool_choice`` to every turn (a named or required
            choice then forces a call every turn: the run ends only at ``max_turns``).
        request_params: Fields merged into every request body as they are (``temperature``,
            ``max_tokens``, ``thinking``, ``reasoning``, a server's own such as
            ``chat_template_kwargs`` or ``top_k``): they travel as the SDK's ``extra_body``, so
            the installed SDK need not know them. Fields the loop sends itself (``model``,
            ``messages``, ``tools``, ``stream``, ``tool_choice``; ``system`` for Anthropic)
            are refused, naming the option to use instead.
        store: In the ``"responses"`` style, let the server keep each response and send only
            the new items after ``previous_response_id`` (default ``False``: stateless, every
            output item, encrypted reasoning included, replayed on every request).
        hosted_code: Let the provider run the model's programs in its own sandbox, calling the
            tools whose ``callers`` include ``"hosted"`` (Anthropic's code execution tool,
            ``code_execution_20260120``; the Responses API's ``programmatic_tool_calling``). The
            calls a paused program makes run through the same lane as native calls. Not in the
            ``"openai"`` style (Chat Completions has no hosted programs).
        hosted_call_timeout: Seconds the calls of a hosted program's step may take in all
            (default 240, below the about 270 s Anthropic waits for a paused program); a call
            still running then is answered as failed, so the program gets an error instead of
            being killed. ``None``: no limit.
        calls_timeout: Seconds the tool calls of one turn may take in all, from the end of
            the model's response (default 600, as a model turn's ``turn_timeout``): a call
            still running then is cancelled (a sync tool's thread, which cannot be
            interrupted, is written off) and answered as failed, saying so; the calls that
            finished keep their outcomes, and the run goes on. So a tool that never returns
            cannot hold a run forever. A tool's own ``timeout`` bounds each of its calls
            within it; a ``run_code`` program is bounded by its runtime's time budget too.
            ``None``: no limit.
        prompt_cache: In the ``"anthropic"`` style, mark prompt-cache breakpoints on the tool
            list, the system prompt and the latest turn (at most 4 in all, counting a top-level
            ``cache_control`` in ``request_params``); ``False`` sends none. OpenAI-style
            servers cache prefixes on their own.
        tools: Default tools for ``run``/``stream`` calls that pass none.
        deps: What tools taking a ``ctx`` see as ``ctx.deps``.
        tool_tiers: In ``"native"`` mode, show ``tool_search`` + ``call_tool`` instead of the
            tools (``True``), never (``False``), or above 40 tools (``None``, the default).
        relay_handler: ``(call) -> result`` (sync or async) answering relay tools' calls;
            without one a relay call makes the run ``"pending"`` (see
            [`Client.resume`][toolnexus.client.Client.resume]).
        max_tool_concurrency: The cap on overlapping safe calls, as toolnexus documents it in
            every language (``maxToolConcurrency``); ``max_parallel`` is its synonym. Giving
            both with different values is an error.
        sdk_threshold: Bytes of rendered SDK above which ``run_code``'s description holds a
            compact index of the tools instead of their declarations (default 6,144); programs
            look tools up with ``search_tools`` / ``describe_tool``, and every call is still
            type-checked against the full SDK. ``0`` always shows the index.
        always_loaded: Tool names whose full declarations the description keeps beside the
            index.

    Raises:
        ConfigurationError: an unknown style, a missing key, or another bad option, named.
    """
    endpoint = Endpoint(
        model,
        base_url=base_url,
        style=style,
        api_key=api_key,
        timeouts=Timeouts(timeout, turn_timeout),
        retries=Retries(retries, bool(retry_timeouts)),
        request_params=request_params,
        prompt_cache=bool(prompt_cache),
        store=bool(store),
        hosted_code=bool(hosted_code),
    )
    execution = Execution(
        max_tool_concurrency=_cap(max_tool_concurrency, max_parallel),
        code_mode=cast("CodeMode | None", code_mode),
        runtime=runtime,
        tool_tiers=tool_tiers,
        hosted_call_timeout=hosted_call_timeout,
        calls_timeout=calls_timeout,
        sdk_threshold=sdk_threshold,
        always_loaded=always_loaded,
    )
    return Client(
        endpoint,
        execution=execution,
        guards=Guards(permissions, approval_handler, hooks),
        system_prompt=system_prompt,
        max_turns=max_turns,
        tools=tools,
        deps=deps,
        relay_handler=relay_handler,
        tool_choice=tool_choice,
        tool_choice_every_turn=bool(tool_choice_every_turn),
        fallback=tuple(fallback),
    )


def _style_for(endpoint: Endpoint, system_prompt: str | None) -> Style:
    """The style object of ``endpoint`` (an SDK client pointed at it, or the in-process model),
    its request fields checked and its style-specific options set."""
    model = endpoint.resolved_model
    params = dict(endpoint.request_params or {})
    built: Style
    if isinstance(model, FunctionModel):
        built = InProcessStyle(model, system_prompt, endpoint.wire)
        built.request_params = params
    else:
        style = endpoint.resolved_style
        built = _build_style(
            style,
            base_url=str(endpoint.url),
            model=model,
            api_key=_api_key(endpoint.api_key, style, endpoint.key_variable),
            system_prompt=system_prompt,
            wire=endpoint.wire,
            request_params=params,
            prompt_cache=bool(endpoint.prompt_cache),
        )
    built.check_request_params(built.request_params)
    if endpoint.store:
        assert isinstance(built, ResponsesStyle)  # Endpoint refuses store in other styles
        built.store = True
    if endpoint.hosted_code:
        built.hosted_code = True
    return built


def _field_names(kind: type) -> frozenset[str]:
    """The names ``kind``'s constructor takes."""
    return frozenset(f.name for f in dataclasses.fields(kind) if f.init)


def _replacements(client: Client, changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` (create_client's names, or the option objects' fields) as the
    ``dataclasses.replace`` arguments of ``client``.

    Raises:
        ConfigurationError: a name that is no option, or max_parallel and
            max_tool_concurrency given different values.
    """
    changes = dict(changes)
    if "max_parallel" in changes:
        cap = _cap(changes.pop("max_tool_concurrency", None), changes.pop("max_parallel"))
        changes["max_tool_concurrency"] = cap
    retries = changes.get("retries")
    if isinstance(retries, int) and not isinstance(retries, bool):
        changes["retries"] = dataclasses.replace(_retries(client.endpoint), count=retries)
    parts: dict[str, dict[str, Any]] = {"endpoint": {}, "execution": {}, "guards": {}}
    nested: dict[str, dict[str, Any]] = {"timeouts": {}, "retries": {}}
    own: dict[str, Any] = {}
    for name, value in changes.items():
        if name in _NESTED_NAMES:
            holder, inner = _NESTED_NAMES[name]
            nested[holder][inner] = value
        elif name in parts or name in _field_names(Client):
            own[name] = value
        elif (part := _part_of(name)) is not None:
            parts[part][name] = value
        else:
            raise ConfigurationError(
                f"derive got an unknown option {name!r}; it takes create_client's options "
                "(model, system_prompt, max_turns, code_mode, ...) or endpoint=, execution=, "
                "guards=."
            )
    endpoint = own.get("endpoint", client.endpoint)
    for holder, inner_changes in nested.items():
        if inner_changes:
            current = parts["endpoint"].get(holder, getattr(endpoint, holder))
            parts["endpoint"][holder] = dataclasses.replace(current, **inner_changes)
    for part, part_changes in parts.items():
        if part_changes:
            own[part] = dataclasses.replace(own.get(part, getattr(client, part)), **part_changes)
    return own


def _part_of(name: str) -> str | None:
    """Which option object has a field ``name``: ``"endpoint"``, ``"execution"``,
    ``"guards"``, or ``None``."""
    for part, kind in (("endpoint", Endpoint), ("execution", Execution), ("guards", Guards)):
        if name in _field_names(kind):
            return part
    return None


def _retries(endpoint: Endpoint) -> Retries:
    """The endpoint's retries (a `Retries`: an endpoint turns an int it is given into one)."""
    return cast(Retries, endpoint.retries)
