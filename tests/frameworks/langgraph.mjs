// LangGraph JS createReactAgent with ChatOpenAI through ctxinf: two
// invokes on one thread (MemorySaver), over Chat Completions or, with the
// argument "responses", the Responses API. Prints each invoke's final
// state's messages.
import { ChatOpenAI } from "@langchain/openai";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { MemorySaver } from "@langchain/langgraph";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { baseURL, model, run, textOf, weatherOf } from "./lib.mjs";

run(async () => {
  const getWeather = tool(async ({ city }) => weatherOf(city), {
    name: "get_weather",
    description: "The weather in a city",
    schema: z.object({ city: z.string() }),
  });
  const llm = new ChatOpenAI({
    model,
    apiKey: "unused-by-the-proxy",
    configuration: { baseURL },
    useResponsesApi: process.argv[2] === "responses",
    maxRetries: 0,
  });
  const agent = createReactAgent({
    llm,
    tools: [getWeather],
    checkpointSaver: new MemorySaver(),
    prompt: "You are a weather agent. Use the tools.",
  });
  const config = { configurable: { thread_id: "thread-1" } };
  const invokes = [];
  for (const q of ["What is the weather in Paris?", "What is the weather in Rome?"]) {
    const state = await agent.invoke({ messages: [{ role: "user", content: q }] }, config);
    invokes.push(
      state.messages.map((m) => ({
        type: m.getType(),
        id: m.id ?? null,
        text: textOf(m.content),
        tool_calls: (m.tool_calls ?? []).map((c) => ({ id: c.id, name: c.name, args: c.args })),
        tool_call_id: m.tool_call_id ?? null,
      })),
    );
  }
  return { invokes };
});
