"""Option checks shared by every constructor that takes counts or durations."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TypeGuard

from toolnexus.errors import ConfigurationError

__all__ = ["int_at_least", "positive_int", "positive_number", "refuse_unknown"]


def int_at_least(value: object, minimum: int) -> TypeGuard[int]:
    """Whether ``value`` is an int (``True``/``False`` are not counts) of at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def positive_int(subject: str, value: object) -> int:
    """``value`` when it is a positive int.

    Raises:
        ConfigurationError: "``subject`` must be a positive integer, got ``value``."
    """
    if not int_at_least(value, 1):
        raise ConfigurationError(f"{subject} must be a positive integer, got {value!r}.")
    return value


def positive_number(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a finite int or float above zero (a number of seconds, say);
    ``True``/``False`` are not numbers here."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def refuse_unknown(
    given: Iterable[object], known: Sequence[str], what: str, where: str = ""
) -> None:
    """Refuse names that ``known`` does not hold.

    Raises:
        ConfigurationError: "unknown ``what`` a, b``where``; known: c, d." (sorted).
    """
    unknown = sorted(str(name) for name in set(given) - set(known))
    if unknown:
        raise ConfigurationError(
            f"unknown {what} {', '.join(unknown)}{where}; known: {', '.join(known)}."
        )
