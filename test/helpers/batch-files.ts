/**
 * A batch input file of `count` embeddings requests (`custom_id` doc-0, doc-1, ...) uploaded to a
 * running server's Files API, for the tests that run batches through real server processes.
 */
import { expect } from 'vitest';

export async function uploadEmbeddingRequests(
  base: string,
  key: string,
  count: number,
): Promise<{ ids: string[]; fileId: string }> {
  const ids = Array.from({ length: count }, (_, i) => `doc-${i}`);
  const text = ids
    .map((id, i) =>
      JSON.stringify({
        custom_id: id,
        method: 'POST',
        url: '/v1/embeddings',
        body: { model: 'tiny-embedder', input: `passage ${i}: ${'words of some length '.repeat(1 + (i % 7))}` },
      }),
    )
    .join('\n');
  const form = new FormData();
  form.append('file', new Blob([text]), 'corpus.jsonl');
  form.append('purpose', 'batch');
  const uploaded = await fetch(`${base}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
  expect(uploaded.status).toBe(200);
  return { ids, fileId: ((await uploaded.json()) as { id: string }).id };
}
