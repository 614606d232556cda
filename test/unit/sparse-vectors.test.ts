/**
 * The sparse and token-vector functions the worker and core use, against direct computations on
 * small inputs, and the scheduler keeping output kinds apart and splitting ragged results.
 */
import { describe, expect, it } from 'vitest';
import { maxSim } from '../../src/core/late-interaction.js';
import { sparseDot } from '../../src/core/sparse.js';
import { Scheduler, type Lane, type Lanes } from '../../src/engine/scheduler.js';
import { spladePool, tokenRows, tokenWeightsPool, topKSparse } from '../../src/vectors/sparse.js';
import type { BatchResult, BatchTask } from '../../src/worker/protocol.js';

/** A seeded pseudo-random generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('spladePool', () => {
  it('is the max over real, non-special tokens of log(1 + relu(logit)), nonzeros only, by index', () => {
    const rand = random(7);
    const [vocab, seqLen] = [50, 6];
    const lengths = [6, 3];
    const ids = Int32Array.from([101, 5, 9, 5, 11, 102, 101, 7, 102]);
    const logits = Float32Array.from({ length: 2 * seqLen * vocab }, () => rand() * 4 - 3.5);
    const skip = new Set([101, 102]);
    const pooled = spladePool(logits, ids, lengths, seqLen, vocab, skip);
    let at = 0;
    let offset = 0;
    lengths.forEach((length, r) => {
      const expected = new Map<number, number>();
      for (let t = 0; t < length; t++) {
        if (skip.has(ids[offset + t]!)) continue;
        for (let v = 0; v < vocab; v++) {
          const w = Math.log1p(Math.max(0, logits[(r * seqLen + t) * vocab + v]!));
          if (w > 0 && w > (expected.get(v) ?? 0)) expected.set(v, w);
        }
      }
      offset += length;
      const count = pooled.counts[r]!;
      expect(count).toBe(expected.size);
      const indices = Array.from(pooled.indices.subarray(at, at + count));
      expect(indices).toEqual([...expected.keys()].sort((a, b) => a - b));
      indices.forEach((index, i) => expect(pooled.values[at + i]).toBeCloseTo(expected.get(index)!, 6));
      at += count;
    });
    // Padding (row 2 beyond its 3 tokens) takes no part even where its logits are large.
    expect(() => spladePool(logits.subarray(1), ids, lengths, seqLen, vocab, skip)).toThrow(RangeError);
  });

  it('gives an empty row for an input of special tokens only', () => {
    const logits = new Float32Array(2 * 4).fill(3);
    const pooled = spladePool(logits, Int32Array.from([101, 102]), [2], 2, 4, new Set([101, 102]));
    expect(Array.from(pooled.counts)).toEqual([0]);
  });
});

describe('tokenWeightsPool', () => {
  it('keeps relu of each token weight, the max per token id, specials and padding left out', () => {
    // Rows: [CLS] 7 9 7 [SEP] and [CLS] 3 [SEP] (+ 2 padding), weights [2, 5].
    const ids = Int32Array.from([0, 7, 9, 7, 2, 0, 3, 2]);
    const weights = Float32Array.from([9, 0.5, -1, 0.8, 9, 9, 0.25, 9, 7, 7]);
    const pooled = tokenWeightsPool(weights, ids, [5, 3], 5, new Set([0, 2]));
    expect(Array.from(pooled.counts)).toEqual([1, 1]);
    expect(Array.from(pooled.indices)).toEqual([7, 3]);
    expect(Array.from(pooled.values)).toEqual([Math.fround(0.8), 0.25]);
  });
});

describe('topKSparse and sparseDot', () => {
  it('keeps the k largest weights in index order, ties by the smaller index', () => {
    const indices = Int32Array.from([2, 5, 8, 13, 21]);
    const values = Float32Array.from([0.5, 2, 0.5, 3, 1]);
    const top = topKSparse(indices, values, 3);
    expect(Array.from(top.indices)).toEqual([5, 13, 21]);
    expect(Array.from(topKSparse(indices, values, 4).indices)).toEqual([2, 5, 13, 21]);
    expect(topKSparse(indices, values, 9).indices).toBe(indices);
  });

  it('multiplies the weights of the ids two vectors share', () => {
    const a = { indices: Int32Array.from([1, 4, 9]), values: Float32Array.from([1, 2, 3]) };
    const b = { indices: Int32Array.from([0, 4, 9, 12]), values: Float32Array.from([5, 0.5, 2, 7]) };
    expect(sparseDot(a, b)).toBe(2 * 0.5 + 3 * 2);
    expect(sparseDot(a, { indices: new Int32Array(0), values: new Float32Array(0) })).toBe(0);
  });
});

describe('tokenRows and maxSim', () => {
  it("keeps each row's real tokens, concatenated", () => {
    const hidden = Float32Array.from({ length: 2 * 3 * 2 }, (_, i) => i);
    expect(Array.from(tokenRows(hidden, [2, 3], 3, 2))).toEqual([0, 1, 2, 3, 6, 7, 8, 9, 10, 11]);
  });

  it('sums over query tokens the best dot product with a document token', () => {
    const query = Float32Array.from([1, 0, 0, 1]);
    const document = Float32Array.from([0.6, 0.8, 1, 0, 0, -1]);
    expect(maxSim(query, document, 2)).toBeCloseTo(1 + 0.8, 6);
  });
});

/** Answers dense batches with one value per row, sparse and token batches with rows as long as the input. */
class KindRunner implements Lanes, Lane {
  readonly sessions = 1;
  readonly threadsPerSession = 1;
  readonly device = 'cpu';
  readonly solo = false;
  readonly kinds: Array<string | undefined> = [];

