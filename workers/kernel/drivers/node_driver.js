// toolvisor's JavaScript kernel driver, embedded in the daemon and run as
// `sh -c 'exec 3<&0 4>&1 </dev/null >&2; exec "$@"' sh node --expose-internals -e <this>`.
//
// The daemon speaks length-prefixed JSON frames (4-byte big-endian length, UTF-8 JSON); the
// wrapper shell moved the protocol to fds 3 (in) and 4 (out) and pointed fd 1 at stderr, so
// output that bypasses the driver (child processes, native code) cannot corrupt the protocol:
// it reaches the daemon through stderr. console.*, process.stdout/stderr.write and display()
// travel as frames, in order.
//
// Cells run as scripts in this context, wrapped in an async function so top-level `await`
// works; top-level declarations are rewritten (with the acorn parser Node ships) into global
// variables, so state persists between cells and a cell can be run again.
'use strict';
(() => {
  const fs = require('fs');
  const net = require('net');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const Module = require('module');
  const { Writable } = require('stream');

  const PROTO_IN = 3;
  const PROTO_OUT = 4;
  let current = null; // the running cell's number
  let interruptCell = null; // rejects the running cell's promise on SIGINT
  let rows = 50;

  function send(msg) {
    const body = Buffer.from(JSON.stringify(msg, (k, v) => (typeof v === 'bigint' ? v.toString() : v)));
    const frame = Buffer.allocUnsafe(4 + body.length);
    frame.writeUInt32BE(body.length, 0);
    body.copy(frame, 4);
    let off = 0;
    while (off < frame.length) {
      try {
        off += fs.writeSync(PROTO_OUT, frame, off);
      } catch (e) {
        if (e.code === 'EAGAIN') continue;
        process.exit(0);
      }
    }
  }

  function stream(name, text) {
    if (text.length) send({ op: 'stream', cell: current, name, text });
  }

  function writableFor(name) {
    return new Writable({
      decodeStrings: false,
      write(chunk, _enc, cb) {
        stream(name, typeof chunk === 'string' ? chunk : chunk.toString('utf8'));
        cb();
      },
    });
  }

  const cellConsole = new console.Console({ stdout: writableFor('stdout'), stderr: writableFor('stderr'), colorMode: false });
  for (const [name, target] of [['stdout', process.stdout], ['stderr', process.stderr]]) {
    target.write = (chunk, enc, cb) => {
      stream(name, typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString(typeof enc === 'string' ? enc : 'utf8'));
      const done = typeof enc === 'function' ? enc : cb;
      if (typeof done === 'function') process.nextTick(done);
      return true;
    };
  }
  globalThis.console = cellConsole;

  // The dynamic-import loader option is experimental in Node 20; its warning is noise here.
  const emitWarning = process.emitWarning;
  process.emitWarning = function (warning, ...rest) {
    const text = String(warning && warning.message ? warning.message : warning);
    if (text.includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
    return emitWarning.call(process, warning, ...rest);
  };

  function inspect(value) {
    return util.inspect(value, { depth: 4, maxArrayLength: 100, maxStringLength: 20000, breakLength: 100, colors: false });
  }

  const MIME = Symbol.for('toolvisor.mime');

  function bundle(value, asResult) {
    if (value && typeof value === 'object' && value[MIME]) return value[MIME];
    if (!asResult && typeof value === 'string') return { 'text/plain': value };
    return { 'text/plain': inspect(value) };
  }

  function display(...values) {
    for (const value of values) send({ op: 'display', cell: current, data: bundle(value, false), result: false });
  }
  display.html = (html) => display({ [MIME]: { 'text/html': String(html), 'text/plain': '[html]' } });
  display.png = (data) =>
    display({ [MIME]: { 'image/png': Buffer.isBuffer(data) ? data.toString('base64') : String(data), 'text/plain': '[image/png]' } });
  display.mime = (data) => display({ [MIME]: data });
  globalThis.display = display;

  class ToolError extends Error {
    constructor(kind, message, hint) {
      super(`${kind}: ${message}${hint ? ` (hint: ${hint})` : ''}`);
      this.name = 'ToolError';
      this.kind = kind;
      this.hint = hint || '';
      this.detail = message;
    }
  }
  globalThis.ToolError = ToolError;

  let bridgeSeq = 0;
  const pending = new Map();
  globalThis.tool = function tool(name, args = {}) {
    if (typeof name !== 'string') return Promise.reject(new TypeError('tool(name, args): name must be a string'));
    const id = ++bridgeSeq;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      send({ op: 'bridge', cell: current, id, tool: name, args: args ?? {} });
    });
  };

  globalThis.require = Module.createRequire(path.join(process.cwd(), '[cell]'));

  let acorn = null;
  try {
    acorn = require('internal/deps/acorn/acorn/dist/acorn');
  } catch {
    acorn = null;
  }

  function patternNames(node, out) {
    if (!node) return;
    switch (node.type) {
      case 'Identifier': out.push(node.name); break;
      case 'ObjectPattern': for (const p of node.properties) patternNames(p.type === 'RestElement' ? p.argument : p.value, out); break;
      case 'ArrayPattern': for (const e of node.elements) patternNames(e, out); break;
      case 'RestElement': patternNames(node.argument, out); break;
      case 'AssignmentPattern': patternNames(node.left, out); break;
      default: break;
    }
  }

  // Rewrites a cell into `var <names>; (async () => { ... return (<last expression>); })()`,
  // keeping every line where it was so stack traces point at the cell's own lines.
  function transform(code) {
    if (!acorn) return null;
    let ast;
    try {
      ast = acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'script', allowAwaitOutsideFunction: true, allowHashBang: true });
    } catch {
      return null; // vm.Script reports the syntax error with its position
    }
    const src = (n) => code.slice(n.start, n.end);
    const names = new Set();
    const hoisted = [];
    const edits = [];
    for (const node of ast.body) {
      if (node.type === 'VariableDeclaration') {
        const parts = [];
        for (const d of node.declarations) {
          const found = [];
          patternNames(d.id, found);
          found.forEach((n) => names.add(n));
          if (d.init) parts.push(`${src(d.id)} = ${src(d.init)}`);
          else if (node.kind !== 'var') parts.push(`${src(d.id)} = undefined`);
        }
        edits.push([node.start, node.end, parts.length ? `void (${parts.join(', ')});` : ';']);
      } else if (node.type === 'FunctionDeclaration' && node.id) {
        names.add(node.id.name);
        hoisted.push(node.id.name);
      } else if (node.type === 'ClassDeclaration' && node.id) {
        names.add(node.id.name);
        edits.push([node.start, node.end, `${node.id.name} = ${src(node)};`]);
      }
    }
    const last = ast.body[ast.body.length - 1];
    if (last && last.type === 'ExpressionStatement' && !last.directive) {
      edits.push([last.start, last.end, `return (${src(last.expression)});`]);
    }
    edits.sort((a, b) => b[0] - a[0]);
    let body = code;
    for (const [start, end, text] of edits) body = body.slice(0, start) + text + body.slice(end);
    const decl = names.size ? `var ${[...names].join(', ')}; ` : '';
    const prologue = hoisted.map((n) => `globalThis.${n} = ${n};`).join(' ');
    return `${decl}(async () => { ${prologue}${body}\n})()`;
  }

  function cleanStack(err) {
    if (!(err instanceof Error) || typeof err.stack !== 'string') return `Uncaught ${inspect(err)}`;
    // Frames after the cell's own (the driver, Node's event plumbing) say nothing useful.
    const lines = err.stack.split('\n');
    const isFrame = (line) => /^\s+at /.test(line);
    let last = -1;
    lines.forEach((line, i) => {
      if (isFrame(line) && line.includes('[cell ')) last = i;
    });
    const kept = last >= 0 ? lines.slice(0, last + 1) : lines;
    return kept.filter((line) => !(isFrame(line) && (line.includes('[eval]') || /\(node:|at node:/.test(line)))).join('\n');
  }

  function sendError(err, cell) {
    const isError = err instanceof Error;
    send({
      op: 'error',
      cell,
      ename: isError ? err.name : 'Uncaught',
      evalue: isError ? err.message : inspect(err),
      traceback: cleanStack(err),
    });
  }

  class Interrupted extends Error {
    constructor() {
      super('the cell was interrupted');
      this.name = 'Interrupted';
    }
  }

  process.on('SIGINT', () => {
    if (interruptCell) interruptCell(new Interrupted());
  });
  process.on('unhandledRejection', (reason) => {
    stream('stderr', `Unhandled promise rejection: ${cleanStack(reason)}\n`);
  });
  process.on('uncaughtException', (err) => {
    stream('stderr', `Uncaught exception: ${cleanStack(err)}\n`);
  });

  // TypeScript cells: Node's own type stripping where it has it (22.13 and later), else the
  // `typescript` package: `[kernels] typescript` (TOOLVISOR_TYPESCRIPT), the run's own
  // node_modules, or the global npm root.
  let stripper = null;
  function typescriptStripper() {
    if (stripper) return stripper;
    if (typeof Module.stripTypeScriptTypes === 'function') {
      stripper = (code) => {
        try {
          return Module.stripTypeScriptTypes(code, { mode: 'strip' });
        } catch (err) {
          // Enums and namespaces need code, not only erasure.
          if (err && err.code === 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX') return Module.stripTypeScriptTypes(code, { mode: 'transform' });
          throw err;
        }
      };
      return stripper;
    }
    const tried = [];
    const candidates = [
      process.env.TOOLVISOR_TYPESCRIPT,
      path.join(process.cwd(), 'node_modules', 'typescript'),
      path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'typescript'),
      '/usr/local/lib/node_modules/typescript',
      '/usr/lib/node_modules/typescript',
    ].filter(Boolean);
    for (const dir of candidates) {
      tried.push(dir);
      let ts;
      try {
        ts = Module.createRequire(path.join(process.cwd(), '[cell]'))(path.resolve(dir));
      } catch {
        continue;
      }
      if (!ts || typeof ts.transpileModule !== 'function') continue;
      const options = {
        compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, removeComments: false },
        reportDiagnostics: false,
      };
      stripper = (code) => ts.transpileModule(code, options).outputText;
      return stripper;
    }
    const err = new Error(
      `TypeScript cells need Node 22.13 or later (its own type stripping; this is ${process.version}) or the typescript package, which is in none of: ${tried.join(', ')}. ` +
        'Install it (`npm install -g typescript`, or into the project) or set `[kernels] typescript` to its directory in the daemon config.'
    );
    err.name = 'TypeScriptUnavailable';
    throw err;
  }

  async function runCell(msg) {
    const cell = msg.cell;
    current = cell;
    rows = msg.rows || rows;
    let status = 'ok';
    try {
      const source = msg.typescript ? typescriptStripper()(msg.code) : msg.code;
      const wrapped = transform(source);
      const script = new vm.Script(wrapped ?? source, {
        filename: path.join(process.cwd(), `[cell ${cell}]`),
        // Node >= 20.12 has the main context's loader for scripts; older ones get a callback.
        importModuleDynamically: (vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER) || ((spec) => import(spec)),
      });
      const interrupted = new Promise((_, reject) => {
        interruptCell = reject;
      });
      const value = await Promise.race([script.runInThisContext({ breakOnSigint: true }), interrupted]);
      if (value !== undefined) {
        send({ op: 'display', cell, data: bundle(value, true), result: true });
      }
    } catch (err) {
      const interrupted = err instanceof Interrupted || (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED');
      status = interrupted ? 'interrupted' : 'error';
      sendError(err, cell);
    } finally {
      interruptCell = null;
    }
    // Everything the cell wrote at the fd level is in the stderr pipe before this marker.
    try {
      fs.writeSync(2, `\x1eTVSYNC ${cell}\x1e`);
    } catch {}
    send({ op: 'done', cell, status });
    current = null;
  }

  const queue = [];
  const cancelled = new Set();
  let running = false;
  async function pump() {
    if (running) return;
    running = true;
    while (queue.length) {
      const msg = queue.shift();
      if (cancelled.delete(msg.cell)) {
        send({ op: 'done', cell: msg.cell, status: 'interrupted' });
        continue;
      }
      await runCell(msg);
    }
    running = false;
  }

  function onMessage(msg) {
    if (msg.op === 'exec') {
      queue.push(msg);
      pump();
    } else if (msg.op === 'cancel') {
      if (msg.cell !== current) cancelled.add(msg.cell);
      else if (interruptCell) interruptCell(new Interrupted());
    } else if (msg.op === 'bridge_result') {
      const waiter = pending.get(msg.id);
      if (!waiter) return;
      pending.delete(msg.id);
      if (msg.err) waiter.reject(new ToolError(msg.err.kind, msg.err.message, msg.err.hint));
      else waiter.resolve(msg.ok);
    }
  }

  let buffered = Buffer.alloc(0);
  const input = new net.Socket({ fd: PROTO_IN, readable: true, writable: false });
  input.on('data', (chunk) => {
    buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
    while (buffered.length >= 4) {
      const len = buffered.readUInt32BE(0);
      if (buffered.length < 4 + len) break;
      const body = buffered.subarray(4, 4 + len);
      buffered = buffered.subarray(4 + len);
      onMessage(JSON.parse(body.toString('utf8')));
    }
  });
  input.on('end', () => process.exit(0));
  input.on('error', () => process.exit(0));

  send({ op: 'ready', pid: process.pid, language: 'javascript', version: process.version, executable: process.execPath });
})();
