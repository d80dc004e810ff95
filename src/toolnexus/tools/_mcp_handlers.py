"""What an MCP server may ask of the client: elicitation, sampling, roots; and progress.

The user answers through handlers with the ``mcp`` SDK's own callback signatures
(``await handler(context, params)`` returning the SDK's result type or an ``ErrorData``), given
per server as ``elicitation_handler=``, ``sampling_handler=`` and ``roots=`` (a list, or a
handler ``await roots(context)``). Each capability is
declared to the server exactly when its handler (or ``roots``) is given; URL-mode elicitation
is declared when the elicitation handler's ``params`` annotation admits
``ElicitRequestURLParams`` (the SDK's ``ElicitRequestParams`` does; a handler annotated with
``ElicitRequestFormParams`` only gets form requests).

Around the user's handler, the client:

* fills in, for an accepted form, every field the user left out that has a schema default
  (SEP-1034);
* declines, without asking the handler, a form that asks for a secret (a field of format
  ``password``, or named like a password, secret, token or API key): the spec says servers
  must not ask for sensitive data in a form, only through URL mode;
* answers the server with an error when the handler raises (as it is called or as it is
  awaited) or takes longer than ``handler_timeout``, naming the exception's type only (its
  message may hold what the user typed): the server then fails its call, which comes back to
  the model as a failed call (the lane goes on).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import re
import typing
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = [
    "ProgressHandler",
    "callbacks",
    "takes_url_requests",
]

logger = logging.getLogger("toolnexus.mcp")

ProgressHandler = Callable[[str, str, float, "float | None", "str | None"], Awaitable[None]]
"""``await on_progress(server, tool, progress, total, message)``: a call's progress."""

SECRET_NAME = re.compile(r"pass(word|wd|phrase)?$|secret|token|api[_-]?key|credential|pin$", re.I)


def takes_url_requests(handler: Callable[..., Any]) -> bool:
    """Whether ``handler``'s ``params`` annotation admits URL-mode elicitation requests."""
    from mcp.types import ElicitRequestURLParams

    target: Any = handler
    if not (inspect.isfunction(handler) or inspect.ismethod(handler)):
        target = getattr(handler, "__call__", None)  # noqa: B004  # a callable object
    try:
        params = [p for p in inspect.signature(target).parameters.values() if p.name != "self"]
    except (TypeError, ValueError):
        return False
    if len(params) < 2 or params[1].annotation is inspect.Parameter.empty:
        return False
    annotation = params[1].annotation
    if isinstance(annotation, str):  # postponed (from __future__ import annotations)
        try:
            annotation = typing.get_type_hints(target)[params[1].name]
        except Exception:  # a name the handler's module cannot resolve: read the text
            name = annotation.rsplit(".", 1)[-1]
            return name in ("ElicitRequestParams", "ElicitRequestURLParams") or (
                "ElicitRequestURLParams" in annotation
            )
    return annotation is ElicitRequestURLParams or ElicitRequestURLParams in typing.get_args(
        annotation
    )


