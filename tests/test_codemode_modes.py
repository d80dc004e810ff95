"""Modes, collapse and transport tagging."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from toolnexus.codemode import (
    RUN_CODE_NAME,
    collapse_message,
    collapsed,
    default_mode,
    is_transport_call,
    new_parent_token,
    parse_mode,
    resolve_mode,
    tag_transport,
)
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall


@pytest.mark.parametrize("mode", ["native", "code", "both"])
def test_parse_mode_accepts_exactly_the_three_modes(mode: str) -> None:
    assert parse_mode(mode) == mode


@pytest.mark.parametrize("bad", ["Code", " code", "", None, 1, "all"])
def test_parse_mode_refuses_anything_else_listing_the_valid_ones(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="'native', 'code', 'both'"):
        parse_mode(bad)


def test_default_mode_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLNEXUS_CODE_MODE", raising=False)
    assert default_mode() == "both"
    monkeypatch.setenv("TOOLNEXUS_CODE_MODE", "code")
    assert default_mode() == "code"
    monkeypatch.setenv("TOOLNEXUS_CODE_MODE", "turbo")
    with pytest.raises(ConfigurationError, match="TOOLNEXUS_CODE_MODE='turbo'"):
        default_mode()


def test_resolve_mode_prefers_the_objects_own_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLNEXUS_CODE_MODE", raising=False)

    @dataclass
    class Agent:
        code_mode: str | None = None

    assert resolve_mode(Agent("native")) == "native"
    assert resolve_mode({"code_mode": "code"}) == "code"
    assert resolve_mode(Agent()) == "both"
    assert resolve_mode(None) == "both"
    with pytest.raises(ConfigurationError):
        resolve_mode({"code_mode": "nope"})


def test_under_code_mode_direct_calls_collapse_except_run_code_and_transport() -> None:
    call = {"name": "read_file", "arguments": {}}
    assert collapsed("code", "read_file", call)
    assert not collapsed("code", RUN_CODE_NAME, call)
    assert not collapsed("both", "read_file", call)
    assert not collapsed("native", "read_file", call)
    tagged = tag_transport(call, new_parent_token())
    assert not collapsed("code", "read_file", tagged)
    assert "parent_token" not in call  # tagging copies


def test_tag_transport_works_on_tool_calls_too() -> None:
    call = ToolCall("c1", "read_file", {})
    assert not is_transport_call(call)
    tagged = tag_transport(call, new_parent_token())
    assert isinstance(tagged, ToolCall) and is_transport_call(tagged)
    assert not collapsed("code", "read_file", tagged)
    assert not is_transport_call({"parent_token": ""})
    assert not is_transport_call("read_file")
    with pytest.raises(ConfigurationError, match="new_parent_token"):
        tag_transport(call, "")


def test_parent_tokens_are_unique() -> None:
    assert len({new_parent_token() for _ in range(100)}) == 100


def test_collapse_message_names_the_way_back_in() -> None:
    message = collapse_message('odd "name"')
    assert "run_code" in message
    assert 'await tools["odd \\"name\\""]' in message
