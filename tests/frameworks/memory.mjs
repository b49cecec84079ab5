// The memory tools through ctxinf with the official OpenAI and Anthropic
// JS SDKs, streamed or not (argv[2]: chat, chat-stream, messages or
// messages-stream): the user states a fact; once the server has indexed
// it, the user asks for it and for the weather. The model searches its
// memory (a tool the server runs, which the client never sees), then
// calls the client's get_weather, which the client runs; then it
// answers. Prints each answer (its finish reason, text and calls), and
// every answer's bytes as received, for the test to look for the memory
// tools in.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { baseURL, model, root, run, weatherOf } from "./lib.mjs";

const mode = process.argv[2] ?? "chat";
const stream = mode.endsWith("-stream");
const seed = "Note: the deploy target is eu-west-1.";
const question = "Recall the deploy target, then tell me the weather in Paris.";

// received keeps the body of every answer, as the client got it.
const received = [];
const recordingFetch = async (url, init) => {
  const r = await fetch(url, init);
  const body = await r.text();
  if (String(url).endsWith("/chat/completions") || String(url).endsWith("/messages")) {
    received.push(body);
  }
  return new Response(body, { status: r.status, statusText: r.statusText, headers: r.headers });
};

// indexed waits until the server has folded and indexed the turn (GET
// /v1/branches/{b}/turns/{t} says phase done).
async function indexed(branch, turn) {
  for (let i = 0; i < 500; i++) {
    const r = await fetch(`${root}/v1/branches/${branch}/turns/${turn}`);
    if (r.ok && (await r.json()).phase === "done") return;
    await new Promise((res) => setTimeout(res, 10));
  }
  throw new Error(`turn ${turn} of branch ${branch} was not indexed in 5 s`);
}

async function chat() {
  const client = new OpenAI({ baseURL, apiKey: "unused-by-the-proxy", maxRetries: 0, fetch: recordingFetch });
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "The weather in a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    },
  ];
  const messages = [{ role: "user", content: seed }];
  const answers = [];
  const ask = async () => {
    let message, finish, id, branch;
    if (stream) {
      const { data: s, response } = await client.chat.completions
        .create({ model, messages, tools, stream: true, stream_options: { include_usage: true } })
        .withResponse();
      branch = response.headers.get("x-ctx-branch");
      // The chunks put together as a client does: the text, and each
      // call by its index.
      let content = "";
      const calls = [];
      for await (const chunk of s) {
        id = chunk.id;
        const choice = chunk.choices[0];
        if (!choice) continue;
        content += choice.delta?.content ?? "";
        for (const tc of choice.delta?.tool_calls ?? []) {
          const call = (calls[tc.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
          call.id += tc.id ?? "";
          call.function.name += tc.function?.name ?? "";
          call.function.arguments += tc.function?.arguments ?? "";
        }
        finish = choice.finish_reason ?? finish;
      }
      message = { content, tool_calls: calls.length ? calls : undefined };
    } else {
      const { data: c, response } = await client.chat.completions.create({ model, messages, tools }).withResponse();
      branch = response.headers.get("x-ctx-branch");
      message = c.choices[0].message;
      finish = c.choices[0].finish_reason;
      id = c.id;
    }
    const calls = (message.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, args: c.function.arguments }));
    answers.push({ finish, text: message.content ?? "", calls });
    messages.push({ role: "assistant", content: message.content ?? null, ...(calls.length ? { tool_calls: message.tool_calls } : {}) });
    return { calls, id, branch };
  };
  const first = await ask();
  await indexed(first.branch, first.id.replace(/^chatcmpl-/, ""));
  messages.push({ role: "user", content: question });
  const { calls } = await ask();
  for (const c of calls) {
    messages.push({ role: "tool", tool_call_id: c.id, content: weatherOf(JSON.parse(c.args).city) });
  }
  await ask();
  return answers;
}

async function messagesAPI() {
  const client = new Anthropic({ baseURL: root, apiKey: "unused-by-the-proxy", maxRetries: 0, fetch: recordingFetch });
  const tools = [
    {
      name: "get_weather",
      description: "The weather in a city",
      input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  ];
  const messages = [{ role: "user", content: seed }];
  const answers = [];
  const ask = async () => {
    let msg, response;
    if (stream) {
      const s = client.messages.stream({ model: "claude-upstream", max_tokens: 1024, messages, tools });
      msg = await s.finalMessage();
      response = (await s.withResponse()).response;
    } else {
      ({ data: msg, response } = await client.messages.create({ model: "claude-upstream", max_tokens: 1024, messages, tools }).withResponse());
    }
    const text = msg.content.filter((b) => b.type === "text").map((b) => b.text).join("");
    const calls = msg.content.filter((b) => b.type === "tool_use").map((b) => ({ id: b.id, name: b.name, args: JSON.stringify(b.input) }));
    answers.push({ finish: msg.stop_reason, text, calls });
    messages.push({ role: "assistant", content: msg.content });
    return { calls, id: msg.id, branch: response.headers.get("x-ctx-branch") };
  };
  const first = await ask();
  await indexed(first.branch, first.id.replace(/^msg_/, ""));
  messages.push({ role: "user", content: question });
  const { calls } = await ask();
  messages.push({
    role: "user",
    content: calls.map((c) => ({ type: "tool_result", tool_use_id: c.id, content: weatherOf(JSON.parse(c.args).city) })),
  });
  await ask();
  return answers;
}

run(async () => {
  const answers = mode.startsWith("messages") ? await messagesAPI() : await chat();
  return { answers, received };
});
