"""Type-checking programs against the SDK with Monty's bundled checker (``ty``), warm.

Why a separate, long-lived session: the checker's first run in a session costs ~50 ms (the
checker starts and loads the stubs), later ones ~2 ms. A run's own session cannot be reused
across runs (globals would leak between programs), so each SDK gets one *checker* session,
kept warm, that only ever defines a function: the program is checked as the body of
``async def _toolnexus_check_N():`` and nothing in it executes. Diagnostics are mapped back to
the program's own lines and columns.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import OrderedDict

import pydantic_monty as monty

__all__ = ["Checker", "CheckerCache"]

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


class Checker:
    """One warm checker session for one SDK; use from one thread at a time."""

    def __init__(self, pool: monty.Monty, sdk: str) -> None:
        self._checkout = pool.checkout(
            type_check=True, type_check_stubs=sdk, type_check_format="concise"
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
