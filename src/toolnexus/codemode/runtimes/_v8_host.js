// toolnexus V8 host: runs ONE model-written program in a permission-less Deno process.
//
// Protocol: JSON lines. Host -> here: {"t":"run",...} once, then {"t":"result",...} per call.
// Here -> host: {"t":"ready"}, {"t":"call",id,name,args}, {"t":"host",id,fn,args} (search_tools,
// describe_tool: answered like a call), {"t":"log",stream,text,truncated},
// {"t":"done",ok,value | kind,message}. One process serves one run, so every run starts from
// fresh global state and a runaway is stopped by killing the process.
//
// The program shares this realm, so it can replace any global or prototype method (JSON,
// Object.prototype.toJSON, String.prototype.slice, Map.prototype.get, ...). Everything this
// script needs after the program starts is therefore captured first and called through
// `apply`, messages are encoded by our own walker (which never consults toJSON), and tables
// are null-prototype objects. A program that breaks its own realm only breaks its own run;
// the Python side validates every message anyway. The program's timer functions are wrapped to
// count its live timers (see `mayBlock`): a program that gets round them only slows itself.

"use strict";

const apply = Reflect.apply;
const { stringify, parse } = JSON;
const { keys, getPrototypeOf, freeze, defineProperty, create } = Object;
const objectPrototype = Object.prototype;
const isArray = Array.isArray;
const isFinite = Number.isFinite;
const String_ = String;
const stringIndexOf = String.prototype.indexOf;
const stringSlice = String.prototype.slice;
const regExpExec = RegExp.prototype.exec;
const encodeText = TextEncoder.prototype.encode;
const decodeText = TextDecoder.prototype.decode;
const subarray = Uint8Array.prototype.subarray;
const Promise_ = Promise;
const MAX_NESTING = 64; // as the host's own limit for tool arguments and results

const core = {
  write: Deno.stdout.writeSync.bind(Deno.stdout),
  read: Deno.stdin.read.bind(Deno.stdin),
  readSync: Deno.stdin.readSync.bind(Deno.stdin),
  inspect: Deno.inspect,
};
const abortTimeout = AbortSignal.timeout;
// Deno defines its timer functions as getters that load them when first read (about 7 ms):
// read at start, they would cost every boot that much. Their getters are kept, and called
// when the program first uses a timer.
const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const TIMER_NAMES = freeze(["setTimeout", "setInterval", "clearTimeout", "clearInterval"]);
const timerGetters = create(null);
for (const name of TIMER_NAMES) {
  const found = getOwnPropertyDescriptor(globalThis, name);
  const value = found.value;
  timerGetters[name] = found.get || (() => value);
}
let timerFunctions = null;
function timer(name) {
  if (timerFunctions === null) {
    timerFunctions = create(null);
    for (let i = 0; i < TIMER_NAMES.length; i++) {
      // an index, not for-of: the program may have replaced the array iterator by now
      timerFunctions[TIMER_NAMES[i]] = apply(timerGetters[TIMER_NAMES[i]], globalThis, []);
    }
  }
  return timerFunctions[name];
}

