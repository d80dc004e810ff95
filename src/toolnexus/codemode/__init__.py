"""Code Mode: the model writes a program that calls tools as functions.

A program's sub-calls stream into one scheduler lane per run, exactly like a batch of native
calls. The model is explained once, with a diagram, in ``docs/codemode.md``; the sandboxes are in
[`toolnexus.codemode.runtimes`][toolnexus.codemode.runtimes].
"""

from toolnexus.codemode._discovery import DEFAULT_SDK_THRESHOLD, ToolIndex, disclosed_sdk
from toolnexus.codemode._execution import Execution
from toolnexus.codemode._modes import (
    RUN_CODE_NAME,
    CodeMode,
    collapse_message,
    collapsed,
    is_transport_call,
    new_parent_token,
    parse_mode,
    tag_transport,
)
from toolnexus.codemode._run_code import (
    await_timeout,
    default_runtime,
    run_code_tool,
    run_program,
    runtime_available,
    visible_tools,
)
from toolnexus.codemode._sdk import render_sdk
from toolnexus.tools import ApprovalHandler, PermissionPolicy, RunContext

# isort: split
# The package's interface to the layers above it (the client loop, the durable workflows, the
# gateway), which build ``run_code`` their own way. Not public API: it may change in any
# release. Imported here so that those layers read this package, never its private modules.
from toolnexus.codemode._bindings import Binding as Binding
from toolnexus.codemode._bindings import bindings as bindings
from toolnexus.codemode._bindings import denied_message as denied_message
from toolnexus.codemode._discovery import check_always_loaded as check_always_loaded
from toolnexus.codemode._discovery import check_threshold as check_threshold
from toolnexus.codemode._discovery import checker_sdk as checker_sdk
from toolnexus.codemode._discovery import render_index as render_index
from toolnexus.codemode._execution import disclosure_from as disclosure_from
from toolnexus.codemode._execution import execution_from as execution_from
from toolnexus.codemode._modes import default_mode as default_mode
from toolnexus.codemode._modes import resolve_mode as resolve_mode
from toolnexus.codemode._run_code import CODE_MODE_NAMING as CODE_MODE_NAMING
from toolnexus.codemode._run_code import RUN_CODE_BASE_DESCRIPTION as RUN_CODE_BASE_DESCRIPTION
from toolnexus.codemode._run_code import program_output as program_output
from toolnexus.codemode._schema_types import python_attribute as python_attribute
from toolnexus.codemode._schema_types import python_literal as python_literal
from toolnexus.codemode._sdk import sdk_tools as sdk_tools
from toolnexus.tools import direct_dispatch as direct_dispatch
from toolnexus.tools import filter_tools as filter_tools

__all__ = [
    "DEFAULT_SDK_THRESHOLD",
    "RUN_CODE_NAME",
    "ApprovalHandler",
    "CodeMode",
    "Execution",
    "PermissionPolicy",
    "RunContext",
    "ToolIndex",
    "await_timeout",
    "collapse_message",
    "collapsed",
    "default_runtime",
    "disclosed_sdk",
    "is_transport_call",
    "new_parent_token",
    "parse_mode",
    "render_sdk",
    "run_code_tool",
    "run_program",
    "runtime_available",
    "tag_transport",
    "visible_tools",
]
