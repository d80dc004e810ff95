"""render_sdk: byte-stable, safe for hostile names and descriptions, faithful types."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolnexus import Tool
from toolnexus.codemode import render_sdk, run_program
from toolnexus.codemode._schema_types import MAX_DEPTH, PythonTypes, TypeScriptTypes
from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime
from toolnexus.errors import ConfigurationError


def make(name: str, description: str = "", schema: dict[str, Any] | None = None) -> Tool:
    async def execute(args: dict[str, Any]) -> Any:
        return {"tool": name, "args": args}

    return Tool(name, description, schema or {"type": "object"}, execute=execute)


HOSTILE_NAMES = [
    "plain",
    "with-dash",
    'quote"name',
    "single'quote",
    "back\\slash",
    "new\nline",
    "line\u2028sep",
    "para\u2029sep",
    "café",
    "emoji🙂",
    "*/ evil /*",
    '"""',
    "class",
    "__init__",
    "tools",
    "123start",
    " ",
]
HOSTILE_DESCRIPTIONS = [
    "ends a comment */ then code();",
    "line one\nimport os; os.system('x')",
    "carriage\rreturn(); evil()",
    "unicode line\u2028evil()",
    "para\u2029evil()",
    'triple """ quotes',
    "nul \x00 and bell \x07",
    "bidi \u202e override",
]


def test_unknown_language_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="SDK language must be one of"):
        render_sdk("ruby", [])


def test_javascript_and_typescript_are_identical() -> None:
    tools = [make("a", "A."), make("b-c", "B.")]
    assert render_sdk("javascript", tools) == render_sdk("typescript", tools)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(range(6)), st.sampled_from(["python", "javascript"]))
def test_the_same_set_gives_the_same_bytes_in_any_order(order: list[int], language: str) -> None:
    tools = [
        make(
            "read",
            "Read.",
            {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}},
        ),
        make("write-file", "Write."),
        make("alpha", "First."),
        make("read", "a duplicate: the first one wins"),
        make("zeta", "Last."),
        make("mid", "Middle."),
    ]
    base = render_sdk(language, tools)
    shuffled = [tools[i] for i in order]
    # dedup is first-wins in the *given* order; keep the original first "read" first
    firsts = [t for t in shuffled if t.name != "read"]
    assert render_sdk(language, [tools[0], *firsts]) == base


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_any_change_of_name_or_description_changes_the_sdk(language: str) -> None:
    base = render_sdk(language, [make("a", "Alpha."), make("b", "Beta.")])
    assert render_sdk(language, [make("a", "Alpha!"), make("b", "Beta.")]) != base
    assert render_sdk(language, [make("a2", "Alpha."), make("b", "Beta.")]) != base
    assert render_sdk(language, [make("a", "Alpha.")]) != base


def test_properties_are_sorted() -> None:
    one = make(
        "t",
        "",
        {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}},
    )
    two = make(
        "t",
        "",
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
    )
    for language in ("python", "javascript"):
        assert render_sdk(language, [one]) == render_sdk(language, [two])


def _hostile_tools() -> list[Tool]:
    return [
        make(
            name,
            HOSTILE_DESCRIPTIONS[i % len(HOSTILE_DESCRIPTIONS)],
            {
                "type": "object",
                "properties": {
                    name: {"type": "string", "description": HOSTILE_DESCRIPTIONS[i % 3]}
                },
            },
        )
        for i, name in enumerate(HOSTILE_NAMES)
    ]


def test_python_sdk_is_valid_python_and_nothing_breaks_out() -> None:
    sdk = render_sdk("python", _hostile_tools())
    tree = ast.parse(sdk)
    kinds = [type(node).__name__ for node in tree.body]
    # exactly: the typing import, ToolError, the TypedDicts, the Tools class, the annotation
    assert kinds[0] == "ImportFrom"
    assert kinds[-2:] == ["ClassDef", "AnnAssign"]
    assert set(kinds[1:-2]) == {"Assign"}
    for node in tree.body[1:-2]:
        assert isinstance(node, ast.Assign)
        assert isinstance(node.value, (ast.Call, ast.Name))
    class_def = tree.body[-2]
    assert isinstance(class_def, ast.ClassDef)
    assert all(
        isinstance(n, (ast.AsyncFunctionDef, ast.FunctionDef, ast.Pass)) for n in class_def.body
    )
    assert "evil()" not in [line.strip() for line in sdk.splitlines()]
    for line in sdk.splitlines():
        assert "\u2028" not in line and "\u2029" not in line and "\r" not in line


def test_javascript_sdk_comments_cannot_be_closed_early() -> None:
    sdk = render_sdk("javascript", _hostile_tools())
    assert "/*" not in sdk.replace('"*/ evil /*"', "")
    for line in sdk.splitlines():
        stripped = line.strip()
        assert not stripped.startswith("evil"), line
        assert "\u2028" not in line and "\u2029" not in line and "\r" not in line
        assert "\x00" not in line and "\u202e" not in line


