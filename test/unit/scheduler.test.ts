import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { defaultBulkYield, Scheduler, type Lane, type Lanes } from '../../src/engine/scheduler.js';
import type { BatchResult, BatchTask } from '../../src/worker/protocol.js';

/** A runner that records batches and answers each row with [sum of its ids, its length]. */
class FakeRunner implements Lanes, Lane {
  readonly sessions: number = 1;
  readonly threadsPerSession = 1;
  readonly device = 'cpu';
  /** Whether the model has a solo session. */
  solo = false;
  readonly batches: number[][] = [];
  readonly soloMarks: boolean[] = [];
  private pending: (() => void)[] = [];
  failNext = 0;
  /** When false, batches complete only when release() is called. */
  auto = true;

  lane(): Lane {
    return this;
  }

  run(task: BatchTask): Promise<BatchResult> {
    this.batches.push(Array.from(task.lengths));
    this.soloMarks.push(task.solo === true);
    return new Promise((resolve, reject) => {
      const finish = () => {
        if (this.failNext > 0) {
          this.failNext -= 1;
          reject(new Error('worker died'));
          return;
        }
        const output = new Float32Array(task.lengths.length * 2);
        let offset = 0;
        task.lengths.forEach((length, row) => {
          let sum = 0;
          for (let t = 0; t < length; t++) sum += task.ids[offset + t]!;
          output[row * 2] = sum;
          output[row * 2 + 1] = length;
          offset += length;
        });
        resolve({ output, width: 2, inferenceMs: 1 });
      };
      if (this.auto) queueMicrotask(finish);
      else this.pending.push(finish);
    });
  }

  release(): void {
    for (const finish of this.pending.splice(0)) finish();
  }
}

const seq = (length: number, value = 1) => ({ ids: new Int32Array(length).fill(value) });
const options = { maxBatchTokens: 1000, maxBatchSize: 8, queueCapacity: 100, maxInFlight: 1 };

