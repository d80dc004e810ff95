"""What crosses Temporal: calls, classifications and outcomes as plain JSON data.

Workflow inputs, activity arguments and results are stored in the workflow's history, so they
are plain dictionaries (Temporal's default JSON converter), never live objects. Each payload is
limited (2 MB by default on the server), and what counts is the bytes Temporal stores: its
converter writes JSON with every non-ASCII character escaped (``\\uXXXX``, six bytes for a CJK
character that UTF-8 writes in three) and a value that is already JSON text gets its quotes
escaped again. So sizes here are measured on the converter's own output (`stored_size`), never
on the JSON text. A tool result past `MAX_RESULT_BYTES` becomes a failed call that says so.

Totals (a batch of 100,000 calls, a long transcript, many large results) do not fit one payload
however they are cut, unless the caller and the workers share a payload store: `file_store`
gives a Temporal data converter whose codec keeps every large payload in a directory they
share and puts a small reference in the history instead ("claim check").
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, get_args

import temporalio.converter
from temporalio.api.common.v1 import Payload

from toolnexus._checks import int_at_least
from toolnexus._json import loads_strict
from toolnexus.errors import ConfigurationError, PayloadStoreError
from toolnexus.scheduling import HostReason, Outcome, ToolCall, snapshot
from toolnexus.tools import Guards, PermissionPolicy

__all__ = [
    "MAX_RESULT_BYTES",
    "PAYLOAD_BUDGET",
    "PAYLOAD_LIMIT",
    "FileStore",
    "Timings",
    "call_from_wire",
    "call_to_wire",
    "failure_to_wire",
    "file_store",
    "has_store",
    "outcome_from_wire",
    "outcome_to_wire",
    "permissions_from_wire",
    "permissions_to_wire",
    "stored_size",
]

PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Temporal's default limit on one payload (the server refuses a larger one)."""

PAYLOAD_BUDGET = 1_900_000
"""The most a toolnexus workflow lets one of its own payloads (a result, a step's input, the
state it carries into a new run) take without a payload store: the limit less room for the
history's framing."""

MAX_RESULT_BYTES = 1_500_000
"""The largest tool result a durable call records, in the bytes Temporal stores (see
`stored_size`); Temporal's payload limit is 2 MB, and a batch's answer needs room too."""


def stored_size(value: Any, converter: temporalio.converter.PayloadConverter | None = None) -> int:
    """How many bytes Temporal stores for ``value`` as one payload: the converter's own
    output (data and metadata), not the JSON text, which can be half as long or less."""
    converter = converter or temporalio.converter.default().payload_converter
    return int(converter.to_payloads([value])[0].ByteSize())


def _seconds(subject: str, value: object) -> float:
    if not isinstance(value, timedelta):
        raise ConfigurationError(
            f"Timings({subject}=...) takes a datetime.timedelta, got {value!r}; "
            f"write e.g. Timings({subject}=timedelta(seconds=30))."
        )
    seconds = value.total_seconds()
    if seconds <= 0:
        raise ConfigurationError(
            f"Timings({subject}=...) must be longer than zero, got {value!r}; a call with no "
            "time to run would never finish."
        )
    return seconds


@dataclass(frozen=True)
class Timings:
    """How long a durable tool call may take, and how a lost worker is noticed.

    Every field is checked when the object is built (`ConfigurationError`), so a bad value
    never reaches a workflow.

    Attributes:
        start_to_close: The most one attempt of a call may run (default 10 minutes); a call
            that runs longer fails as having run out of time.
        heartbeat: A worker running a call reports every third of this; a call whose worker
            stops reporting for this long is taken as lost (default 10 s). Shorter notices a
            dead worker sooner, at the cost of more heartbeats.
        idempotent_attempts: How often a call of an idempotent tool is tried in all when its
            worker is lost (default 3). A call of any other tool is tried once.
    """

    start_to_close: timedelta = timedelta(minutes=10)
    heartbeat: timedelta = timedelta(seconds=10)
    idempotent_attempts: int = 3

    def __post_init__(self) -> None:
        _seconds("start_to_close", self.start_to_close)
        _seconds("heartbeat", self.heartbeat)
        if not int_at_least(self.idempotent_attempts, 1):
            raise ConfigurationError(
                "Timings(idempotent_attempts=...) must be a positive integer, got "
                f"{self.idempotent_attempts!r}."
            )

    def to_wire(self) -> dict[str, float | int]:
        return {
            "start_to_close": self.start_to_close.total_seconds(),
            "heartbeat": self.heartbeat.total_seconds(),
            "idempotent_attempts": self.idempotent_attempts,
        }


