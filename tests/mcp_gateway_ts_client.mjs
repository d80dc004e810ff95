// The official TypeScript SDK client (protocol 2025-11-25) driving the gateway over stdio.
//
// Run: node mcp_gateway_ts_client.mjs SDK_DIR SCENARIO_JSON
// SDK_DIR is the @modelcontextprotocol/sdk package folder; SCENARIO_JSON is
// {"command": ..., "args": [...], "env": {...}, "approve": "accept"|"decline"|"cancel"|"malformed",
//  "declare": ["elicitation", "sampling", "roots"], "calls": [{"name": ..., "arguments": {...}}]}.
// Prints one JSON line: the negotiated version, the server's capabilities, every request the
// gateway made of this client, and each call's result (with its progress notifications: as the
// SDK delivered them, and as they arrived on the wire before the call's answer).
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, scenarioText] = process.argv.slice(2);
const scenario = JSON.parse(scenarioText);
const load = (file) => import(pathToFileURL(path.join(sdkDir, "dist/esm", file)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { ElicitRequestSchema, CreateMessageRequestSchema, ListRootsRequestSchema } =
  await load("types.js");

const declare = new Set(scenario.declare ?? ["elicitation", "sampling", "roots"]);
const capabilities = {};
if (declare.has("elicitation")) capabilities.elicitation = { form: {}, url: {} };
if (declare.has("sampling")) capabilities.sampling = {};
if (declare.has("roots")) capabilities.roots = {};
const client = new Client({ name: "ts-test-client", version: "1.0.0" }, { capabilities });
const asked = [];

if (declare.has("elicitation")) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push({ method: request.method, params: request.params });
    if (request.params.mode === "url") return { action: "accept" }; // the user went there
    const schema = request.params.requestedSchema ?? {};
    if (schema.properties && "approve" in schema.properties) {
      const how = scenario.approve ?? "accept";
      if (how === "malformed") return { action: "accept", content: { approve: "yes" } };
      if (how === "accept") return { action: "accept", content: { approve: true } };
      return { action: how };
    }
    return { action: "accept", content: { dish: "ts soup" } };
  });
}
if (declare.has("sampling")) {
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    asked.push({ method: request.method, params: request.params });
    return { role: "assistant", model: "ts-model", content: { type: "text", text: "sampled by ts" } };
  });
}
if (declare.has("roots")) {
  client.setRequestHandler(ListRootsRequestSchema, async (request) => {
    asked.push({ method: request.method, params: request.params ?? {} });
    return { roots: [{ uri: "file:///ts/root", name: "ts" }] };
  });
}

const transport = new StdioClientTransport({
  command: scenario.command,
  args: scenario.args,
  env: scenario.env,
  stderr: "ignore",
});
let negotiated = null;
transport.setProtocolVersion = (version) => {
  negotiated = version; // the SDK hands the transport the version initialize settled on
};
await client.connect(transport);
// What arrived on the wire, in order: progress notifications and responses. The SDK hands a
// notification to its handler a microtask later but settles a response at once, so progress
// that arrives in the same read as its call's answer never reaches `onprogress` (the SDK
// drops it as "a progress notification for an unknown token"); the wire shows what was sent.
const wire = [];
const deliver = transport.onmessage;
transport.onmessage = (message, extra) => {
  if (message.method === "notifications/progress") wire.push({ progress: message.params });
  else if (message.id !== undefined && message.method === undefined) wire.push({ response: message.id });
  deliver(message, extra);
};
let callId = null;
const send = transport.send.bind(transport);
transport.send = (message, options) => {
  if (message.method === "tools/call") callId = message.id;
  return send(message, options);
};
const sentBefore = (id) => {
  const end = wire.findIndex((event) => event.response === id);
  return wire
    .slice(0, end < 0 ? wire.length : end)
    .filter((event) => event.progress && event.progress.progressToken === id)
    .map((event) => event.progress);
};
const out = {
  version: negotiated,
  capabilities: client.getServerCapabilities(),
  calls: [],
};
for (const call of scenario.calls ?? []) {
  const progress = [];
  try {
    const result = await client.callTool(
      { name: call.name, arguments: call.arguments ?? {} },
      undefined,
      { onprogress: (p) => progress.push(p), timeout: 60000 },
    );
    out.calls.push({ result, progress, wire: sentBefore(callId) });
  } catch (error) {
    const failed = { code: error.code ?? null, message: String(error.message) };
    out.calls.push({ error: failed, progress, wire: sentBefore(callId) });
  }
}
out.asked = asked;
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();