describe('Scheduler', () => {
  it('dispatches a lone item at once on an idle server', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, options, [{ id: 'm' }]);
    const job = scheduler.submit('m', [seq(5)]);
    expect(runner.batches).toEqual([[5]]);
    runner.release();
    const result = await job;
    expect(Array.from(result.output)).toEqual([5, 5]);
  });

  it('marks a batch solo only when it is the only work on the server', async () => {
    const runner = new FakeRunner();
    runner.solo = true;
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 1, maxInFlight: 2 }, [{ id: 'm' }]);
    await scheduler.submit('m', [seq(5)]);
    // Two batches go out together (one is never alone), the third waits for a free slot.
    await scheduler.submit('m', [seq(4), seq(3), seq(2)]);
    expect(runner.batches.slice(0, 3)).toEqual([[5], [4], [3]]);
    expect(runner.soloMarks.slice(0, 3)).toEqual([true, false, false]);
    // None for a model without a solo session.
    const plain = new FakeRunner();
    await new Scheduler(plain, options, [{ id: 'm' }]).submit('m', [seq(5)]);
    expect(plain.soloMarks).toEqual([false]);
  });

  it('forms each batch as the rule says: the oldest, then the nearest in length (earlier first among equals) that fit', () => {
    // The rule written plainly: every candidate of the window sorted by distance, then position.
    const reference = (lengths: number[], cap: number, budget: number, uniform: boolean): number[][] => {
      const queue = lengths.map((length, id) => ({ length, id }));
      const batches: number[][] = [];
      while (queue.length > 0) {
        const anchor = queue[0]!;
        const window = queue.slice(0, 512);
        const order = window
          .map((_, i) => i)
          .slice(1)
          .sort(
            (a, b) =>
              Math.abs(window[a]!.length - anchor.length) - Math.abs(window[b]!.length - anchor.length) || a - b,
          );
        const chosen = [0];
        let longest = anchor.length;
        let tokens = anchor.length;
        for (const i of order) {
          if (cap === 1 || chosen.length >= cap) break;
          const length = window[i]!.length;
          if (uniform && length !== anchor.length) continue;
          const padded = Math.max(longest, length) * (chosen.length + 1);
          if (padded > budget || (tokens + length) / padded < 0.8) continue;
          chosen.push(i);
          longest = Math.max(longest, length);
          tokens += length;
        }
        chosen.sort((a, b) => a - b);
        batches.push(chosen.map((i) => window[i]!.id));
        for (const i of [...chosen].reverse()) queue.splice(i, 1);
      }
      return batches;
    };
    const scheduler = new Scheduler(new FakeRunner(), options, [{ id: 'm' }]);
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 700 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.boolean(),
        (lengths, cap, budget, uniform) => {
          const queue = {
            items: lengths.map((length, index) => ({ length, index, enqueuedAt: 0 })),
            maxBatchSize: cap,
            uniformLength: uniform,
          } as unknown as Parameters<Scheduler['formBatch']>[0];
          const batches: number[][] = [];
          while (queue.items.length > 0) batches.push(scheduler.formBatch(queue, budget).map((item) => item.index));
          expect(batches).toEqual(reference(lengths, cap, budget, uniform));
        },
      ),
      { numRuns: 200 },
    );
  });

  it("runs a user's inputs longest first and answers them in input order", async () => {
    const runner = new FakeRunner();
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 1 }, [{ id: 'm' }]);
    const result = await scheduler.submit('m', [seq(5, 1), seq(40, 2), seq(12, 3), seq(40, 4), seq(7, 5)]);
    // The two of 40 in their own order, then the shorter ones.
    expect(runner.batches).toEqual([[40], [40], [12], [7], [5]]);
    expect(Array.from(result.output)).toEqual([5, 5, 80, 40, 36, 12, 160, 40, 35, 7]);
    // A bulk job's inputs keep their order.
    await scheduler.submit('m', [seq(3), seq(9)], undefined, 'dense', 'bulk');
    expect(runner.batches.slice(5)).toEqual([[3], [9]]);
  });

  it('shares batches across requests and returns every row to its request in order', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, options, [{ id: 'm' }]);
    const first = scheduler.submit('m', [seq(4)]); // dispatched alone, holds the only slot
    const a = scheduler.submit('m', [seq(10, 1), seq(11, 2)]);
    const b = scheduler.submit('m', [seq(10, 3), seq(12, 4)]);
    runner.release();
    await first;
    await new Promise((r) => setTimeout(r, 0));
    runner.release();
    const [ra, rb] = await Promise.all([a, b]);
    expect(runner.batches[1]!.length).toBe(4);
    expect(Array.from(ra.output)).toEqual([10, 10, 22, 11]);
    expect(Array.from(rb.output)).toEqual([30, 10, 48, 12]);
  });

  it('groups by length and keeps the padded size within the token budget', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, maxBatchTokens: 300 }, [{ id: 'm' }]);
    const blocker = scheduler.submit('m', [seq(1)]);
    const lengths = [100, 5, 98, 6, 97, 7, 8];
    const job = scheduler.submit(
      'm',
      lengths.map((n) => seq(n)),
    );
    for (let i = 0; i < 6; i++) {
      runner.release();
      await new Promise((r) => setTimeout(r, 0));
    }
    await blocker;
    const result = await job;
    for (const batch of runner.batches) {
      expect(Math.max(...batch) * batch.length).toBeLessThanOrEqual(300);
      // never a 100-token input padded together with a 5-token one
      expect(Math.min(...batch) / Math.max(...batch)).toBeGreaterThan(0.5);
    }
    expect(Array.from(result.output).filter((_, i) => i % 2 === 1)).toEqual(lengths);
  });

  it("batches a lane with a token budget of its own (an accelerator's) by that budget, the others by the scheduler's", async () => {
    const cpu = new FakeRunner();
    const gpu = Object.assign(new FakeRunner(), { maxBatchTokens: 16384 });
    cpu.auto = false;
    gpu.auto = false;
    const lanes: Lanes = { lane: (model) => (model === 'on-gpu' ? gpu : cpu) };
    const scheduler = new Scheduler(lanes, { ...options, maxBatchTokens: 256, maxBatchSize: 32, maxInFlight: 64 }, [
      { id: 'on-cpu' },
      { id: 'on-gpu' },
    ]);
    // A lone item goes at once: one in flight each, then 40 inputs of similar length wait in each queue.
    const firsts = [scheduler.submit('on-cpu', [seq(100)]), scheduler.submit('on-gpu', [seq(100)])];
    const inputs = Array.from({ length: 40 }, (_, i) => seq(100 + (i % 5)));
    const jobs = [scheduler.submit('on-cpu', inputs), scheduler.submit('on-gpu', inputs)];
    for (let i = 0; i < 30; i++) {
      cpu.release();
      gpu.release();
      await new Promise((r) => setTimeout(r, 0));
    }
    await Promise.all([...firsts, ...jobs]);
    // 256 tokens hold two inputs of ~100; 16384 would hold 160, the batch size cap stops at 32.
    expect(Math.max(...cpu.batches.map((b) => b.length))).toBe(2);
    expect(gpu.batches.map((b) => b.length)).toEqual([1, 32, 8]);
    for (const batch of gpu.batches) expect(Math.max(...batch) / Math.min(...batch)).toBeLessThan(1.25);
  });

  it('splits a client batch larger than one model batch', async () => {
    const runner = new FakeRunner();
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 4, maxInFlight: 1 }, [{ id: 'm' }]);
    const result = await scheduler.submit(
      'm',
      Array.from({ length: 10 }, (_, i) => seq(3, i)),
    );
    expect(result.output.length).toBe(20);
    expect(Array.from(result.output).filter((_, i) => i % 2 === 0)).toEqual(
      Array.from({ length: 10 }, (_, i) => 3 * i),
    );
    expect(runner.batches.every((b) => b.length <= 4)).toBe(true);
  });

  it('runs one input per batch for models that ask for it', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, options, [{ id: 'q', maxBatchSize: 1 }]);
    const blocker = scheduler.submit('q', [seq(2)]);
    const job = scheduler.submit('q', [seq(2), seq(2), seq(2)]);
    for (let i = 0; i < 5; i++) {
      runner.release();
      await new Promise((r) => setTimeout(r, 0));
    }
    await Promise.all([blocker, job]);
    expect(runner.batches.every((b) => b.length === 1)).toBe(true);
  });

  it('drops a cancelled request before dispatch', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, options, [{ id: 'm' }]);
    const blocker = scheduler.submit('m', [seq(3)]);
    const controller = new AbortController();
    const cancelled = scheduler.submit('m', [seq(50), seq(50)], controller.signal);
    controller.abort();
    await expect(cancelled).rejects.toMatchObject({ code: 'client_closed' });
    expect(scheduler.depth('m')).toBe(0);
    runner.release();
    await blocker;
    expect(runner.batches).toEqual([[3]]);
  });

  it('refuses with overloaded and Retry-After when the queue is full', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, queueCapacity: 3 }, [{ id: 'm' }]);
    const running = scheduler.submit('m', [seq(2)]);
    const queued = scheduler.submit('m', [seq(2), seq(2), seq(2)]);
    const refused = scheduler.submit('m', [seq(2)]);
    await expect(refused).rejects.toMatchObject({ code: 'overloaded', status: 429 });
    await refused.catch((error: { retryAfterSeconds?: number }) =>
      expect(error.retryAfterSeconds).toBeGreaterThanOrEqual(1),
    );
    for (let i = 0; i < 4; i++) {
      runner.release();
      await new Promise((r) => setTimeout(r, 0));
    }
    await Promise.all([running, queued]);
  });

  it('retries a batch once when its worker fails, then gives up with internal', async () => {
    const runner = new FakeRunner();
    const scheduler = new Scheduler(runner, options, [{ id: 'm' }]);
    runner.failNext = 1;
    const ok = await scheduler.submit('m', [seq(2, 5)]);
    expect(Array.from(ok.output)).toEqual([10, 2]);
    runner.failNext = 2;
    await expect(scheduler.submit('m', [seq(2)])).rejects.toMatchObject({ code: 'internal' });
  });

  it('retries an image batch whose worker fails with the images it had, though the first try transferred its bytes', async () => {
    const runner = new FakeRunner();
    const sent: number[][][] = [];
    const run = runner.run.bind(runner);
    runner.run = (task: BatchTask) => {
      sent.push(task.images!.map((bytes) => Array.from(bytes)));
      // As postMessage does: the buffers leave this thread.
      structuredClone(task.images, { transfer: task.images!.map((bytes) => bytes.buffer as ArrayBuffer) });
      return run(task);
    };
    const scheduler = new Scheduler(runner, options, [{ id: 'm' }]);
    const image = (value: number) => ({
      ids: new Int32Array(0),
      image: { bytes: new Uint8Array([value, value + 1, value + 2]), tokens: 50, param: 'input' },
    });
    runner.failNext = 1;
    const result = await scheduler.submit('m', [image(1), image(7)]);
    expect(sent).toEqual([
      [
        [1, 2, 3],
        [7, 8, 9],
      ],
      [
        [1, 2, 3],
        [7, 8, 9],
      ],
    ]);
    expect([result.output[1], result.output[3]]).toEqual([50, 50]);
    runner.failNext = 2;
    await expect(scheduler.submit('m', [image(3)])).rejects.toMatchObject({ code: 'internal' });
  });

  it('loses and duplicates nothing under many concurrent requests', async () => {
    const runner = new FakeRunner();
    const scheduler = new Scheduler(runner, { ...options, queueCapacity: 10_000, maxInFlight: 2 }, [{ id: 'm' }]);
    const jobs = Array.from({ length: 200 }, (_, r) =>
      scheduler.submit(
        'm',
        Array.from({ length: 1 + (r % 5) }, (_, i) => seq(1 + ((r * 7 + i) % 40), r * 10 + i)),
      ),
    );
    const results = await Promise.all(jobs);
    results.forEach((result, r) => {
      const expected = Array.from({ length: 1 + (r % 5) }, (_, i) => {
        const length = 1 + ((r * 7 + i) % 40);
        return [length * (r * 10 + i), length];
      }).flat();
      expect(Array.from(result.output)).toEqual(expected);
    });
    const rows = runner.batches.reduce((n, b) => n + b.length, 0);
    expect(rows).toBe(results.reduce((n, r) => n + r.output.length / 2, 0));
  });

  it('drains queued work before it resolves and refuses new work meanwhile', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, options, [{ id: 'm' }]);
    const a = scheduler.submit('m', [seq(2)]);
    const b = scheduler.submit('m', [seq(3)]);
    const drained = scheduler.drain();
    await expect(scheduler.submit('m', [seq(1)])).rejects.toMatchObject({ code: 'shutting_down' });
    for (let i = 0; i < 3; i++) {
      runner.release();
      await new Promise((r) => setTimeout(r, 0));
    }
    await Promise.all([a, b, drained]);
  });
});

