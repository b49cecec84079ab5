// LangChain's withStructuredOutput with a zod schema through ctxinf, by
// the method the argument names: jsonSchema (the default for gpt-4o
// models: response_format json_schema), functionCalling (a forced tool),
// or responses (jsonSchema over the Responses API: text.format). Prints
// the parsed result.
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";
import { baseURL, model, run } from "./lib.mjs";

run(async () => {
  const variant = process.argv[2] ?? "jsonSchema";
  const llm = new ChatOpenAI({
    model,
    apiKey: "unused-by-the-proxy",
    configuration: { baseURL },
    useResponsesApi: variant === "responses",
    maxRetries: 0,
  });
  const schema = z.object({
    city: z.string().describe("The city"),
    celsius: z.number().describe("The temperature in degrees Celsius"),
  });
  const method = variant === "functionCalling" ? "functionCalling" : "jsonSchema";
  const structured = llm.withStructuredOutput(schema, { name: "weather_report", method });
  const prompt = process.env.CTXINF_PROMPT;
  const result = await structured.invoke(prompt);
  return { result, parsed: schema.safeParse(result).success };
});
