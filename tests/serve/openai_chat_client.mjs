// Drives `zaya serve` on a ZAYA1-8B-like model (tests/chat_model_dir.h) with the official `openai`
// npm client (scripts/fetch_openai_npm.sh; found through NODE_PATH), for its chat features.
// Usage: node openai_chat_client.mjs BASE_URL MODEL
// Checks, with thinking off (chat_template_kwargs.enable_thinking false) so that the random model's
// answer is the constrained tool call: tool_calls come back for a named tool_choice (one call,
// finish_reason "tool_calls") and for "required" (arguments a JSON object valid for the tool's
// schema);
// the same named request streamed gives delta.tool_calls whose pieces add up to the same call;
// a conversation holding the assistant's tool_calls and the tool's result (role "tool") renders
// and gets an answer. Exit 0 when all pass; failures are printed one per line.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const OpenAI = require("openai");  // CommonJS build: resolved through NODE_PATH

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 120000 });
const failures = [];
const check = (ok, what) => {
  if (!ok) failures.push(what);
};

// Bounded strings (enum, maxLength): the grammar bounds them, so a random model's call ends.
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city.",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", enum: ["Paris", "Tokyo", "Lima"] },
          unit: { type: "string", enum: ["c", "f"] },
        },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "lookup",
      description: "Look a record up.",
      parameters: {
        type: "object",
        properties: {
          id: { type: "integer", minimum: 0, maximum: 99 },
          note: { type: "string", maxLength: 6 },
        },
        required: ["id"],
      },
    },
  },
];
const messages = [{ role: "user", content: "What is the weather in Paris?" }];
const common = {
  model, tools, messages, max_tokens: 160, temperature: 1,
  chat_template_kwargs: { enable_thinking: false },
};

// A call's arguments against the two tools' schemas above.
function validCall(call) {
  let args;
  try {
    args = JSON.parse(call.function.arguments);
  } catch (e) {
    return `arguments are not JSON: ${call.function.arguments}`;
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) return "not an object";
  if (!/^call_[a-z0-9]{24}$/.test(call.id)) return `id ${call.id}`;
  if (call.type !== "function") return `type ${call.type}`;
  if (call.function.name === "get_weather") {
    if (!["Paris", "Tokyo", "Lima"].includes(args.city)) return `city ${args.city}`;
    if ("unit" in args && !["c", "f"].includes(args.unit)) return `unit ${args.unit}`;
    for (const k of Object.keys(args)) if (!["city", "unit"].includes(k)) return `extra ${k}`;
  } else if (call.function.name === "lookup") {
    if (!Number.isInteger(args.id) || args.id < 0 || args.id > 99) return `id ${args.id}`;
    if ("note" in args && (typeof args.note !== "string" || [...args.note].length > 6))
      return `note ${args.note}`;
    for (const k of Object.keys(args)) if (!["id", "note"].includes(k)) return `extra ${k}`;
  } else {
    return `unknown tool ${call.function.name}`;
  }
  return "";
}

// A named function is one call that ends the answer; "required" may make several.
async function forced(tool_choice, seed, wantName) {
  const r = await client.chat.completions.create({ ...common, tool_choice, seed });
  const c = r.choices[0];
  const calls = c.message.tool_calls ?? [];
  check(calls.length >= 1, `${JSON.stringify(tool_choice)}: no tool_calls in ${JSON.stringify(c)}`);
  if (wantName) {
    check(calls.length === 1, `named: ${calls.length} calls`);
    check(c.finish_reason === "tool_calls", `named: finish_reason ${c.finish_reason}`);
  } else {
    check(c.finish_reason === "tool_calls" || c.finish_reason === "length",
          `${JSON.stringify(tool_choice)}: finish_reason ${c.finish_reason}`);
  }
  for (const call of calls) {
    const why = validCall(call);
    check(why === "", `${JSON.stringify(tool_choice)}: ${why} in ${JSON.stringify(call)}`);
    if (wantName) check(call.function.name === wantName, `named: got ${call.function.name}`);
  }
  return { message: c.message, calls };
}

async function main() {
  const named = { type: "function", function: { name: "get_weather" } };
  const first = await forced(named, 3, "get_weather");
  for (const seed of [4, 5]) await forced("required", seed, "");

  // Streamed: delta.tool_calls pieces (index, id, type and name first, then arguments) add up to
  // the call the same request gets without streaming.
  const stream = await client.chat.completions.create({
    ...common, tool_choice: named, seed: 3, stream: true,
  });
  const built = [];
  let finish = null;
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    finish = ch.finish_reason ?? finish;
    for (const piece of ch.delta?.tool_calls ?? []) {
      if (!built[piece.index]) built[piece.index] = { id: "", type: "", function: { name: "", arguments: "" } };
      const b = built[piece.index];
      if (piece.id) b.id = piece.id;
      if (piece.type) b.type = piece.type;
      if (piece.function?.name) b.function.name += piece.function.name;
      b.function.arguments += piece.function?.arguments ?? "";
    }
  }
  check(built.length === first.calls.length,
        `streamed ${built.length} calls, not streamed ${first.calls.length}`);
  built.forEach((b, i) => {
    const want = first.calls[i];
    check(want && b.id === want.id && b.function.name === want.function.name &&
            b.function.arguments === want.function.arguments,
          `streamed call ${i} ${JSON.stringify(b)} != ${JSON.stringify(want)}`);
  });
  check(finish === "tool_calls", `streamed finish_reason ${finish}`);

  // The tool's result goes back: the assistant's tool_calls and a role "tool" message.
  const call = first.calls[0];
  const history = [
    ...messages,
    { role: "assistant", content: null, tool_calls: [call] },
    { role: "tool", tool_call_id: call.id, content: '{"temperature": 21}' },
  ];
  const answer = await client.chat.completions.create({
    model, tools, messages: history, max_tokens: 6, temperature: 1, seed: 9,
    chat_template_kwargs: { enable_thinking: false },
  });
  const m = answer.choices[0].message;
  check(m.role === "assistant", `round trip role ${m.role}`);
  check(typeof m.content === "string" || (m.tool_calls ?? []).length > 0,
        `round trip answer ${JSON.stringify(m)}`);
  check(answer.usage.prompt_tokens > 40, `round trip prompt tokens ${answer.usage.prompt_tokens}`);
}

main()
  .then(() => {
    for (const f of failures) console.log(`FAIL ${f}`);
    if (failures.length === 0) console.log("openai chat client: all checks passed");
    process.exit(failures.length === 0 ? 0 : 1);
  })
  .catch((e) => {
    console.log(`FAIL unexpected error: ${e?.stack ?? e}`);
    process.exit(1);
  });