def call_to_wire(call: ToolCall) -> dict[str, Any]:
    wire = {"id": call.id, "name": call.name, "arguments": call.arguments}
    return wire if call.caller is None else wire | {"caller": dict(call.caller)}


def call_from_wire(data: dict[str, Any]) -> ToolCall:
    return ToolCall(data["id"], data["name"], data["arguments"], caller=data.get("caller"))


def outcome_to_wire(
    outcome: Outcome,
    tool: str,
    converter: temporalio.converter.PayloadConverter | None = None,
) -> dict[str, Any]:
    """The outcome of a call of ``tool`` as JSON data; one past `MAX_RESULT_BYTES` as Temporal
    stores it (`stored_size`) becomes a failure that says so.

    The value travels as JSON text: Temporal's converter sorts the keys of the objects it
    stores, and a model should read a tool's result exactly as the tool wrote it, keys in the
    same order as in process. What JSON cannot hold is written from its snapshot.
    """
    value = json.dumps(snapshot(outcome.value), ensure_ascii=False, default=repr)
    wire = {"value_json": value, "error": outcome.error, "metadata": outcome.metadata}
    if outcome.reason is not None:  # the host's reason, for the host: left out when none
        wire["reason"] = outcome.reason
    # escaping writes a character in at most 12 bytes (a surrogate pair, \uXXXX\uXXXX):
    # a short result needs no measuring
    error = "" if outcome.error is None else str(outcome.error)
    if (len(value) + len(error)) * 12 + 4096 < MAX_RESULT_BYTES and outcome.metadata is None:
        return wire
    size = stored_size(wire, converter)
    if size > MAX_RESULT_BYTES:
        message = (
            f"result too large for a durable run ({size:,} bytes as Temporal stores it, the "
            f"limit is {MAX_RESULT_BYTES:,}); return less, or write it to a file and return "
            "its path"
        )
        return failure_to_wire(tool, message)
    return wire


def failure_to_wire(tool: str, message: str, reason: HostReason | None = None) -> dict[str, Any]:
    """A failed call as JSON data (a lost worker, say), with the host's ``reason`` when it has
    one (`Outcome.reason`)."""
    wire = {"value_json": None, "error": {"tool": tool, "message": message}, "metadata": None}
    return wire if reason is None else wire | {"reason": reason}


def outcome_from_wire(data: dict[str, Any]) -> Outcome:
    """An outcome from its JSON data. A payload from before outcomes had a ``reason`` has
    none: a retry is then known by its ``metadata`` mark, as it was then (a workflow replaying
    such a history must count the same retries)."""
    error = data.get("error")
    if error is not None:
        metadata = data.get("metadata")
        reason = data.get("reason")
        if reason is None and isinstance(metadata, dict) and metadata.get("retry"):
            reason = "retry"  # the RETRY mark of toolnexus.tools._outcome
        return Outcome(error=dict(error), metadata=metadata, reason=_reason(reason))
    value_json = data.get("value_json")
    value = None if value_json is None else json.loads(value_json)
    return Outcome(value=value, metadata=data.get("metadata"), reason=_reason(data.get("reason")))


_REASONS: frozenset[str] = frozenset(get_args(HostReason))


