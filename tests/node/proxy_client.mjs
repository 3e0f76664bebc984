// The official openai npm package through the kemem-es proxy, as a Node chat backend would
// call it: the three-line switch (baseURL, the kemem key, the memory scope as default headers),
// one plain call and one stream. Prints one JSON line for tests/test_proxy.py.
// Usage: node proxy_client.mjs <proxy base URL, e.g. http://127.0.0.1:8765/v1> <kemem key>
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({
  baseURL,
  apiKey,
  defaultHeaders: { "X-Kemem-User-Id": "u1", "X-Kemem-Agent-Id": "agent_a" },
  maxRetries: 0,
});
const messages = [{ role: "user", content: "豆包最近怎么样？" }];

const plain = await client.chat.completions.create({ model: "stub-model", messages });

const stream = await client.chat.completions.create({ model: "stub-model", messages, stream: true });
let streamed = "";
let chunks = 0;
for await (const chunk of stream) {
  chunks += 1;
  streamed += chunk.choices[0]?.delta?.content ?? "";
}

console.log(
  JSON.stringify({
    plain: plain.choices[0].message.content,
    memory_info: plain.memory_info,
    streamed,
    chunks,
  }),
);
