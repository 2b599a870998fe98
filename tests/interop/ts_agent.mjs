#!/usr/bin/env node
// The scenario agent of docs/scenario-agent.md, written with the
// official TypeScript SDK (@agentclientprotocol/sdk, agent API), over stdio.
//
// Commands: echo, stream, read, write, wait_for_cancel, nested, deadline,
// permission, fail, sleep; anything else answers "unknown command".
//
// Cancellation, as far as the TS SDK allows it (it is cooperative):
// - `session/cancel` aborts the session's running turns; the prompt answers
//   `stopReason: "cancelled"`.
// - `$/cancel_request` for a prompt aborts the handler's `ctx.signal` (the
//   SDK does that); the handler then rejects with an AbortError, which the SDK
//   turns into the `-32800` error.
// - Either way every nested request still open is cancelled on the wire: each
//   one is sent with `cancellationSignal` = the turn's signal (ctx.signal
//   combined with the session's cancel), so the SDK sends its
//   `$/cancel_request`. The turn then waits (bounded) for those requests'
//   answers before answering the prompt, so that every request it made gets
//   its response while the prompt is still open.
//
// Diagnostics go to stderr only when ACP_TS_AGENT_DEBUG is set.

import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";

const { methods, RequestError } = acp;
const debug = process.env.ACP_TS_AGENT_DEBUG
  ? (...args) => console.error("ts_agent:", ...args)
  : () => {};

// How long a cancelled turn waits for the answers to its cancelled nested
// requests before it answers anyway.
const NESTED_SETTLE_MS = 2000;

let nextSession = 0;
let clientCapabilities = {};
// sessionId -> Set of AbortControllers, one per running turn.
const turns = new Map();

class SessionCancelled extends Error {
  constructor() {
    super("session/cancel");
    this.name = "SessionCancelled";
  }
}

