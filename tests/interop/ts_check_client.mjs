#!/usr/bin/env node
// A client written with the official TypeScript SDK (@agentclientprotocol/sdk,
// client API), driven the way `python -m acp_trio check-client` asks:
//
//   node ts_check_client.mjs <agent command> [args...]
//
// One session, one prompt; session/cancel when an agent_message_chunk says
// "check-client: cancel now". It reads and writes real files. Permission
// requests titled "check-client: choose an option" are answered "allow"; the
// others are held: $/cancel_request (the SDK aborts ctx.signal) makes them
// -32800, our own session/cancel answers them with the cancelled outcome.

import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";

const { methods } = acp;
const CUE = "check-client: cancel now";
const held = new Set();
let agentRef = null;

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
    if (
      update.sessionUpdate === "agent_message_chunk" &&
      update.content?.type === "text" &&
      update.content.text.includes(CUE)
    ) {
      await agentRef.notify(methods.agent.session.cancel, { sessionId });
      for (const entry of [...held]) if (entry.sessionId === sessionId) entry.cancelled();
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
    const result = await agent.request(methods.agent.session.prompt, {
      sessionId: session.sessionId,
      prompt: [{ type: "text", text: "check me" }],
    });
    process.stderr.write(`ts-check-client: stopReason ${result.stopReason}\n`);
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
