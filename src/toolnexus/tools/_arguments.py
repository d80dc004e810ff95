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

    def validate(args: Mapping[str, Any]) -> None:
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
