#!/usr/bin/env node
// A minimal remote client written with the official TypeScript SDK's
// experimental remote transports (@agentclientprotocol/sdk 2.4.0):
//   node ts_remote_client.mjs URL PROMPT...
// Connects to URL (http://host:port/acp: Streamable HTTP with
// createHttpStream; ws://host:port/acp: WebSocket with createWebSocketStream
// and the `ws` package), initializes, opens a session, sends each PROMPT in
// turn and prints one JSON line per event:
//   {ev: "update", text}, {ev: "result", prompt, result, ms},
//   {ev: "error", prompt, code}, {ev: "done"}
// (ms: the prompt's round trip, updates included, in milliseconds)
// or {ev: "fatal", message} (exit code 1).
// A PROMPT "cancel:P" sends P, then `session/cancel` 200 ms later; "abort:P"
// sends P, then aborts the request 200 ms later (the SDK sends
// `$/cancel_request` for it).

import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

const { methods } = acp;
// --quiet: count the updates instead of printing them (for benchmarks).
const quiet = process.argv[2] === "--quiet";
const [url, ...prompts] = process.argv.slice(quiet ? 3 : 2);
let updates = 0;
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const app = acp
  .client({ name: "ts-remote-client" })
  .onNotification(methods.client.session.update, (ctx) => {
    const content = ctx.params.update.content;
    if (quiet) updates += 1;
    else if (content && content.type === "text") emit({ ev: "update", text: content.text });
  })
  .onRequest(methods.client.fs.readTextFile, async () => ({ content: "x".repeat(64) }))
  .onRequest(methods.client.fs.writeTextFile, async () => ({}));

// The SDK closes the HTTP stream (DELETE) without awaiting it when
// connectWith's callback ends; a process.exit right after could drop that
// request. Track every fetch so the script exits only once they settled.
const inFlight = new Set();
const trackedFetch = (input, init) => {
  const request = globalThis.fetch(input, init);
  inFlight.add(request);
  request.then(
    () => inFlight.delete(request),
    () => inFlight.delete(request),
  );
  return request;
};

try {
  const stream = url.startsWith("ws")
    ? createWebSocketStream(url, { WebSocket })
    : createHttpStream(url, { fetch: trackedFetch });
  await app.connectWith(stream, async (agent) => {
    await agent.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
    });
    const session = await agent.request(methods.agent.session.new, {
      cwd: process.cwd(),
      mcpServers: [],
    });
    const sessionId = session.sessionId;
    for (const prompt of prompts) {
      const [mode, text] = /^(cancel|abort):/.test(prompt)
        ? [prompt.slice(0, prompt.indexOf(":")), prompt.slice(prompt.indexOf(":") + 1)]
        : ["plain", prompt];
      const abort = new AbortController();
      const start = performance.now();
      const pending = agent.request(
        methods.agent.session.prompt,
        { sessionId, prompt: [{ type: "text", text }] },
        { cancellationSignal: abort.signal },
      );
      if (mode !== "plain") {
        setTimeout(() => {
          if (mode === "abort") abort.abort();
          else agent.notify(methods.agent.session.cancel, { sessionId });
        }, 200);
      }
      try {
        const result = await pending;
        emit({ ev: "result", prompt, result, ms: performance.now() - start });
      } catch (error) {
        if (error && typeof error.code === "number") emit({ ev: "error", prompt, code: error.code });
        else throw error;
      }
    }
  });
  // Let the DELETE the SDK sent on close reach the server (SSE GETs that
  // the close aborted settle too).
  await new Promise((resolve) => setTimeout(resolve, 0));
  await Promise.allSettled([...inFlight]);
  emit(quiet ? { ev: "done", updates } : { ev: "done" });
  process.exit(0);
} catch (error) {
  emit({ ev: "fatal", message: String(error && error.stack ? error.stack : error) });
  process.exit(1);
}
