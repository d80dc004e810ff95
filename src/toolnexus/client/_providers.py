"""Model names with a provider prefix: ``"openai:gpt-4.1-mini"``, ``"anthropic:…"``,
``"openrouter:…"``, and ``"test"`` (a [`TestModel`][toolnexus.testing.TestModel]).

The prefix picks the wire style, the default endpoint and the environment variable holding the
API key, so ``create_client(model="anthropic:claude-sonnet-4-5")`` needs nothing else. An
explicit ``base_url=``, ``style=`` or ``api_key=`` still wins. A name whose part before the
first ``:`` is not a provider here (``qwen3:8b`` on Ollama) is the endpoint's own model name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROVIDERS", "TEST_MODEL_NAME", "Provider", "provider_of"]

TEST_MODEL_NAME = "test"
"""``create_client(model="test")`` with no ``base_url``: a ``TestModel()``."""


@dataclass(frozen=True)
class Provider:
    """What a provider prefix stands for."""

    style: str
    base_url: str
    key_variable: str


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic": Provider("anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
    "openrouter": Provider("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
}


def provider_of(model: str) -> tuple[Provider, str] | None:
    """The provider ``model`` names and the model name it knows, or ``None`` (no prefix).

    Example::

        >>> provider_of("openrouter:openai/gpt-4o-mini")[1]
        'openai/gpt-4o-mini'
    """
    prefix, sep, name = model.partition(":")
    provider = PROVIDERS.get(prefix.strip().lower()) if sep else None
    if provider is None or not name.strip():
        return None
    return provider, name.strip()