describe('Scheduler priorities', () => {
  it('serves waiting interactive inputs before bulk inputs queued earlier', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 1 }, [{ id: 'm' }]);
    // A batch's inputs arrive first: the first takes the one slot, the rest wait.
    const bulk = scheduler.submit('m', [seq(11), seq(12), seq(13)], undefined, 'dense', 'bulk');
    // A user's request arrives while they wait.
    const online = scheduler.submit('m', [seq(3), seq(2)]);
    expect(runner.batches).toEqual([[11]]);
    // Each batch that lands frees the slot for the next one chosen.
    while (runner.batches.length < 5) {
      runner.release();
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    runner.release();
    await Promise.all([bulk, online]);
    // Once the running one lands, the interactive inputs go before the bulk inputs still queued.
    expect(runner.batches).toEqual([[11], [3], [2], [12], [13]]);
  });

  it("keeps bulk batches out of a session's ready slot while users are about, so that a user's request goes next", async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    // One session with room for two batches: the running one and the next.
    // No grace after a user's batch here, so that only the slot rule holds bulk batches back.
    const scheduler = new Scheduler(
      runner,
      { ...options, maxBatchSize: 1, maxInFlight: 2, bulkYield: { graceMs: 0 } },
      [{ id: 'm' }],
    );
    // A user was just answered.
    const earlier = scheduler.submit('m', [seq(1)]);
    runner.release();
    await earlier;
    runner.batches.length = 0;
    const bulk = scheduler.submit('m', [seq(11), seq(12), seq(13)], undefined, 'dense', 'bulk');
    expect(runner.batches).toEqual([[11]]);
    const online = scheduler.submit('m', [seq(2)]);
    expect(runner.batches).toEqual([[11], [2]]);
    while (runner.batches.length < 4) {
      runner.release();
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    runner.release();
    await Promise.all([bulk, online]);
    expect(runner.batches).toEqual([[11], [2], [12], [13]]);
  });

  it("keeps bulk and interactive inputs out of each other's batches, and cancels bulk jobs alone", async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, options, [{ id: 'm' }]);
    const first = scheduler.submit('m', [seq(4)]);
    const controller = new AbortController();
    const bulk = scheduler.submit('m', [seq(4), seq(4)], controller.signal, 'dense', 'bulk');
    const online = scheduler.submit('m', [seq(4), seq(4)]);
    controller.abort();
    await expect(bulk).rejects.toMatchObject({ code: 'client_closed' });
    runner.release();
    await first;
    runner.release();
    await online;
    expect(runner.batches).toEqual([[4], [4, 4]]);
    expect(scheduler.depth('m')).toBe(0);
  });
});

