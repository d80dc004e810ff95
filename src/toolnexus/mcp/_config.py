"""The gateway's config file: the ``mcpServers`` JSON MCP clients use, plus an optional
``toolnexus`` key of gateway options, checked whole before anything starts.

Every key is checked strictly against a schema (pydantic; no value is converted, so
``"max_parallel": "4"`` or ``"approval": "fs_write"`` are refused, not reinterpreted), and a
wrong one is a one-line `ConfigurationError` naming the key and what it must be.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolnexus._checks import refuse_unknown
from toolnexus.codemode import PermissionPolicy
from toolnexus.errors import ConfigurationError
from toolnexus.tools.mcp import config_error, parse_config

__all__ = ["BUDGET_KEYS", "DURABLE_KEYS", "OPTION_KEYS", "gateway_options", "load_config"]

OPTION_KEYS = (
    "language", "mode", "max_parallel", "approval", "audit_log", "policy", "budgets",
    "sdk_threshold", "always_loaded", "durable",
)  # fmt: skip
"""What the ``toolnexus`` key of a gateway config may set (command-line options win)."""

BUDGET_KEYS = ("timeout", "max_memory", "max_output", "max_sub_calls")
"""The sandbox limits ``toolnexus.budgets`` may set."""

DURABLE_KEYS = ("address", "task_queue", "namespace")
"""What ``toolnexus.durable`` (run_code tasks as Temporal workflows) may set."""


class _Options(BaseModel):
    """The schema of the ``toolnexus`` key."""

    model_config = ConfigDict(strict=True, extra="forbid")

    language: Literal["python", "javascript"] | None = None
    mode: Literal["code", "both"] | None = None
    max_parallel: int | None = Field(default=None, ge=1)
    approval: list[str] = []
    audit_log: str | None = None
    policy: dict[str, Any] | None = None
    budgets: dict[str, Any] | None = None
    sdk_threshold: int | None = Field(default=None, ge=0)
    always_loaded: list[str] = []
    durable: dict[str, Any] | None = None


class _Durable(BaseModel):
    """The schema of ``toolnexus.durable``."""

    model_config = ConfigDict(strict=True, extra="forbid")

    address: str = Field(min_length=1, pattern=r"^[^\s/]+:[0-9]{1,5}$")
    task_queue: str = Field(min_length=1, max_length=200)
    namespace: str = Field(default="default", min_length=1, max_length=200)


LOCAL_DURABLE = {"address": "127.0.0.1:7233", "task_queue": "toolnexus-gateway"}
"""``--durable`` without a ``toolnexus.durable`` key: a Temporal server on this machine at its
default port (``temporal server start-dev``), on the gateway's own task queue."""


def durable_settings(given: Mapping[str, Any] | None, wanted: bool) -> dict[str, Any] | None:
    """Where run_code tasks run as Temporal workflows: ``given`` (the config's checked
    ``toolnexus.durable``), or `LOCAL_DURABLE` when ``wanted`` (``--durable``) and the config
    names none; ``None`` (in-memory tasks) when neither asks for it."""
    if given is not None:
        return dict(given)
    return _Durable.model_validate(LOCAL_DURABLE).model_dump() if wanted else None


class _Budgets(BaseModel):
    """The schema of ``toolnexus.budgets``."""

    model_config = ConfigDict(strict=True, extra="forbid")

    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_memory: int | None = Field(default=None, ge=1)
    max_output: int | None = Field(default=None, ge=1)
    max_sub_calls: int | None = Field(default=None, ge=1)


OPTIONS_MUST_BE = {
    "language": '"python" or "javascript"',
    "mode": '"code" or "both"',
    "max_parallel": "a positive integer",
    "approval": 'a list of tool names, like ["fs_write_file"]',
    "audit_log": "a string (the path of a JSON-lines file)",
    "policy": 'an object, like {"deny": ["fs_write_file"]}',
    "budgets": 'an object, like {"timeout": 60}',
    "sdk_threshold": "a number of bytes (an integer >= 0)",
    "always_loaded": 'a list of tool names, like ["fs_read_text_file"]',
    "durable": 'an object, like {"address": "127.0.0.1:7233", "task_queue": "gateway"}',
}
DURABLE_MUST_BE = {
    "address": 'the Temporal frontend as "host:port", like "127.0.0.1:7233"',
    "task_queue": "a non-empty string (the Temporal task queue the gateway's workers poll)",
    "namespace": 'a non-empty string (the Temporal namespace, "default" unless given)',
}
BUDGETS_MUST_BE = {
    "timeout": "a positive number of seconds",
    "max_memory": "a positive integer (bytes)",
    "max_output": "a positive integer (bytes)",
    "max_sub_calls": "a positive integer",
}


def gateway_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The gateway options a config's ``toolnexus`` key sets, checked (only those it sets).

    Raises:
        ConfigurationError: an unknown key, or a value of the wrong type (one line naming it).
    """
    options = config.get("toolnexus", {})
    if not isinstance(options, Mapping):
        raise ConfigurationError("the config's 'toolnexus' key must be an object of options.")
    refuse_unknown(options, OPTION_KEYS, "toolnexus option(s)", " in the config")
    try:
        checked = _Options.model_validate(dict(options)).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise config_error("toolnexus.", exc, OPTIONS_MUST_BE) from None
    policy = checked.get("policy")
    if policy is not None:
        known = [f.name for f in dataclasses.fields(PermissionPolicy)]
        refuse_unknown(policy, known, "key(s)", " in toolnexus.policy")
        try:
            checked["policy"] = PermissionPolicy(**policy)
        except ConfigurationError as exc:
            raise ConfigurationError(f"toolnexus.policy: {exc}") from None
    budgets = checked.get("budgets")
    if budgets is not None:
        refuse_unknown(budgets, BUDGET_KEYS, "budget(s)", " in toolnexus.budgets")
        try:
            _Budgets.model_validate(budgets)
        except ValidationError as exc:
            raise config_error("toolnexus.budgets.", exc, BUDGETS_MUST_BE) from None
    durable = checked.get("durable")
    if durable is not None:
        refuse_unknown(durable, DURABLE_KEYS, "key(s)", " in toolnexus.durable")
        try:
            checked["durable"] = _Durable.model_validate(durable).model_dump()
        except ValidationError as exc:
            raise config_error("toolnexus.durable.", exc, DURABLE_MUST_BE) from None
    return checked


def load_config(config_path: str | Path) -> dict[str, Any]:
    """Read a gateway config file and check all of it (the servers and the options).

    Raises:
        ConfigurationError: the file cannot be read (missing, a folder, unreadable), is not
            JSON, not an object, or has a key of the wrong type (one line naming it).
    """
    path = Path(config_path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(f"no config file {path}") from None
    except IsADirectoryError:
        raise ConfigurationError(
            f"the config {path} is a folder; give the path of its JSON file"
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"cannot read the config {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{path} is not UTF-8 text: {exc.reason}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{path} is not JSON: {exc}") from None
    except (RecursionError, ValueError) as exc:
        raise ConfigurationError(f"{path} cannot be read as JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigurationError(f"{path} must hold a JSON object with an mcpServers key.")
    parse_config({"mcpServers": config.get("mcpServers", {})})  # checked now, before any starts
    gateway_options(config)
    return config
