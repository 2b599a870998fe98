#!/usr/bin/env node
// The benchmark client written with the official TypeScript SDK
// (@agentclientprotocol/sdk 2.4.0, client API), installed for the interop
// tests by `npm ci --prefix tests/interop`. Same command line and output as
// the Python clients (see _common.py):
//
//   node ts_client.mjs --workload {stream,read,cancel} --n N [--warmup W] -- AGENT...
//
// Held requests (read of /hold, terminal/create, permission) wait for their
// ctx.signal (the agent's $/cancel_request: the SDK answers -32800); on our
// own session/cancel, pending permission requests get the `cancelled` outcome.

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";

const here = fileURLToPath(new URL(".", import.meta.url));
const require = createRequire(`${here}../../tests/interop/package.json`);
const acp = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);
const { methods } = acp;

const CONTENT = "x".repeat(64);
const WARMUP = { stream: 500, read: 100, cancel: 3 };

function parseArgs(argv) {
  const cut = argv.indexOf("--");
  if (cut < 0 || cut === argv.length - 1) {
    throw new Error("usage: ts_client.mjs --workload W --n N [--warmup W] -- AGENT...");
  }
  const opts = { command: argv.slice(cut + 1) };
  const flags = argv.slice(0, cut);
  for (let i = 0; i < flags.length; i += 2) opts[flags[i].replace(/^--/, "")] = flags[i + 1];
  opts.n = Number(opts.n);
  opts.warmup = opts.warmup === undefined ? WARMUP[opts.workload] : Number(opts.warmup);
  return opts;
}

function promptText(workload, n) {
  if (workload === "stream") return `stream ${n}`;
  if (workload === "read") return `read ${n} /bench/file`;
  return "nested";
}

const state = { chunks: 0, lastText: null, arrived: 0, onAllHeld: null, cancelled: 0 };
const permissions = new Set();

function reset() {
  state.chunks = 0;
  state.lastText = null;
  state.arrived = 0;
}

function arrive() {
  state.arrived++;
  if (state.arrived === 3 && state.onAllHeld) state.onAllHeld();
}

function abortError() {
  return new DOMException("cancelled", "AbortError");
}

function hold(ctx) {
  arrive();
  return new Promise((_, reject) => {
    const fail = () => {
      state.cancelled++;
      reject(abortError());
    };
    if (ctx.signal.aborted) return fail();
    ctx.signal.addEventListener("abort", fail, { once: true });
  });
}

function holdPermission(ctx) {
  return new Promise((resolve, reject) => {
    const entry = {
      answer(cancelledOnWire) {
        if (!permissions.delete(entry)) return;
        state.cancelled++;
        if (cancelledOnWire) reject(abortError());
        else resolve({ outcome: { outcome: "cancelled" } });
      },
    };
    permissions.add(entry);
    arrive();
    if (ctx.signal.aborted) return entry.answer(true);
    ctx.signal.addEventListener("abort", () => entry.answer(true), { once: true });
  });
}

const app = acp
  .client({ name: "ts-bench-client" })
  .onNotification(methods.client.session.update, (ctx) => {
    const update = ctx.params.update;
    if (update.sessionUpdate === "agent_message_chunk") {
      state.chunks++;
      state.lastText = update.content?.text ?? null;
    }
  })
  .onRequest(methods.client.fs.readTextFile, async (ctx) => {
    if (ctx.params.path === "/hold") return hold(ctx);
    return { content: CONTENT };
  })
  .onRequest(methods.client.fs.writeTextFile, async () => ({}))
  .onRequest(methods.client.terminal.create, async (ctx) => hold(ctx))
  .onRequest(methods.client.session.requestPermission, async (ctx) => holdPermission(ctx));

function check(workload, n, stopReason) {
  if (workload === "cancel") {
    if (stopReason !== "cancelled") throw new Error(`nested ended ${stopReason}`);
    return;
  }
  if (stopReason !== "end_turn") throw new Error(`${workload} ended ${stopReason}`);
  if (workload === "stream" && state.chunks !== n) {
    throw new Error(`stream ${n}: the handler saw ${state.chunks} chunks`);
  }
  if (workload === "read" && state.lastText !== `read ${n} ${n * CONTENT.length}`) {
    throw new Error(`read ${n}: the agent answered ${state.lastText}`);
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const child = spawn(opts.command[0], opts.command.slice(1), {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  let out;
  await app.connectWith(stream, async (agent) => {
    await agent.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
      clientInfo: { name: "ts-bench-client", version: "2.4.0" },
    });
    const { sessionId } = await agent.request(methods.agent.session.new, {
      cwd: process.cwd(),
      mcpServers: [],
    });
    const prompt = (text) =>
      agent.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text }],
      });
    if (opts.workload === "cancel") {
      const latencies = [];
      for (let cycle = 0; cycle < opts.warmup + opts.n; cycle++) {
        reset();
        const allHeld = new Promise((resolve) => {
          state.onAllHeld = resolve;
        });
        const answer = prompt("nested");
        await allHeld;
        const start = performance.now();
        await agent.notify(methods.agent.session.cancel, { sessionId });
        for (const entry of [...permissions]) entry.answer(false);
        const result = await answer;
        const done = performance.now();
        check("cancel", 1, result.stopReason);
        if (cycle >= opts.warmup) latencies.push(done - start);
      }
      out = { latencies_ms: latencies, cancelled: state.cancelled };
    } else {
      if (opts.warmup) await prompt(promptText(opts.workload, opts.warmup));
      reset();
      const start = performance.now();
      const result = await prompt(promptText(opts.workload, opts.n));
      const seconds = (performance.now() - start) / 1000;
      check(opts.workload, opts.n, result.stopReason);
      out = { seconds, per_second: opts.n / seconds };
    }
  });
  child.stdin.end();
  const timer = setTimeout(() => child.kill("SIGTERM"), 5000);
  await exited;
  clearTimeout(timer);
  process.stdout.write(
    `${JSON.stringify({ client: "ts", workload: opts.workload, n: opts.n, ...out })}\n`,
  );
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`ts_client: ${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
