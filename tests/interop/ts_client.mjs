#!/usr/bin/env node
// A scenario test client (see docs/scenario-agent.md) written with the
// official TypeScript SDK (@agentclientprotocol/sdk, client API).
//
// Usage:
//   node ts_client.mjs [options] -- <agent command> [args...]
//
// Options (steps run in order, one session):
//   --prompt TEXT          send a prompt and wait for its answer
//   --cancel-after MS      the previous prompt is cancelled with session/cancel
//                          MS ms after it was sent (after --wait-requests)
//   --abort-after MS       the previous prompt is cancelled with $/cancel_request
//                          (the SDK's cancellationSignal), MS ms after it was sent
//   --wait-requests N      the cancel of the previous prompt waits first until N
//                          requests from the agent arrived during that prompt
//   --answer-permissions   with --cancel-after: pending permission requests of
//                          the session get the `cancelled` outcome as soon as
//                          session/cancel is sent (without this they are only
//                          answered when the agent cancels them)
//   --script JSON          steps as a JSON array of
//                          {prompt, cancel: "session"|"request", after_ms,
//                           wait_requests, answer_permissions}
//
// It advertises fs.readTextFile, fs.writeTextFile and terminal, and answers:
// fs/read_text_file of any path but /hold with 64 "x"; fs/write_text_file
// with {}; /hold, terminal/create and session/request_permission never on
// their own: on $/cancel_request (the SDK aborts ctx.signal) each gets
// -32800 (the handler rejects with an AbortError; the SDK makes it -32800);
// with --answer-permissions a permission request gets the `cancelled` outcome
// when the client sends session/cancel.
//
// Output: one JSON object per line on stdout, each with "ev":
//   wire      {dir: "send"|"recv", msg}  every JSON-RPC message (stream wrapper)
//   initialized {result}, session {sessionId}
//   update    {sessionId, update}        each session/update notification
//   request   {method, id, params}       each request from the agent, when handled
//   answered  {method, id, how}          how a held request ended
//   cancel    {kind, after_ms, step}     just before a cancel is sent
//   result    {step, prompt, result}     a prompt's result
//   error     {step, prompt, code, message, data}  a prompt's error
//   done      {}                         at the end (exit code 0)
//   fatal     {message}                  on an unexpected error (exit code 1)

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";

const { methods } = acp;

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function parseArgs(argv) {
  const sep = argv.indexOf("--");
  if (sep < 0 || sep === argv.length - 1) {
    throw new Error("usage: ts_client.mjs [options] -- <agent command> [args...]");
  }
  const command = argv.slice(sep + 1);
  const opts = argv.slice(0, sep);
  const steps = [];
  const last = (flag) => {
    if (steps.length === 0) throw new Error(`${flag} needs a --prompt before it`);
    return steps[steps.length - 1];
  };
  for (let i = 0; i < opts.length; i++) {
    const flag = opts[i];
    switch (flag) {
      case "--prompt":
        steps.push({ prompt: opts[++i] });
        break;
      case "--cancel-after":
        Object.assign(last(flag), { cancel: "session", after_ms: Number(opts[++i]) });
        break;
      case "--abort-after":
        Object.assign(last(flag), { cancel: "request", after_ms: Number(opts[++i]) });
        break;
      case "--wait-requests":
        last(flag).wait_requests = Number(opts[++i]);
        break;
      case "--answer-permissions":
        last(flag).answer_permissions = true;
        break;
      case "--script":
        steps.push(...JSON.parse(opts[++i]));
        break;
      default:
        throw new Error(`unknown option ${flag}`);
    }
  }
  return { command, steps };
}

function abortError() {
  return new DOMException("cancelled", "AbortError");
}

// Held requests: each waits for its ctx.signal (the peer's $/cancel_request).
// Permission requests can also be answered `cancelled` locally.
const heldPermissions = new Set();
let requestsSeen = 0;
const requestWaiters = [];

function sawRequest(ctx) {
  requestsSeen++;
  emit({ ev: "request", method: ctx.method, id: ctx.requestId, params: ctx.params });
  for (const waiter of [...requestWaiters]) waiter();
}

function waitForRequests(n) {
  return new Promise((resolve) => {
    const check = () => {
      if (requestsSeen >= n) {
        requestWaiters.splice(requestWaiters.indexOf(check), 1);
        resolve();
      }
    };
    requestWaiters.push(check);
    check();
  });
}

function hold(ctx) {
  return new Promise((_, reject) => {
    const fail = () => {
      emit({ ev: "answered", method: ctx.method, id: ctx.requestId, how: "-32800" });
      reject(abortError());
    };
    if (ctx.signal.aborted) return fail();
    ctx.signal.addEventListener("abort", fail, { once: true });
  });
}

