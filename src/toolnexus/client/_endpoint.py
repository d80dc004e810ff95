"""``Endpoint``, ``Timeouts`` and ``Retries``: which model a client talks to and how its
requests go out, as frozen, checked values (as httpx's ``Timeout`` and ``Limits`` are)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from toolnexus._checks import int_at_least, positive_number
from toolnexus.client._models import FunctionModel
from toolnexus.client._providers import TEST_MODEL_NAME, provider_of
from toolnexus.client.styles._base import WireOptions
from toolnexus.errors import ConfigurationError

__all__ = ["ClientStyle", "Endpoint", "Retries", "Timeouts"]

ClientStyle = Literal["openai", "anthropic", "responses"]
_STYLES: tuple[str, ...] = get_args(ClientStyle)


@dataclass(frozen=True)
class Timeouts:
    """How long a client waits for its endpoint.

    Attributes:
        request: Seconds to wait for the server (connecting, and between pieces of an answer;
            default 120); ``create_client``'s ``timeout``.
        turn: Seconds one model turn may take in all, retries and streaming included (default
            600); ``create_client``'s ``turn_timeout``. ``None``: no limit.
    """

    request: float | None = 120.0
    turn: float | None = 600.0

    def __post_init__(self) -> None:
        if self.request is not None and not positive_number(self.request):
            raise ConfigurationError(
                f"timeout must be a positive number (Timeouts.request), got {self.request!r}."
            )
        if self.turn is not None and not positive_number(self.turn):
            raise ConfigurationError(
                "turn_timeout must be a positive number of seconds or None (Timeouts.turn), "
                f"got {self.turn!r}."
            )


@dataclass(frozen=True)
class Retries:
    """Which failed requests a client sends again.

    Attributes:
        count: Retries of a request that failed with 408, 429, 502, 503, 504, 529 or a lost
            connection, with backoff and ``Retry-After`` (default 2); ``create_client``'s
            ``retries``.
        timeouts: Also retry requests that timed out (default off); ``retry_timeouts``.
    """

    count: int = 2
    timeouts: bool = False

    def __post_init__(self) -> None:
        if self.count is not None and not int_at_least(self.count, 0):
            raise ConfigurationError(
                f"retries must be an int >= 0 (Retries.count), got {self.count!r}."
            )
        object.__setattr__(self, "timeouts", bool(self.timeouts))


@dataclass(frozen=True)
class _Resolved:
    """What an endpoint's fields come to once a provider prefix is read."""

    style: ClientStyle
    model: str | FunctionModel
    base_url: str | None
    key_variable: str | None


