"""Progressive disclosure: a small ``run_code`` description, tools found from inside the program.

Under a byte threshold of the rendered SDK, ``run_code``'s description is the SDK itself, as it
always was. Above it, the description holds how to call tools, a compact **index** of the
granted tools (grouped by name prefix, one short line each, cut to one line per group when even
that is too long) and the full declarations of an "always loaded" set the user names; a program
finds the rest with two host functions, the same in Python and JavaScript:

* ``await search_tools(query, limit=5)`` -> ``[{"name", "summary"}]``, ranked by BM25 over the
  tools' names (split on ``_ - . /`` and camelCase), argument names and descriptions; an exact
  name ranks first, ties go by name;
* ``await describe_tool(name)`` -> the tool's declaration as the SDK renders it (a string).

Both answer from a `ToolIndex` of the granted tools only, so a denied tool is invisible to
them as it is to the SDK. The type checker is still given the full SDK: every granted tool stays
callable and checked whether or not the program looked it up.

Everything here is **byte-stable**: the same tool set gives the same bytes in any process (no
randomness, no clock, ordering by name), and no name or description can make the index grow past
its cap: every line is clipped (in UTF-8 bytes) with a marker.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolnexus.codemode._schema_types import safe_comment
from toolnexus.codemode._sdk import SDK_HEADERS, parse_language, render_sdk, sdk_tools
from toolnexus.errors import ConfigurationError
from toolnexus.tools import Tool

__all__ = [
    "DEFAULT_SDK_THRESHOLD",
    "DESCRIBE_TOOL",
    "HOST_FUNCTIONS",
    "MAX_INDEX_BYTES",
    "SEARCH_TOOLS",
    "ToolIndex",
    "checker_sdk",
    "clip_bytes",
    "disclosed_sdk",
    "render_index",
]

DEFAULT_SDK_THRESHOLD = 6 * 1024
"""Bytes of rendered SDK above which ``run_code``'s description is the index, not the SDK."""

MAX_INDEX_BYTES = 8 * 1024
"""The most bytes the index part of the description may take, whatever the tool set."""

MAX_LINE_BYTES = 160
"""The most bytes of one line of the index (a tool, or a group at large sizes)."""

MAX_NAME_BYTES = 64
"""The most bytes of a tool's name shown in the index (a longer one is clipped, marked)."""

DEFAULT_LIMIT = 5
MAX_LIMIT = 50
MAX_QUERY_CHARS = 1000
MAX_INDEXED_CHARS = 4000
"""How much of a description the search reads: a 100 KB description costs no more than this."""

SEARCH_TOOLS = "search_tools"
DESCRIBE_TOOL = "describe_tool"
HOST_FUNCTIONS = (SEARCH_TOOLS, DESCRIBE_TOOL)
"""The host functions a program may call besides its tools."""

CLIP_MARK = "…"
"""Ends a line of the index that was clipped."""

_SPLIT = re.compile(r"[^0-9A-Za-z\u00c0-\uffff]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\x00-\x7f]+")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-/]+")
_FLAT = re.compile(r"\s+")


def clip_bytes(text: str, limit: int, mark: str = CLIP_MARK) -> str:
    """``text`` when its UTF-8 fits in ``limit`` bytes, else its head and ``mark`` within them
    (never a split character)."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    room = max(limit - len(mark.encode()), 0)
    return data[:room].decode("utf-8", "ignore") + mark


def _flat(text: str) -> str:
    """``text`` on one line: every line break a tokenizer honours and every control or bidi
    character becomes a space (the rules of the SDK's comments), runs of spaces one space."""
    return _FLAT.sub(" ", " ".join(safe_comment(text, ""))).strip()


def _shown_name(name: str) -> str:
    """A tool's name as the index shows it: as it is when plain, else as an ASCII-escaped
    string literal (so no name can carry a line break or markup into the index), clipped."""
    shown = name if _PLAIN_NAME.fullmatch(name) else _quoted(name)
    return clip_bytes(shown, MAX_NAME_BYTES)


def _quoted(name: str) -> str:
    escaped = name.encode("unicode_escape").decode("ascii").replace('"', '\\"')
    return f'"{escaped}"'


def first_sentence(text: str) -> str:
    """The first sentence of ``text``'s first paragraph (to its first ``.``, ``!`` or ``?`` before
    a space), on one line."""
    head = text.strip().split("\n\n", 1)[0][:MAX_INDEXED_CHARS]
    flat = _flat(head)
    match = re.search(r"[.!?](\s|$)", flat)
    return flat[: match.start() + 1] if match else flat


def words(text: str) -> list[str]:
    """The search words of ``text``: split on anything but letters and digits and at camelCase
    humps, lower-cased (``"getUser_by-ID"`` -> ``["get", "user", "by", "id"]``)."""
    out: list[str] = []
    for part in _SPLIT.split(text):
        if part:
            out += [w.casefold() for w in _CAMEL.findall(part)]
    return out


def _group(tool: Tool, counts: Mapping[str, int]) -> str:
    """The index group of ``tool``: the first word of its name when other tools share it (an
    MCP server's prefix, a toolkit's, an API's tag), else its source."""
    head = _prefix(tool.name)
    return head if head and counts.get(head, 0) > 1 else tool.source or "tools"


def _prefix(name: str) -> str:
    match = re.match(r"[A-Za-z0-9]+", name)
    if match is None or match.end() == len(name):
        return ""
    return match.group(0)


_PY_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
               "array": "list", "object": "dict", "null": "None"}  # fmt: skip