function holdPermission(ctx) {
  return new Promise((resolve, reject) => {
    const entry = {
      sessionId: ctx.params.sessionId,
      answer(how) {
        if (!heldPermissions.delete(entry)) return;
        emit({ ev: "answered", method: ctx.method, id: ctx.requestId, how });
        if (how === "-32800") reject(abortError());
        else resolve({ outcome: { outcome: "cancelled" } });
      },
    };
    heldPermissions.add(entry);
    if (ctx.signal.aborted) return entry.answer("-32800");
    ctx.signal.addEventListener("abort", () => entry.answer("-32800"), { once: true });
  });
}

// Logs every message the connection sends and receives.
function tap(stream) {
  const readable = stream.readable.pipeThrough(
    new TransformStream({
      transform(msg, controller) {
        emit({ ev: "wire", dir: "recv", msg });
        controller.enqueue(msg);
      },
    }),
  );
  const out = new TransformStream({
    transform(msg, controller) {
      emit({ ev: "wire", dir: "send", msg });
      controller.enqueue(msg);
    },
  });
  void out.readable.pipeTo(stream.writable).catch(() => {});
  return { readable, writable: out.writable };
}

const app = acp
  .client({ name: "ts-scenario-client" })
  .onNotification(methods.client.session.update, (ctx) => {
    emit({ ev: "update", sessionId: ctx.params.sessionId, update: ctx.params.update });
  })
  .onRequest(methods.client.fs.readTextFile, async (ctx) => {
    sawRequest(ctx);
    if (ctx.params.path === "/hold") return hold(ctx);
    return { content: "x".repeat(64) };
  })
  .onRequest(methods.client.fs.writeTextFile, async (ctx) => {
    sawRequest(ctx);
    return {};
  })
  .onRequest(methods.client.terminal.create, async (ctx) => {
    sawRequest(ctx);
    return hold(ctx);
  })
  .onRequest(methods.client.session.requestPermission, async (ctx) => {
    sawRequest(ctx);
    return holdPermission(ctx);
  });

async function runStep(agent, sessionId, step, index) {
  const abort = new AbortController();
  const seenBefore = requestsSeen;
  let cancelled = false;
  const request = agent.request(
    methods.agent.session.prompt,
    { sessionId, prompt: [{ type: "text", text: step.prompt }] },
    { cancellationSignal: abort.signal },
  );
  let cancelTask = Promise.resolve();
  if (step.cancel) {
    cancelTask = (async () => {
      if (step.wait_requests) {
        await Promise.race([waitForRequests(seenBefore + step.wait_requests), request]);
      }
      await new Promise((r) => setTimeout(r, step.after_ms ?? 0));
      if (cancelled) return;
      emit({ ev: "cancel", kind: step.cancel, after_ms: step.after_ms ?? 0, step: index });
      if (step.cancel === "session") {
        await agent.notify(methods.agent.session.cancel, { sessionId });
        if (step.answer_permissions) {
          for (const entry of [...heldPermissions]) {
            if (entry.sessionId === sessionId) entry.answer("cancelled (session/cancel)");
          }
        }
      } else {
        abort.abort();
      }
    })();
  }
  try {
    const result = await request;
    emit({ ev: "result", step: index, prompt: step.prompt, result });
  } catch (error) {
    emit({
      ev: "error",
      step: index,
      prompt: step.prompt,
      code: error?.code ?? null,
      message: String(error?.message ?? error),
      data: error?.data ?? null,
    });
  } finally {
    cancelled = true;
  }
  await cancelTask;
}

async function main() {
  const { command, steps } = parseArgs(process.argv.slice(2));
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, sig) => resolve({ code, sig })));
  child.on("error", (error) => {
    emit({ ev: "fatal", message: `cannot start agent: ${error.message}` });
    process.exit(1);
  });
  const stream = tap(acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
  await app.connectWith(stream, async (agent) => {
    const init = await agent.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
      clientInfo: { name: "ts-scenario-client", version: "2.4.0" },
    });
    emit({ ev: "initialized", result: init });
    const session = await agent.request(methods.agent.session.new, {
      cwd: process.cwd(),
      mcpServers: [],
    });
    emit({ ev: "session", sessionId: session.sessionId });
    for (const [index, step] of steps.entries()) {
      await runStep(agent, session.sessionId, step, index);
    }
    // Let late messages (answers to cancelled requests) arrive and be logged.
    await new Promise((r) => setTimeout(r, 200));
  });
  child.stdin.end();
  const timer = setTimeout(() => child.kill("SIGTERM"), 3000);
  const status = await exited;
  clearTimeout(timer);
  emit({ ev: "done", agent_exit: status.code, agent_signal: status.sig });
}

main().then(
  () => process.exit(0),
  (error) => {
    emit({ ev: "fatal", message: String(error?.stack ?? error) });
    process.exit(1);
  },
);
