"""Argument validation: a model's arguments are checked before a tool body ever runs.

Two validators, one contract (raise [`ToolArgumentsError`][toolnexus.errors.ToolArgumentsError]
naming each field and problem):

* tools built by ``@tool`` carry a pydantic model, which validates with the same rules as its
  generated JSON Schema plus pydantic's coercions and any custom validators;
* hand-written tools (and MCP tools, later) carry only a JSON Schema, checked with the reference
  ``jsonschema`` implementation.

No schema causes I/O: a ``$ref`` (``$dynamicRef``, ``$recursiveRef``) must be local (``#...``,
into ``$defs`` or anywhere in the document) and resolve there, or the tool is refused as it is
built; the validator's registry refuses to retrieve anything (jsonschema would otherwise fetch
an ``http(s)`` reference on every check).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import jsonschema
import referencing.jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from pydantic import BaseModel, ValidationError
from referencing import Registry, Resource, Specification
from referencing.exceptions import NoSuchResource, Unresolvable

if TYPE_CHECKING:
    from referencing._core import Resolver

from toolnexus.errors import ConfigurationError, ToolArgumentsError

__all__ = ["ArgumentsValidator", "check_references", "schema_validator"]

ArgumentsValidator = Callable[[Mapping[str, Any]], BaseModel | None]
"""Checks arguments; returns them parsed by the tool's pydantic model (``None`` for a schema)."""


def _field_path(parts: Any) -> str:
    return ".".join(str(p) for p in parts)


def _model_validator(name: str, model: type[BaseModel]) -> ArgumentsValidator:
    def validate(args: Mapping[str, Any]) -> BaseModel:
        try:
            return model.model_validate(args)
        except ValidationError as exc:
            problems = []
            for err in exc.errors(include_url=False):
                where = _field_path(err["loc"])
                problems.append(f"{where}: {err['msg']}" if where else err["msg"])
            raise ToolArgumentsError(name, problems) from None

    return validate


def _json_schema_validator(name: str, schema: dict[str, Any]) -> ArgumentsValidator:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ConfigurationError(
            f"Tool '{name}': input_schema is not a valid JSON Schema: {exc.message} "
            f"(at {_field_path(exc.absolute_path) or 'the root'}). Fix the schema or build the "
            "tool with @tool, which generates it from the function signature."
        ) from None
    check_references(name, "input_schema", schema, cls)
    validator: Validator = cls(schema, registry=_NOTHING_RETRIEVED)
    plainly_valid = _plain_check(schema)

    def validate(args: Mapping[str, Any]) -> None:
        if plainly_valid is not None and plainly_valid(args):
            return  # certainly valid: what jsonschema would find no error in
        try:
            errors = sorted(validator.iter_errors(args), key=lambda e: [str(p) for p in e.path])
        except Unresolvable as exc:  # checked as the tool was built; kept a failure of the call
            raise ToolArgumentsError(
                name, [f"the schema's reference {exc.ref!r} does not resolve (none is fetched)"]
            ) from None
        if errors:
            problems = []
            for err in errors:
                where = _field_path(err.absolute_path)
                problems.append(f"{where}: {err.message}" if where else err.message)
            raise ToolArgumentsError(name, problems)
        return

    return validate


_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