_TS_SCALARS = {"string": "string", "integer": "number", "number": "number",
               "boolean": "boolean", "array": "array", "object": "object",
               "null": "null"}  # fmt: skip


def _shallow_type(schema: Any, python: bool) -> str:
    """A one-word type for a property's schema (the index's compact signatures)."""
    names = _PY_SCALARS if python else _TS_SCALARS
    if isinstance(schema, Mapping):
        kind = schema.get("type")
        if isinstance(kind, str) and kind in names:
            return names[kind]
        if isinstance(schema.get("enum"), list):
            return "str" if python else "string"
    return "Any" if python else "unknown"


def compact_signature(tool: Tool, python: bool) -> str:
    """``(a: str, b?: int)``: the tool's argument names and one-word types, required first."""
    props = tool.input_schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return "()"
    required = tool.input_schema.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    keys = sorted(props, key=lambda k: (str(k) not in needed, str(k)))
    parts = []
    for key in keys:
        label = str(key) if _PLAIN_NAME.fullmatch(str(key)) else _quoted(str(key))
        mark = "" if str(key) in needed else "?"
        parts.append(f"{clip_bytes(label, 40)}{mark}: {_shallow_type(props[key], python)}")
    return "(" + ", ".join(parts) + ")"


@dataclass(frozen=True)
class _Entry:
    tool: Tool
    group: str
    summary: str


_FIELDS = (("name", 3.0), ("summary", 2.0), ("arguments", 0.5), ("body", 0.15))
"""The fields of a tool's search document and their weights."""

PREFIX_WEIGHT = 0.5
"""What a word counts for when it matches a query word only as a prefix of it (or it of the
word), both at least four letters long: ``repo`` and ``repository``."""


def _stem(word: str) -> str:
    """A crude English plural fold: ``repositories`` -> ``repository``, ``issues`` -> ``issue``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


_STOP = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of",
     "on", "or", "that", "the", "to", "with"}
)  # fmt: skip
"""English words too common to tell tools apart."""


def _terms(text: str) -> list[str]:
    return [_stem(w) for w in words(text) if w not in _STOP]


class _Ranking:
    """BM25F-like ranking (k1 1.2, b 0.75 per field) over four fields per tool, weighted: its
    name's words, its first sentence, its argument names, the rest of its description (the
    first `MAX_INDEXED_CHARS`). Each field is normalised by its own average length, so a long
    description does not bury a tool whose name says it all. An inverted index: a query costs
    the postings of its words, not a pass over every tool."""

    k1 = 1.2
    b = 0.75

    def __init__(self, entries: Sequence[_Entry]) -> None:
        fields: list[list[Counter[str]]] = []
        for e in entries:
            props = e.tool.input_schema.get("properties")
            arg_names = " ".join(map(str, props)) if isinstance(props, Mapping) else ""
            body = e.tool.description[:MAX_INDEXED_CHARS]
            rest = body[len(e.summary) :] if body.startswith(e.summary) else body
            # a name's words count once each: ``issues_list_issue_values_for_issue`` is not
            # three times about issues
            name = Counter(dict.fromkeys(_terms(e.tool.name), 1))
            fields.append([name, *(Counter(_terms(t)) for t in (e.summary, arg_names, rest))])
        n = max(len(fields), 1)
        average = [
            max(sum(sum(f[k].values()) for f in fields) / n, 1.0) for k in range(len(_FIELDS))
        ]
        self.postings: dict[str, list[tuple[int, int, float]]] = {}
        frequency: Counter[str] = Counter()
        for i, doc in enumerate(fields):
            frequency.update(set().union(*(f.keys() for f in doc)))
            for k, field in enumerate(doc):
                scale = self.k1 * (1 - self.b + self.b * sum(field.values()) / average[k])
                for word, tf in field.items():
                    saturated = tf * (self.k1 + 1) / (tf + scale)
                    self.postings.setdefault(word, []).append((i, k, saturated))
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in frequency.items()}
        self.vocabulary = sorted(frequency)

    def expand(self, query: str) -> list[dict[str, float]]:
        """Per word of the query, the words it matches with their weights: itself (1) and
        those it is a prefix of or that are a prefix of it (`PREFIX_WEIGHT`)."""
        out: list[dict[str, float]] = []
        for term in dict.fromkeys(_terms(query)):
            matches = {term: 1.0}
            if len(term) >= 4:
                for word in self.vocabulary:
                    if (
                        word != term
                        and len(word) >= 4
                        and (word.startswith(term) or term.startswith(word))
                    ):
                        matches[word] = PREFIX_WEIGHT
            out.append(matches)
        return out

    def scores(self, terms: Sequence[Mapping[str, float]]) -> dict[int, float]:
        """Each matching tool's score for the query words ``terms`` (see `expand`): per field
        and query word, its best match's weight, so a word counts once however it matched."""
        totals: dict[int, float] = {}
        for matches in terms:
            best: dict[tuple[int, int], float] = {}
            for word, boost in matches.items():
                idf = self.idf.get(word, 0.0) * boost
                for i, k, saturated in self.postings.get(word, ()):
                    value = idf * saturated
                    if value > best.get((i, k), 0.0):
                        best[(i, k)] = value
            for (i, k), value in best.items():
                totals[i] = totals.get(i, 0.0) + _FIELDS[k][1] * value
        return totals


