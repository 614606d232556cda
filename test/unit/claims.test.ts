import { describe, expect, it } from 'vitest';
import { claimFree, claimQueued, claimStarted, claimTaken, startClaimed } from '../../src/worker/claims.js';

describe('startClaimed', () => {
  const cells = () => new Int32Array(new SharedArrayBuffer(8));

  it('starts a task sent without a claim', () => {
    expect(startClaimed(undefined, undefined)).toBe(true);
    expect(startClaimed(cells(), undefined)).toBe(true);
  });

  it('starts a queued task and marks it started, so the pool can no longer take it', () => {
    const claims = cells();
    Atomics.store(claims, 1, claimQueued);
    expect(startClaimed(claims, 1)).toBe(true);
    expect(Atomics.load(claims, 1)).toBe(claimStarted);
    expect(Atomics.compareExchange(claims, 1, claimQueued, claimTaken)).toBe(claimStarted);
    expect(Atomics.load(claims, 0)).toBe(claimFree);
  });

  it('skips a task the pool took back and frees its cell', () => {
    const claims = cells();
    Atomics.store(claims, 0, claimQueued);
    expect(Atomics.compareExchange(claims, 0, claimQueued, claimTaken)).toBe(claimQueued);
    expect(startClaimed(claims, 0)).toBe(false);
    expect(Atomics.load(claims, 0)).toBe(claimFree);
  });
});
