/**
 * Worker thread of the ceiling bench: one ONNX Runtime session, run on prebuilt feeds.
 *
 * `session.run` of onnxruntime-node blocks its JS thread, so each concurrently running session lives in
 * its own worker. Workers take batch indexes from a shared atomic counter (no main-thread round trip per
 * batch) and report the time of each run.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';

export interface BertBatch {
  kind: 'bert';
  count: number;
  seq: number;
  ids: Int32Array;
  typeIds: Int32Array;
  lengths: Int32Array;
}
export interface RawFeed {
  kind: 'raw';
  tensors: Record<string, { data: Float32Array; dims: number[] }>;
}
export type Batch = BertBatch | RawFeed;

export interface WorkerInit {
  model: string | Uint8Array;
  options: ort.InferenceSession.SessionOptions;
}

export type ToWorker =
  | { type: 'load'; batches: Batch[]; warmup: number[] }
  | { type: 'go'; counter: SharedArrayBuffer; total: number; offset?: number }
  | { type: 'close' };

export type FromWorker =
  | { type: 'ready'; loadMs: number; inputNames: readonly string[]; outputNames: readonly string[] }
  | { type: 'loaded' }
  | { type: 'done'; runs: Array<[index: number, ms: number]> }
  | { type: 'error'; message: string };

const port = parentPort!;
const init = workerData as WorkerInit;

function toFeeds(session: ort.InferenceSession, b: Batch): Record<string, ort.Tensor> {
  if (b.kind === 'raw') {
    const feeds: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(b.tensors)) feeds[name] = new ort.Tensor('float32', t.data, t.dims);
    return feeds;
  }
  const n = b.count * b.seq;
  const ids = new BigInt64Array(n);
  const mask = new BigInt64Array(n);
  const types = new BigInt64Array(n);
  for (let r = 0; r < b.count; r++) {
    const len = b.lengths[r]!;
    for (let c = 0; c < b.seq; c++) {
      const k = r * b.seq + c;
      ids[k] = BigInt(b.ids[k]!);
      types[k] = BigInt(b.typeIds[k]!);
      mask[k] = c < len ? 1n : 0n;
    }
  }
  const dims = [b.count, b.seq];
  const feeds: Record<string, ort.Tensor> = {};
  for (const name of session.inputNames) {
    if (name === 'input_ids') feeds[name] = new ort.Tensor('int64', ids, dims);
    else if (name === 'attention_mask') feeds[name] = new ort.Tensor('int64', mask, dims);
    else if (name === 'token_type_ids') feeds[name] = new ort.Tensor('int64', types, dims);
    else throw new Error(`unexpected model input ${name}`);
  }
  return feeds;
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const session =
    typeof init.model === 'string'
      ? await ort.InferenceSession.create(init.model, init.options)
      : await ort.InferenceSession.create(init.model, init.options);
  const fetches = session.outputNames.slice(0, 1);
  port.postMessage({
    type: 'ready',
    loadMs: performance.now() - t0,
    inputNames: session.inputNames,
    outputNames: session.outputNames,
  } satisfies FromWorker);

  let feeds: Array<Record<string, ort.Tensor>> = [];
  port.on('message', (msg: ToWorker) => {
    void (async () => {
      try {
        if (msg.type === 'load') {
          feeds = msg.batches.map((b) => toFeeds(session, b));
          for (const i of msg.warmup) {
            const feed = feeds[i];
            if (feed) await session.run(feed, fetches);
          }
          port.postMessage({ type: 'loaded' } satisfies FromWorker);
        } else if (msg.type === 'go') {
          const counter = new Int32Array(msg.counter);
          const runs: Array<[number, number]> = [];
          for (;;) {
            const i = Atomics.add(counter, 0, 1);
            if (i >= msg.total) break;
            const s = performance.now();
            await session.run(feeds[((msg.offset ?? 0) + i) % feeds.length]!, fetches);
            runs.push([i, performance.now() - s]);
          }
          port.postMessage({ type: 'done', runs } satisfies FromWorker);
        } else if (msg.type === 'close') {
          await session.release();
          port.close();
        }
      } catch (error) {
        port.postMessage({ type: 'error', message: (error as Error).stack ?? String(error) } satisfies FromWorker);
      }
    })();
  });
}

main().catch((error: unknown) => {
  port.postMessage({ type: 'error', message: (error as Error).stack ?? String(error) } satisfies FromWorker);
});
