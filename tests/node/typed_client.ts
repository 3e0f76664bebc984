// A TypeScript program against the client generated from docs/openapi.json
// (openapi-typescript types + openapi-fetch): search, add, context. `tsc --noEmit` in CI
// (scripts/ci_drop.sh) fails when the description loses its types.
import createClient from "openapi-fetch";
import type { components, paths } from "./generated/kemem";

type ErrorBody = components["schemas"]["ErrorBody"];

export async function chatTurn(baseUrl: string, key: string, userId: string): Promise<string> {
  const kemem = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${key}` } });

  const added = await kemem.POST("/v1/memories", {
    body: { text: "木木养了一只叫豆包的柯基", user_id: userId },
  });
  if (added.error) {
    const err: ErrorBody = added.error;
    throw new Error(`${err.error.code}: ${err.error.message} (${err.error.field ?? "-"})`);
  }
  const firstId: string = added.data.results[0].id;

  const found = await kemem.POST("/v1/memories/search", {
    body: { query: "豆包最近怎么样", user_id: userId, limit: 5 },
  });
  if (found.error) throw new Error(found.error.error.code);
  const best = found.data.results[0];
  const score: number = best.score;
  const kind: "events" | "entities" = best.kind;
  // the v23 answer is typed too, its Chinese keys included
  const stages: Record<string, number> = found.data.additional_info["检索耗时"];
  // @ts-expect-error: a field the answer does not have is a type error, not `unknown`
  void best.nope;

  const ctx = await kemem.POST("/v1/context", {
    body: { message: "豆包最近怎么样", user_id: userId, max_tokens: 800 },
  });
  if (ctx.error) throw new Error(ctx.error.error.message);
  const total: number = ctx.data.tokens.total;

  const page = await kemem.GET("/v1/memories/{memory_id}", {
    params: { path: { memory_id: firstId }, query: { user_id: userId } },
  });
  const text: string | undefined = page.data?.text;

  return [ctx.data.text, score, kind, stages.total, total, text].join("\n");
}
