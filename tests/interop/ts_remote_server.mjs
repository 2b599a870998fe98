#!/usr/bin/env node
// A remote agent served with the official TypeScript SDK's experimental
// server transport (@agentclientprotocol/sdk 2.4.0, AcpServer + Node
// adapter: Streamable HTTP over HTTP/1.1, and WebSocket upgrades through the
// `ws` package) on 127.0.0.1, a free port:
//   node ts_remote_server.mjs
// Prints {"url": "http://127.0.0.1:PORT/acp"} on stdout once listening
// (ws://127.0.0.1:PORT/acp is the WebSocket profile on the same port).
// Commands (a subset of the scenario vocabulary): echo TEXT, stream N [SIZE],
// read N PATH (sequential fs/read_text_file), wait_for_cancel.

import { createServer } from "node:http";

import * as acp from "@agentclientprotocol/sdk";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import {
  createNodeHttpHandler,
  createNodeWebSocketUpgradeHandler,
} from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

const { methods } = acp;
let nextSession = 0;
const cancels = new Map();

function createAgent() {
  return acp
    .agent({ name: "ts-remote-agent" })
    .onRequest(methods.agent.initialize, async () => ({
      protocolVersion: 1,
      agentCapabilities: { loadSession: false },
      agentInfo: { name: "ts-remote-agent", version: "2.4.0" },
    }))
    .onRequest(methods.agent.session.new, async () => ({
      sessionId: `ts-remote-${++nextSession}`,
    }))
    .onNotification(methods.agent.session.cancel, async (ctx) => {
      cancels.get(ctx.params.sessionId)?.();
    })
    .onRequest(methods.agent.session.prompt, async (ctx) => {
      const sessionId = ctx.params.sessionId;
      const first = ctx.params.prompt.find((block) => block.type === "text");
      const text = first ? first.text.trim() : "";
      const words = text.split(" ");
      const say = (t) =>
        ctx.client.notify(methods.client.session.update, {
          sessionId,
          update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: t } },
        });
      switch (words[0]) {
        case "echo":
          await say(text.slice(5));
          return { stopReason: "end_turn" };
        case "stream": {
          const n = Number.parseInt(words[1], 10);
          const size = words[2] ? Number.parseInt(words[2], 10) : 16;
          for (let i = 0; i < n; i++) await say(String(i).padEnd(size, "."));
          return { stopReason: "end_turn" };
        }
        case "read": {
          let total = 0;
          for (let i = 0; i < Number.parseInt(words[1], 10); i++) {
            const r = await ctx.client.request(methods.client.fs.readTextFile, {
              sessionId,
              path: words[2],
            });
            total += r.content.length;
          }
          await say(`read ${words[1]} ${total}`);
          return { stopReason: "end_turn" };
        }
        case "wait_for_cancel":
          await new Promise((resolve) => cancels.set(sessionId, resolve));
          cancels.delete(sessionId);
          return { stopReason: "cancelled" };
        default:
          await say("unknown command");
          return { stopReason: "end_turn" };
      }
    });
}

const server = new AcpServer({ createAgent });
const http = createServer(createNodeHttpHandler(server));
const webSockets = new WebSocketServer({ noServer: true });
http.on("upgrade", createNodeWebSocketUpgradeHandler(server, webSockets));
http.listen(0, "127.0.0.1", () => {
  const { port } = http.address();
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}/acp` }) + "\n");
});
process.on("SIGTERM", async () => {
  await server.close();
  webSockets.close();
  http.close();
  process.exit(0);
});