function abortError(message) {
  return new DOMException(message, "AbortError");
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError("aborted"));
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError("aborted"));
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function untilAborted(signal) {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(abortError("aborted"));
    signal.addEventListener("abort", () => reject(abortError("aborted")), { once: true });
  });
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([
    promise,
    new Promise((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function permissionRequest(sessionId) {
  return {
    sessionId,
    toolCall: { toolCallId: "call-1", title: "Run the tests" },
    options: [
      { optionId: "allow", name: "Allow", kind: "allow_once" },
      { optionId: "reject", name: "Reject", kind: "reject_once" },
    ],
  };
}

// Runs one prompt turn: `body(turn)` gets a helper object; the result of the
// turn follows the scenario rules for session/cancel and $/cancel_request.
async function runTurn(ctx, body) {
  const sessionId = ctx.params.sessionId;
  const sessionCancel = new AbortController();
  let set = turns.get(sessionId);
  if (!set) turns.set(sessionId, (set = new Set()));
  set.add(sessionCancel);
  const signal = AbortSignal.any([ctx.signal, sessionCancel.signal]);
  const nested = [];
  const turn = {
    sessionId,
    signal,
    say: (text) =>
      ctx.client.notify(methods.client.session.update, {
        sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
      }),
    // A request to the client that is cancelled on the wire with the turn.
    request: (method, params, options = {}) => {
      const p = ctx.client.request(method, params, { cancellationSignal: signal, ...options });
      nested.push(p);
      return p;
    },
  };
  try {
    try {
      return await body(turn);
    } catch (error) {
      if (!signal.aborted) throw error;
      // Let the cancelled nested requests get their answers first.
      await withTimeout(Promise.allSettled(nested), NESTED_SETTLE_MS);
      if (sessionCancel.signal.aborted) {
        debug("turn cancelled by session/cancel", ctx.requestId);
        return { stopReason: "cancelled" };
      }
      debug("turn cancelled by $/cancel_request", ctx.requestId);
      // ctx.signal is aborted: the SDK answers an AbortError with -32800.
      throw abortError("cancelled by $/cancel_request");
    }
  } finally {
    set.delete(sessionCancel);
    if (set.size === 0) turns.delete(sessionId);
  }
}

async function prompt(ctx) {
  const first = ctx.params.prompt.find((block) => block.type === "text");
  const text = first ? first.text.trim() : "";
  const words = text.split(" ");
  const command = words[0];
  const rest = text.slice(command.length + 1);
  return runTurn(ctx, async (turn) => {
    switch (command) {
      case "echo":
        await turn.say(rest);
        return { stopReason: "end_turn" };
      case "stream": {
        const n = Number.parseInt(words[1], 10);
        const size = words[2] ? Number.parseInt(words[2], 10) : 16;
        for (let i = 0; i < n; i++) {
          // A cancelled turn stops streaming.
          if (turn.signal.aborted) throw abortError("cancelled");
          await turn.say(String(i).padEnd(size, "."));
          // notify() resolves without waiting for I/O while the pipe has
          // room: without a turn of the event loop now and then, stdin (and
          // the session/cancel on it) would never be read.
          if (i % 64 === 63) await new Promise((resolve) => setImmediate(resolve));
        }
        return { stopReason: "end_turn" };
      }
      case "read": {
        const n = Number.parseInt(words[1], 10);
        const path = words[2];
        let total = 0;
        for (let i = 0; i < n; i++) {
          const r = await turn.request(methods.client.fs.readTextFile, {
            sessionId: turn.sessionId,
            path,
          });
          total += r.content.length;
        }
        await turn.say(`read ${n} ${total}`);
        return { stopReason: "end_turn" };
      }
      case "write": {
        const n = Number.parseInt(words[1], 10);
        const content = "x".repeat(Number.parseInt(words[3], 10));
        for (let i = 0; i < n; i++) {
          await turn.request(methods.client.fs.writeTextFile, {
            sessionId: turn.sessionId,
            path: words[2],
            content,
          });
        }
        return { stopReason: "end_turn" };
      }
      case "wait_for_cancel":
        await untilAborted(turn.signal);
        throw new Error("unreachable");
      case "sleep":
        await sleep(Number.parseInt(words[1], 10), turn.signal);
        return { stopReason: "end_turn" };
      case "fail":
        throw new RequestError(Number.parseInt(words[1], 10), words.slice(2).join(" ") || "fail");
      case "permission": {
        const r = await turn.request(
          methods.client.session.requestPermission,
          permissionRequest(turn.sessionId),
        );
        if (turn.signal.aborted) throw abortError("cancelled");
        const o = r.outcome;
        await turn.say(
          o.outcome === "selected"
            ? `permission: selected ${o.optionId}`
            : "permission: cancelled",
        );
        return { stopReason: "end_turn" };
      }
      case "nested": {
        const calls = [];
        if (clientCapabilities.terminal) {
          calls.push(
            turn.request(methods.client.terminal.create, {
              sessionId: turn.sessionId,
              command: "sleep",
              args: ["3600"],
            }),
          );
        }
        calls.push(
          turn.request(methods.client.session.requestPermission, permissionRequest(turn.sessionId)),
        );
        if (clientCapabilities.fs?.readTextFile) {
          calls.push(
            turn.request(methods.client.fs.readTextFile, {
              sessionId: turn.sessionId,
              path: "/hold",
            }),
          );
        }
        // Waits for all of them, or until the turn is cancelled.
        const results = await Promise.race([Promise.all(calls), untilAborted(turn.signal)]);
        for (const r of results) await turn.say(JSON.stringify(r));
        return { stopReason: "end_turn" };
      }
      case "deadline": {
        const ms = Number.parseInt(words[1], 10);
        const deadline = AbortSignal.any([turn.signal, AbortSignal.timeout(ms)]);
        const p = ctx.client.request(
          methods.client.fs.readTextFile,
          { sessionId: turn.sessionId, path: "/hold" },
          { cancellationSignal: deadline },
        );
        await Promise.race([p, untilAborted(deadline)]).catch(() => {});
        if (turn.signal.aborted) throw abortError("cancelled");
        await withTimeout(p.catch(() => {}), NESTED_SETTLE_MS);
        throw RequestError.requestCancelled({ reason: "deadline" });
      }
      default:
        await turn.say("unknown command");
        return { stopReason: "end_turn" };
    }
  });
}

const app = acp
  .agent({ name: "ts-scenario-agent" })
  .onRequest(methods.agent.initialize, async (ctx) => {
    clientCapabilities = ctx.params.clientCapabilities ?? {};
    return {
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: false,
        promptCapabilities: { image: false, audio: false, embeddedContext: false },
      },
      agentInfo: { name: "ts-scenario-agent", version: "2.4.0" },
    };
  })
  .onRequest(methods.agent.session.new, async () => ({
    sessionId: `ts-session-${++nextSession}`,
  }))
  .onRequest(methods.agent.session.prompt, prompt)
  .onNotification(methods.agent.session.cancel, async (ctx) => {
    debug("session/cancel", ctx.params.sessionId);
    for (const controller of turns.get(ctx.params.sessionId) ?? []) {
      controller.abort(new SessionCancelled());
    }
  });

const connection = app.connect(
  acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
);
await connection.closed;
debug("connection closed");
process.exit(0);
