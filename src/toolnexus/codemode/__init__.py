"""Code Mode: the model writes a program that calls tools as functions.

A program's sub-calls stream into one scheduler lane per run, exactly like a batch of native
calls. The model is explained once, with a diagram, in ``docs/codemode.md``; the sandboxes are in
[`toolnexus.codemode.runtimes`][toolnexus.codemode.runtimes].
"""

from toolnexus.codemode._bindings import Binding, bindings, denied_message
from toolnexus.codemode._discovery import (
    DEFAULT_SDK_THRESHOLD,
    ToolIndex,
    check_always_loaded,
    check_threshold,
    checker_sdk,
    disclosed_sdk,
    render_index,
)
from toolnexus.codemode._execution import Execution
from toolnexus.codemode._modes import (
    RUN_CODE_NAME,
    CodeMode,
    collapse_message,
    collapsed,
    default_mode,
    is_transport_call,
    new_parent_token,
    parse_mode,
    resolve_mode,
    tag_transport,
)
from toolnexus.codemode._run_code import (
    RUN_CODE_BASE_DESCRIPTION,
    await_timeout,
    default_runtime,
    program_output,
    run_code_tool,
    run_program,
    runtime_available,
    visible_tools,
)
from toolnexus.codemode._sdk import render_sdk
from toolnexus.tools._calls import ApprovalHandler, RunContext, direct_dispatch
from toolnexus.tools._policy import PermissionPolicy, filter_tools

__all__ = [
    "DEFAULT_SDK_THRESHOLD",
    "RUN_CODE_BASE_DESCRIPTION",
    "RUN_CODE_NAME",
    "ApprovalHandler",
    "Binding",
    "CodeMode",
    "Execution",
    "PermissionPolicy",
    "RunContext",
    "ToolIndex",
    "await_timeout",
    "bindings",
    "check_always_loaded",
    "check_threshold",
    "checker_sdk",
    "collapse_message",
    "collapsed",
    "default_mode",
    "default_runtime",
    "denied_message",
    "direct_dispatch",
    "disclosed_sdk",
    "filter_tools",
    "is_transport_call",
    "new_parent_token",
    "parse_mode",
    "program_output",
    "render_index",
    "render_sdk",
    "resolve_mode",
    "run_code_tool",
    "run_program",
    "runtime_available",
    "tag_transport",
    "visible_tools",
]