def test_typescript_sdk_type_checks(tmp_path: Path) -> None:
    from deno import find_deno_bin  # type: ignore[import-untyped]

    sdk = render_sdk("typescript", _hostile_tools())
    names = ", ".join(json.dumps(n) for n in HOSTILE_NAMES)
    usage = f"\nconst names = [{names}] as const;\nasync function use() {{ for (const n of names) await tools[n]({{}}); }}\nexport {{ use }};\n"
    source = tmp_path / "sdk.ts"
    source.write_text(sdk + usage)
    done = subprocess.run(
        [find_deno_bin(), "check", "--no-config", "--no-remote", "--quiet", str(source)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"NO_COLOR": "1", "DENO_DIR": str(tmp_path / "cache")},
        check=False,
    )
    # Optional properties of a hostile name are fine; the file must parse and check.
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("runtime_class", [MontyRuntime, V8Runtime])
async def test_every_hostile_name_is_callable_by_its_exact_name(runtime_class: type[Any]) -> None:
    runtime = runtime_class(timeout=10)
    tools = _hostile_tools()
    names = json.dumps(HOSTILE_NAMES)
    code = (
        f"names = {HOSTILE_NAMES!a}\nout = []\nfor n in names:\n    r = await tools[n]({{}})\n    out.append(r['tool'])\nout"
        if runtime.language == "python"
        else f"const out = []; for (const n of {names}) out.push((await tools[n]({{}})).tool); return out"
    )
    try:
        result = await run_program(code, tools, runtime=runtime)
    finally:
        await runtime.aclose()
    assert result == {"result": HOSTILE_NAMES, "logs": []}


def test_identifier_names_get_attributes_and_others_do_not() -> None:
    sdk = render_sdk("python", [make("read_file"), make("read-file"), make("class"), make("_x")])
    assert "    async def read_file(self" in sdk
    assert "def read-file" not in sdk and "async def class" not in sdk and "async def _x" not in sdk


# -- JSON Schema to types ------------------------------------------------------------------------


def py(schema: Any) -> tuple[str, list[str]]:
    types = PythonTypes()
    return types.expr(schema, "T"), types.declarations


def ts(schema: Any) -> str:
    return TypeScriptTypes().expr(schema, "T")


@pytest.mark.parametrize(
    ("schema", "python", "typescript"),
    [
        ({"type": "string"}, "str", "string"),
        ({"type": "integer"}, "int", "number"),
        ({"type": "number"}, "float", "number"),
        ({"type": "boolean"}, "bool", "boolean"),
        ({"type": "null"}, "None", "null"),
        ({"type": ["string", "null"]}, "str | None", "string | null"),
        (
            {"enum": ["a", "b", 3, True, None]},
            'Literal["a", "b", 3, True, None]',
            '"a" | "b" | 3 | true | null',
        ),
        ({"const": "x"}, 'Literal["x"]', '"x"'),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "str | int", "string | number"),
        ({"anyOf": [{"type": "string"}, {}]}, "Any", "unknown"),
        ({"allOf": [{"type": "string"}, {"type": "number"}]}, "Any", "(string) & (number)"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]", "Array<string>"),
        (
            {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
            "tuple[str, int]",
            "[string, number]",
        ),
        ({"type": "array"}, "list[Any]", "Array<unknown>"),
        (
            {"type": "object", "additionalProperties": {"type": "integer"}},
            "dict[str, int]",
            "{ [key: string]: number }",
        ),
        (
            {"type": "object", "additionalProperties": False},
            "dict[str, Any]",
            "Record<string, never>",
        ),
        ({"$ref": "#/definitions/x"}, "Any", "unknown"),
        ({"type": "quaternion"}, "Any", "unknown"),
        ("not a schema", "Any", "unknown"),
        ({"type": 7}, "Any", "unknown"),
        ({"enum": [1.5]}, "Any", "1.5"),
        ({"enum": [{"a": 1}]}, "Any", "unknown"),
    ],
)
def test_schema_to_types(schema: Any, python: str, typescript: str) -> None:
    assert py(schema)[0] == python
    assert ts(schema) == typescript


def test_objects_become_typed_dicts_with_required_and_optional_keys() -> None:
    expr, declarations = py(
        {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "owner": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
        }
    )
    assert expr == "T"
    assert declarations == [
        'TOwner = TypedDict("TOwner", {"name": NotRequired[str]})',
        'T = TypedDict("T", {"id": int, "owner": NotRequired[TOwner], "tags": NotRequired[list[str]]})',
    ]
    assert ts(
        {
            "type": "object",
            "required": ["id"],
            "properties": {"id": {"type": "integer"}, "n": {"type": "string"}},
        }
    ) == ('{ "id": number; "n"?: string }')


def test_nesting_past_the_limit_becomes_any_and_never_raises() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_DEPTH + 5):
        schema = {"type": "array", "items": schema}
    assert "Any" in py(schema)[0]
    assert "unknown" in ts(schema)
    assert py(schema)[0].count("list[") == MAX_DEPTH + 1


@settings(max_examples=200)
@given(
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(
                st.sampled_from(
                    [
                        "type",
                        "items",
                        "properties",
                        "enum",
                        "oneOf",
                        "anyOf",
                        "allOf",
                        "required",
                        "additionalProperties",
                        "const",
                        "$ref",
                        "x",
                    ]
                ),
                children,
                max_size=4,
            ),
        ),
        max_leaves=20,
    )
)
def test_any_schema_node_renders_without_raising(node: Any) -> None:
    expr, declarations = py(node)
    ast.parse("\n".join([*declarations, f"x: {expr}"]))
    assert isinstance(ts(node), str)
