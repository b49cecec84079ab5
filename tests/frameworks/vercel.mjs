// The Vercel AI SDK's default OpenAI provider (openai(model): the
// Responses API, store on, so later turns send item_reference items for
// the earlier ones) through ctxinf: three turns of generateText with a
// tool, or with the argument "stream" two turns of streamText. Prints
// each turn's result and the input item types each request sent.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";
import { baseURL, model, recordingFetch, run, weatherOf } from "./lib.mjs";

run(async () => {
  const stream = process.argv[2] === "stream";
  const sent = [];
  const openai = createOpenAI({ baseURL, apiKey: "unused-by-the-proxy", fetch: recordingFetch(sent) });
  const tools = {
    get_weather: tool({
      description: "The weather in a city",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => weatherOf(city),
    }),
  };
  const questions = stream
    ? ["What is the weather in Oslo?", "Thank you."]
    : ["What is the weather in Paris?", "What is the weather in Rome?", "Thank you."];
  const messages = [];
  const turns = [];
  for (const q of questions) {
    messages.push({ role: "user", content: q });
    const args = { model: openai(model), tools, stopWhen: stepCountIs(5), messages, maxRetries: 0 };
    let r;
    let streamed = "";
    const errors = [];
    if (stream) {
      r = streamText({ ...args, onError: ({ error }) => errors.push(String(error?.message ?? error)) });
      for await (const delta of r.textStream) streamed += delta;
      if (errors.length > 0) throw new Error(`turn ${turns.length + 1}: streamText's errors: ${errors.join("; ")}`);
    } else {
      r = await generateText(args);
    }
    const steps = await r.steps;
    turns.push({
      text: await r.text,
      streamed,
      errors,
      finishReason: await r.finishReason,
      steps: steps.map((s) => ({
        finishReason: s.finishReason,
        text: s.text,
        toolCalls: s.toolCalls.map((c) => ({ id: c.toolCallId, name: c.toolName, input: c.input })),
        toolResults: s.toolResults.map((c) => ({ id: c.toolCallId, output: c.output })),
        responseId: s.response?.id ?? null,
      })),
    });
    messages.push(...(await r.response).messages);
  }
  const requests = sent.map((s) => ({
    url: s.url,
    store: s.body?.store ?? null,
    previous_response_id: s.body?.previous_response_id ?? null,
    input: (s.body?.input ?? []).map((it) => it.type ?? "message:" + it.role),
  }));
  return { turns, requests };
});
