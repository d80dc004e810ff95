"""Type-checking programs against the SDK with Monty's bundled checker (``ty``), warm.

Why a separate, long-lived session: the checker's first run in a session costs ~50 ms (the
checker starts and loads the stubs), later ones ~2 ms. A run's own session cannot be reused
across runs (globals would leak between programs), so each SDK gets one *checker* session,
kept warm, that only ever defines a function: the program is checked as the body of
``async def _toolnexus_check_N():`` and nothing in it executes. Diagnostics are mapped back to
the program's own lines and columns.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import threading
from collections import OrderedDict

import pydantic_monty as monty

__all__ = ["Checker", "CheckerCache", "checker_stubs"]

_INDENT = "    "
_POSITION = re.compile(r"^main\.py:(\d+):(\d+):", re.MULTILINE)
MAX_CHECKS_PER_SESSION = 200
"""A checker session accumulates every function it checked; recycle it after this many."""


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""What ends a line for Python's tokenizer. Not ``str.splitlines()``, which also breaks at
U+2028, form feeds and other characters that may sit inside a string literal."""


def _wrap(code: str, n: int) -> str:
    lines = _LINE_BREAK.split(code.rstrip("\r\n")) if code.strip() else []
    body = "\n".join(_INDENT + line for line in lines) or f"{_INDENT}pass"
    return f"async def _toolnexus_check_{n}():\n{body}\n{_INDENT}pass\n"


def _unwrap_positions(text: str) -> str:
    def shift(m: re.Match[str]) -> str:
        line, col = int(m.group(1)) - 1, max(int(m.group(2)) - len(_INDENT), 1)
        return f"line {line}, column {col}:"

    return _POSITION.sub(shift, text)


_SUBSCRIPT_NAMES = ("Awaitable", "Callable", "Literal", "overload")


def checker_stubs(sdk: str) -> str:
    """The Python SDK as the type checker sees it: ``tools["name"]`` typed for every tool.

    The SDK in ``run_code``'s description declares a tool whose name is an identifier once, as
    a method, so ``tools["add"]`` would reach only the untyped fallback of ``__getitem__``
    and a wrong argument would fail at the call instead of before any call. Here each such
    method also gets its ``__getitem__`` overload (same argument and result types), ahead
    of the fallback: the subscript form is checked like the attribute form, at no cost to the
    description the model reads. Anything that is not a Tools class of that shape is left as
    it is.
    """
    try:
        tree = ast.parse(sdk)
    except SyntaxError:
        return sdk
    tools = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tools"), None)
    if tools is None:
        return sdk
    methods: list[ast.stmt] = []
    overloads: list[ast.stmt] = []
    for item in tools.body:
        args = item.args.posonlyargs if isinstance(item, ast.AsyncFunctionDef) else []
        if isinstance(item, ast.AsyncFunctionDef) and len(args) == 2 and args[1].annotation:
            arg_type, result = (
                ast.unparse(args[1].annotation),
                (ast.unparse(item.returns) if item.returns else "Any"),
            )
            overloads.append(
                ast.parse(
                    f"@overload\ndef __getitem__(self, name: Literal[{json.dumps(item.name)}]) "
                    f"-> Callable[[{arg_type}], Awaitable[{result}]]: ...\n"
                ).body[0]
            )
        if not (isinstance(item, ast.FunctionDef) and item.name == "__getitem__"):
            methods.append(item)
    if not overloads:
        return sdk
    getitems = [i for i in tools.body if isinstance(i, ast.FunctionDef) and i.name == "__getitem__"]
    if len(getitems) == 1:  # the fallback alone: it becomes an overload, then the implementation
        fallback = getitems[0]
        fallback.decorator_list = [ast.Name("overload")]
        getitems.append(ast.parse("def __getitem__(self, name: str) -> Any: ...\n").body[0])  # type: ignore[arg-type]
    tools.body = [*methods, *overloads, *getitems]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "typing":
            have = {a.name for a in node.names}
            node.names += [ast.alias(n) for n in _SUBSCRIPT_NAMES if n not in have]
            node.names.sort(key=lambda a: a.name)
    return ast.unparse(tree) + "\n"


class Checker:
    """One warm checker session for one SDK; use from one thread at a time."""

    def __init__(self, pool: monty.Monty, sdk: str) -> None:
        self._checkout = pool.checkout(
            type_check=True, type_check_stubs=checker_stubs(sdk), type_check_format="concise"
        )
        self._session = self._checkout.__enter__()
        self.checks = 0
        self.closed = False
        self.lock = threading.Lock()

    def check(self, code: str) -> str | None:
        """``None`` when ``code`` type-checks, else the diagnostics (program positions)."""
        self.checks += 1
        try:
            self._session.feed_run(_wrap(code, self.checks))
        except monty.MontyTypingError as exc:
            return _unwrap_positions(exc.display().strip())
        except (monty.MontyCrashedError, monty.MontyDisconnectError):
            raise  # the checker is gone, not the program's fault
        except monty.MontyError as exc:  # a syntax error the checker did not report as typing
            return _unwrap_positions(str(exc))
        return None

    def close(self) -> None:
        """Return the worker to the pool."""
        self.closed = True
        with contextlib.suppress(monty.MontyError):
            self._checkout.__exit__(None, None, None)


class CheckerCache:
    """Warm checkers for the most recently used SDKs (thread-safe).

    Never more than `SIZE` checker sessions exist at once (an old one is closed before a
    new one is opened), so the pool can always reserve that many workers for them: a run that
    waits for its check must never wait for a worker that another waiting run holds.
    """

    SIZE = 2

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._checkers: OrderedDict[str, Checker] = OrderedDict()
        self._lock = threading.Lock()  # the table
        self._opening = threading.Lock()  # one checker opens at a time

    def check(self, pool: monty.Monty, sdk: str, code: str) -> str | None:
        """Type-check ``code`` against ``sdk``; blocks (run it in a worker thread)."""
        while True:
            checker = self._checker(pool, sdk)
            with checker.lock:
                if checker.closed:  # evicted between lookup and lock: take a fresh one
                    continue
                try:
                    return checker.check(code)
                except monty.MontyCrashedError:
                    self._drop(sdk, checker)
                    raise
                finally:
                    if checker.checks >= MAX_CHECKS_PER_SESSION:
                        self._drop(sdk, checker)

    def close(self) -> None:
        """Close every checker."""
        with self._lock:
            checkers = list(self._checkers.values())
            self._checkers.clear()
        for checker in checkers:
            checker.close()

    def _checker(self, pool: monty.Monty, sdk: str) -> Checker:
        with self._opening:
            with self._lock:
                checker = self._checkers.get(sdk)
                if checker is not None:
                    self._checkers.move_to_end(sdk)
                    return checker
                evicted = []
                while len(self._checkers) >= self._size:
                    evicted.append(self._checkers.popitem(last=False)[1])
            for old in evicted:
                with old.lock:  # let a check in progress finish first
                    old.close()
            checker = Checker(pool, sdk)
            with self._lock:
                self._checkers[sdk] = checker
            return checker

    def _drop(self, sdk: str, checker: Checker) -> None:
        with self._lock:
            if self._checkers.get(sdk) is checker:
                del self._checkers[sdk]
        checker.close()
