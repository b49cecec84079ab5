// A client tool loop of 12 calls with the OpenAI JS SDK through ctxinf
// (the server runs no tools): the client runs each call of tick and sends
// its result, until the model answers. Prints every step.
import OpenAI from "openai";
import { baseURL, model, run } from "./lib.mjs";

run(async () => {
  const client = new OpenAI({ baseURL, apiKey: "unused-by-the-proxy", maxRetries: 0 });
  const tools = [
    {
      type: "function",
      function: {
        name: "tick",
        description: "Count one tick",
        parameters: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
      },
    },
  ];
  const messages = [
    { role: "system", content: "You count ticks with the tick tool." },
    { role: "user", content: "Please call tick 12 times, one call at a time." },
  ];
  const steps = [];
  for (let i = 0; i < 20; i++) {
    const r = await client.chat.completions.create({ model, messages, tools });
    const choice = r.choices[0];
    const calls = choice.message.tool_calls ?? [];
    steps.push({
      id: r.id,
      finish: choice.finish_reason,
      content: choice.message.content ?? null,
      calls: calls.map((c) => ({ id: c.id, name: c.function.name, args: c.function.arguments })),
    });
    messages.push(choice.message);
    if (choice.finish_reason !== "tool_calls" || calls.length === 0) break;
    for (const c of calls) {
      messages.push({ role: "tool", tool_call_id: c.id, content: `tick ${JSON.parse(c.function.arguments).n} done` });
    }
  }
  return { steps };
});
