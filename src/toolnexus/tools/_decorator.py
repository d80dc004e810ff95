"""``@tool``: a [`Tool`][toolnexus.tools.Tool] from a type-annotated function.

The function's parameters become the tool's arguments: their annotations give the JSON Schema
(through pydantic), their defaults make them optional, and the ``Args:`` section of the
docstring (Google, NumPy or reST style) gives each one its description. A parameter named
``ctx`` is not an argument: it receives the run context the caller passed along.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, overload

import docstring_parser
import typing_extensions
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, create_model
from pydantic.json_schema import GenerateJsonSchema

from toolnexus.errors import ConfigurationError
from toolnexus.tools._resources import ResourcesFunction
from toolnexus.tools._tool import (
    AsyncValidatingCall,
    ConcurrencyPredicate,
    Tool,
    ToolHints,
    ToolResult,
    ValidatingCall,
)

__all__ = ["tool"]

CONTEXT_PARAMETER = "ctx"

_FORBIDDEN_KINDS = {
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
    inspect.Parameter.POSITIONAL_ONLY: "positional-only parameters",
}


class _ToolSchemaGenerator(GenerateJsonSchema):
    """JSON Schema without pydantic's generated ``title`` keys, which only cost prompt tokens."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _describe(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The tool description and the per-parameter descriptions, from the docstring."""
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    parts = [p for p in (doc.short_description, doc.long_description) if p]
    params = {p.arg_name: p.description or "" for p in doc.params}
    return "\n\n".join(parts), params


def _arguments_model(
    fn: Callable[..., Any], tool_name: str
) -> tuple[type[BaseModel], list[str], bool, str]:
    """Build the pydantic model of ``fn``'s arguments.

    Returns the model, the parameter names (in order), whether ``fn`` takes ``ctx``, and the
    description. Fields are named ``p0, p1, ...`` with the real parameter name as alias, so a
    parameter may be called ``json`` or ``schema`` without shadowing ``BaseModel`` attributes.
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(
            f"@tool '{tool_name}': cannot resolve the type annotations of "
            f"{fn.__qualname__}: {exc}. Import every name used in an annotation at module level."
        ) from exc
    description, param_docs = _describe(fn)
    fields: dict[str, Any] = {}
    names: list[str] = []
    takes_ctx = False
    for param in inspect.signature(fn).parameters.values():
        if param.name == CONTEXT_PARAMETER:
            takes_ctx = True
            continue
        if param.kind in _FORBIDDEN_KINDS:
            raise ConfigurationError(
                f"@tool '{tool_name}': {_FORBIDDEN_KINDS[param.kind]} ({param.name}) cannot be "
                "described to a model; use named parameters with type annotations."
            )
        default = ... if param.default is inspect.Parameter.empty else param.default
        annotation = hints.get(param.name, Any)
        info = Field(default, alias=param.name, description=param_docs.get(param.name) or None)
        fields[f"p{len(names)}"] = (annotation, info)
        names.append(param.name)
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    model = create_model(f"{tool_name}_arguments", __config__=config, **fields)
    return model, names, takes_ctx, description


def _make_execute(
    fn: Callable[..., Any], model: type[BaseModel], names: list[str], takes_ctx: bool
) -> ValidatingCall:
    """``fn`` as ``execute(args, ctx)``: validated by ``model``, called with keywords."""

    def keywords(parsed: BaseModel, ctx: Any) -> dict[str, Any]:
        kwargs = {name: getattr(parsed, f"p{i}") for i, name in enumerate(names)}
        if takes_ctx:
            kwargs[CONTEXT_PARAMETER] = ctx
        return kwargs

    if inspect.iscoroutinefunction(fn):

        async def run_async(parsed: BaseModel, ctx: Any) -> Any:
            return await fn(**keywords(parsed, ctx))

        return AsyncValidatingCall(model, run_async)

    def run_sync(parsed: BaseModel, ctx: Any) -> Any:
        return fn(**keywords(parsed, ctx))

    return ValidatingCall(model, run_sync)


def _output_schema(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """JSON Schema of ``fn``'s return annotation (TypedDict, pydantic model, dataclass, list,
    dict, scalars); ``None`` when it has none, returns ``Any``, or cannot be described."""
    try:
        annotation = typing.get_type_hints(fn).get("return", Any)
    except Exception:  # the arguments' annotations were checked already; this is a nicety
        return None
    if annotation is Any or annotation is type(None) or annotation is ToolResult:
        return None
    try:
        schema = TypeAdapter(annotation).json_schema(schema_generator=_ToolSchemaGenerator)
    except (PydanticUserError, TypeError, ValueError):
        if not typing.is_typeddict(annotation):
            return None
        # Before Python 3.12 pydantic reads only typing_extensions' TypedDict; a plain
        # typing.TypedDict return type is rebuilt as one (its own fields; nested ones stay Any).
        rebuilt = typing_extensions.TypedDict(  # type: ignore[misc]
            annotation.__name__, typing.get_type_hints(annotation), total=annotation.__total__
        )
        try:
            schema = TypeAdapter(rebuilt).json_schema(schema_generator=_ToolSchemaGenerator)
        except (PydanticUserError, TypeError, ValueError):
            return None
    schema = inline_definitions(schema)
    schema.pop("title", None)
    return schema


def inline_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its local ``$defs`` references replaced by the definitions themselves.

    Why: several providers and the Code Mode SDK read a flat schema better than ``$ref``s (the
    SDK turns a ``$ref`` into ``Any``). A recursive model cannot be flattened; its references
    (and its ``$defs``) are kept as they are.
    """
    definitions = schema.get("$defs")
    if not isinstance(definitions, dict):
        return schema
    recursive = False

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        nonlocal recursive
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            key = ref.removeprefix("#/$defs/")
            if key in seen or key not in definitions:
                recursive = True
                return node
            extra = {k: v for k, v in node.items() if k != "$ref"}
            return {**resolve(definitions[key], (*seen, key)), **resolve(extra, seen)}
        return {k: resolve(v, seen) for k, v in node.items() if k != "$defs"}

    flat = resolve(schema, ())
    if recursive:
        flat["$defs"] = definitions
    return dict(flat)