def permissions_to_wire(guards: Guards | None) -> dict[str, Any] | None:
    """What a durable entry point's ``guards`` send to the workflow: the caller's permissions,
    which narrow the tools its calls may call on the workers (``None``: nothing to narrow).

    Only permissions travel: the calls run on the workers, and what else guards them (the
    approval handler, the hooks, approvals a policy asks for) is the workers' own client's,
    the one thing that can run there.

    Raises:
        ConfigurationError: ``guards`` is not a ``Guards``, or holds what cannot travel.
    """
    if guards is None:
        return None
    if not isinstance(guards, Guards):
        raise ConfigurationError(f"guards must be a toolnexus Guards, got {guards!r}.")
    if guards.approval_handler is not None or guards.hooks is not None:
        raise ConfigurationError(
            "a durable entry point's guards= takes permissions only: its calls run on the "
            "workers, under the approval handler and hooks of the workers' client "
            "(worker(..., client=create_client(approval_handler=..., hooks=...))); a function "
            "of the caller's cannot travel there."
        )
    policy = guards.permissions
    if policy is None:
        return None
    if policy.mode != "default" or policy.approval_required:
        raise ConfigurationError(
            "a durable entry point's permissions can only narrow the tools (deny=, "
            "deny_prefixes=, allow=, in mode 'default'): approvals are asked on the workers, "
            "so give mode= and approval_required= to the policy of the workers' client."
        )
    allow = None if policy.allow is None else list(policy.allow)
    return {"deny": list(policy.deny), "deny_prefixes": list(policy.deny_prefixes), "allow": allow}


def permissions_from_wire(data: dict[str, Any]) -> PermissionPolicy:
    """The caller's permissions, as `permissions_to_wire` sent them."""
    return PermissionPolicy(
        deny=data["deny"], deny_prefixes=data["deny_prefixes"], allow=data["allow"]
    )


def _reason(value: Any) -> HostReason | None:
    """A reason read from a payload, if it is one toolnexus sets (a history is written by
    whoever can start a workflow: anything else is no reason)."""
    return value if isinstance(value, str) and value in _REASONS else None  # type: ignore[return-value]


STORE_ENCODING = b"binary/toolnexus-file-store"

_DIGEST = re.compile(r"[0-9a-f]{64}")
"""A reference's name of a stored payload: its SHA-256, 64 lowercase hex digits, nothing else."""


