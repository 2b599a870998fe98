#!/usr/bin/env node
// A v2 client written with the official TypeScript SDK 2.4.0's experimental
// v2 API. It spawns the agent command given after "--" and runs a fixed
// scenario over stdio, printing one JSON object per line ("ev": ...):
//   hello             a turn: user_message, running, output, idle end_turn
//   wait + 2 held     session/cancel: idle cancelled, both held -32800
//   tools             tool_call/cancel of "slow"; "fast" completes
//   raise             idle with stopReason "error"
// With --fallback: offer v2; if the agent answers v1 (the TS v2 client
// refuses it), spawn the agent again and speak v1 with the TS v1 client.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

import * as v1 from "@agentclientprotocol/sdk";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";

const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
const options = argv.slice(0, dash);
const command = argv.slice(dash + 1);

function start() {
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { child, exited, stream };
}

async function stop({ child, exited }) {
  child.stdin.end();
  const timer = setTimeout(() => child.kill("SIGTERM"), 3000);
  await exited;
  clearTimeout(timer);
}

const updates = [];
let waiters = [];
function waitFor(predicate) {
  const found = updates.find(predicate);
  if (found) return Promise.resolve(found);
  return new Promise((resolve) => waiters.push({ predicate, resolve }));
}

const v2client = acp.client({ name: "ts-v2-client" }).onNotification("session/update", (ctx) => {
  const update = ctx.params.update;
  updates.push(update);
  emit({ ev: "update", update });
  waiters = waiters.filter((w) => {
    if (!w.predicate(update)) return true;
    w.resolve(update);
    return false;
  });
});

const text = (t) => [{ type: "text", text: t }];
const idleOf = async (messageId) => {
  // The idle that ends a turn follows that turn's user_message (which may
  // be read after the prompt's answer).
  const user = await waitFor((u) => u.sessionUpdate === "user_message" && u.messageId === messageId);
  const start = updates.indexOf(user);
  return waitFor(
    (u) => u.sessionUpdate === "state_update" && u.state === "idle" && u.stopReason && updates.indexOf(u) > start,
  );
};

async function turn(agent, sessionId, words) {
  const accepted = await agent.request("session/prompt", { sessionId, prompt: text(words) });
  const idle = await idleOf(accepted.messageId);
  return { messageId: accepted.messageId, stopReason: idle.stopReason, error: idle.error };
}

async function scenario(agent) {
  const init = await agent.request("initialize", {
    protocolVersion: 2,
    info: { name: "ts-v2-client", version: "2.4.0" },
    capabilities: {},
  });
  emit({ ev: "initialized", result: init });
  const { sessionId } = await agent.request("session/new", { cwd: process.cwd() });

  emit({ ev: "hello", ...(await turn(agent, sessionId, "hello")) });

  const waiting = await agent.request("session/prompt", { sessionId, prompt: text("wait") });
  await waitFor((u) => u.sessionUpdate === "user_message" && u.messageId === waiting.messageId);
  const held = [1, 2].map(() =>
    agent.request("session/prompt", { sessionId, prompt: text("hello") }).then(
      (r) => ({ ok: r }),
      (e) => ({ code: e.code }),
    ),
  );
  await agent.notify("session/cancel", { sessionId });
  const idle = await idleOf(waiting.messageId);
  emit({ ev: "cancel", stopReason: idle.stopReason, held: await Promise.all(held) });

  const tools = await agent.request("session/prompt", { sessionId, prompt: text("tools") });
  await waitFor((u) => u.toolCallId === "slow" && u.capabilities?.cancel);
  await waitFor((u) => u.toolCallId === "fast" && u.capabilities?.cancel);
  await agent.request("tool_call/cancel", { sessionId, toolCallId: "slow" });
  const toolsIdle = await idleOf(tools.messageId);
  const finals = {};
  for (const u of updates) {
    if (u.sessionUpdate === "tool_call_update" && ["completed", "cancelled", "failed"].includes(u.status)) {
      finals[u.toolCallId] = u.status;
    }
  }
  emit({ ev: "tools", stopReason: toolsIdle.stopReason, finals });

  emit({ ev: "raise", ...(await turn(agent, sessionId, "raise")) });
}

async function fallback() {
  const first = start();
  let refused = null;
  try {
    await v2client.connectWith(first.stream, async (agent) => {
      await agent.request("initialize", {
        protocolVersion: 2,
        info: { name: "ts-v2-client", version: "2.4.0" },
      });
    });
  } catch (error) {
    refused = String(error?.message ?? error);
  }
  await stop(first);
  emit({ ev: "v2_refused", message: refused });
  if (refused === null) return;
  const second = start();
  await v1.client({ name: "ts-v1-client" }).connectWith(second.stream, async (agent) => {
    const init = await agent.request(v1.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
    const { sessionId } = await agent.request(v1.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    const answer = await agent.request(v1.methods.agent.session.prompt, { sessionId, prompt: text("hello") });
    emit({ ev: "v1", protocolVersion: init.protocolVersion, stopReason: answer.stopReason });
  });
  await stop(second);
}

async function main() {
  if (options.includes("--fallback")) {
    await fallback();
  } else {
    const agent = start();
    await v2client.connectWith(agent.stream, scenario);
    await stop(agent);
  }
  emit({ ev: "done" });
}

main().then(
  () => process.exit(0),
  (error) => {
    emit({ ev: "fatal", message: String(error?.stack ?? error) });
    process.exit(1);
  },
);