describe('Scheduler: bulk work yields to users', () => {
  // Fake clocks: the rules below depend on when things happened, never on how long they took.
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const settle = () => vi.advanceTimersByTimeAsync(0);
  const { windowMs, graceMs, maxHoldMs } = defaultBulkYield;
  const bulk = (scheduler: Scheduler, inputs: { ids: Int32Array }[]) =>
    scheduler.submit('m', inputs, undefined, 'dense', 'bulk');
  /** A user's request of one input, answered before the test goes on. */
  const answered = async (runner: FakeRunner, scheduler: Scheduler) => {
    const job = scheduler.submit('m', [seq(1)]);
    runner.release();
    await job;
  };

  it('fills every slot with full batches when no user is about', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, maxBatchTokens: 400, maxInFlight: 2 }, [{ id: 'm' }]);
    const job = bulk(
      scheduler,
      Array.from({ length: 8 }, () => seq(100)),
    );
    // The running slot and the ready one, each with the whole token budget.
    expect(runner.batches).toEqual([
      [100, 100, 100, 100],
      [100, 100, 100, 100],
    ]);
    runner.release();
    await job;
  });

  it('while users are about, runs short bulk batches in the running slot only', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, maxBatchTokens: 400, maxInFlight: 2 }, [{ id: 'm' }]);
    await answered(runner, scheduler);
    runner.batches.length = 0;
    await vi.advanceTimersByTimeAsync(graceMs);
    const job = bulk(
      scheduler,
      Array.from({ length: 4 }, () => seq(100)),
    );
    // A quarter of the budget: one input of 100 tokens, and nothing in the ready slot.
    expect(runner.batches).toEqual([[100]]);
    // Once no user has been seen for the window, the batches grow back and take both slots.
    await vi.advanceTimersByTimeAsync(windowMs);
    runner.release();
    await settle();
    expect(runner.batches).toEqual([[100], [100, 100, 100]]);
    runner.release();
    await job;
  });

  it("holds bulk batches back while a user's input waits or runs, and for the grace after it", async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 1 }, [{ id: 'm' }]);
    const job = bulk(scheduler, [seq(11), seq(12), seq(13)]);
    expect(runner.batches).toEqual([[11]]);
    const online = scheduler.submit('m', [seq(2)]);
    runner.release();
    await settle();
    // The user's input took the slot the bulk batch left; the bulk waits while it runs.
    expect(runner.batches).toEqual([[11], [2]]);
    await vi.advanceTimersByTimeAsync(graceMs * 2);
    expect(runner.batches).toEqual([[11], [2]]);
    runner.release();
    await online;
    // Answered: the bulk still waits for the user's next request, for the grace.
    await vi.advanceTimersByTimeAsync(graceMs - 1);
    expect(runner.batches).toEqual([[11], [2]]);
    await vi.advanceTimersByTimeAsync(1);
    expect(runner.batches).toEqual([[11], [2], [12]]);
    runner.release();
    await settle();
    runner.release();
    await job;
  });

  it('lets a bulk batch go between the requests of a busy user once bulk has waited long enough', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 1 }, [{ id: 'm' }]);
    await answered(runner, scheduler);
    const job = bulk(scheduler, [seq(11), seq(12)]);
    // Within the grace after the user's request: held.
    expect(runner.batches).toEqual([[1]]);
    // The user sends a request every 10 ms, each answered at once: the bulk waits, but not for ever.
    const gap = 10;
    const bulkWent = () => runner.batches.some((batch) => batch[0]! > 10);
    let waited = 0;
    while (!bulkWent()) {
      await vi.advanceTimersByTimeAsync(gap);
      waited += gap;
      if (!bulkWent()) await answered(runner, scheduler);
    }
    expect(waited).toBe(maxHoldMs);
    expect(runner.batches.length).toBe(maxHoldMs / gap + 1);
    runner.release();
    await vi.advanceTimersByTimeAsync(maxHoldMs);
    runner.release();
    await job;
  });

  it("holds bulk batches back while a user's input runs for at most the longest hold, then lets one take a free session", async () => {
    const runner = new (class extends FakeRunner {
      override readonly sessions = 2;
    })();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 1, maxInFlight: 4 }, [{ id: 'm' }]);
    const online = scheduler.submit('m', [seq(2)]);
    const job = bulk(scheduler, [seq(11), seq(12), seq(13)]);
    expect(runner.batches).toEqual([[2]]);
    await vi.advanceTimersByTimeAsync(maxHoldMs - 1);
    expect(runner.batches).toEqual([[2]]);
    await vi.advanceTimersByTimeAsync(1);
    // One bulk batch, in the session the user's input left free; none in a ready slot.
    expect(runner.batches).toEqual([[2], [11]]);
    runner.release();
    await online;
    await vi.advanceTimersByTimeAsync(maxHoldMs);
    runner.release();
    await settle();
    runner.release();
    await job;
  });

  it('runs a user input that finds only bulk batches running after them, solo, with the bulk held meanwhile', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    runner.solo = true;
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 1, maxInFlight: 2 }, [{ id: 'm' }]);
    const job = bulk(scheduler, [seq(11), seq(12), seq(13), seq(14)]);
    // No user about: the running slot and the ready one.
    expect(runner.batches).toEqual([[11], [12]]);
    const online = scheduler.submit('m', [seq(2)]);
    // It does not queue behind them in the session: it waits for both to land.
    expect(runner.batches).toEqual([[11], [12]]);
    runner.release();
    await settle();
    expect(runner.batches).toEqual([[11], [12], [2]]);
    expect(runner.soloMarks[2]).toBe(true);
    runner.release();
    await online;
    await vi.advanceTimersByTimeAsync(graceMs);
    // Users about: one short bulk batch at a time.
    expect(runner.batches).toEqual([[11], [12], [2], [13]]);
    runner.release();
    await settle();
    runner.release();
    await job;
  });

  it('runs a user input at once next to bulk batches on a lane without a solo session', async () => {
    const runner = new FakeRunner();
    runner.auto = false;
    const scheduler = new Scheduler(runner, { ...options, maxBatchSize: 1, maxInFlight: 2 }, [{ id: 'm' }]);
    const job = bulk(scheduler, [seq(11), seq(12), seq(13)]);
    expect(runner.batches).toEqual([[11], [12]]);
    // A later bulk batch lands first: its slot goes to the user, not to the bulk input waiting.
    const online = scheduler.submit('m', [seq(2)]);
    runner.release();
    await settle();
    expect(runner.batches).toEqual([[11], [12], [2]]);
    expect(runner.soloMarks[2]).toBe(false);
    runner.release();
    await online;
    await vi.advanceTimersByTimeAsync(graceMs);
    runner.release();
    await job;
    expect(runner.batches).toEqual([[11], [12], [2], [13]]);
  });
});
