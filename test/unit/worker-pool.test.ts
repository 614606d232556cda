import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkerPool } from '../../src/engine/worker-pool.js';

const file = fileURLToPath(new URL('../fixtures/echo-worker.mjs', import.meta.url));
interface Echo {
  echo: unknown;
  threadId: number;
  sum: number;
  values: Float32Array;
}

let pool: WorkerPool<{ threadId: number }> | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

describe('WorkerPool', () => {
  it('starts every thread, then runs tasks and gives their results, buffers handed over both ways', async () => {
    pool = new WorkerPool({ file, threads: 2, tasksPerThread: 2, workerData: {} });
    const reports = await pool.ready;
    expect(new Set(reports.map((r) => r.threadId)).size).toBe(2);
    const values = Float32Array.of(1, 2, 3.5);
    const result = await pool.run<Echo>({ echo: 'a', values }, [values.buffer]);
    expect(result).toMatchObject({ echo: 'a', sum: 6.5 });
    expect(Array.from(result.values)).toEqual([1, 2, 3.5]);
    // Transferred, not copied: the sender's array is detached.
    expect(values.length).toBe(0);
  });

  it('holds at most tasksPerThread per thread and queues the rest, in order', async () => {
    pool = new WorkerPool({ file, threads: 2, tasksPerThread: 2, workerData: {} });
    await pool.ready;
    const runs = Array.from({ length: 7 }, (_, i) => pool!.run<Echo>({ echo: i, wait: 30 }));
    expect(pool.queueSize).toBe(3);
    const results = await Promise.all(runs);
    expect(results.map((r) => r.echo)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    // Both threads took work.
    expect(new Set(results.map((r) => r.threadId)).size).toBe(2);
    expect(pool.queueSize).toBe(0);
  });

  it('rejects a task that fails with its message and keeps the thread', async () => {
    pool = new WorkerPool({ file, threads: 1, tasksPerThread: 1, workerData: {} });
    await pool.ready;
    await expect(pool.run({ fail: 'bad input' })).rejects.toMatchObject({ message: 'bad input', name: 'TypeError' });
    await expect(pool.run<Echo>({ echo: 'after' })).resolves.toMatchObject({ echo: 'after' });
    expect(pool.restarts).toBe(0);
  });

  it('fails the tasks a dying thread held, replaces the thread and runs what waited', async () => {
    pool = new WorkerPool({ file, threads: 1, tasksPerThread: 2, workerData: {} });
    const first = (await pool.ready)[0]!.threadId;
    const dying = pool.run({ die: true });
    const held = pool.run({ echo: 'held' });
    const waiting = pool.run<Echo>({ echo: 'waiting' });
    await expect(dying).rejects.toThrow(/exited with code 3/);
    await expect(held).rejects.toThrow(/exited with code 3/);
    const result = await waiting;
    expect(result.echo).toBe('waiting');
    expect(result.threadId).not.toBe(first);
    expect(pool.restarts).toBe(1);
  });

  it('does not start when a thread fails to start, and fails what was sent', async () => {
    pool = new WorkerPool({ file, threads: 2, tasksPerThread: 1, workerData: { failStart: true } });
    const task = pool.run({ echo: 'never' });
    await expect(pool.ready).rejects.toThrow('no model here');
    await expect(task).rejects.toThrow();
    expect(pool.restarts).toBe(0);
  });

  it('closes only after the tasks it holds and queues have finished', async () => {
    pool = new WorkerPool({ file, threads: 1, tasksPerThread: 1, workerData: {} });
    await pool.ready;
    const runs = [pool.run<Echo>({ echo: 1, wait: 50 }), pool.run<Echo>({ echo: 2, wait: 10 })];
    let closed = false;
    const closing = pool.close().then(() => (closed = true));
    await expect(pool.run({ echo: 3 })).rejects.toThrow(/closed/);
    expect((await runs[0]!).echo).toBe(1);
    expect(closed).toBe(false);
    expect((await runs[1]!).echo).toBe(2);
    await closing;
    expect(closed).toBe(true);
    pool = undefined;
  });

  it('has every thread release its sessions before it is ended', async () => {
    const releasedFile = join(mkdtempSync(join(tmpdir(), 'onnx-gateway-pool-')), 'released');
    pool = new WorkerPool({ file, threads: 3, tasksPerThread: 1, workerData: { releasedFile } });
    const threads = (await pool.ready).map((report) => report.threadId);
    await pool.close();
    pool = undefined;
    expect(readFileSync(releasedFile, 'utf8').trim().split('\n').map(Number).sort()).toEqual(threads.sort());
  });
});

describe('WorkerPool rebalance', () => {
  it('moves a task waiting behind a long one to a thread that ran dry, and copies what it sends to wait', async () => {
    pool = new WorkerPool({ file, threads: 2, tasksPerThread: 2, workerData: {}, rebalance: true });
    await pool.ready;
    const order: string[] = [];
    const run = (echo: string, wait: number, values = new Float32Array(0)) =>
      pool!.run<Echo>({ echo, wait, values }, [values.buffer]).then((result) => {
        order.push(echo);
        return result;
      });
    // long and short go to a thread each; behind-long waits behind long, behind-short behind short.
    const longValues = Float32Array.of(1);
    const queuedValues = Float32Array.of(2, 3);
    const long = run('long', 600, longValues);
    const short = run('short', 20);
    const behindLong = run('behind-long', 5, queuedValues);
    const behindShort = run('behind-short', 20);
    // Sent to run at once: handed over; sent to wait: copied, so it can be sent again.
    expect(longValues.length).toBe(0);
    expect(queuedValues.length).toBe(2);
    const results = await Promise.all([long, short, behindLong, behindShort]);
    // The thread of the short ones ran dry and took behind-long over before long ended.
    expect(order).toEqual(['short', 'behind-short', 'behind-long', 'long']);
    expect(results[2].threadId).toBe(results[1].threadId);
    expect(results[2].threadId).not.toBe(results[0].threadId);
    expect(results[2].sum).toBe(5);
  });

  it('leaves a waiting task with its thread without rebalance', async () => {
    pool = new WorkerPool({ file, threads: 2, tasksPerThread: 2, workerData: {} });
    await pool.ready;
    const values = Float32Array.of(2, 3);
    const runs = [
      pool.run<Echo>({ echo: 'long', wait: 200 }),
      pool.run<Echo>({ echo: 'short', wait: 5 }),
      pool.run<Echo>({ echo: 'behind-long', values }, [values.buffer]),
    ];
    expect(values.length).toBe(0);
    const [long, , behindLong] = await Promise.all(runs);
    expect(behindLong!.threadId).toBe(long!.threadId);
  });

  it('answers every task once, with its own result, however the threads take them over', async () => {
    pool = new WorkerPool({ file, threads: 3, tasksPerThread: 2, workerData: {}, rebalance: true });
    await pool.ready;
    for (let round = 0; round < 5; round++) {
      const waits = Array.from({ length: 40 }, (_, i) => ((i * 7 + round * 13) % 11) * 2);
      const results = await Promise.all(
        waits.map((wait, i) => {
          const values = Float32Array.of(i, round);
          return pool!.run<Echo>({ echo: i, wait, values }, [values.buffer]);
        }),
      );
      expect(results.map((r) => r.echo)).toEqual(waits.map((_, i) => i));
      expect(results.map((r) => r.sum)).toEqual(waits.map((_, i) => i + round));
      expect(pool.queueSize).toBe(0);
    }
  });
});
