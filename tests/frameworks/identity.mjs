// Agents whose requests differ from a plain resent history, with the
// OpenAI JS SDK through ctxinf and no conversation key: "timestamp" puts
// the time in its system prompt (new each request), four requests;
// "window" keeps only its last four messages, eight requests. Prints
// each request's system prompt, user message and reply.
import OpenAI from "openai";
import { baseURL, model, run } from "./lib.mjs";

run(async () => {
  const mode = process.argv[2];
  const client = new OpenAI({ baseURL, apiKey: "unused-by-the-proxy", maxRetries: 0 });
  const n = mode === "window" ? 8 : 4;
  let history = [];
  const exchanges = [];
  for (let i = 1; i <= n; i++) {
    const system =
      mode === "timestamp"
        ? `You are a helpful agent. The time is ${new Date().toISOString()} (request ${i}).`
        : "You are a helpful agent.";
    if (mode === "window") history = history.slice(-4);
    const user = `Note ${i}: the code word is word-${i * 7}.`;
    history.push({ role: "user", content: user });
    const r = await client.chat.completions.create({ model, messages: [{ role: "system", content: system }, ...history] });
    const reply = r.choices[0].message.content;
    history.push({ role: "assistant", content: reply });
    exchanges.push({ system, user, reply, id: r.id });
  }
  return { exchanges };
});
