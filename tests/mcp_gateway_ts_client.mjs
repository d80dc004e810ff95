// The official TypeScript SDK client (protocol 2025-11-25) driving the gateway over stdio.
//
// Run: node mcp_gateway_ts_client.mjs SDK_DIR SCENARIO_JSON
// SDK_DIR is the @modelcontextprotocol/sdk package folder; SCENARIO_JSON is
// {"command": ..., "args": [...], "env": {...}, "approve": "accept"|"decline"|"cancel"|"malformed",
//  "declare": ["elicitation", "sampling", "roots"], "calls": [{"name": ..., "arguments": {...}}]}.
// Prints one JSON line: the negotiated version, the server's capabilities, every request the
// gateway made of this client, and each call's result (with its progress notifications).
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
    out.calls.push({ result, progress });
  } catch (error) {
    out.calls.push({ error: { code: error.code ?? null, message: String(error.message) }, progress });
  }
}
out.asked = asked;
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();
