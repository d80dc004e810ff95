// The official TypeScript SDK client (its experimental tasks API) against the gateway, on the
// 2025-11-25 wire: a run_code task streamed to its result, tasks/get, tasks/list, a cancel of
// the finished task, and a second task cancelled while it works. Prints one JSON object.
//
// Run: node tests/mcp_ts_tasks.mjs SDK_FOLDER URL
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [sdk, url] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdk, 'dist/esm', p)).href);
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

const client = new Client({ name: 'ts-tasks', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const out = { protocol: client.transport.protocolVersion ?? null };
out.capabilities = client.getServerCapabilities();
const tools = (await client.listTools()).tools;
out.taskSupport = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));

const program = 'import asyncio\nawait asyncio.gather(*[tools.up_lookup({"key": f"t{i}", "delay": 0.5}) for i in range(4)])';
out.stream = [];
for await (const message of client.experimental.tasks.callToolStream(
  { name: 'run_code', arguments: { code: program } },
  undefined,
  { task: { ttl: 60000 } },
)) {
  if (message.type === 'taskCreated') out.stream.push({ type: message.type, status: message.task.status, taskId: message.task.taskId });
  else if (message.type === 'taskStatus') out.stream.push({ type: message.type, status: message.task.status, statusMessage: message.task.statusMessage });
  else if (message.type === 'result') out.stream.push({ type: 'result', structuredContent: message.result.structuredContent });
  else out.stream.push({ type: message.type, error: String(message.error) });
}
const taskId = out.stream[0].taskId;
out.got = await client.experimental.tasks.getTask(taskId);
out.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
try {
  await client.experimental.tasks.cancelTask(taskId);
  out.cancelFinished = 'accepted';
} catch (error) {
  out.cancelFinished = { code: error.code, message: error.message };
}

const slow = 'await tools.up_lookup({"key": "slow", "delay": 30})';
let second;
for await (const message of client.experimental.tasks.callToolStream(
  { name: 'run_code', arguments: { code: slow } }, undefined, { task: { ttl: 60000 } },
)) {
  if (message.type === 'taskCreated') { second = message.task.taskId; break; }
}
out.cancelled = (await client.experimental.tasks.cancelTask(second)).status;
out.afterCancel = (await client.experimental.tasks.getTask(second)).status;
console.log(JSON.stringify(out));
await client.close();
