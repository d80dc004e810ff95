"""``PermissionPolicy``: which tools a model (and a program) may call, and which need consent."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from toolnexus.errors import ConfigurationError
from toolnexus.tools._tool import Tool

__all__ = ["PermissionPolicy", "PolicyMode", "filter_tools"]

PolicyMode = Literal["default", "permissive", "strict"]
_POLICY_MODES: tuple[str, ...] = get_args(PolicyMode)


def _names(option: str, value: Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        raise ConfigurationError(
            f"PermissionPolicy {option} must be a list of tool names, got the string {value!r}; "
            f"write {option}=[{value!r}]."
        )
    names = tuple(value)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise ConfigurationError(f"PermissionPolicy {option} must hold strings, got {bad[0]!r}.")
    return names


@dataclass(frozen=True)
class PermissionPolicy:
    """Which tools may be called, and which calls need an approval handler's consent.

    Modes:
        ``"default"``: every tool is allowed unless denied (``deny``, ``deny_prefixes``), or
        left out of ``allow`` when an allow-list is given.
        ``"permissive"``: like ``"default"``, and no call needs approval, whatever the tool or
        ``approval_required`` say (for trusted, unattended runs).
        ``"strict"``: only tools named in ``allow`` are allowed (none when ``allow`` is
        ``None``), and every call needs approval.

    A denied tool is removed from what the model sees; inside a program it stays present as a
    stub that fails like any failing tool, so the program cannot tell "denied" from "failed".

    Attributes:
        mode: ``"default"``, ``"permissive"`` or ``"strict"``.
        deny: Tool names that are never allowed (wins over ``allow``).
        deny_prefixes: Name prefixes that are never allowed (``"mcp__github__"``).
        allow: When given, the only tool names allowed.
        approval_required: Tool names whose every call needs approval.

    Raises:
        ConfigurationError: an unknown mode, or a name list that is not a list of strings.
    """

    mode: PolicyMode = "default"
    deny: Sequence[str] = field(default_factory=tuple)
    deny_prefixes: Sequence[str] = field(default_factory=tuple)
    allow: Sequence[str] | None = None
    approval_required: Sequence[str] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.mode not in _POLICY_MODES:
            raise ConfigurationError(
                f"PermissionPolicy mode must be one of {', '.join(map(repr, _POLICY_MODES))}, "
                f"got {self.mode!r}."
            )
        object.__setattr__(self, "deny", _names("deny", self.deny))
        object.__setattr__(self, "deny_prefixes", _names("deny_prefixes", self.deny_prefixes))
        if self.allow is not None:
            object.__setattr__(self, "allow", _names("allow", self.allow))
        object.__setattr__(
            self, "approval_required", _names("approval_required", self.approval_required)
        )

    def allows(self, name: str) -> bool:
        """Whether a tool called ``name`` may be called at all."""
        if name in self.deny or any(name.startswith(p) for p in self.deny_prefixes if p):
            return False
        if self.allow is not None:
            return name in self.allow
        return self.mode != "strict"

    def needs_approval(self, tool: Tool) -> bool:
        """Whether a call of ``tool`` must be approved before it runs."""
        if self.mode == "permissive":
            return False
        if self.mode == "strict":
            return True
        return tool.requires_approval or tool.name in self.approval_required


def filter_tools(tools: Sequence[Tool], policy: PermissionPolicy | None) -> list[Tool]:
    """The tools of ``tools`` that ``policy`` allows (all of them when there is no policy)."""
    if policy is None:
        return list(tools)
    return [t for t in tools if policy.allows(t.name)]
