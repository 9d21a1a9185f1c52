// Drives `zaya serve` with the official `openai` npm client (scripts/fetch_openai_npm.sh; found
// through NODE_PATH). Usage: node openai_client.mjs BASE_URL MODEL
// Checks: completions and chat (plain and streamed: the streamed text equals the plain greedy
// text), 8 concurrent streamed clients each getting its own sequential greedy answer, bad
// requests surfacing as APIError with the right 4xx status, a request naming another model being
// served by this one, and the model list and retrieval. Exit 0 when all pass; failures are printed
// one per line.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const OpenAI = require("openai");  // CommonJS build: resolved through NODE_PATH

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const failures = [];
const check = (ok, what) => {
  if (!ok) failures.push(what);
};

async function completion(prompt, max_tokens = 8) {
  const r = await client.completions.create({ model, prompt, max_tokens, temperature: 0 });
  check(r.object === "text_completion", `completion object: ${r.object}`);
  check(typeof r.choices[0].text === "string", "completion text is a string");
  check(r.usage.completion_tokens <= max_tokens, `usage ${JSON.stringify(r.usage)}`);
  return r.choices[0].text;
}

async function streamedCompletion(prompt, max_tokens = 8) {
  const stream = await client.completions.create({
    model, prompt, max_tokens, temperature: 0, stream: true,
  });
  let text = "", finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  check(finish === "length" || finish === "stop", `streamed finish_reason ${finish}`);
  return text;
}

async function main() {
  // Plain and streamed completions agree.
  const plain = await completion("The quick brown fox");
  const streamed = await streamedCompletion("The quick brown fox");
  check(plain === streamed, `streamed ${JSON.stringify(streamed)} != plain ${JSON.stringify(plain)}`);

  // Chat, plain and streamed.
  const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello?" }];
  const chat = await client.chat.completions.create({
    model, messages, max_tokens: 8, temperature: 0,
  });
  check(chat.object === "chat.completion", `chat object ${chat.object}`);
  check(chat.choices[0].message.role === "assistant", "chat role");
  const content = chat.choices[0].message.content;
  check(typeof content === "string", "chat content is a string");
  const chatStream = await client.chat.completions.create({
    model, messages, max_tokens: 8, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let streamedContent = "", sawRole = false, usage = null;
  for await (const chunk of chatStream) {
    check(chunk.object === "chat.completion.chunk", `chunk object ${chunk.object}`);
    if (chunk.usage) usage = chunk.usage;
    const delta = chunk.choices[0]?.delta;
    if (delta?.role === "assistant") sawRole = true;
    streamedContent += delta?.content ?? "";
  }
  check(sawRole, "chat stream starts with the assistant role");
  check(usage && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens,
        `chat stream usage ${JSON.stringify(usage)}`);
  check(streamedContent === content,
        `chat stream ${JSON.stringify(streamedContent)} != ${JSON.stringify(content)}`);

  // Eight concurrent streamed clients, each must get its own sequential answer.
  const prompts = Array.from({ length: 8 }, (_, i) => `Client number ${i} says`);
  const sequential = [];
  for (const p of prompts) sequential.push(await completion(p, 6));
  const concurrent = await Promise.all(prompts.map((p) => streamedCompletion(p, 6)));
  concurrent.forEach((t, i) =>
    check(t === sequential[i],
          `concurrent client ${i}: ${JSON.stringify(t)} != ${JSON.stringify(sequential[i])}`));

  // Bad requests are APIErrors with 4xx statuses.
  const expectError = async (what, status, fn) => {
    try {
      await fn();
      failures.push(`${what}: no error`);
    } catch (e) {
      check(e instanceof OpenAI.APIError, `${what}: not an APIError (${e})`);
      check(e.status === status, `${what}: status ${e.status}, wanted ${status}`);
    }
  };
  await expectError("temperature -1", 400, () =>
    client.completions.create({ model, prompt: "x", max_tokens: 2, temperature: -1 }));
  await expectError("unknown model id", 404, () => client.models.retrieve("no-such-model"));
  await expectError("n = 9", 400, () =>
    client.chat.completions.create({ model, messages, max_tokens: 2, n: 9 }));
  // n = 3: three choices, indexed.
  const three = await client.chat.completions.create({ model, messages, max_tokens: 3, n: 3 });
  check(three.choices.length === 3 && three.choices.every((c, i) => c.index === i),
        `n = 3: ${JSON.stringify(three.choices)}`);

  // A client configured with another model's name is served by this server's model.
  const other = await client.completions.create({ model: "no-such-model", prompt: "x",
                                                  max_tokens: 2 });
  check(other.model === model && other.choices.length === 1,
        `another model's name: ${JSON.stringify(other)}`);

  // Model listing.
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === model, "models.list");
  check((await client.models.retrieve(model)).id === model, "models.retrieve");
}

main()
  .then(() => {
    for (const f of failures) console.log(`FAIL ${f}`);
    if (failures.length === 0) console.log("openai client: all checks passed");
    process.exit(failures.length === 0 ? 0 : 1);
  })
  .catch((e) => {
    console.log(`FAIL unexpected error: ${e?.stack ?? e}`);
    process.exit(1);
  });
