"""Code Mode runtimes: the sandboxes programs run in.

``MontyRuntime`` runs Python (the default); ``V8Runtime`` runs JavaScript in a permission-less
Deno subprocess. Both implement [`CodeRuntime`][toolnexus.codemode.runtimes.CodeRuntime]; budgets
are keyword arguments of either.
"""

from toolnexus.codemode.runtimes._base import (
    MAX_LOOKUPS,
    Budgets,
    CodeRuntime,
    FailureKind,
    ProgramFailure,
    RunReport,
    ToolCaller,
)
from toolnexus.codemode.runtimes._monty import MontyRuntime
from toolnexus.codemode.runtimes._v8 import V8Runtime

__all__ = [
    "MAX_LOOKUPS",
    "Budgets",
    "CodeRuntime",
    "FailureKind",
    "MontyRuntime",
    "ProgramFailure",
    "RunReport",
    "ToolCaller",
    "V8Runtime",
]
