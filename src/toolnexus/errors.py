"""Every exception type of toolnexus.

The tree::

    ToolnexusError                     root of everything toolnexus raises on purpose
    ├── ConfigurationError (ValueError) a bad option, raised where it is given, before work starts
    │   └── MissingExtraError (ImportError) an optional dependency is not installed
    ├── ToolArgumentsError (ValueError) arguments that do not match a tool's input schema
    ├── SessionError (ValueError)       an event the session log refuses (type or data)
    ├── ProviderError                   a model endpoint refused or failed a request
    │   ├── ProviderTimeout             no answer in time (the request or the turn timeout)
    │   ├── ProviderUnreachable         no connection, or it was lost before the answer ended
    │   ├── ProviderStatusError         an HTTP error status (4xx, 5xx)
    │   │   └── ProviderRateLimited     429: too many requests (``retry_after`` when given)
    │   └── ProviderProtocolError       an answer that is not of the style's API (not JSON, ...)
    ├── AgentError                      a sub-agent runtime verb used wrongly
    ├── PatchError (ValueError)         a patch apply_patch cannot apply (nothing changed)
    ├── ToolError                       a failed tool call, as a program or caller sees it
    ├── ViewError (ValueError)          a file toolnexus.view cannot draw (not a session log)
    └── PayloadStoreError (ValueError)  a durable payload store reference or file it refuses

    ModelRetry (Exception)             raised by a tool: the model reads the message, tries again

``ModelRetry`` is a signal, not an error, and stands outside the tree: a tool's own
``except ToolnexusError`` around its work does not swallow it.

Exceptions are for the host developer. What a model-written program sees of a failure is kept
to two strings, ``tool`` and ``message`` (see [`ToolError`][toolnexus.errors.ToolError] and
[`toolnexus.scheduling.Outcome`][toolnexus.scheduling.Outcome]): never a traceback, an exception
type or a chained cause, because model-authored code is one prompt-injection hop from the
transcript.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentError",
    "ConfigurationError",
    "MissingExtraError",
    "ModelRetry",
    "PatchError",
    "PayloadStoreError",
    "ProviderError",
    "ProviderProtocolError",
    "ProviderRateLimited",
    "ProviderStatusError",
    "ProviderTimeout",
    "ProviderUnreachable",
    "SessionError",
    "ToolArgumentsError",
    "ToolError",
    "ToolnexusError",
    "ViewError",
]


class ToolnexusError(Exception):
    """Base class of every exception toolnexus raises on purpose."""


class ConfigurationError(ToolnexusError, ValueError):
    """An option or constructor argument is invalid.

    Raised at the point of configuration (constructing a ``Tool``, a ``Scheduler``, ...), before
    anything runs, with a message that names the option, the bad value and the fix.
    """


class MissingExtraError(ConfigurationError, ImportError):
    """A feature needs an optional dependency (an extra of toolnexus) that is not installed.

    Every extra says so the same way: ``<feature> needs the <extra> extra: install
    toolnexus[<extra>] ...``. It is also an ``ImportError``, so ``import toolnexus.temporal``
    without ``temporalio`` fails as an import does, with that message.

    Attributes:
        extra: The extra to install (``"mcp"``, ``"temporal"``, ``"v8"``, ``"openai"``, ...).
    """

    def __init__(self, feature: str, extra: str, alternative: str = "") -> None:
        self.extra = extra
        super().__init__(
            f"{feature} needs the {extra} extra: install toolnexus[{extra}] (from a clone of "
            f"the repository: pip install -e '.[{extra}]'){alternative}."
        )


class ToolArgumentsError(ToolnexusError, ValueError):
    """A tool was called with arguments that do not match its input schema.

    Attributes:
        tool: The name of the tool.
        problems: One ``"field: problem"`` line per violation, in a stable order.
    """

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = problems
        listing = "; ".join(problems) if problems else "arguments do not match the schema"
        super().__init__(f"invalid arguments for tool '{tool}': {listing}")


class SessionError(ToolnexusError, ValueError):
    """The session log refused an event (a surface type given to ``log_event``, bad data)."""


class ProviderError(ToolnexusError):
    """A model endpoint refused or failed a request (after the retries that could help).

    Raised as one of its subclasses, which say the cause: `ProviderTimeout`,
    `ProviderUnreachable`, `ProviderStatusError` (`ProviderRateLimited` for a 429) and
    `ProviderProtocolError`. A plain ``ProviderError`` is a failure the server reported inside
    an answer that was otherwise fine (an error object sent with status 200, a failed response
    event) or one rebuilt from a durable run's record.

    Attributes:
        status: The HTTP status, or ``None`` when there was no response (connection refused,
            timeout, a turn past its time limit).
        message: One line: what went wrong, where, and the fix when there is an obvious one
            (which API key variable to set, which URL was tried).
        detail: Everything the server said (the whole error body), for logs; may be ``None``.
        partial: The run so far when the error ended a run (a
            [`RunResult`][toolnexus.client.RunResult] with status ``"error"``): its transcript,
            the tool calls that already ran (with their side effects) and the session log.
    """

    def __init__(self, status: int | None, message: str, detail: str | None = None) -> None:
        self.status = status
        self.message = message
        self.detail = detail
        self.partial: Any = None
        super().__init__(message)


class ProviderTimeout(ProviderError):
    """The model endpoint gave no answer in time: the request's ``timeout`` or the whole turn's
    ``turn_timeout`` ran out. ``status`` is ``None``."""


class ProviderUnreachable(ProviderError):
    """The model endpoint could not be reached (DNS, a refused connection, TLS), or the
    connection was lost before the answer ended. ``status`` is ``None``; the message names the
    root cause and the URL."""


class ProviderStatusError(ProviderError):
    """The model endpoint answered with an HTTP error status; ``status`` is that status."""

    status: int


class ProviderRateLimited(ProviderStatusError):
    """The model endpoint answered 429 (too many requests), still after the retries.

    Attributes:
        retry_after: The seconds the server asked to wait (its ``Retry-After`` header), or
            ``None`` when it named none (or named a date instead of seconds).
    """

    def __init__(
        self,
        status: int,
        message: str,
        detail: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, message, detail)
        self.retry_after = retry_after


class ProviderProtocolError(ProviderError):
    """The model endpoint answered (``status`` as before: ``200``, or ``None`` for a stream),
    but not with something the style's API defines: a body that is not JSON or nested too
    deeply, an object of the wrong shape, a stream cut off before its end, a stop reason or a
    call toolnexus cannot use. Usually a wrong ``base_url`` or ``style``, or a server that
    failed without saying so."""


class ToolError(ToolnexusError):
    """A tool call failed; carries exactly two strings, ``tool`` and ``message``.

    This is the shape a failure takes wherever it is raised rather than returned: inside a Code
    Mode program (``except ToolError as e``) and from helpers that unwrap an
    [`Outcome`][toolnexus.scheduling.Outcome]. ``str(e)`` is the message.

    Attributes:
        tool: The name of the tool that failed.
        message: What went wrong, as the tool (or the scheduler) reported it.
    """

    def __init__(self, tool: str, message: str) -> None:
        self.tool = tool
        self.message = message
        super().__init__(message)

    def __repr__(self) -> str:
        return f"ToolError(tool={self.tool!r}, message={self.message!r})"


class AgentError(ToolnexusError):
    """A sub-agent runtime verb was used wrongly (an unknown agent, a limit, a closed handle, a
    full inbox, an item that cannot be posted)."""


class PatchError(ToolnexusError, ValueError):
    """A patch given to the ``apply_patch`` tool is malformed or does not apply; nothing was
    changed (a model reads the message and can send a corrected patch)."""


class ModelRetry(Exception):
    """Raise it from a tool to hand the model a message and let it try the call again.

    A signal, not an error: it is no [`ToolnexusError`][toolnexus.errors.ToolnexusError], so
    a tool's own ``except ToolnexusError`` around its work lets it through (it used to be
    one: code that caught it as a ``ToolnexusError`` catches ``ModelRetry`` by name now).

    The message is the call's result, marked as failed; the model reads it and can call again
    with better arguments. Each tool may be retried this way (arguments that do not validate
    count too) at most `Tool.retries` times per run (default 1);
    past that the run stops as ``"incomplete"``, with ``RunResult.stopped_by`` saying why.

    Example::

        @tool
        def lookup(city: str) -> str:
            if city not in KNOWN:
                raise ModelRetry(f"unknown city {city!r}; known: {', '.join(KNOWN)}")
            return KNOWN[city]
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ViewError(ToolnexusError, ValueError):
    """`toolnexus.view` cannot draw what it was given (a file that is not a session log)."""


class PayloadStoreError(ToolnexusError, ValueError):
    """A durable run's payload store (``toolnexus.temporal.FileStore``) refuses a reference or
    a stored file: a reference that is not one it wrote (anything but a SHA-256 in lowercase
    hex), a file missing from the store, or one whose contents no longer match its hash."""
