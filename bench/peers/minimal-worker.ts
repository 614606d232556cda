/**
 * Worker of the minimal piscina peer: one session per model, 1 intra-op thread, one input per run.
 * Embedders: mean pooling over the mask + L2 normalisation; rerankers: the logit.
 */
import { workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';

export interface MinimalTask {
  model: string;
  ids: Int32Array;
  typeIds?: Int32Array;
}

const { models } = workerData as { models: Record<string, string> };
const sessions = new Map<string, ort.InferenceSession>();
for (const [id, path] of Object.entries(models)) {
  sessions.set(
    id,
    await ort.InferenceSession.create(path, {
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
      logSeverityLevel: 3,
    }),
  );
}

export default async function run(task: MinimalTask): Promise<Float32Array> {
  const session = sessions.get(task.model);
  if (!session) throw new Error(`model ${task.model} not loaded`);
  const n = task.ids.length;
  const dims = [1, n];
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', BigInt64Array.from(task.ids, BigInt), dims),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(n).fill(1n), dims),
  };
  if (session.inputNames.includes('token_type_ids')) {
    feeds.token_type_ids = new ort.Tensor(
      'int64',
      task.typeIds ? BigInt64Array.from(task.typeIds, BigInt) : new BigInt64Array(n),
      dims,
    );
  }
  const out = await session.run(feeds);
  if (out.logits) return Float32Array.from(out.logits.data as Float32Array);
  const hidden = out.last_hidden_state!.data as Float32Array;
  const width = hidden.length / n;
  const v = new Float32Array(width);
  for (let t = 0; t < n; t++) for (let d = 0; d < width; d++) v[d]! += hidden[t * width + d]!;
  let norm = 0;
  for (let d = 0; d < width; d++) norm += v[d]! * v[d]!;
  const inv = 1 / Math.max(Math.sqrt(norm), 1e-12);
  for (let d = 0; d < width; d++) v[d]! *= inv;
  return v;
}
