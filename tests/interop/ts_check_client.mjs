#!/usr/bin/env node
// A client written with the official TypeScript SDK (@agentclientprotocol/sdk,
// client API), driven the way `python -m acp_trio check-client` asks:
//
//   node ts_check_client.mjs <agent command> [args...]
//
// One session; session/cancel when an agent_message_chunk says
// "check-client: cancel now"; another prompt when a turn said "check-client:
// prompt again". A cancelled turn still unanswered after a second gets
// $/cancel_request (the SDK's cancellationSignal); one still unanswered a
// second later is given up (its late answer is dropped) and the session goes
// on. It reads and writes real files. Permission
// requests titled "check-client: choose an option" are answered "allow"; the
// others are held: $/cancel_request (the SDK aborts ctx.signal) makes them
// -32800, our own session/cancel answers them with the cancelled outcome.

import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";

const { methods } = acp;
const CUE = "check-client: cancel now";
const PROMPT_AGAIN = "check-client: prompt again";
const GRACE_MS = 1000;
const MAX_PROMPTS = 10;
const held = new Set();
let agentRef = null;
// The running turn: what the cue does to it, and whether it asked for more.
const turn = { onCue: null, promptAgain: false };

function holdPermission(ctx) {
  return new Promise((resolve, reject) => {
    const entry = {
      sessionId: ctx.params.sessionId,
      cancelled() {
        if (held.delete(entry)) resolve({ outcome: { outcome: "cancelled" } });
      },
    };
    held.add(entry);
    const abort = () => {
      if (held.delete(entry)) reject(new DOMException("cancelled", "AbortError"));
    };
    if (ctx.signal.aborted) return abort();
    ctx.signal.addEventListener("abort", abort, { once: true });
  });
}

const app = acp
  .client({ name: "ts-check-client" })
  .onNotification(methods.client.session.update, async (ctx) => {
    const { update, sessionId } = ctx.params;
    if (update.sessionUpdate !== "agent_message_chunk" || update.content?.type !== "text") return;
    if (update.content.text.includes(PROMPT_AGAIN)) turn.promptAgain = true;
    if (update.content.text.includes(CUE)) {
      await agentRef.notify(methods.agent.session.cancel, { sessionId });
      for (const entry of [...held]) if (entry.sessionId === sessionId) entry.cancelled();
      turn.onCue?.();
    }
  })
  .onRequest(methods.client.fs.readTextFile, async (ctx) => ({
    content: await readFile(ctx.params.path, "utf8"),
  }))
  .onRequest(methods.client.fs.writeTextFile, async (ctx) => {
    await writeFile(ctx.params.path, ctx.params.content, "utf8");
    return {};
  })
  .onRequest(methods.client.session.requestPermission, async (ctx) => {
    if (ctx.params.toolCall.title === "check-client: choose an option") {
      return { outcome: { outcome: "selected", optionId: "allow" } };
    }
    return holdPermission(ctx);
  });

// One turn, with the ladder after a cancel: session/cancel (at the cue),
// then $/cancel_request, then giving the turn up.
async function promptOnce(agent, sessionId) {
  turn.promptAgain = false;
  const controller = new AbortController();
  const timers = [];
  let giveUp;
  const givenUp = new Promise((resolve) => {
    giveUp = resolve;
  });
  turn.onCue = () => {
    timers.push(setTimeout(() => controller.abort(), GRACE_MS));
    timers.push(setTimeout(() => giveUp("given up"), 2 * GRACE_MS));
  };
  const prompt = agent.request(
    methods.agent.session.prompt,
    { sessionId, prompt: [{ type: "text", text: "check me" }] },
    { cancellationSignal: controller.signal },
  );
  prompt.catch(() => {}); // a turn given up may still fail later
  try {
    const result = await Promise.race([prompt, givenUp]);
    return typeof result === "string" ? result : `stopReason ${result.stopReason}`;
  } catch (error) {
    if (error?.code === -32800) return "cancelled (-32800)";
    throw error;
  } finally {
    for (const timer of timers) clearTimeout(timer);
    turn.onCue = null;
  }
}

async function main() {
  const command = process.argv.slice(2);
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  await app.connectWith(stream, async (agent) => {
    agentRef = agent;
    await agent.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
      clientInfo: { name: "ts-check-client", version: "1" },
    });
    const session = await agent.request(methods.agent.session.new, {
      cwd: process.cwd(),
      mcpServers: [],
    });
    for (let i = 0; i < MAX_PROMPTS; i++) {
      const outcome = await promptOnce(agent, session.sessionId);
      process.stderr.write(`ts-check-client: ${outcome}\n`);
      if (!turn.promptAgain) break;
    }
  });
  child.stdin.end();
  await exited;
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`ts-check-client: ${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