def _secret_field(schema: Any) -> str | None:
    """The name of a field of a form's schema that asks for a secret, if any."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return None
    for name, spec in properties.items():
        if isinstance(spec, dict) and spec.get("format") == "password":
            return str(name)
        if SECRET_NAME.search(str(name)):
            return str(name)
    return None


def _with_defaults(schema: Any, content: dict[str, Any] | None) -> dict[str, Any]:
    """``content`` with every field it leaves out that has a schema default (SEP-1034)."""
    filled = dict(content or {})
    properties = schema.get("properties") if isinstance(schema, dict) else None
    for name, spec in (properties or {}).items():
        if name not in filled and isinstance(spec, dict) and "default" in spec:
            filled[name] = spec["default"]
    return filled


async def _bounded(
    server: str, what: str, answer: Callable[[], Awaitable[Any]], seconds: float | None
) -> tuple[Any, Any]:
    """``(result, None)`` from the user's handler (called here, so a handler raising as it is
    called is caught too), or ``(None, ErrorData)`` for the server."""
    from mcp.types import INTERNAL_ERROR, ErrorData

    try:
        return await asyncio.wait_for(answer(), seconds), None
    except TimeoutError:
        logger.warning("MCP server %r: the %s handler did not answer in time", server, what)
        return None, ErrorData(
            code=INTERNAL_ERROR,
            message=f"the client's {what} handler did not answer within {seconds:g} s",
        )
    except Exception as exc:
        # The type only: the handler's own message may hold what the user typed.
        kind = type(exc).__name__
        logger.warning("MCP server %r: the %s handler raised %s", server, what, kind)
        return None, ErrorData(
            code=INTERNAL_ERROR, message=f"the client's {what} handler failed ({kind})"
        )


def callbacks(
    server: str,
    *,
    elicitation: Callable[..., Awaitable[Any]] | None,
    sampling: Callable[..., Awaitable[Any]] | None,
    roots: Sequence[Any] | Callable[..., Awaitable[Any]] | None,
    timeout: float | None,
) -> dict[str, Any]:
    """The ``ClientSession`` keyword arguments that answer ``server``'s requests (only those
    the user gave: a capability is declared exactly when its callback is passed)."""
    from mcp.types import (
        INVALID_PARAMS,
        ElicitRequestFormParams,
        ElicitRequestURLParams,
        ElicitResult,
        ErrorData,
        ListRootsResult,
        Root,
    )

    found: dict[str, Any] = {}
    if elicitation is not None:
        handler = elicitation
        url_mode = takes_url_requests(handler)

        async def elicit(context: Any, params: Any) -> Any:
            if isinstance(params, ElicitRequestURLParams) and not url_mode:
                return ErrorData(code=INVALID_PARAMS, message="URL-mode elicitation not supported")
            if isinstance(params, ElicitRequestFormParams):
                secret = _secret_field(params.requested_schema)
                if secret is not None:
                    logger.warning(
                        "MCP server %r asked for a secret (field %r) in a form elicitation; "
                        "declined (servers must use URL mode for sensitive data)",
                        server,
                        secret,
                    )
                    return ElicitResult(action="decline")
            result, error = await _bounded(
                server, "elicitation", lambda: handler(context, params), timeout
            )
            if error is not None:
                return error
            if (
                isinstance(result, ElicitResult)
                and result.action == "accept"
                and isinstance(params, ElicitRequestFormParams)
            ):
                result = result.model_copy(
                    update={"content": _with_defaults(params.requested_schema, result.content)}
                )
            return result

        found["elicitation_callback"] = elicit
        found["url_elicitation"] = url_mode
    if sampling is not None:
        sampler = sampling

        async def sample(context: Any, params: Any) -> Any:
            result, error = await _bounded(
                server, "sampling", lambda: sampler(context, params), timeout
            )
            return error if error is not None else result

        found["sampling_callback"] = sample
    if callable(roots):
        asker = roots

        async def ask_roots(context: Any) -> Any:
            result, error = await _bounded(server, "roots", lambda: asker(context), timeout)
            return error if error is not None else result

        found["list_roots_callback"] = ask_roots
    elif roots is not None:
        listed = ListRootsResult(
            roots=[
                root if isinstance(root, Root) else Root.model_validate({"uri": str(root)})
                for root in roots
            ]
        )

        async def list_roots(context: Any) -> Any:
            return listed

        found["list_roots_callback"] = list_roots
    return found


@functools.cache
def session_class() -> type[Any]:
    """The SDK's ``ClientSession``, declaring form-only elicitation when asked to (the SDK
    itself always declares form and URL mode with an elicitation callback)."""
    from mcp import ClientSession
    from mcp.types import ClientCapabilities, ElicitationCapability, FormElicitationCapability

    class Session(ClientSession):
        def __init__(self, *args: Any, url_elicitation: bool = True, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._url_elicitation = url_elicitation

        def _build_capabilities(self, version: str) -> ClientCapabilities:
            capabilities = super()._build_capabilities(version)
            if capabilities.elicitation is not None and not self._url_elicitation:
                capabilities.elicitation = ElicitationCapability(form=FormElicitationCapability())
            return capabilities

    return Session