// Waiting for a reply: a blocking read where nothing else can happen meanwhile. Deno's async
// read hands each read to a thread of its runtime, which then wakes this one: two more thread
// wake-ups per sub-call than a read on this thread (a JSON-lines round trip took 106 us with
// the async read, 37 us with the blocking one, on a 2-CPU machine). So when the program has
// calls waiting for replies and nothing else that needs the event loop (no timer of its own,
// checked after its pending reactions ran), this script reads stdin blocking. Timers are
// counted through the program's setTimeout/setInterval/clearTimeout/clearInterval; a program
// that uses AbortSignal.timeout or a timer with a string callback has its reads asynchronous
// from then on. Other asynchronous work (crypto.subtle, WebAssembly compiles, Blob reads) made
// while a call is out completes once a reply has come in: every call is answered (or the run
// ends), so nothing waits forever.
const timers = create(null); // the program's live timer ids
let liveTimers = 0;
let blocking = true; // false once the program used a timer this script cannot count
let waiting = 0; // calls written and not answered
function settled(id) {
  if (timers[id]) {
    delete timers[id];
    liveTimers--;
  }
}
function countedTimer(name, repeats) {
  return function (callback, delay, ...args) {
    const start = timer(name);
    if (typeof callback !== "function") {
      blocking = false;
      return apply(start, globalThis, [callback, delay, ...args]);
    }
    let id;
    const fire = function () {
      if (!repeats) settled(id);
      return apply(callback, this, args);
    };
    id = apply(start, globalThis, [fire, delay]);
    if (!timers[id]) {
      timers[id] = true;
      liveTimers++;
    }
    return id;
  };
}
function countedClear(id) {
  settled(id);
  return apply(timer("clearTimeout"), globalThis, [id]);
}
const counted = {
  setTimeout: countedTimer("setTimeout", false),
  setInterval: countedTimer("setInterval", true),
  clearTimeout: countedClear,
  clearInterval: countedClear,
};
for (const name of TIMER_NAMES) {
  // defined over Deno's getters without calling them
  defineProperty(globalThis, name, {
    value: counted[name],
    writable: true,
    enumerable: true,
    configurable: true,
  });
}
AbortSignal.timeout = function timeout(ms) {
  blocking = false;
  return apply(abortTimeout, AbortSignal, [ms]);
};
// After the program's pending reactions: whether the next read may block. A message to a port
// of our own is the cheapest task that runs once they have (9 us here; a setTimeout of 0 waits
// 2 ms). The channel is made when first needed: made at start, it cost every boot ~12 ms.
const postMessage = MessagePort.prototype.postMessage;
const closePort = MessagePort.prototype.close;
let channel = null;
let afterReactions = null;
function mayBlock() {
  if (!blocking) return false; // for the rest of the run
  if (channel === null) {
    channel = new MessageChannel();
    channel.port2.onmessage = () => {
      const resolve = afterReactions;
      afterReactions = null;
      resolve(blocking && waiting > 0 && liveTimers === 0);
    };
  }
  return new Promise_((resolve) => {
    afterReactions = resolve;
    apply(postMessage, channel.port1, [null]);
  });
}
const encoder = new TextEncoder();
const decoder = new TextDecoder();

// Stack traces name no host path: this script's frames read "toolnexus-host", the program's
// keep their line and column. Not writable, so a program cannot turn it off.
defineProperty(Error, "prepareStackTrace", {
  value: (error, frames) => {
    let text = "";
    try {
      text = `${error}`;
    } catch {
      text = "Error";
    }
    for (let i = 0; i < frames.length; i++) {
      const frame = frames[i];
      const file = frame.getFileName();
      const where = file
        ? "toolnexus-host"
        : `<anonymous>:${frame.getLineNumber()}:${frame.getColumnNumber()}`;
      text += `\n    at ${frame.getFunctionName() || "<program>"} (${where})`;
    }
    return text;
  },
  writable: false,
  configurable: false,
});

// No state may outlive a run or reach the disk: no web storage, no Cache API, no database.
for (const name of [
  "localStorage",
  "sessionStorage",
  "Storage",
  "caches",
  "CacheStorage",
  "Cache",
  "indexedDB",
  "IDBFactory",
]) {
  delete globalThis[name];
}
// The program gets no handle on the process: no Deno namespace (every permission is denied
// anyway; this also keeps it from writing raw protocol lines).
delete globalThis.Deno;
// Nor workers: a program has no use for another V8 isolate, and one would only eat the memory
// budget (dying under it, reported as out of memory rather than as what the program did).
delete globalThis.Worker;
// A call the program fired and never awaited may fail; that must not end the process.
globalThis.addEventListener("unhandledrejection", (event) => event.preventDefault());

class NotJSON extends Error {}