class ToolIndex:
    """The granted tools, searchable and describable: what ``search_tools``,
    ``describe_tool`` and the description's index answer from.

    Args:
        tools: The granted tools (deduplicated first-wins, as the SDK does).
        language: The SDK language ``describe_tool`` answers in.

    Example::

        index = ToolIndex(granted, "python")
        index.search("read a file")      # [{"name": "fs_read_file", "summary": "Read ..."}]
        index.describe("fs_read_file")   # its typed declaration, as the SDK renders it
    """

    def __init__(self, tools: Sequence[Tool], language: str = "python") -> None:
        self.language = parse_language(language)
        ordered = sdk_tools(tools)
        counts = Counter(_prefix(t.name) for t in ordered)
        self.entries = [
            _Entry(t, _group(t, counts), first_sentence(t.description)) for t in ordered
        ]
        self.by_name = {e.tool.name: e for e in self.entries}
        self._ranking: _Ranking | None = None  # built at the first search

    def _ranked(self) -> _Ranking:
        if self._ranking is None:
            self._ranking = _Ranking(self.entries)
        return self._ranking

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[dict[str, str]]:
        """The tools best matching ``query``, best first: ``[{"name", "summary"}]``.

        An exact name ranks first (then one equal but for case); the rest by BM25 score, ties
        by name. Only tools that match at least one word of the query are returned.

        Raises:
            ValueError: a query that is not a string, or a limit that is not an int from 1 to
                50 (the program sees it as a failed call, with this message).
        """
        if not isinstance(query, str):
            raise ValueError(f"search_tools needs a query string, got {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ValueError(
                f"search_tools limit must be an int from 1 to {MAX_LIMIT}, got {limit!r}"
            )
        query = query[:MAX_QUERY_CHARS]
        exact = query.strip()
        ranking = self._ranked()
        terms = ranking.expand(query)
        totals = ranking.scores(terms)
        for i, e in enumerate(self.entries):  # exact names, matched by words or not
            if e.tool.name.casefold() == exact.casefold():
                totals.setdefault(i, 0.0)
        scored: list[tuple[int, float, str, int]] = []
        for i, score in totals.items():
            name = self.entries[i].tool.name
            rank = 0 if name == exact else 1 if name.casefold() == exact.casefold() else 2
            if rank < 2 or score > 0:
                scored.append((rank, -score, name, i))
        scored.sort()
        hits = [self.entries[i] for *_, i in scored[:limit]]
        return [
            {"name": e.tool.name, "summary": clip_bytes(e.summary, MAX_LINE_BYTES)} for e in hits
        ]

    def describe(self, name: str) -> str:
        """The declaration of the granted tool ``name``, as the SDK renders it.

        Raises:
            LookupError: no granted tool has that name (a denied tool is not found either).
        """
        entry = self.by_name.get(name) if isinstance(name, str) else None
        if entry is None:
            shown = _shown_name(name) if isinstance(name, str) else repr(name)
            raise LookupError(f"no tool named {shown}; search_tools(query) finds tools")
        return _declarations(self.language, [entry.tool])


