"""Model names with a provider prefix (``openai:``, ``anthropic:``, ``openrouter:``) and
``"test"``: the prefix picks the style, the default endpoint and the key's variable, and an
explicit ``base_url=`` still wins (checked on the wire against a real local endpoint)."""

from __future__ import annotations

import json

import pytest

from fake_provider import FakeProvider, Turn
from toolnexus import ToolHints, create_client, tool
from toolnexus.errors import ConfigurationError
from toolnexus.testing import TestModel


@tool(hints=ToolHints(read_only=True))
def lookup(city: str) -> str:
    """Weather for a city."""
    return f"{city}: sunny"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "key-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "key-anthropic")
    monkeypatch.setenv("OPENROUTER_API_KEY", "key-openrouter")


@pytest.mark.parametrize(
    ("name", "style", "url", "model"),
    [
        ("openai:gpt-4.1-mini", "openai", "https://api.openai.com/v1", "gpt-4.1-mini"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "https://api.anthropic.com", "claude-sonnet-4-5"),
        ("openrouter:openai/gpt-4o-mini", "openai", "https://openrouter.ai/api/v1", "openai/gpt-4o-mini"),
    ],
)  # fmt: skip
def test_a_prefix_picks_the_style_and_the_default_endpoint(
    name: str, style: str, url: str, model: str
) -> None:
    client = create_client(model=name)
    assert (client.style_name, client.base_url, client.model) == (style, url, model)


@pytest.mark.parametrize(
    ("name", "style", "path", "key"),
    [
        ("openai:gpt-4.1-mini", "openai", "/v1", "key-openai"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "", "key-anthropic"),
        ("openrouter:openai/gpt-4o-mini", "openai", "/v1", "key-openrouter"),
    ],
)  # fmt: skip
async def test_base_url_overrides_and_the_prefix_picks_the_key_variable(
    provider: FakeProvider, name: str, style: str, path: str, key: str
) -> None:
    provider.script(Turn(text="hello"))
    client = create_client(model=name, base_url=provider.url + path, code_mode="native")
    result = await client.run("hi")
    assert result.text == "hello" and client.style_name == style
    assert provider.requests[0]["model"] == name.partition(":")[2]
    sent = {k.lower(): v for k, v in provider.headers[0].items()}
    assert key in (sent.get("authorization", "").removeprefix("Bearer "), sent.get("x-api-key"))


def test_a_missing_key_names_the_providers_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigurationError, match="set one of ANTHROPIC_API_KEY"):
        create_client(model="anthropic:claude-sonnet-4-5")


def test_an_explicit_style_wins_and_unknown_prefixes_are_model_names() -> None:
    client = create_client(model="openai:gpt-4.1", style="responses")
    assert (client.style_name, client.base_url) == ("responses", "https://api.openai.com/v1")
    local = create_client(model="qwen3:8b", base_url="http://127.0.0.1:11434/v1", api_key="x")
    assert local.model == "qwen3:8b"
    with pytest.raises(ConfigurationError, match="base_url must be"):
        create_client(model="qwen3:8b")


async def test_test_is_a_test_model() -> None:
    client = create_client(model="test", code_mode="native")
    result = await client.run("go", tools=[lookup])
    assert json.loads(result.text) == {"lookup": "a: sunny"}
    assert isinstance(create_client(model="test")._config.style.function_model, TestModel)  # type: ignore[attr-defined]
    coded = await create_client(model="test", code_mode="code").run("go", tools=[lookup])
    assert json.loads(coded.tool_calls[0].output)["result"] == {"lookup": "a: sunny"}
