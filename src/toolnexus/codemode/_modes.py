"""Modes: what the model is shown (native tools, ``run_code`` alone, or both) and what collapses.

``"native"`` shows the granted tools; ``"code"`` shows only ``run_code``, whose SDK declares the
granted tools; ``"both"`` shows the granted tools plus ``run_code`` when a runtime can run it.
``run_code`` is injected *after* the permission filter ran, so a policy can never filter the
transport away, and its SDK only ever declares tools the policy granted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
from collections.abc import Mapping
from typing import Any, Literal, get_args

from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall

__all__ = [
    "ENV_CODE_MODE",
    "MODES",
    "RUN_CODE_NAME",
    "CodeMode",
    "collapse_message",
    "collapsed",
    "default_mode",
    "is_transport_call",
    "new_parent_token",
    "parse_mode",
    "resolve_mode",
    "tag_transport",
]

CodeMode = Literal["native", "code", "both"]
MODES: tuple[CodeMode, ...] = get_args(CodeMode)
ENV_CODE_MODE = "TOOLNEXUS_CODE_MODE"
RUN_CODE_NAME = "run_code"
PARENT_TOKEN_KEY = "parent_token"


def parse_mode(value: object) -> CodeMode:
    """``value`` as a mode; exactly ``"native"``, ``"code"`` or ``"both"`` are accepted.

    Raises:
        ConfigurationError: anything else, listing the valid modes.
    """
    if value == "native" or value == "code" or value == "both":
        return value
    raise ConfigurationError(
        f"code mode must be one of {', '.join(repr(m) for m in MODES)}, got {value!r}."
    )


def default_mode() -> CodeMode:
    """The process-wide default: ``TOOLNEXUS_CODE_MODE`` when set, else ``"both"``.

    Raises:
        ConfigurationError: the environment variable holds something that is not a mode.
    """
    raw = os.environ.get(ENV_CODE_MODE)
    if raw is None or not raw.strip():
        return "both"
    try:
        return parse_mode(raw.strip())
    except ConfigurationError as exc:
        raise ConfigurationError(
            f"{ENV_CODE_MODE}={raw!r} is not a code mode; set it to native, code or both, "
            "or unset it for the default (both)."
        ) from exc


def resolve_mode(obj: object = None) -> CodeMode:
    """The mode for ``obj`` (an agent, a config, a mapping): its ``code_mode`` when set, else
    [`default_mode`][toolnexus.codemode.default_mode].

    Example::

        resolve_mode({"code_mode": "code"})   # "code"
        resolve_mode(None)                    # "both" unless TOOLNEXUS_CODE_MODE says otherwise
    """
    value = obj.get("code_mode") if isinstance(obj, Mapping) else getattr(obj, "code_mode", None)
    return default_mode() if value is None else parse_mode(value)


def new_parent_token() -> str:
    """A fresh, unguessable token naming one ``run_code`` execution."""
    return secrets.token_hex(16)


def tag_transport(call: ToolCall | Mapping[str, Any], token: str) -> Any:
    """A copy of ``call`` marked as synthesised by the program run ``token`` names.

    Works on a [`ToolCall`][toolnexus.scheduling.ToolCall] (returns a ``ToolCall``) and on a mapping
    (returns a ``dict`` with a ``"parent_token"`` key).
    """
    if not isinstance(token, str) or not token:
        raise ConfigurationError("tag_transport needs a token from new_parent_token().")
    if isinstance(call, ToolCall):
        return dataclasses.replace(call, parent_token=token)
    return {**call, PARENT_TOKEN_KEY: token}


def is_transport_call(call: object) -> bool:
    """Whether ``call`` was synthesised by a running program rather than sent by the model."""
    if isinstance(call, ToolCall):
        token: object = call.parent_token
    elif isinstance(call, Mapping):
        token = call.get(PARENT_TOKEN_KEY)
    else:
        token = None
    return isinstance(token, str) and bool(token)


def collapsed(mode: str, name: str, call: object = None) -> bool:
    """Whether a model-direct call to ``name`` must be refused as an unknown tool.

    Under ``"code"`` the model was shown ``run_code`` alone, so a direct call to any other tool
    (hallucinated, or replayed from a transcript recorded in another mode) can only fail. Refuse
    it here, *before* hooks and approval run: a guard must never be asked to approve a call that
    cannot execute. Calls tagged by [`tag_transport`][toolnexus.codemode.tag_transport] are a
    program's sub-calls and pass.
    """
    return parse_mode(mode) == "code" and name != RUN_CODE_NAME and not is_transport_call(call)


def collapse_message(name: str) -> str:
    """What the model is told when its direct call to ``name`` collapsed: the way back in."""
    return (
        f"unknown tool '{name}': in this conversation tools are called from code. Call "
        f"'{RUN_CODE_NAME}' with a program that calls it: "
        f"`await tools[{json.dumps(name, ensure_ascii=True)}]({{...}})` "
        "(the same in Python and JavaScript)."
    )