# -- the description -----------------------------------------------------------------------------

_PY_HOW = """\
# Python in the Monty sandbox (a subset of Python). %(count)s tools; too many to declare here, so
# the index below names them and the program looks up what it needs (host calls, not tool calls):
#   hits = await search_tools("words", limit=5)   # [{"name": ..., "summary": ...}], best first
#   print(await describe_tool(hits[0]["name"]))   # its typed declaration, docs included
# Call any tool listed, looked up or not: `await tools.name({...})` or `tools["any-name"]({...})`
# (one dict of arguments; every call is type-checked before the run). Fan out with
# `await asyncio.gather(...)`. A failed call raises ToolError (RuntimeError; str(e) is the message).
# The final expression (JSON) is the result; print() goes to logs. Return a summary, not a dump:
#   rows = await tools.some_list({})
#   {"count": len(rows), "first": rows[:3]}"""

_JS_HOW = """\
// JavaScript in V8 (no file system or network). %(count)s tools; too many to declare here, so
// the index below names them and the program looks up what it needs (host calls, not tool calls):
declare function search_tools(query: string, limit?: number):
  Promise<Array<{ name: string; summary: string }>>;
declare function describe_tool(name: string): Promise<string>;
//   const hits = await search_tools("words", 5);   // best first
//   console.log(await describe_tool(hits[0].name)); // its typed declaration, docs included
// Call any tool listed, looked up or not: `await tools.name({...})` or `tools["any-name"]({...})`
// (one object of arguments). Fan out with `await Promise.all([...])`. A failed call throws a
// ToolError (`e.tool`, `e.message`). `return` the result (JSON); console output goes to logs.
// Return a summary, not a dump:
//   const rows = await tools.some_list({});
//   return { count: rows.length, first: rows.slice(0, 3) };"""


def render_index(
    language: str,
    tools: Sequence[Tool],
    *,
    always_loaded: Sequence[str] = (),
    max_bytes: int = MAX_INDEX_BYTES,
    index: ToolIndex | None = None,
) -> str:
    """The description's tool part above the threshold: how to call, the index, and the full
    declarations of the ``always_loaded`` tools (those of them that are granted).

    ``index``: the `ToolIndex` of ``tools`` when the caller built it already. The index is the
    largest of three forms that fits in ``max_bytes``: one line per tool
    (compact signature and first sentence), names only per group, or one line per group
    (its size and its first names). Past even that, later groups are left out and counted.

    Raises:
        ConfigurationError: an unknown language.
    """
    lang = parse_language(language)
    python = lang == "python"
    if index is None or index.language != lang:
        index = ToolIndex(tools, lang)
    prefix = "# " if python else "// "
    how = (_PY_HOW if python else _JS_HOW) % {"count": len(index.entries)}
    groups: dict[str, list[_Entry]] = {}
    for e in index.entries:
        groups.setdefault(e.group, []).append(e)
    ordered = sorted(groups.items())
    body = _fit(
        [
            _per_tool(ordered, prefix, python),
            _names_only(ordered, prefix),
            _per_group(ordered, prefix),
        ],
        max_bytes,
        prefix,
        len(ordered),
    )
    parts = [how, *body]
    loaded = [index.by_name[n].tool for n in sorted(set(always_loaded)) if n in index.by_name]
    if loaded:
        parts.append(f"{prefix}Always loaded (declared in full):")
        parts.append(_declarations(lang, loaded).rstrip("\n"))
    return "\n".join(parts) + "\n"


def _declarations(language: str, tools: Sequence[Tool]) -> str:
    """The SDK of ``tools`` without its header (it is said above, once)."""
    text = render_sdk(language, tools)
    header = SDK_HEADERS[language]
    return text[len(header) + 1 :] if text.startswith(header) else text


def _per_tool(groups: list[tuple[str, list[_Entry]]], prefix: str, python: bool) -> list[list[str]]:
    out = []
    for group, entries in groups:
        lines = [f"{prefix}[{_shown_name(group)}] {len(entries)} tools"]
        for e in entries:
            name = _shown_name(e.tool.name)
            signature = compact_signature(e.tool, python)
            head = f"{prefix}  {name}{signature}"
            if len(head.encode()) > MAX_LINE_BYTES // 2:
                head = f"{prefix}  {name}(…)"
            line = f"{head}: {e.summary}" if e.summary else head
            lines.append(clip_bytes(line, MAX_LINE_BYTES))
        out.append(lines)
    return out


