// Drives `zaya serve` started with an API key (and, in the test, over HTTPS with a self-signed
// certificate the process trusts through NODE_EXTRA_CA_CERTS) with the official `openai` npm
// client (scripts/fetch_openai_npm.sh; found through NODE_PATH).
// Usage: node openai_auth_client.mjs BASE_URL MODEL KEY
// Checks: with the key, the model list and a chat completion (plain and streamed) succeed; with a
// wrong key the client raises AuthenticationError (401, code invalid_api_key). Exit 0 when all
// pass; failures are printed one per line.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const OpenAI = require("openai");  // CommonJS build: resolved through NODE_PATH

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const failures = [];
const check = (ok, what) => {
  if (!ok) failures.push(what);
};

async function main() {
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === model, "models.list");

  const messages = [{ role: "user", content: "Hello?" }];
  const chat = await client.chat.completions.create({
    model, messages, max_tokens: 6, temperature: 0,
  });
  check(chat.object === "chat.completion", `chat object ${chat.object}`);
  check(typeof chat.choices[0].message.content === "string", "chat content is a string");
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 6, temperature: 0, stream: true,
  });
  let streamed = "";
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
  check(streamed === chat.choices[0].message.content,
        `streamed ${JSON.stringify(streamed)} != ${JSON.stringify(chat.choices[0].message.content)}`);

  const wrong = new OpenAI({ baseURL, apiKey: apiKey + "-wrong", maxRetries: 0, timeout: 60000 });
  try {
    await wrong.chat.completions.create({ model, messages, max_tokens: 2 });
    failures.push("a wrong key: no error");
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError, `a wrong key: not an AuthenticationError (${e})`);
    check(e.status === 401, `a wrong key: status ${e.status}`);
    check(e.code === "invalid_api_key", `a wrong key: code ${e.code}`);
  }
}

main()
  .then(() => {
    for (const f of failures) console.log(`FAIL ${f}`);
    if (failures.length === 0) console.log("openai client with a key: all checks passed");
    process.exit(failures.length === 0 ? 0 : 1);
  })
  .catch((e) => {
    console.log(`FAIL unexpected error: ${e?.stack ?? e}`);
    process.exit(1);
  });
