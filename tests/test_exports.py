"""The public face: exported names are pinned, so a change to them is deliberate."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import toolnexus
import toolnexus.agents
import toolnexus.client
import toolnexus.codemode
import toolnexus.codemode.runtimes
import toolnexus.errors
import toolnexus.mcp
import toolnexus.scheduling
import toolnexus.session
import toolnexus.temporal
import toolnexus.testing
import toolnexus.tools
import toolnexus.tools.builtins
import toolnexus.tools.mcp
import toolnexus.tools.relay
import toolnexus.tools.tiers
import toolnexus.view

EXPECTED = {
    toolnexus: [
        "Client", "ConfigurationError", "Endpoint", "Execution", "Guards", "ModelRetry",
        "Outcome", "ProviderError", "Resources", "Retries", "RunContext", "Scheduler", "Session",
        "Timeouts", "Tool", "ToolCall", "ToolError", "ToolHints", "ToolResult",
        "Toolkit", "ToolnexusError", "__version__", "create_client", "run_batch", "tool",
    ],
    toolnexus.errors: [
        "AgentError", "ConfigurationError", "MissingExtraError", "ModelRetry", "PatchError",
        "PayloadStoreError", "ProviderError", "ProviderProtocolError", "ProviderRateLimited",
        "ProviderStatusError", "ProviderTimeout", "ProviderUnreachable", "SessionError",
        "ToolArgumentsError", "ToolError", "ToolnexusError", "ViewError",
    ],
    toolnexus.agents: [
        "AgentDefinition", "AgentError", "AgentRuntime", "Budget", "Handle", "TaskResult",
        "TaskStatus", "agent", "task_tool",
    ],
    toolnexus.client: [
        "Client", "ClientStyle", "DoneEvent", "Endpoint", "Meter", "Retries", "RunResult",
        "RunStatus", "StreamEvent", "TextDelta", "Timeouts",
        "ToolCallEvent", "ToolCallRecord", "ToolResultEvent", "Usage", "UsageEvent",
        "create_client",
    ],
    toolnexus.scheduling: [
        "EVERYTHING", "MAX_KEY_WORK", "AuditNaming", "Dispatch", "HostReason", "Mode", "Outcome", "Scheduler", "SchedulingRule", "Ticket",
        "ToolCall", "Wait", "concurrency_mode", "invoke_tool", "max_tool_concurrency", "result_snapshot", "run_batch", "snapshot",
    ],
    toolnexus.session: ["BOOKKEEPING_TYPES", "MAX_DEPTH", "SURFACE_TYPES", "Event", "Session", "events"],
    toolnexus.mcp: [
        "Gateway", "GatewayMode", "gateway_options", "load_config", "run_gateway", "serve",
        "serve_config",
    ],
    toolnexus.temporal: [
        "BATCH_WORKFLOW", "CONTINUE_AFTER", "LOST", "MAX_RESULT_BYTES", "PROGRAM_WORKFLOW",
        "RUN_WORKFLOW", "BatchWorkflow", "FileStore", "ProgramWorkflow", "RunHandle",
        "RunWorkflow", "Timings", "file_store", "replayer", "run_batch", "run_program",
        "start_program", "start_run", "worker",
    ],
    toolnexus.testing: [
        "FunctionModel",
        "ModelReply",
        "ScriptedModel",
        "TestModel",
        "program_for",
        "sample_arguments",
    ],
    toolnexus.view: ["build", "read_events", "render", "trace"],
    toolnexus.tools: [
        "AfterHook", "ApprovalHandler", "BeforeHook", "ConcurrencyPredicate", "Guards", "HostReason",
        "Mode", "Outcome", "PermissionPolicy", "Resources", "ResourcesFunction", "RunContext",
        "Tool", "ToolHints", "ToolHooks", "ToolResult", "Toolkit", "classify", "concurrency_mode",
        "tool",
    ],
    toolnexus.tools.builtins: [
        "PatchError", "PrivateNetwork", "QuestionHandler", "SearchBackend", "Todo", "builtin_tools",
    ],
    toolnexus.tools.mcp: [
        "MAX_LIST_PAGES", "ContentParts", "FileTokenStorage", "McpTools", "MemoryTokenStorage",
        "ServerConfig", "describe_part", "headless_authorization", "image_problem", "list_all",
        "mcp_servers", "oauth_provider", "parse_config",
    ],
    toolnexus.tools.tiers: ["CALL_TOOL", "DEFAULT_THRESHOLD", "TOOL_SEARCH", "tool_tiers"],
    toolnexus.tools.relay: ["is_relay", "relay_tool"],
    toolnexus.codemode: [
        "DEFAULT_SDK_THRESHOLD", "RUN_CODE_NAME", "ApprovalHandler", "CodeMode", "Execution",
        "PermissionPolicy", "RunContext", "ToolIndex", "await_timeout", "collapse_message",
        "collapsed", "default_runtime", "disclosed_sdk", "is_transport_call", "new_parent_token",
        "parse_mode", "render_sdk", "run_code_tool", "run_program", "runtime_available",
        "tag_transport", "visible_tools",
    ],
    toolnexus.codemode.runtimes: [
        "MAX_LOOKUPS", "Budgets", "CodeRuntime", "FailureKind", "MontyRuntime", "ProgramFailure", "RunReport",
        "ToolCaller", "V8Runtime",
    ],
}  # fmt: skip


def test_exported_names_are_pinned_and_importable() -> None:
    # (ruff's RUF022 keeps each __all__ sorted, isort-style)
    for module, names in EXPECTED.items():
        assert module.__all__ == names, module.__name__
        for name in names:
            assert getattr(module, name) is not None


def test_public_callables_have_docstrings() -> None:
    for module in EXPECTED:
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isfunction(value) or inspect.isclass(value):
                assert (value.__doc__ or "").strip(), f"{module.__name__}.{name}"


def test_errors_tree() -> None:
    from toolnexus.errors import (
        ConfigurationError,
        SessionError,
        ToolArgumentsError,
        ToolError,
        ToolnexusError,
    )

    for error in (ConfigurationError, SessionError, ToolArgumentsError):
        assert issubclass(error, ToolnexusError) and issubclass(error, ValueError)
    assert issubclass(ToolError, ToolnexusError) and not issubclass(ToolError, ValueError)
    e = ToolError("read", "no such file")
    assert (e.tool, e.message, str(e)) == ("read", "no such file", "no such file")
    assert repr(e) == "ToolError(tool='read', message='no such file')"
    assert str(ToolArgumentsError("t", [])) == (
        "invalid arguments for tool 't': arguments do not match the schema"
    )


def _drawn_tree(text: str) -> dict[str, str | None]:
    """Each class a drawn tree names, with the class it hangs under (``None``: a root)."""
    import re

    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        match = re.match(r"^([\s│├└─]*?)([A-Z]\w+)(?: \(|\s{2,}|$)", line.strip("\n"))
        if match is None or not match.group(2).endswith(
            ("Error", "Retry", "Limited", "Timeout", "Unreachable")
        ):
            continue
        depth = len(match.group(1))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[match.group(2)] = stack[-1][1] if stack else None
        stack.append((depth, match.group(2)))
    return parents


def test_the_errors_tree_drawn_in_the_docstring_and_the_docs_is_the_class_tree() -> None:
    """Every name in ``toolnexus.errors.__all__`` is drawn once, under its real base class, in
    the module docstring and in docs/errors.md, and nothing else is drawn."""
    from pathlib import Path

    module = toolnexus.errors
    docs = (Path(__file__).parent.parent / "docs" / "errors.md").read_text(encoding="utf-8")
    for where, text in (("docstring", module.__doc__ or ""), ("docs/errors.md", docs)):
        drawn = _drawn_tree(text)
        assert sorted(drawn) == sorted(module.__all__), where
        for name, parent in drawn.items():
            cls = getattr(module, name)
            toolnexus_bases = [b.__name__ for b in cls.__bases__ if b.__module__ == module.__name__]
            assert toolnexus_bases == ([parent] if parent else []), (where, name)


def test_model_retry_is_a_signal_outside_the_error_tree() -> None:
    from toolnexus.errors import ModelRetry, ToolnexusError

    assert not issubclass(ModelRetry, ToolnexusError) and issubclass(ModelRetry, Exception)


def test_outcome_unwrap() -> None:
    import pytest

    from toolnexus.errors import ToolError
    from toolnexus.scheduling import Outcome

    assert Outcome(value=3).unwrap() == 3
    assert Outcome(value=3).ok and not Outcome.failure("t", "m").ok
    with pytest.raises(ToolError, match="boom") as info:
        Outcome.failure("t", "boom").unwrap()
    assert info.value.tool == "t"


LAYERS = [
    "errors", "session", "tools", "scheduling", "codemode", "client", "agents", "temporal", "mcp",
    "cli",
]  # fmt: skip
"""Lowest first; a module may import its own layer and those below (private root modules
like ``toolnexus._json`` sit on the lowest floor, with ``errors``)."""


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "toolnexus" or len(parts) < 2:
        return None
    if parts[1].startswith("_"):
        return 0
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """Every module ``tree`` imports, anywhere (in functions, methods, ``TYPE_CHECKING``
    blocks, ``importlib.import_module("...")`` calls), with its line."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join([*(base if node.level else []), *filter(None, [node.module])])
            yield node.lineno, target
            if target == "toolnexus":  # from toolnexus import codemode
                yield from ((node.lineno, f"toolnexus.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))
            and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _upward_imports(src: Path) -> list[str]:
    upward = []
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        module = ".".join(parts).removesuffix(".__init__")
        own = _layer(module)
        if own is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, target in _imported(tree, module, parts[-1] == "__init__"):
            layer = _layer(target)
            if layer is not None and layer > own:
                upward.append(f"{module} imports {target} (line {line})")
    return sorted(set(upward))


def test_no_module_imports_a_higher_layer_even_lazily() -> None:
    """A lower layer never imports a higher one: at import time, inside a function, under
    ``TYPE_CHECKING`` or through ``importlib``."""
    assert _upward_imports(Path(__file__).parent.parent / "src") == []


def test_the_layering_check_sees_lazy_imports(tmp_path: Path) -> None:
    package = tmp_path / "toolnexus" / "tools"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from toolnexus.errors import ToolError\n")
    (package / "_lazy.py").write_text(
        "def f():\n    from toolnexus.codemode import direct_dispatch\n"
        "class C:\n    def g(self):\n        import toolnexus.client\n"
        "def h():\n    from .. import agents\n"
        "def i():\n    import importlib\n    importlib.import_module('toolnexus.mcp')\n"
    )
    assert _upward_imports(tmp_path) == [
        "toolnexus.tools._lazy imports toolnexus.agents (line 7)",
        "toolnexus.tools._lazy imports toolnexus.client (line 5)",
        "toolnexus.tools._lazy imports toolnexus.codemode (line 2)",
        "toolnexus.tools._lazy imports toolnexus.mcp (line 10)",
    ]


PRIVATE_READS_ALLOWED = 4
"""How many imports in one top-level package still read another package's private modules
(57 when this was first counted). Lower it when you remove one; never raise it: a package
offers what its neighbours need from its ``__init__`` (the public names, and a block marked
as its interface to the layers above). The four left: ``toolnexus.testing``, a public facade
of the client's in-process models (3), and the gateway's proxy reading how the MCP client
words a problem (1)."""


def _private_reads(src: Path) -> list[str]:
    """Every ``from toolnexus.<other>._<private> import ...`` (anywhere in a module) whose
    ``<other>`` is not the importing module's own top-level package."""
    reads = []
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        module = ".".join(parts).removesuffix(".__init__")
        own = module.split(".")[1] if module.count(".") else ""
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, target in _imported(tree, module, parts[-1] == "__init__"):
            names = target.split(".")
            if names[0] != "toolnexus" or len(names) < 3 or names[1] == own:
                continue
            if not names[1].startswith("_") and any(name.startswith("_") for name in names[2:]):
                reads.append(f"{module} reads {target} (line {line})")
    return sorted(set(reads))


def test_private_modules_are_read_across_packages_no_more_than_counted() -> None:
    reads = _private_reads(Path(__file__).parent.parent / "src")
    assert len(reads) <= PRIVATE_READS_ALLOWED, "\n".join(reads)


def test_the_private_read_count_sees_every_kind_of_import(tmp_path: Path) -> None:
    package = tmp_path / "toolnexus" / "client"
    package.mkdir(parents=True)
    (package / "_loop.py").write_text(
        "from toolnexus.tools._calls import dispatch_call\n"
        "from toolnexus.client._turn import run_calls\n"  # its own package: fine
        "from toolnexus.tools import Tool\n"  # a package's own surface: fine
        "def f():\n    from toolnexus.scheduling._batch import precheck\n"
    )
    assert _private_reads(tmp_path) == [
        "toolnexus.client._loop reads toolnexus.scheduling._batch (line 5)",
        "toolnexus.client._loop reads toolnexus.tools._calls (line 1)",
    ]


def _import_circles(src: Path) -> list[tuple[str, ...]]:
    """Pairs and longer circles of modules that import each other, in any way (at import
    time, lazily in a function, or for type checking only: a circle a type checker needs is
    still two modules that cannot be read apart)."""
    paths = {
        ".".join(p.relative_to(src).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted(src.rglob("*.py"))
    }
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                package = module.rpartition(".")[0].split(".")
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join([*base, node.module])
                found = {target, *(f"{target}.{alias.name}" for alias in node.names)}
                graph.setdefault(module, set()).update(
                    m for m in found if m in paths and paths[m].name != "__init__.py"
                )
    circles: set[tuple[str, ...]] = set()

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                circles.add(tuple(path))
            elif nxt > start and nxt not in path:
                walk(start, nxt, [*path, nxt])

    for module in sorted(graph):
        walk(module, module, [module])
    return sorted(circles)


def test_no_two_modules_import_each_other() -> None:
    assert _import_circles(Path(__file__).parent.parent / "src") == []


def test_the_circle_check_sees_lazy_and_type_only_imports(tmp_path: Path) -> None:
    package = tmp_path / "toolnexus" / "agents"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from toolnexus.agents._runtime import AgentRuntime\n")
    (package / "_runtime.py").write_text(
        "def f():\n    from toolnexus.agents._task import task_tool\n"
    )
    (package / "_task.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from toolnexus.agents._runtime import AgentRuntime\n"
    )
    (package / "_definition.py").write_text("from toolnexus.agents import AgentRuntime\n")
    assert _import_circles(tmp_path) == [("toolnexus.agents._runtime", "toolnexus.agents._task")]


def test_importing_toolnexus_imports_no_provider_sdk() -> None:
    # The official SDKs take about a second each to import, and the CLI, the gateway and the
    # workers start with `import toolnexus`: a style reads its SDK's errors when first asked.
    code = "import sys, toolnexus.cli; print(sorted({'openai', 'anthropic'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_a_style_reads_its_sdks_errors_when_asked() -> None:
    import anthropic
    import openai

    from toolnexus.client.styles._anthropic import AnthropicStyle
    from toolnexus.client.styles._openai import OpenAIStyle
    from toolnexus.client.styles._responses import ResponsesStyle

    assert OpenAIStyle.errors.timeout == (openai.APITimeoutError,)
    assert ResponsesStyle.errors.status == (openai.APIStatusError,)
    assert AnthropicStyle.errors.rate_limited == (anthropic.RateLimitError,)
