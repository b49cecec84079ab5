// The OpenAI JS SDK's error classes through ctxinf, whose upstream
// answers 429 (with Retry-After) or 400: each call's error and how many
// attempts the SDK made (maxRetries 1). Each call's prompt carries its
// name, for the test to count the upstream requests it caused.
import OpenAI from "openai";
import { baseURL, errorInfo, model, run } from "./lib.mjs";

run(async () => {
  let attempts = 0;
  const client = new OpenAI({
    baseURL,
    apiKey: "unused-by-the-proxy",
    maxRetries: 1,
    fetch: (url, init) => {
      attempts++;
      return fetch(url, init);
    },
  });
  const calls = {
    "chat-429": (p) => client.chat.completions.create({ model, messages: [{ role: "user", content: p }] }),
    "chat-400": (p) => client.chat.completions.create({ model, messages: [{ role: "user", content: p }] }),
    "chat-stream-429": async (p) => {
      const s = await client.chat.completions.create({ model, stream: true, messages: [{ role: "user", content: p }] });
      for await (const _ of s) {
        // drain
      }
    },
    "responses-429": (p) => client.responses.create({ model, input: p }),
    "responses-400": (p) => client.responses.create({ model, input: p }),
  };
  const out = {};
  for (const [name, call] of Object.entries(calls)) {
    const status = name.split("-").at(-1);
    const prompt = `Call ${name}: hello [status ${status}]`;
    attempts = 0;
    const t0 = Date.now();
    try {
      await call(prompt);
      out[name] = { ok: true, attempts };
    } catch (e) {
      out[name] = {
        ...errorInfo(e),
        rateLimitError: e instanceof OpenAI.RateLimitError,
        badRequestError: e instanceof OpenAI.BadRequestError,
        retryAfter: e?.headers?.get?.("retry-after") ?? null,
        type: e?.type ?? null,
        attempts,
        ms: Date.now() - t0,
      };
    }
  }
  return out;
});