def _names_only(groups: list[tuple[str, list[_Entry]]], prefix: str) -> list[list[str]]:
    out = []
    for group, entries in groups:
        lines = [f"{prefix}[{_shown_name(group)}] {len(entries)} tools:"]
        current = prefix + " "
        for e in entries:
            word = " " + _shown_name(e.tool.name)
            if len((current + word).encode()) > MAX_LINE_BYTES:
                lines.append(current)
                current = prefix + " "
            current += word
        lines.append(current)
        out.append(lines)
    return out


def _per_group(groups: list[tuple[str, list[_Entry]]], prefix: str) -> list[list[str]]:
    out = []
    for group, entries in groups:
        names = ", ".join(_shown_name(e.tool.name) for e in entries[:6])
        more = ", …" if len(entries) > 6 else ""
        line = f"{prefix}[{_shown_name(group)}] {len(entries)} tools, e.g. {names}{more}"
        out.append([clip_bytes(line, MAX_LINE_BYTES)])
    return out


def _fit(forms: list[list[list[str]]], max_bytes: int, prefix: str, count: int) -> list[str]:
    """The first form whose lines fit in ``max_bytes``; else the last, cut to what fits and a
    line counting the groups left out."""
    title = f"{prefix}Index (group, then tools):"
    for form in forms:
        lines = [title, *(line for group in form for line in group)]
        if _size(lines) <= max_bytes:
            return lines
    lines = [title]
    kept = 0
    for group in forms[-1]:
        if _size([*lines, *group]) + MAX_LINE_BYTES > max_bytes:
            break
        lines += group
        kept += 1
    lines.append(f"{prefix}… and {count - kept} more groups: search_tools finds their tools.")
    return lines


def _size(lines: list[str]) -> int:
    return sum(len(line.encode()) + 1 for line in lines)


def disclosed_sdk(
    language: str,
    tools: Sequence[Tool],
    *,
    threshold: int = DEFAULT_SDK_THRESHOLD,
    always_loaded: Sequence[str] = (),
    sdk: str | None = None,
    index: ToolIndex | None = None,
) -> str:
    """What ``run_code``'s description shows of ``tools``: their SDK when it fits in
    ``threshold`` bytes (exactly as before), else `render_index`.

    Args:
        language: The SDK language.
        tools: The granted tools.
        threshold: Bytes of rendered SDK above which the index is shown instead.
        always_loaded: Tool names declared in full beside the index.
        sdk: The SDK of ``tools`` when the caller rendered it already.
        index: The `ToolIndex` of ``tools`` when the caller built it already.

    Raises:
        ConfigurationError: an unknown language, or a threshold that is not a non-negative int.
    """
    check_threshold(threshold)
    full = sdk if sdk is not None else render_sdk(language, tools)
    if len(full.encode("utf-8", "replace")) <= threshold:
        return full
    return render_index(language, tools, always_loaded=always_loaded, index=index)


def check_threshold(threshold: object) -> int:
    """``threshold`` if it is a byte count (an int >= 0), else a
    [`ConfigurationError`][toolnexus.errors.ConfigurationError] naming the option."""
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ConfigurationError(
            f"sdk_threshold must be a number of bytes (an int >= 0), got {threshold!r}; "
            f"leave it out for the default ({DEFAULT_SDK_THRESHOLD})."
        )
    return threshold


def check_always_loaded(names: object) -> tuple[str, ...]:
    """``names`` as a tuple of tool names, or a ConfigurationError naming the option."""
    if (
        isinstance(names, str)
        or not isinstance(names, Sequence)
        or not all(isinstance(n, str) for n in names)
    ):
        raise ConfigurationError(f"always_loaded must be a list of tool names, got {names!r}.")
    return tuple(names)


_PY_DISCOVERY = """
SearchHit = TypedDict("SearchHit", {"name": str, "summary": str})
async def search_tools(query: str, limit: int = 5) -> list[SearchHit]: ...
async def describe_tool(name: str) -> str: ...
"""


_TYPING_IMPORT = re.compile(r"^from typing import (.*)$", re.MULTILINE)


def checker_sdk(language: str, sdk: str) -> str:
    """The SDK a runtime checks programs against: the full ``sdk`` plus the host functions.

    Only the Python runtime type-checks; the JavaScript SDK is returned as it is.
    """
    if language != "python":
        return sdk
    match = _TYPING_IMPORT.search(sdk)
    if match is None:
        return sdk.rstrip("\n") + "\nfrom typing import TypedDict\n" + _PY_DISCOVERY
    names = sorted({*match.group(1).split(", "), "TypedDict"})
    head = sdk[: match.start()] + f"from typing import {', '.join(names)}" + sdk[match.end() :]
    return head.rstrip("\n") + "\n" + _PY_DISCOVERY
