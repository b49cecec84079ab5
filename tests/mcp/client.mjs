// The official MCP TypeScript SDK as a client of ctxinf's MCP server:
//
//   node client.mjs stdio BINARY   starts `BINARY mcp` (its environment
//                                  is this process's: CTX_DATA_DIR…)
//   node client.mjs http URL TOKEN connects to URL (serve's /mcp) with
//                                  the bearer token TOKEN
//
// It lists the tools, calls each, reads the resources and the prompt,
// sends a bad argument, and prints one line "RESULT {json}" for
// tests/mcp_test.go to check (or {"error": …} when it fails).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, token] = process.argv.slice(2);

function transport(withToken) {
  if (mode === "stdio") {
    return new StdioClientTransport({ command: target, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
  }
  const headers = withToken ? { Authorization: `Bearer ${withToken}` } : {};
  return new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
}

async function main() {
  const out = { tools: [], results: {}, errors: {} };
  if (mode === "http") {
    // Without a token the server refuses the connection.
    const refused = new Client({ name: "ts-sdk-test", version: "1.0.0" });
    try {
      await refused.connect(transport(""));
      out.unauthorized = "connected";
      await refused.close();
    } catch (e) {
      out.unauthorized = String(e.message || e);
    }
  }
  const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
  await client.connect(transport(token));
  out.server = client.getServerVersion();

  const { tools } = await client.listTools();
  out.tools = tools.map((t) => t.name).sort();

  // call calls a tool and keeps its structured result; a tool error
  // throws.
  const call = async (name, args) => {
    const res = await client.callTool({ name, arguments: args });
    if (res.isError) {
      throw new Error(`${name}: ${res.content.map((c) => c.text).join("")}`);
    }
    out.results[name] = res.structuredContent;
    return res.structuredContent;
  };

  const conv = await call("start_conversation", { title: "ts-sdk" });
  const branch = conv.branch;
  const t1 = await call("record_exchange", {
    branch, user: "Which port does the staging database listen on?", reply: "The staging database listens on port 5433.",
    idempotency_key: "ts-1",
  });
  const again = await call("record_exchange", {
    branch, user: "Which port does the staging database listen on?", reply: "The staging database listens on port 5433.",
    idempotency_key: "ts-1",
  });
  out.repeat = again.turn === t1.turn;
  await call("record_exchange", { branch, user: "Where do we deploy?", reply: "To the eu-west-1 region." });
  const pin = await call("pin_fact", { branch, fact: "Answer in French." });
  await call("edit_fact", { branch, id: pin.id, fact: "Answer in English." });
  const second = await call("pin_fact", { branch, fact: "Use metric units." });
  await call("unpin_fact", { branch, id: second.id });
  await call("list_facts", { branch });
  await call("commit_pending", { branch });

  // The folded turns are searchable once indexed, soon after the fold.
  const deadline = Date.now() + 30000;
  for (;;) {
    const found = await call("search_memory", { branch, query: "staging database port", k: 5 });
    if (found.hits.length > 0 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await call("get_context", { branch, message: "Remind me of the staging database port?" });
  await call("get_history", { branch, limit: 10 });
  await call("get_turn", { branch, seq: 1 });
  await call("fork", { branch, at_seq: 1, label: "ts-fork" });
  await call("list_conversations", {});

  out.summary = (await client.readResource({ uri: `ctxinf://branches/${branch}/summary` })).contents[0].text;
  out.facts = JSON.parse((await client.readResource({ uri: `ctxinf://branches/${branch}/facts` })).contents[0].text);
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate).sort();
  const prompt = await client.getPrompt({ name: "use_memory", arguments: { branch } });
  out.prompt = prompt.messages[0].content.text;

  const bad = await client.callTool({ name: "search_memory", arguments: { branch, query: "port", k: 80 } });
  out.errors.search_memory = bad.isError ? bad.content.map((c) => c.text).join("") : "no error";
  const missing = await client.callTool({ name: "get_history", arguments: { branch: "01ARZ3NDEKTSV4RRFFQ69G5FAV" } });
  out.errors.get_history = missing.isError ? missing.content.map((c) => c.text).join("") : "no error";

  out.branch = branch;
  await client.close();
  return out;
}

try {
  console.log("RESULT " + JSON.stringify(await main()));
} catch (e) {
  console.log("RESULT " + JSON.stringify({ error: { class: e?.constructor?.name, message: String(e?.message || e), stack: e?.stack } }));
  process.exitCode = 1;
}
