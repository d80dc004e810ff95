// toolnexus V8 host: runs ONE model-written program in a permission-less Deno process.
//
// Protocol: JSON lines. Host -> here: {"t":"run",...} once, then {"t":"result",...} per call.
// Here -> host: {"t":"ready"}, {"t":"call",id,name,args}, {"t":"log",stream,text},
// {"t":"done",ok,value | kind,message}. One process serves one run, so every run starts from
// fresh global state and a runaway is stopped by killing the process.

const core = {
  write: Deno.stdout.writeSync.bind(Deno.stdout),
  stdin: Deno.stdin,
  inspect: Deno.inspect,
};
const encoder = new TextEncoder();
const send = (message) => {
  const bytes = encoder.encode(JSON.stringify(message) + "\n");
  let offset = 0;
  while (offset < bytes.length) offset += core.write(bytes.subarray(offset));
};
// The program gets no handle on the process: no Deno namespace (every permission is denied
// anyway; this also keeps it from writing raw protocol lines).
delete globalThis.Deno;
// Nor workers: a program has no use for another V8 isolate, and one would only eat the memory
// budget (dying under it, reported as out of memory rather than as what the program did).
delete globalThis.Worker;
// A call the program fired and never awaited may fail; that must not end the process.
globalThis.addEventListener("unhandledrejection", (event) => event.preventDefault());

class ToolError extends Error {
  constructor(tool, message) {
    super(message);
    Object.defineProperty(this, "name", { value: "ToolError", enumerable: false });
    Object.defineProperty(this, "stack", { value: `ToolError: ${message}`, enumerable: false });
    this.tool = tool;
  }
}

const LINE_OFFSET = 2; // lines the AsyncFunction wrapper adds above the program's first line

function describe(error) {
  if (error instanceof ToolError) return `tool '${error.tool}' failed: ${error.message}`;
  if (!(error instanceof Error)) return `uncaught ${core.inspect(error)}`;
  const where = /<anonymous>:(\d+):(\d+)/.exec(String(error.stack));
  const text = `${error.name}: ${error.message}`;
  return where ? `${text} (line ${Number(where[1]) - LINE_OFFSET}, column ${where[2]})` : text;
}

function jsonProblem(value, path, depth) {
  if (depth > 200) return `${path} is nested too deeply`;
  if (value === null || typeof value === "string" || typeof value === "boolean") return null;
  if (typeof value === "number") {
    return Number.isFinite(value) ? null : `${path} is ${value}, which JSON cannot hold`;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = jsonProblem(value[i], `${path}[${i}]`, depth + 1);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value === "object") {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      return `${path} is a ${value.constructor?.name ?? "non-plain object"}, which is not JSON`;
    }
    for (const [key, item] of Object.entries(value)) {
      if (item === undefined) continue; // dropped, as JSON.stringify does
      const problem = jsonProblem(item, `${path}[${JSON.stringify(key)}]`, depth + 1);
      if (problem) return problem;
    }
    return null;
  }
  return `${path} is ${typeof value === "undefined" ? "undefined" : `a ${typeof value}`}, which is not JSON`;
}

function makeConsole(maxOutput) {
  let used = 0;
  let truncated = false;
  const emit = (stream) => (...args) => {
    if (truncated) return;
    const text = args.map((a) => (typeof a === "string" ? a : core.inspect(a))).join(" ");
    used += encoder.encode(text).length + 1;
    if (used > maxOutput) truncated = true; // the host writes the marker
    send({ t: "log", stream, text: truncated ? "" : text, truncated });
  };
  const stdout = emit("stdout");
  const stderr = emit("stderr");
  return Object.freeze({ log: stdout, info: stdout, debug: stdout, error: stderr, warn: stderr });
}

function makeTools(names, pending) {
  let nextId = 0;
  const tools = Object.create(null);
  for (const name of names) {
    tools[name] = (args) =>
      new Promise((resolve, reject) => {
        const id = ++nextId;
        let payload;
        try {
          payload = args === undefined ? {} : JSON.parse(JSON.stringify(args));
        } catch (e) {
          reject(new ToolError(name, `arguments are not JSON: ${e.message}`));
          return;
        }
        pending.set(id, { resolve, reject, name });
        send({ t: "call", id, name, args: payload });
      });
  }
  return Object.freeze(tools);
}

async function main() {
  const decoder = new TextDecoder();
  const pending = new Map();
  let buffer = "";
  let started = false;
  send({ t: "ready" });
  const chunk = new Uint8Array(1 << 16);
  for (;;) {
    // read() straight into a buffer: measurably faster per message than the readable stream
    const size = await core.stdin.read(chunk);
    if (size === null) break;
    buffer += decoder.decode(chunk.subarray(0, size), { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const message = JSON.parse(buffer.slice(0, newline));
      buffer = buffer.slice(newline + 1);
      if (message.t === "run" && !started) {
        started = true;
        run(message, pending); // not awaited: results must keep flowing in
      } else if (message.t === "result") {
        const call = pending.get(message.id);
        if (!call) continue;
        pending.delete(message.id);
        if (message.ok) call.resolve(message.value);
        else call.reject(new ToolError(message.tool, message.message));
      }
    }
  }
}

async function run(message, pending) {
  globalThis.console = makeConsole(message.max_output);
  globalThis.ToolError = ToolError;
  globalThis.tools = makeTools(message.tools, pending);
  const AsyncFunction = (async () => {}).constructor;
  let value;
  try {
    value = await new AsyncFunction(message.code)();
  } catch (error) {
    send({ t: "done", ok: false, kind: "exception", message: describe(error) });
    return;
  }
  if (value === undefined) value = null;
  const problem = jsonProblem(value, "result", 0);
  if (problem) send({ t: "done", ok: false, kind: "invalid_output", message: problem });
  else send({ t: "done", ok: true, value });
}

main();