  lane(): Lane {
    return this;
  }

  run(task: BatchTask): Promise<BatchResult> {
    this.kinds.push(task.kind);
    const lengths = Array.from(task.lengths);
    if (!task.kind) return Promise.resolve({ output: Float32Array.from(lengths), width: 1, inferenceMs: 1 });
    // Row r gives `length` entries of value r + 1 (tokens: vectors of width 2).
    const width = task.kind === 'tokens' ? 2 : 1;
    const output = Float32Array.from(lengths.flatMap((length) => new Array<number>(length * width).fill(length)));
    const indices =
      task.kind === 'sparse'
        ? Int32Array.from(lengths.flatMap((length) => Array.from({ length }, (_, i) => i)))
        : undefined;
    return Promise.resolve({
      output,
      width: task.kind === 'sparse' ? 100 : width,
      counts: Int32Array.from(lengths),
      indices,
      inferenceMs: 1,
    });
  }
}

describe('Scheduler output kinds', () => {
  const options = { maxBatchTokens: 1000, maxBatchSize: 8, queueCapacity: 100, maxInFlight: 1 };
  const seq = (length: number) => ({ ids: new Int32Array(length).fill(1) });

  it('never mixes kinds in a batch, and splits ragged results back to their inputs', async () => {
    const runner = new KindRunner();
    const scheduler = new Scheduler(runner, options, [{ id: 'm' }]);
    const [dense, sparse, tokens] = await Promise.all([
      scheduler.submit('m', [seq(3), seq(4)]),
      scheduler.submit('m', [seq(3), seq(5)], undefined, 'sparse'),
      scheduler.submit('m', [seq(4), seq(2)], undefined, 'tokens'),
    ]);
    // Each batch is one kind (a task carries one); the results' shapes show no input went astray.
    expect(new Set(runner.kinds)).toEqual(new Set(['sparse', 'tokens', undefined]));
    expect(Array.from(dense.output)).toEqual([3, 4]);
    expect(Array.from(sparse.counts!)).toEqual([3, 5]);
    expect(Array.from(sparse.indices!)).toEqual([0, 1, 2, 0, 1, 2, 3, 4]);
    expect(Array.from(sparse.output)).toEqual([3, 3, 3, 5, 5, 5, 5, 5]);
    expect(Array.from(tokens.counts!)).toEqual([4, 2]);
    expect(tokens.width).toBe(2);
    expect(Array.from(tokens.output)).toEqual([...new Array<number>(8).fill(4), ...new Array<number>(4).fill(2)]);
  });

  it('hands the attended lengths of a batch to the worker, the others attending all their tokens', async () => {
    const tasks: BatchTask[] = [];
    const lane: Lane = {
      sessions: 1,
      threadsPerSession: 1,
      solo: false,
      device: 'cpu',
      run: (task) => (
        tasks.push(task),
        Promise.resolve({
          output: new Float32Array(task.ids.length * 2),
          width: 2,
          counts: Int32Array.from(task.lengths),
          inferenceMs: 1,
        })
      ),
    };
    const scheduler = new Scheduler({ lane: () => lane }, { ...options, maxInFlight: 1 }, [{ id: 'm' }]);
    const blocker = scheduler.submit('m', [seq(2)]);
    await Promise.all([
      blocker,
      scheduler.submit('m', [{ ids: new Int32Array(6), attended: 4 }, seq(6)], undefined, 'tokens'),
    ]);
    const batch = tasks.find((task) => task.kind === 'tokens')!;
    expect(Array.from(batch.attended!)).toEqual([4, 6]);
    expect(tasks.find((task) => !task.kind)!.attended).toBeUndefined();
  });
});
