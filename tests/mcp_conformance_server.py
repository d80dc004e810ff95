"""An upstream MCP server implementing the fixtures of the official conformance suite's server
scenarios (``@modelcontextprotocol/conformance`` 0.1.16), on the python SDK's lowlevel
``Server``, over streamable HTTP (with an event store, for SSE resumability).

Run: python tests/mcp_conformance_server.py PORT [--page-size N] [--many N] [--endless]
    [--no-resources]

Every tool, resource, template and prompt the scenarios name is here, with the content the
scenarios check. ``--page-size N`` pages its ``tools/list``, ``resources/list`` and
``prompts/list`` answers N items at a time, so a client in front of it must follow cursors.
Extra tools record their calls (``record_read``/``record_write``: enter/exit lines into the
file named by ``$CONFORMANCE_RECORD``), for the lane tests. For the hostile tests: ``--many N``
lists N more resources; ``--endless`` pages ``resources/list`` forever (a new cursor each
page); ``--no-resources`` serves no resources at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import uvicorn
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
SCHEMA_2020 = "https://json-schema.org/draft/2020-12/schema"
EMPTY: dict[str, Any] = {"type": "object", "properties": {}}
RECORD = os.environ.get("CONFORMANCE_RECORD")
PAGE = 0
ENDLESS = False
subscriptions: set[str] = set()


class Events(EventStore):
    """Every event kept in memory, replayed after a ``Last-Event-ID`` of its stream."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> Any:
        stream = next((s for s, e, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self.events:
            if stream_id == stream and int(event_id) > int(last_event_id) and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def _tool(name: str, description: str, schema: dict[str, Any] | None = None, **more: Any) -> Any:
    return types.Tool(name=name, description=description, input_schema=schema or EMPTY, **more)


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _string_args(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {n: {"type": "string"} for n in names},
        "required": list(names),
    }


TOOLS = [
    _tool("test_simple_text", "Returns simple text"),
    _tool("test_image_content", "Returns an image"),
    _tool("test_audio_content", "Returns audio"),
    _tool("test_embedded_resource", "Returns an embedded resource"),
    _tool("test_multiple_content_types", "Returns text, an image and a resource"),
    _tool("test_tool_with_logging", "Sends three log messages"),
    _tool("test_error_handling", "Always fails"),
    _tool("test_tool_with_progress", "Reports progress 0, 50, 100 of 100"),
    _tool("test_sampling", "Asks the client's LLM", _string_args("prompt")),
    _tool("test_elicitation", "Asks the user", _string_args("message")),
    _tool("test_elicitation_sep1034_defaults", "Asks with defaults for every primitive type"),
    _tool("test_elicitation_sep1330_enums", "Asks with every enum form"),
    _tool("test_reconnection", "Closes its SSE stream mid-call"),
    _tool(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        {
            "$schema": SCHEMA_2020,
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
    _tool(
        "test_structured",
        "Returns structuredContent with _meta, under an outputSchema, with a title and icons",
        output_schema={
            "type": "object",
            "properties": {"answer": {"type": "integer"}},
            "required": ["answer"],
        },
        title="Structured answer",
        icons=[types.Icon(src="https://example.com/icon.png", mime_type="image/png")],
        annotations=types.ToolAnnotations(read_only_hint=True, title="Structured"),
        _meta={"fixture": "structured"},
    ),
    _tool("test_resource_link", "Returns a resource_link part"),
    _tool(
        "record_read",
        "A read that records its enter/exit",
        {"type": "object", "properties": {"tag": {"type": "string"}, "delay": {"type": "number"}}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    _tool(
        "record_write",
        "A write (no annotations) that records its enter/exit",
        {
            "type": "object",
            "properties": {
                "tag": {"type": "string"},
                "delay": {"type": "number"},
                "until": {"type": "string"},
            },
        },
    ),
]

ELICIT_1034 = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}
ELICIT_1330 = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def _record(line: str) -> None:
    if RECORD:
        with open(RECORD, "a", encoding="utf-8") as out:
            out.write(f"{line} {time.monotonic():.6f}\n")


async def _recorded(kind: str, args: dict[str, Any]) -> Any:
    tag = str(args.get("tag", "?"))
    _record(f"enter {kind} {tag}")
    await asyncio.sleep(float(args.get("delay", 0.2)))
    until = args.get("until")  # a file to wait for (at most 60 s): the test says when to end
    for _ in range(600 if until else 0):
        if await asyncio.to_thread(os.path.exists, str(until)):
            break
        await asyncio.sleep(0.1)
    _record(f"exit {kind} {tag}")
    return [_text(f"{kind} {tag}")]


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name, args = params.name, dict(params.arguments or {})
    session = ctx.session
    if name == "test_simple_text":
        content: list[Any] = [_text("This is a simple text response for testing.")]
    elif name == "test_image_content":
        content = [types.ImageContent(type="image", data=IMAGE, mime_type="image/png")]
    elif name == "test_audio_content":
        content = [types.AudioContent(type="audio", data=AUDIO, mime_type="audio/wav")]
    elif name == "test_embedded_resource":
        content = [_embedded("test://embedded-resource", "This is an embedded resource content.")]
    elif name == "test_multiple_content_types":
        content = [
            _text("Multiple content types test:"),
            types.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="test://mixed-content-resource",
                    mime_type="application/json",
                    text='{"test":"data","value":123}',
                ),
            ),
        ]
    elif name == "test_tool_with_logging":
        for i, text in enumerate(
            ["Tool execution started", "Tool processing data", "Tool execution completed"]
        ):
            if i:
                await asyncio.sleep(0.05)
            await session.send_log_message("info", text, related_request_id=ctx.request_id)
        content = [_text("Tool with logging executed successfully")]
    elif name == "test_error_handling":
        return types.CallToolResult(
            content=[_text("This tool intentionally returns an error for testing")], is_error=True
        )
    elif name == "test_tool_with_progress":
        for step in (0, 50, 100):
            if step:
                await asyncio.sleep(0.05)
            await session.report_progress(step, 100, f"Completed step {step} of 100")
        content = [_text("Progress test completed")]
    elif name == "test_sampling":
        answer = await session.create_message(
            messages=[types.SamplingMessage(role="user", content=_text(args["prompt"]))],
            max_tokens=100,
        )
        said = getattr(answer.content, "text", "No response")
        content = [_text(f"LLM response: {said}")]
    elif name == "test_elicitation":
        schema = {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        }
        result = await session.elicit_form(args["message"], schema, ctx.request_id)
        content = [_text(f"User response: action={result.action}, content={result.content}")]
    elif name in ("test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums"):
        schema = ELICIT_1034 if name.endswith("defaults") else ELICIT_1330
        result = await session.elicit_form("Please provide values", schema, ctx.request_id)
        content = [
            _text(
                f"Elicitation completed: action={result.action}, "
                f"content={json.dumps(result.content)}"
            )
        ]
    elif name == "test_reconnection":
        await session.send_log_message(
            "info", "Before disconnect", related_request_id=ctx.request_id
        )
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await asyncio.sleep(0.2)
        await session.send_log_message("info", "After reconnect", related_request_id=ctx.request_id)
        content = [_text("Reconnection test completed")]
    elif name == "json_schema_2020_12_tool":
        content = [_text(f"got {json.dumps(args)}")]
    elif name == "test_structured":
        return types.CallToolResult(
            content=[_text('{"answer": 42}')],
            structured_content={"answer": 42},
            _meta={"fixture": "result-meta"},
        )
    elif name == "test_resource_link":
        content = [
            types.ResourceLink(
                type="resource_link",
                uri="test://static-text",
                name="static-text",
                mime_type="text/plain",
                annotations=types.Annotations(audience=["user"], priority=0.5),
            )
        ]
    elif name in ("record_read", "record_write"):
        content = await _recorded(name.removeprefix("record_"), args)
    else:
        return types.CallToolResult(content=[_text(f"unknown tool {name}")], is_error=True)
    return types.CallToolResult(content=content)


def _embedded(uri: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri=uri, mime_type="text/plain", text=text),
    )


RESOURCES = [
    types.Resource(
        uri="test://static-text",
        name="static-text",
        description="A static text resource",
        mime_type="text/plain",
    ),
    types.Resource(
        uri="test://static-binary",
        name="static-binary",
        description="A static binary resource (a PNG)",
        mime_type="image/png",
    ),
    types.Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource to subscribe to",
        mime_type="text/plain",
    ),
]
TEMPLATES = [
    types.ResourceTemplate(
        uri_template="test://template/{id}/data",
        name="template",
        description="A template substituting {id}",
        mime_type="application/json",
    )
]


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
    uri = params.uri
    if uri == "test://static-text":
        contents: list[Any] = [
            types.TextResourceContents(
                uri=uri,
                mime_type="text/plain",
                text="This is the content of the static text resource.",
            )
        ]
    elif uri == "test://static-binary":
        contents = [types.BlobResourceContents(uri=uri, mime_type="image/png", blob=IMAGE)]
    elif uri == "test://watched-resource":
        contents = [types.TextResourceContents(uri=uri, mime_type="text/plain", text="watched")]
    elif uri.startswith("test://template/") and uri.endswith("/data"):
        ident = uri.removeprefix("test://template/").removesuffix("/data")
        text = json.dumps(
            {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"},
            separators=(",", ":"),
        )
        contents = [types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
    else:
        from mcp.shared.exceptions import MCPError

        raise MCPError(-32002, f"Resource not found: {uri}")
    return types.ReadResourceResult(contents=contents)


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource",
        arguments=[
            types.PromptArgument(name="resourceUri", description="The URI to embed", required=True)
        ],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
]


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    args = params.arguments or {}
    name = params.name

    def user(content: Any) -> types.PromptMessage:
        return types.PromptMessage(role="user", content=content)

    if name == "test_simple_prompt":
        messages = [user(_text("This is a simple prompt for testing."))]
    elif name == "test_prompt_with_arguments":
        messages = [
            user(
                _text(
                    f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
                )
            )
        ]
    elif name == "test_prompt_with_embedded_resource":
        uri = args.get("resourceUri", "test://example-resource")
        messages = [
            user(_embedded(uri, "Embedded resource content for testing.")),
            user(_text("Please process the embedded resource above.")),
        ]
    elif name == "test_prompt_with_image":
        messages = [
            user(types.ImageContent(type="image", data=IMAGE, mime_type="image/png")),
            user(_text("Please analyze the image above.")),
        ]
    else:
        from mcp.shared.exceptions import MCPError

        raise MCPError(-32602, f"unknown prompt {name}")
    return types.GetPromptResult(messages=messages)


def _paged(items: list[Any], params: types.PaginatedRequestParams | None) -> tuple[list[Any], Any]:
    if not PAGE:
        return items, None
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    return items[start:end], (str(end) if end < len(items) else None)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    items, cursor = _paged(TOOLS, params)
    return types.ListToolsResult(tools=items, next_cursor=cursor)


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    if ENDLESS:
        page = int(params.cursor) if params is not None and params.cursor else 0
        return types.ListResourcesResult(resources=RESOURCES[:1], next_cursor=str(page + 1))
    items, cursor = _paged(RESOURCES, params)
    return types.ListResourcesResult(resources=items, next_cursor=cursor)


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=TEMPLATES)


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    items, cursor = _paged(PROMPTS, params)
    return types.ListPromptsResult(prompts=items, next_cursor=cursor)


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscriptions.add(params.uri)
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscriptions.discard(params.uri)
    return types.EmptyResult()


async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
    value = params.argument.value
    choices = [c for c in ("paris", "park", "party") if c.startswith(value)]
    return types.CompleteResult(
        completion=types.Completion(values=choices, total=len(choices), has_more=False)
    )


async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def server(with_resources: bool = True) -> Server[Any]:
    resources: dict[str, Any] = {
        "on_list_resources": list_resources,
        "on_list_resource_templates": list_templates,
        "on_read_resource": read_resource,
        "on_subscribe_resource": subscribe,
        "on_unsubscribe_resource": unsubscribe,
    }
    made: Server[Any] = Server(
        "conformance-fixtures",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        **(resources if with_resources else {}),
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
    )
    made.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    return made


def main() -> None:
    global PAGE, ENDLESS
    port = int(sys.argv[1])
    if "--page-size" in sys.argv:
        PAGE = int(sys.argv[sys.argv.index("--page-size") + 1])
    if "--many" in sys.argv:
        for i in range(int(sys.argv[sys.argv.index("--many") + 1])):
            RESOURCES.append(
                types.Resource(uri=f"test://many/{i}", name=f"many-{i}", description="one of many")
            )
    ENDLESS = "--endless" in sys.argv
    made = server(with_resources="--no-resources" not in sys.argv)
    app = made.streamable_http_app(event_store=Events(), retry_interval=100)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