// `value` as JSON text, or a NotJSON saying what is wrong and where. Never calls toJSON, never
// calls a method the program could have replaced (primitives go through the captured
// stringify, which consults toJSON only for objects).
function encode(value, path, depth, root = path) {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
      return apply(stringify, JSON, [value]);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!isFinite(value)) throw new NotJSON(`${path} is ${value}, which JSON cannot hold`);
      return apply(stringify, JSON, [value]);
    case "object":
      break;
    default:
      throw new NotJSON(`${path} is ${typeof value === "undefined" ? "undefined" : `a ${typeof value}`}, which is not JSON`);
  }
  if (depth >= MAX_NESTING) {
    throw new NotJSON(`a value nested deeper than ${MAX_NESTING} levels in ${root}`);
  }
  if (isArray(value)) {
    let text = "[";
    for (let i = 0; i < value.length; i++) {
      if (i) text += ",";
      const item = value[i] === undefined ? null : value[i];
      text += encode(item, `${path}[${i}]`, depth + 1, root);
    }
    return text + "]";
  }
  const proto = getPrototypeOf(value);
  if (proto !== objectPrototype && proto !== null) {
    let kind = "non-plain object";
    try {
      const name = proto.constructor.name;
      if (typeof name === "string" && name) kind = name;
    } catch {
      // a hostile prototype: keep the generic word
    }
    throw new NotJSON(`${path} is a ${kind}, which is not JSON`);
  }
  const names = keys(value);
  let text = "{";
  let first = true;
  for (let i = 0; i < names.length; i++) {
    const item = value[names[i]];
    if (item === undefined) continue; // dropped, as JSON.stringify does
    const key = apply(stringify, JSON, [names[i]]);
    text += `${first ? "" : ","}${key}:${encode(item, `${path}[${key}]`, depth + 1, root)}`;
    first = false;
  }
  return text + "}";
}

function writeLine(text) {
  const bytes = apply(encodeText, encoder, [text + "\n"]);
  let offset = 0;
  while (offset < bytes.length) offset += core.write(apply(subarray, bytes, [offset]));
}

const send = (fields) => writeLine(encode(fields, "message", 0));

// `fields` plus one more key whose value is JSON text already (arguments, a result).
function sendWith(fields, key, json) {
  const head = encode(fields, "message", 0);
  writeLine(`${apply(stringSlice, head, [0, head.length - 1])},"${key}":${json}}`);
}

class ToolError extends Error {
  constructor(tool, message) {
    super(message);
    defineProperty(this, "name", { value: "ToolError", enumerable: false });
    defineProperty(this, "stack", { value: `ToolError: ${message}`, enumerable: false });
    this.tool = tool;
  }
}
freeze(ToolError);
freeze(ToolError.prototype);

const LINE_OFFSET = 2; // lines the AsyncFunction wrapper adds above the program's first line
const POSITION = /<anonymous>:(\d+):(\d+)/;

function describe(error) {
  try {
    if (error instanceof ToolError) return `tool '${error.tool}' failed: ${error.message}`;
    if (!(error instanceof Error)) return `uncaught ${core.inspect(error)}`;
    const where = apply(regExpExec, POSITION, [String_(error.stack)]);
    const text = `${error.name}: ${error.message}`;
    return where ? `${text} (line ${Number(where[1]) - LINE_OFFSET}, column ${where[2]})` : text;
  } catch {
    return "an uncaught exception that could not be described";
  }
}

function makeConsole(maxOutput) {
  let used = 0;
  let truncated = false;
  const emit = (stream) => (...args) => {
    if (truncated) return;
    let text = "";
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (i) text += " ";
      try {
        text += typeof arg === "string" ? arg : core.inspect(arg);
      } catch {
        text += "<uninspectable>";
      }
    }
    used += apply(encodeText, encoder, [text]).length + 1;
    if (used > maxOutput) truncated = true; // the host writes the marker
    send({ t: "log", stream, text: truncated ? "" : text, truncated });
  };
  const stdout = emit("stdout");
  const stderr = emit("stderr");
  return freeze({ log: stdout, info: stdout, debug: stdout, error: stderr, warn: stderr });
}