def _build(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    hints: ToolHints | None,
    concurrency_safe: ConcurrencyPredicate | None,
    requires_approval: bool,
    timeout: float | None,
    resources: ResourcesFunction | None,
    callers: Sequence[str] = ("direct",),
) -> Tool:
    if not callable(fn) or (name is None and not hasattr(fn, "__name__")):
        raise ConfigurationError(
            f"@tool must decorate a function, got {fn!r}; pass name= for a callable object."
        )
    tool_name = name if name is not None else fn.__name__
    try:
        model, names, takes_ctx, doc_description = _arguments_model(fn, tool_name)
        schema = inline_definitions(
            model.model_json_schema(by_alias=True, schema_generator=_ToolSchemaGenerator)
        )
    except PydanticUserError as exc:
        raise ConfigurationError(
            f"@tool '{tool_name}': a parameter type cannot be described as JSON Schema: {exc}. "
            "Use JSON-friendly types (str, int, float, bool, list, dict, pydantic models)."
        ) from exc
    schema.pop("title", None)
    return Tool(
        tool_name,
        description if description is not None else doc_description,
        schema,
        execute=_make_execute(fn, model, names, takes_ctx),
        output_schema=_output_schema(fn),
        hints=hints,
        concurrency_safe=concurrency_safe,
        requires_approval=requires_approval,
        arguments_model=model,
        timeout=timeout,
        resources=resources,
        callers=callers,
    )


ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    hints: ToolHints | None = None,
    concurrency_safe: ConcurrencyPredicate | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
    resources: ResourcesFunction | None = None,
    callers: Sequence[str] = ("direct",),
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    hints: ToolHints | None = None,
    concurrency_safe: ConcurrencyPredicate | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
    resources: ResourcesFunction | None = None,
    callers: Sequence[str] = ("direct",),
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a type-annotated function (sync or async) into a [`Tool`][toolnexus.tools.Tool].

    Use it bare or with options::

        @tool
        async def read_file(path: str) -> str:
            '''Read a UTF-8 text file.

            Args:
                path: File to read, relative to the workspace.
            '''

        @tool(hints=ToolHints(read_only=True))
        def search(query: str, limit: int = 10, ctx: RunCtx | None = None) -> list[str]: ...

    Args:
        fn: The function (when used bare).
        name: Tool name; defaults to the function's name.
        description: Tool description; defaults to the docstring without its sections.
        hints: Side-effect hints; ``ToolHints(read_only=True)`` lets calls overlap.
        concurrency_safe: Per-call predicate on the arguments dict; only ``True`` means safe.
        requires_approval: Whether each call needs an approval handler's consent.
        timeout: Seconds a call may take before it fails (``None``: no limit); see
            `Tool.timeout`.
        resources: ``resources(args) -> Resources | None``: the resources one call reads and
            writes, so calls on different resources overlap (see
            [`Resources`][toolnexus.tools.Resources]). ``None``: the safety class decides.
        callers: Who may call the tool: ``"direct"`` (the model, natively) and/or
            ``"hosted"`` (a program the provider runs, with ``create_client(hosted_code=True)``);
            see `Tool.callers`.

    Returns:
        The tool (or, with options, a decorator that returns it).

    Raises:
        ConfigurationError: the function uses ``*args``/``**kwargs``/positional-only
            parameters, or an annotation cannot be resolved or turned into a schema.
    """

    def decorate(f: ToolFunction) -> Tool:
        return _build(
            f,
            name=name,
            description=description,
            hints=hints,
            concurrency_safe=concurrency_safe,
            requires_approval=requires_approval,
            timeout=timeout,
            resources=resources,
            callers=callers,
        )

    if fn is not None:
        return decorate(fn)
    return decorate