@dataclass(frozen=True)
class Endpoint:
    """One model endpoint: the model, where it is, how to talk to it.

    Example::

        endpoint = Endpoint.parse("openai:gpt-4.1-mini", timeouts=Timeouts(request=30))
        local = Endpoint("qwen3:8b", base_url="http://127.0.0.1:11434/v1", api_key="none")

    ``model`` may carry a provider prefix (``"openai:…"``, ``"anthropic:…"``,
    ``"openrouter:…"``), which picks the style, the default ``base_url`` and the key's variable
    (an explicit ``base_url`` or ``style`` still wins), or be ``"test"`` (a ``TestModel()``) or
    an in-process model from [`toolnexus.testing`][toolnexus.testing]. The fields keep what was
    given, so ``dataclasses.replace(endpoint, model="anthropic:…")`` reads the new prefix.
    The key is read from the environment when a client is built, not here.

    Attributes:
        model: The model name (see above).
        base_url: The endpoint's URL; left out for a prefix or an in-process model.
        style: ``"openai"``, ``"anthropic"`` or ``"responses"``; default the prefix's, else
            ``"openai"``.
        api_key: Else the prefix's variable; with no prefix, ``OPENROUTER_API_KEY``, then
            ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``.
        timeouts: [`Timeouts`][toolnexus.client.Timeouts].
        retries: [`Retries`][toolnexus.client.Retries] (an int is its ``count``).
        request_params: Fields merged into every request body as they are.
        prompt_cache: Anthropic prompt-cache breakpoints (default on).
        store: In the ``"responses"`` style, let the server keep each response.
        hosted_code: Let the provider run the model's programs (not the ``"openai"`` style).
    """

    model: str | FunctionModel
    base_url: str | None = None
    style: str | None = None
    api_key: str | None = field(default=None, repr=False)  # a secret: kept out of logs
    timeouts: Timeouts = field(default_factory=Timeouts)
    retries: Retries | int = field(default_factory=Retries)
    request_params: Mapping[str, Any] | None = None
    prompt_cache: bool = True
    store: bool = False
    hosted_code: bool = False
    _resolved: _Resolved = field(init=False, repr=False, compare=False)

    @classmethod
    def parse(cls, name: str, **options: Any) -> Endpoint:
        """The endpoint a provider-prefixed model name stands for (``"openai:gpt-4.1-mini"``,
        ``"anthropic:claude-sonnet-4-5"``, ``"openrouter:openai/gpt-4o-mini"``, or ``"test"``);
        ``options`` are the other fields.

        Raises:
            ConfigurationError: ``name`` has no known provider prefix (build
                ``Endpoint(name, base_url=...)`` for a server of your own).
        """
        if not isinstance(name, str) or (
            name.strip() != TEST_MODEL_NAME and provider_of(name) is None
        ):
            raise ConfigurationError(
                f"Endpoint.parse takes 'provider:model' (openai:, anthropic:, openrouter:) or "
                f"'test', got {name!r}; for another server use Endpoint({name!r}, base_url=...)."
            )
        return cls(name, **options)

    def __post_init__(self) -> None:
        if isinstance(self.retries, int) and not isinstance(self.retries, bool):
            object.__setattr__(self, "retries", Retries(self.retries))
        if not isinstance(self.retries, Retries):
            raise ConfigurationError(
                f"retries must be an int >= 0 or a Retries, got {self.retries!r}."
            )
        if not isinstance(self.timeouts, Timeouts):
            raise ConfigurationError(
                f"Endpoint timeouts must be a Timeouts(request=..., turn=...), got "
                f"{self.timeouts!r}."
            )
        if self.request_params is not None and not isinstance(self.request_params, Mapping):
            raise ConfigurationError("request_params must be a mapping of body fields.")
        resolved = _resolve(self.model, self.base_url, self.style)
        object.__setattr__(self, "_resolved", resolved)
        if self.store and resolved.style != "responses":
            raise ConfigurationError(
                f"store=True is an option of the 'responses' style, not {resolved.style!r}."
            )
        if self.hosted_code and (
            resolved.style == "openai" or isinstance(resolved.model, FunctionModel)
        ):
            raise ConfigurationError(
                "hosted_code=True needs a provider that hosts programs: style='anthropic' "
                "(code execution) or style='responses' (programmatic tool calling); Chat "
                "Completions has none."
            )

    @property
    def resolved_style(self) -> ClientStyle:
        """The wire style in force (``style``, else the prefix's, else ``"openai"``)."""
        return self._resolved.style

    @property
    def resolved_model(self) -> str | FunctionModel:
        """The model the endpoint knows (the name without its prefix, or the in-process model)."""
        return self._resolved.model

    @property
    def url(self) -> str | None:
        """The URL in force (``base_url``, else the prefix's; ``None`` in process)."""
        return self._resolved.base_url

    @property
    def key_variable(self) -> str | None:
        """The environment variable the prefix names for the key, if any."""
        return self._resolved.key_variable

    @property
    def wire(self) -> WireOptions:
        """The request settings the styles take."""
        retries = self.retries
        assert isinstance(retries, Retries)
        return WireOptions(
            self.timeouts.request, retries.count, retries.timeouts, self.timeouts.turn
        )


def _resolve(model: object, base_url: str | None, style: str | None) -> _Resolved:
    """The prefix read and the endpoint checked, with ``create_client``'s messages."""
    key_variable: str | None = None
    if isinstance(model, str) and base_url is None and model.strip() == TEST_MODEL_NAME:
        from toolnexus.client._test_model import TestModel

        model = TestModel()
    elif isinstance(model, str) and (named := provider_of(model)) is not None:
        provider, model = named
        style = style if style is not None else provider.style
        base_url = base_url if base_url is not None else provider.base_url
        key_variable = provider.key_variable
    if style is None:
        style = "openai"
    if style not in _STYLES:
        raise ConfigurationError(
            f"style must be one of {', '.join(map(repr, _STYLES))}, got {style!r}; use 'openai' "
            "for Chat Completions servers (OpenRouter, vLLM, Ollama), 'anthropic' for Messages "
            "and 'responses' for the OpenAI Responses API."
        )
    if isinstance(model, FunctionModel):
        if base_url is not None:
            raise ConfigurationError(
                "create_client got a base_url and an in-process model; an in-process model "
                "(FunctionModel, ScriptedModel) needs no endpoint: leave base_url out."
            )
        return _Resolved(style, model, None, None)  # type: ignore[arg-type]
    for option, value in (("base_url", base_url), ("model", model)):
        if not isinstance(value, str) or not value.strip():
            raise ConfigurationError(
                f"create_client {option} must be a non-empty string (or model a "
                "toolnexus.testing model, with no base_url)."
            )
    url = urlsplit(str(base_url))
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ConfigurationError(
            f"create_client base_url must be an http(s) URL, got {base_url!r}; for example "
            "'https://openrouter.ai/api/v1' or 'http://127.0.0.1:11434/v1'."
        )
    return _Resolved(style, model, base_url, key_variable)  # type: ignore[arg-type]
