"""Argument validation: a model's arguments are checked before a tool body ever runs.

Two validators, one contract (raise [`ToolArgumentsError`][toolnexus.errors.ToolArgumentsError]
naming each field and problem):

* tools built by ``@tool`` carry a pydantic model, which validates with the same rules as its
  generated JSON Schema plus pydantic's coercions and any custom validators;
* hand-written tools (and MCP tools, later) carry only a JSON Schema, checked with the reference
  ``jsonschema`` implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from pydantic import BaseModel, ValidationError

from toolnexus.errors import ConfigurationError, ToolArgumentsError

__all__ = ["ArgumentsValidator", "schema_validator"]

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
    validator: Validator = cls(schema)
    plainly_valid = _plain_check(schema)

    def validate(args: Mapping[str, Any]) -> None:
        if plainly_valid is not None and plainly_valid(args):
            return  # certainly valid: what jsonschema would find no error in
        errors = sorted(validator.iter_errors(args), key=lambda e: [str(p) for p in e.path])
        if errors:
            problems = []
            for err in errors:
                where = _field_path(err.absolute_path)
                problems.append(f"{where}: {err.message}" if where else err.message)
            raise ToolArgumentsError(name, problems)
        return

    return validate


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
