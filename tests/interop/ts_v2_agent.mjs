#!/usr/bin/env node
// A v2 agent written with the official TypeScript SDK 2.4.0's experimental v2
// API, served over stdio through the SDK's AgentProtocolRouter (with the
// v1 scenario agent's minimal twin beside it unless --no-v1).
//
// The TS v2 API is low level: the prompt lifecycle is written out here.
// What a prompt does is its text:
// - "hello": agent_message_chunk "hi", idle end_turn;
// - "wait": runs until session/cancel, idle cancelled;
// - "tools": tool calls "slow" (until tool_call/cancel) and "fast" (completes
//   once "slow" has ended), both advertising capabilities.cancel; idle end_turn;
// - "raise": idle with stopReason "error" and the error.
// A prompt arriving while a turn runs is held (answered when inserted);
// session/cancel cancels the turn and answers every held prompt -32800.

import { Readable, Writable } from "node:stream";

import * as v1 from "@agentclientprotocol/sdk";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";

const { RequestError } = acp;

// sessionId -> { running: turn | null, held: [{ start, reject }] }
const sessions = new Map();
let nextSession = 0;
let nextMessage = 0;

function state(sessionId) {
  let s = sessions.get(sessionId);
  if (!s) {
    s = { running: null, held: [], toolCalls: new Map() };
    sessions.set(sessionId, s);
  }
  return s;
}

function aborted(signal) {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

async function runTurn(client, sessionId, text, turn) {
  const s = state(sessionId);
  const send = (update) => client.notify("session/update", { sessionId, update });
  let idle = { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn" };
  try {
    if (text === "hello") {
      await send({
        sessionUpdate: "agent_message_chunk",
        messageId: `m-agent-${turn.messageId}`,
        content: { type: "text", text: "hi" },
      });
    } else if (text === "wait") {
      await aborted(turn.abort.signal);
    } else if (text === "tools") {
      const slow = new AbortController();
      s.toolCalls.set("slow", slow);
      const cancel = { cancel: {} };
      await send({ sessionUpdate: "tool_call_update", toolCallId: "slow", title: "slow", status: "in_progress", capabilities: cancel });
      await send({ sessionUpdate: "tool_call_update", toolCallId: "fast", title: "fast", status: "in_progress", capabilities: cancel });
      await Promise.race([aborted(slow.signal), aborted(turn.abort.signal)]);
      s.toolCalls.delete("slow");
      await send({ sessionUpdate: "tool_call_update", toolCallId: "slow", status: "cancelled", capabilities: null });
      const fast = turn.abort.signal.aborted ? "cancelled" : "completed";
      await send({ sessionUpdate: "tool_call_update", toolCallId: "fast", status: fast, capabilities: null });
    } else if (text === "raise") {
      throw new Error("boom");
    }
    if (turn.abort.signal.aborted) idle = { ...idle, stopReason: "cancelled" };
  } catch (error) {
    idle = turn.abort.signal.aborted
      ? { ...idle, stopReason: "cancelled" }
      : { ...idle, stopReason: "error", error: { code: -32603, message: String(error.message) } };
  } finally {
    await send(idle);
    s.running = null;
    const next = s.held.shift();
    if (next) next.start();
  }
}

function insert(client, sessionId, prompt) {
  const s = state(sessionId);
  const messageId = `m-user-${++nextMessage}`;
  const turn = { messageId, abort: new AbortController() };
  s.running = turn;
  const text = prompt[0]?.type === "text" ? prompt[0].text : "";
  return (async () => {
    await client.notify("session/update", {
      sessionId,
      update: { sessionUpdate: "user_message", messageId, content: prompt },
    });
    await client.notify("session/update", {
      sessionId,
      update: { sessionUpdate: "state_update", state: "running" },
    });
    runTurn(client, sessionId, text, turn);
    return { messageId };
  })();
}

const v2app = acp
  .agent({ name: "ts-v2-agent" })
  .onRequest("initialize", async () => ({
    protocolVersion: 2,
    info: { name: "ts-v2-agent", version: "2.4.0" },
    capabilities: { session: {} },
  }))
  .onRequest("session/new", async () => ({ sessionId: `ts-v2-session-${++nextSession}` }))
  .onRequest("session/prompt", async (ctx) => {
    const { sessionId, prompt } = ctx.params;
    const s = state(sessionId);
    if (s.running === null) return insert(ctx.client, sessionId, prompt);
    return new Promise((resolve, reject) => {
      s.held.push({ start: () => resolve(insert(ctx.client, sessionId, prompt)), reject });
    });
  })
  .onRequest("tool_call/cancel", async (ctx) => {
    const s = state(ctx.params.sessionId);
    const controller = s.toolCalls.get(ctx.params.toolCallId);
    if (!controller) throw RequestError.invalidParams({ toolCallId: ctx.params.toolCallId });
    controller.abort();
    return {};
  })
  .onNotification("session/cancel", async (ctx) => {
    const s = state(ctx.params.sessionId);
    for (const held of s.held.splice(0)) held.reject(RequestError.requestCancelled());
    s.running?.abort.abort();
  });

const v1app = v1
  .agent({ name: "ts-v1-agent" })
  .onRequest(v1.methods.agent.initialize, async () => ({
    protocolVersion: 1,
    agentCapabilities: {},
    agentInfo: { name: "ts-v1-agent", version: "2.4.0" },
  }))
  .onRequest(v1.methods.agent.session.new, async () => ({ sessionId: "ts-v1-session" }))
  .onRequest(v1.methods.agent.session.prompt, async () => ({ stopReason: "end_turn" }));

let router = acp.agentProtocolRouter();
if (!process.argv.includes("--no-v2")) router = router.withV2(v2app);
if (!process.argv.includes("--no-v1")) router = router.withV1(v1app);

const connection = router.connect(
  acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
);
await connection.closed;
process.exit(0);
