/**
 * Turns on a device whose sessions may not work at the same time from several threads (devices.ts,
 * `takesTurns`): a lock in memory shared by every thread of the process on that device. A thread
 * waiting for its turn blocks (Atomics.wait): it has nothing else to do meanwhile, and its next task
 * waits in its message queue as it would behind a running one.
 */
export class DeviceLock {
  private readonly cell: Int32Array;

  constructor(shared: SharedArrayBuffer) {
    this.cell = new Int32Array(shared);
  }

  /** Runs `step` in this thread's turn. */
  async hold<T>(step: () => Promise<T>): Promise<T> {
    while (Atomics.compareExchange(this.cell, 0, 0, 1) !== 0) Atomics.wait(this.cell, 0, 1);
    try {
      return await step();
    } finally {
      Atomics.store(this.cell, 0, 0);
      Atomics.notify(this.cell, 0, 1);
    }
  }
}

/** Runs steps at once: a device whose sessions need no turns. */
export const noLock = { hold: <T>(step: () => Promise<T>): Promise<T> => step() };
