/**
 * Taking back a task that waits in a thread behind the one it runs (engine/worker-pool.ts). Each
 * such task has a cell in memory the pool and the thread share; whichever moves it out of `queued`
 * first has the task: the thread, as the task's turn comes, or the pool, for a thread that has run
 * dry. So a lone request's batches end together instead of one waiting behind another while a
 * session idles.
 */

/** A cell's states. */
export const claimFree = 0;
export const claimQueued = 1;
export const claimStarted = 2;
export const claimTaken = 3;

/**
 * The thread's side, as a task's turn comes: whether it is still the thread's to run. A task the
 * pool took back is skipped, and its cell freed for the pool's next one.
 */
export function startClaimed(cells: Int32Array | undefined, claim: number | undefined): boolean {
  if (claim === undefined || cells === undefined) return true;
  if (Atomics.compareExchange(cells, claim, claimQueued, claimStarted) === claimQueued) return true;
  Atomics.store(cells, claim, claimFree);
  return false;
}