def _refuse_retrieval(uri: str) -> Resource[Any]:
    """A registry's ``retrieve``: nothing outside the schema document is ever fetched."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class the stubs miss


_NOTHING_RETRIEVED: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
"""The registry every validator is built with: a reference it does not hold is unresolvable,
never fetched."""


def _unfollowed(
    resource: Resource[Any],
    resolver: Resolver[Any],
    specification: Specification[Any],
    seen: set[int],
) -> Iterator[str]:
    """The references of ``resource``, its subschemas and every schema they reach that are
    not local or do not resolve within the document (each as written)."""
    contents = resource.contents
    if id(contents) in seen:
        return
    seen.add(id(contents))
    if isinstance(contents, Mapping):
        for keyword in _REFERENCE_KEYWORDS:
            ref = contents.get(keyword)
            if ref is None:
                continue
            if not isinstance(ref, str) or not ref.startswith("#"):
                yield repr(ref)
                continue
            try:
                target = resolver.lookup(ref)
            except Unresolvable:
                yield repr(ref)
                continue
            # a target outside the keywords walked below (draft 7 reading ``$defs``, say)
            reached = Resource.from_contents(target.contents, default_specification=specification)
            yield from _unfollowed(reached, target.resolver, specification, seen)
    for sub in resource.subresources():
        yield from _unfollowed(sub, resolver.in_subresource(sub), specification, seen)


def check_references(
    name: str, what: str, schema: Mapping[str, Any], cls: type[Validator] | None = None
) -> None:
    """Refuse a schema with a reference that is not local to it (``#...``) or does not
    resolve there: such a reference would make jsonschema fetch it, or fail on every check.

    ``cls`` is the validator class the schema is checked with (by default, the one its
    ``$schema`` names, else draft 7).

    Raises:
        ConfigurationError: naming the tool, ``what`` schema and each such reference.
    """
    if cls is None:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    dialect = str(cls.META_SCHEMA.get("$schema", ""))  # a metaschema names its own dialect
    specification = referencing.jsonschema.specification_with(dialect, default=Specification.OPAQUE)
    root = specification.create_resource(schema)
    resolver = _NOTHING_RETRIEVED.resolver_with_root(root)
    try:
        refused = list(dict.fromkeys(_unfollowed(root, resolver, specification, set())))
    except RecursionError:
        refused = ["(nested too deep to check)"]
    if refused:
        raise ConfigurationError(
            f"Tool '{name}': {what} has references that do not resolve within it: "
            f"{', '.join(refused[:5])}{' ...' if len(refused) > 5 else ''}. Only local "
            "references ('#/$defs/...', '#/properties/...') are followed, and no schema is ever "
            "fetched: inline the referenced schema under $defs."
        )


def schema_validator(
    name: str, schema: dict[str, Any], model: type[BaseModel] | None
) -> ArgumentsValidator:
    """The validator for one tool: its pydantic model when it has one, else its JSON Schema.

    Raises:
        ConfigurationError: the schema is not an object schema or not valid JSON Schema.
    """
    if schema.get("type") != "object":
        raise ConfigurationError(
            f"Tool '{name}': input_schema must describe an object "
            f'({{"type": "object", "properties": {{...}}}}), got type {schema.get("type")!r}. '
            "Model providers only send tool arguments as a JSON object."
        )
    if model is not None:
        return _model_validator(name, model)
    return _json_schema_validator(name, schema)


_ANNOTATIONS = frozenset({"description", "title", "default", "examples"})
"""Keywords that describe a value without constraining it."""

_PLAIN_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "null": frozenset({type(None)}),
    "array": frozenset({list}),
    "object": frozenset({dict}),
}
"""The exact Python types a plain JSON Schema ``type`` certainly accepts (a set look-up per
argument, where a predicate per argument was a function call each)."""


def _plain_check(schema: dict[str, Any]) -> Callable[[Mapping[str, Any]], bool] | None:
    """A quick check that says ``True`` only for arguments the schema certainly accepts, for a
    schema made of nothing but an object's ``properties`` (each a plain ``type``),
    ``required`` and a boolean ``additionalProperties``; ``None`` for any other schema.

    ``False`` means "not certain" (a float for an integer, a missing field, anything
    unusual): the full ``jsonschema`` check then decides and words the errors, so the result
    is always the reference implementation's.
    """
    if not set(schema) <= {"type", "properties", "required", "additionalProperties"} | _ANNOTATIONS:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (
        type(properties) is not dict
        or type(required) is not list
        or not all(type(r) is str for r in required)
        or type(extra) is not bool
    ):
        return None
    checks: dict[str, frozenset[type] | None] = {}  # None: any value
    for key, sub in properties.items():
        if type(sub) is not dict or not set(sub) <= {"type"} | _ANNOTATIONS:
            return None
        kind = sub.get("type")
        if kind is None and "type" not in sub:
            checks[key] = None  # no constraint at all
        elif type(kind) is str and kind in _PLAIN_TYPES:
            checks[key] = _PLAIN_TYPES[kind]
        else:
            return None
    needed = tuple(required)

    def plainly_valid(args: Mapping[str, Any]) -> bool:
        if type(args) is not dict:
            return False
        for key in needed:
            if key not in args:
                return False
        for key, value in args.items():
            if key in checks:
                kinds = checks[key]
                if kinds is not None and type(value) not in kinds:
                    return False
            elif not extra:
                return False
        return True

    return plainly_valid