class FileStore(temporalio.converter.PayloadCodec):
    """A payload codec that keeps large payloads in a directory the caller and the workers
    share, and stores a small reference (the payload's SHA-256) in the history instead.

    With it, a batch's calls, a run's transcript, a program's recorded outcomes and the state a
    workflow carries into its next run are never one oversized payload, whatever their size.
    Files are named by content, written atomically and checked against their hash when read;
    deleting them is the operator's choice (a workflow's history refers to them as long as it
    is kept).

    A reference is read from a workflow history, which anyone who can start a workflow can
    write: only a SHA-256 in lowercase hex names a file, and anything else is refused without
    opening a file. Only a regular file in the store is read (never a link, a pipe or a
    device). Writing a payload whose file is missing or damaged writes the file again.

    Args:
        directory: A directory every worker and caller reads and writes (created if missing).
        threshold: Payloads larger than this many bytes go to the store (default 256 KiB).

    Raises:
        ConfigurationError: ``directory`` is empty or not a path, or cannot be created;
            ``threshold`` is not a count of bytes.
    """

    def __init__(self, directory: str | os.PathLike[str], *, threshold: int = 256 * 1024) -> None:
        if not int_at_least(threshold, 0):
            raise ConfigurationError(
                f"FileStore(threshold=...) must be a count of bytes, got {threshold!r}."
            )
        name = directory if isinstance(directory, (str, os.PathLike)) else None
        text = os.fspath(name) if name is not None else None
        if not isinstance(text, str) or not text.strip():
            raise ConfigurationError(
                f"FileStore needs the path of a directory, got {directory!r}; give the "
                "directory the caller and the workers share (an empty path would be whatever "
                "folder the process happens to run in)."
            )
        self.directory = Path(text)
        self.threshold = threshold
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"FileStore cannot use {text!r} as its directory ({exc.strerror}); "
                "give a directory the caller and the workers can write."
            ) from None

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Large payloads replaced by references to their files."""
        return [await self._encode(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """References replaced by the payloads they name.

        Raises:
            PayloadStoreError: a reference that is not one this store writes, or a file that
                is missing from the store or was changed.
        """
        return [await self._decode(p) for p in payloads]

    async def _encode(self, payload: Payload) -> Payload:
        if payload.ByteSize() <= self.threshold:
            return payload
        data = payload.SerializeToString()
        digest = hashlib.sha256(data).hexdigest()
        await asyncio.to_thread(self._write, digest, data)
        reference = json.dumps({"sha256": digest, "size": len(data)}).encode()
        return Payload(metadata={"encoding": STORE_ENCODING}, data=reference)

    async def _decode(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != STORE_ENCODING:
            return payload
        digest, size = self._reference(payload.data)
        data = await asyncio.to_thread(self._read, digest, size)
        return Payload.FromString(data)

    def _reference(self, raw: bytes) -> tuple[str, int | None]:
        """The digest and size a stored reference names, checked before any file is touched."""
        try:
            reference = loads_strict(raw)
        except ValueError:
            reference = None
        if not isinstance(reference, dict):
            raise PayloadStoreError(
                f"the payload store at {self.directory} was given a reference that is not a "
                'JSON object ({"sha256": ..., "size": ...}); the history holds a payload this '
                "store did not write"
            )
        digest, size = reference.get("sha256"), reference.get("size")
        if not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
            shown = repr(digest) if len(repr(digest)) <= 80 else repr(digest)[:77] + "..."
            raise PayloadStoreError(
                f"the payload store at {self.directory} refuses the reference {shown}: a "
                "stored payload is named by its SHA-256 as 64 lowercase hex digits, and nothing "
                "else is opened; the history holds a payload this store did not write"
            )
        if size is not None and (type(size) is not int or size < 0):
            raise PayloadStoreError(
                f"the payload store at {self.directory} refuses the reference to {digest}: its "
                f"size {size!r} is not a count of bytes"
            )
        return digest, size

    def _path(self, digest: str) -> Path:
        return self.directory / digest[:2] / digest

    def _stored(self, path: Path, size: int | None = None) -> bytes | None:
        """The contents of the regular file at ``path`` (never following a link, never
        waiting on a pipe or a device), or ``None`` when there is none."""
        flags = (
            os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        )
        try:
            handle = os.open(path, flags)
        except FileNotFoundError:
            return None
        except OSError:  # a link (ELOOP), or a file this process may not read
            return None
        with os.fdopen(handle, "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                return None
            if size is not None and status.st_size != size:
                return b""  # damaged: its hash cannot match
            return file.read()

    def _write(self, digest: str, data: bytes) -> None:
        path = self._path(digest)
        stored = self._stored(path, len(data))
        if stored is not None and hashlib.sha256(stored).hexdigest() == digest:
            return  # already there, whole
        path.parent.mkdir(exist_ok=True)  # a missing or damaged file is written (again)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".part-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _read(self, digest: str, size: int | None = None) -> bytes:
        path = self._path(digest)
        data = self._stored(path)
        if data is None:
            raise PayloadStoreError(
                f"payload {digest} is not in the store at {self.directory} (no regular file "
                f"at {path}): the workers and the caller must share one store directory"
            )
        if hashlib.sha256(data).hexdigest() != digest or (size is not None and len(data) != size):
            raise PayloadStoreError(
                f"payload {digest} in the store at {self.directory} was changed (its contents "
                "no longer match its hash); writing the same payload again repairs it"
            )
        return data


def file_store(
    directory: str | os.PathLike[str], *, threshold: int = 256 * 1024
) -> temporalio.converter.DataConverter:
    """Temporal's default data converter with a `FileStore` codec over ``directory``.

    Connect the caller's and every worker's Temporal client with it
    (``Client.connect(address, data_converter=file_store(path))``) to run batches, programs and
    agent runs whose totals pass Temporal's 2 MB payload limit. The directory must be shared
    (a local directory for a dev server and workers on one machine; a network file system
    otherwise).

    Raises:
        ConfigurationError: ``directory`` is empty or cannot be created, or ``threshold`` is
            not a count.
    """
    codec = FileStore(directory, threshold=threshold)
    return dataclasses.replace(temporalio.converter.default(), payload_codec=codec)


def has_store(converter: temporalio.converter.DataConverter) -> bool:
    """Whether a Temporal client's converter keeps large payloads in a `FileStore`."""
    return isinstance(converter.payload_codec, FileStore)
