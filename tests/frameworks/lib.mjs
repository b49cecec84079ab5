// Shared by the scenario scripts: where the server is, and how a script
// hands its result to tests/frameworks_test.go (one line "RESULT <json>"
// on stdout; libraries may print other lines).

export const root = process.env.CTXINF_URL;
if (!root) {
  throw new Error("CTXINF_URL is not set: tests/frameworks_test.go runs these scripts");
}
export const baseURL = root + "/v1";

// The model name the frameworks ask for; the server runs its own.
export const model = "gpt-4o-mini";

// weatherOf is the client's get_weather tool.
export function weatherOf(city) {
  return { Paris: "18C, sunny", Rome: "12C, rain", Oslo: "-3C, snow" }[city] ?? "unknown";
}

// errorInfo is what a script reports of an error.
export function errorInfo(e) {
  return {
    class: e?.constructor?.name ?? typeof e,
    message: String(e?.message ?? e),
    status: e?.status ?? e?.statusCode ?? null,
    stack: String(e?.stack ?? "").split("\n").slice(0, 8).join("\n"),
  };
}

// textOf is a LangChain message's text, its content a string or blocks.
export function textOf(content) {
  if (typeof content === "string") return content;
  return (content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("");
}

// recordingFetch is fetch that also keeps each request's URL and body.
export function recordingFetch(sent) {
  return async (url, init) => {
    let body = null;
    try {
      body = JSON.parse(init?.body ?? "null");
    } catch {
      body = null;
    }
    sent.push({ url: String(url), body });
    return fetch(url, init);
  };
}

// run prints main's result, or the error it threw (and exits 1).
export async function run(main) {
  try {
    const out = await main();
    process.stdout.write("RESULT " + JSON.stringify(out) + "\n");
  } catch (e) {
    process.stdout.write("RESULT " + JSON.stringify({ error: errorInfo(e) }) + "\n");
    process.exitCode = 1;
  }
}
