"""Resource templates as the gateway routes reads by them: which URIs a template matches, how
specific it is, and whether two templates can match one URI.

A template (RFC 6570, simple and reserved expansion, path and query forms) is read as literal
characters, matched exactly, and expressions, matched loosely by what their operator may
expand to. A URI that several templates match goes to the most specific
(`Template.specificity`):

1. more literal characters;
2. then fewer expressions that may span a ``/`` (``{+x}``, ``{#x}``, ``{/x}``, ``{?x}``);
3. then fewer expressions in all.

Two templates of two servers that are equally specific and can match one URI
(`Template.overlaps`) could not be told apart: the gateway refuses them at start.

Matching runs the template's automaton over the URI (time linear in the URI's length), not a
backtracking regular expression, so no template an upstream lists can make a read slow.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Template"]


class _Chars(NamedTuple):
    """A set of characters: ``chars`` itself, or every character but those (``excluded``)."""

    chars: frozenset[str]
    excluded: bool

    def has(self, char: str) -> bool:
        return (char in self.chars) != self.excluded

    def meets(self, other: _Chars) -> bool:
        """Whether a character is in both sets (there are always characters outside a set)."""
        if self.excluded and other.excluded:
            return True
        if self.excluded:
            return bool(other.chars - self.chars)
        if other.excluded:
            return bool(self.chars - other.chars)
        return bool(self.chars & other.chars)


class _Expression(NamedTuple):
    """What one operator's expression matches: an optional lead character (one of ``lead``),
    then any run of characters not in ``stops``."""

    lead: str
    stops: str


_EXPRESSIONS = {
    "": _Expression("", "/?#&"),
    "+": _Expression("", ""),
    "#": _Expression("", ""),
    "/": _Expression("/", "?#"),
    "?": _Expression("?&", "#"),
    "&": _Expression("?&", "#"),
}
"""Each operator's expression (any other operator, ``.`` and ``;``, matches as a simple one)."""


@dataclass
class _Automaton:
    """A nondeterministic automaton over character sets: state ``i``'s edges, by character set
    and target, and its empty moves; state 0 starts, the last state accepts."""

    edges: list[list[tuple[_Chars, int]]] = field(default_factory=lambda: [[]])
    empty: list[list[int]] = field(default_factory=lambda: [[]])

    def _state(self) -> int:
        self.edges.append([])
        self.empty.append([])
        return len(self.edges) - 1

    def literal(self, char: str) -> None:
        here = len(self.edges) - 1
        self.edges[here].append((_Chars(frozenset(char), False), self._state()))

    def expression(self, expression: _Expression) -> None:
        start = len(self.edges) - 1
        run = start
        if expression.lead:
            run = self._state()
            self.edges[start].append((_Chars(frozenset(expression.lead), False), run))
        self.edges[run].append((_Chars(frozenset(expression.stops), True), run))
        end = self._state()
        self.empty[run].append(end)
        if expression.lead:
            self.empty[start].append(end)

    def _closure(self, states: Iterable[int]) -> set[int]:
        reached = set(states)
        stack = list(reached)
        while stack:
            for target in self.empty[stack.pop()]:
                if target not in reached:
                    reached.add(target)
                    stack.append(target)
        return reached

    def accepts(self, text: str) -> bool:
        """Whether ``text`` is accepted (the set of states run over it)."""
        states = self._closure([0])
        for char in text:
            states = self._closure(
                target for state in states for chars, target in self.edges[state] if chars.has(char)
            )
            if not states:
                return False
        return len(self.edges) - 1 in states

    def meets(self, other: _Automaton) -> bool:
        """Whether some string is accepted by both (a search over pairs of states)."""
        final = (len(self.edges) - 1, len(other.edges) - 1)
        seen = {(0, 0)}
        queue = deque(seen)
        while queue:
            pair = queue.popleft()
            if pair == final:
                return True
            mine, theirs = pair
            following = [(m, theirs) for m in self.empty[mine]]
            following += [(mine, t) for t in other.empty[theirs]]
            following += [
                (m, t)
                for chars, m in self.edges[mine]
                for other_chars, t in other.edges[theirs]
                if chars.meets(other_chars)
            ]
            for step in following:
                if step not in seen:
                    seen.add(step)
                    queue.append(step)
        return False


@dataclass(frozen=True)
class Template:
    """One server's resource template, as the gateway routes by it.

    Args:
        text: The template as the server listed it (``note://t/{id}``).
        server: The server that listed it.
    """

    text: str
    server: str
    specificity: tuple[int, int, int] = field(init=False, compare=False)
    _automaton: _Automaton = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        automaton = _Automaton()
        literals = spanning = expressions = 0
        for literal, braced in re.findall(r"([^{]*)(\{[^}]*\}|\{)?", self.text):
            if braced == "{":  # a "{" that is never closed is a literal character
                literal += braced
                braced = ""
            literals += len(literal)
            for char in literal:
                automaton.literal(char)
            if braced:
                expression = _EXPRESSIONS.get(braced[1:2], _EXPRESSIONS[""])
                automaton.expression(expression)
                expressions += 1
                spanning += "/" not in expression.stops
        object.__setattr__(self, "specificity", (literals, -spanning, -expressions))
        object.__setattr__(self, "_automaton", automaton)

    def matches(self, uri: str) -> bool:
        """Whether ``uri`` is one this template expands to."""
        return self._automaton.accepts(uri)

    def overlaps(self, other: Template) -> bool:
        """Whether some URI matches both templates."""
        return self._automaton.meets(other._automaton)