let nextId = 0; // call ids, shared by tool calls and host functions

// search_tools and describe_tool: answered by the host at once (they are not tool calls).
function makeHost(pending) {
  const ask = (fn, fields) =>
    new Promise_((resolve, reject) => {
      let text;
      try {
        text = encode(fields, "arguments", 0);
      } catch (e) {
        const why = e instanceof NotJSON ? e.message : "they could not be read";
        reject(new ToolError(fn, `arguments are not JSON: ${why}`));
        return;
      }
      const id = ++nextId;
      pending[id] = { resolve, reject };
      waiting++;
      writeLine(`{"t":"host","id":${id},"fn":"${fn}","args":${text}}`);
    });
  return freeze({
    search_tools: (query, limit = 5) => ask("search_tools", { query, limit }),
    describe_tool: (name) => ask("describe_tool", { name }),
  });
}

function makeTools(names, pending) {
  const tools = create(null);
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    const quoted = apply(stringify, JSON, [name]); // the call line's head, made once per tool
    tools[name] = (args) =>
      new Promise_((resolve, reject) => {
        let text;
        try {
          text = encode(args === undefined ? {} : args, "arguments", 0);
        } catch (e) {
          const why = e instanceof NotJSON ? e.message : "they could not be read";
          reject(new ToolError(name, `arguments are not JSON: ${why}`));
          return;
        }
        const id = ++nextId;
        pending[id] = { resolve, reject };
        waiting++;
        writeLine(`{"t":"call","id":${id},"name":${quoted},"args":${text}}`);
      });
  }
  return freeze(tools);
}

async function main() {
  const pending = create(null);
  let buffer = "";
  let started = false;
  send({ t: "ready" });
  const chunk = new Uint8Array(1 << 16);
  for (;;) {
    // read() straight into a buffer: measurably faster per message than the readable stream
    // (a spare waiting for its program reads asynchronously: no channel made before a run)
    const size = started && (await mayBlock()) ? core.readSync(chunk) : await core.read(chunk);
    if (size === null) {
      if (channel !== null) apply(closePort, channel.port1, []);
      break;
    }
    buffer += apply(decodeText, decoder, [apply(subarray, chunk, [0, size]), { stream: true }]);
    let newline;
    while ((newline = apply(stringIndexOf, buffer, ["\n"])) >= 0) {
      const message = apply(parse, JSON, [apply(stringSlice, buffer, [0, newline])]);
      buffer = apply(stringSlice, buffer, [newline + 1]);
      if (message.t === "run" && !started) {
        started = true;
        run(message, pending); // not awaited: results must keep flowing in
      } else if (message.t === "result") {
        const call = pending[message.id];
        if (!call) continue;
        delete pending[message.id];
        waiting--;
        if (message.ok) call.resolve(message.value);
        else call.reject(new ToolError(message.tool, message.message));
      }
    }
  }
}

function finish(value) {
  let text;
  try {
    text = encode(value === undefined ? null : value, "result", 0);
  } catch (e) {
    const problem = e instanceof NotJSON ? e.message : "the result could not be read";
    send({ t: "done", ok: false, kind: "invalid_output", message: problem });
    return;
  }
  sendWith({ t: "done", ok: true }, "value", text);
}

async function run(message, pending) {
  globalThis.console = makeConsole(message.max_output);
  globalThis.ToolError = ToolError;
  globalThis.tools = makeTools(message.tools, pending);
  const host = makeHost(pending);
  globalThis.search_tools = host.search_tools;
  globalThis.describe_tool = host.describe_tool;
  const AsyncFunction = (async () => {}).constructor;
  let value;
  try {
    value = await new AsyncFunction(message.code)();
  } catch (error) {
    send({ t: "done", ok: false, kind: "exception", message: describe(error) });
    return;
  }
  finish(value);
}

main();
