"""``Guards``: what every call of a run passes before its tool runs (permissions, approvals,
hooks), as one frozen, checked value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolnexus.errors import ConfigurationError
from toolnexus.session import Session
from toolnexus.tools._calls import ApprovalHandler, RunContext
from toolnexus.tools._hooks import ToolHooks
from toolnexus.tools._policy import PermissionPolicy

__all__ = ["Guards", "guards_from"]


@dataclass(frozen=True)
class Guards:
    """The guards of the call pipeline: which tools may run, who approves, what runs around.

    Example::

        guards = Guards(permissions=PermissionPolicy(deny=["rm"]), hooks=ToolHooks(before=[log]))
        client = Client(Endpoint.parse("openai:gpt-4.1-mini"), guards=guards)

    Attributes:
        permissions: The [`PermissionPolicy`][toolnexus.codemode.PermissionPolicy] in force
            (``None``: every tool allowed).
        approval_handler: ``(tool_name, args) -> bool`` (sync or async), asked for calls that
            need approval; without one, such calls are refused.
        hooks: [`ToolHooks`][toolnexus.tools.ToolHooks] run around every call, sub-calls
            included.
    """

    permissions: PermissionPolicy | None = None
    approval_handler: ApprovalHandler | None = None
    hooks: ToolHooks | None = None

    def __post_init__(self) -> None:
        if self.permissions is not None and not isinstance(self.permissions, PermissionPolicy):
            raise ConfigurationError(
                f"Guards permissions must be a PermissionPolicy or None, got {self.permissions!r}; "
                "build one with PermissionPolicy(allow=..., deny=...)."
            )
        if self.approval_handler is not None and not callable(self.approval_handler):
            raise ConfigurationError(
                "Guards approval_handler must be a function (tool_name, args) -> bool, got "
                f"{self.approval_handler!r}."
            )
        if self.hooks is not None and not isinstance(self.hooks, ToolHooks):
            raise ConfigurationError(
                f"Guards hooks must be ToolHooks or None, got {self.hooks!r}; build them with "
                "ToolHooks(before=[...], after=[...])."
            )

    def context(
        self, deps: Any = None, *, session: Session | None = None, call_id: str | None = None
    ) -> RunContext[Any]:
        """The `RunContext` the calls of a run under these guards carry (what a tool's
        ``ctx`` shows as ``policy``, ``approval_handler`` and ``hooks``)."""
        return RunContext(
            deps=deps,
            policy=self.permissions,
            approval_handler=self.approval_handler,
            hooks=self.hooks,
            session=session,
            call_id=call_id,
        )


def guards_from(
    guards: Guards | None,
    owner: str,
    *,
    policy: PermissionPolicy | None = None,
    approval_handler: ApprovalHandler | None = None,
    hooks: ToolHooks | None = None,
) -> Guards:
    """``guards`` with the keyword spellings folded in: either may be given, or both when they
    agree (``owner`` names the function in the error).

    Raises:
        ConfigurationError: ``guards=`` and a keyword give the same guard different values.
    """
    if guards is None:
        return Guards(policy, approval_handler, hooks)
    if not isinstance(guards, Guards):
        raise ConfigurationError(f"{owner} guards must be a toolnexus Guards, got {guards!r}.")
    for name, keyword, held in (
        ("policy", policy, guards.permissions),
        ("approval_handler", approval_handler, guards.approval_handler),
        ("hooks", hooks, guards.hooks),
    ):
        if keyword is not None and keyword is not held:
            raise ConfigurationError(
                f"{owner} got guards= and {name}=: they set the same guard; give it in one "
                "place (guards=Guards(...) or the keyword)."
            )
    return guards
