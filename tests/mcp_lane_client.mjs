// The official TypeScript SDK client sending concurrent tools/call requests to one server.
//
// Run: MCP_SDK=<the @modelcontextprotocol/sdk folder> node tests/mcp_lane_client.mjs URL CALLS_JSON
// CALLS_JSON is a list of {"name", "arguments"}; every call is sent at once, on one session
// (one client, one streamable HTTP session), in list order. Prints one JSON line: the
// results in list order, and the order in which the answers arrived.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// the SDK is imported from its folder: ESM resolves bare names beside this file only
const sdk = (path) => import(pathToFileURL(join(process.env.MCP_SDK, "dist/esm", path)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const [url, callsJson] = process.argv.slice(2);
const calls = JSON.parse(callsJson);
const client = new Client({ name: "lane-test", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const arrived = [];
const results = await Promise.all(
  calls.map((call, index) =>
    client.callTool({ name: call.name, arguments: call.arguments }).then((result) => {
      arrived.push(index);
      return result;
    }),
  ),
);
console.log(JSON.stringify({ results, arrived, protocol: client.transport?.protocolVersion }));
await client.close();
