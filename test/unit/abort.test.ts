/**
 * onAbort: every listener of a signal runs once on abort, a removed one never, and the signal itself
 * carries one listener however many are waiting on it.
 */
import { describe, expect, it } from 'vitest';
import { onAbort } from '../../src/abort.js';

describe('onAbort', () => {
  it('calls each listener once when the signal aborts, except those removed', () => {
    const controller = new AbortController();
    const added: unknown[] = [];
    const add = controller.signal.addEventListener.bind(controller.signal);
    controller.signal.addEventListener = (...args: Parameters<typeof add>) => {
      added.push(args[0]);
      add(...args);
    };
    const calls: string[] = [];
    const stops = ['a', 'b', 'c', 'd'].map((name) => onAbort(controller.signal, () => calls.push(name)));
    stops[1]!();
    stops[3]!();
    stops[3]!();
    expect(added).toHaveLength(1);
    controller.abort();
    controller.abort();
    expect(calls).toEqual(['a', 'c']);
    // After the abort, a new listener runs at once and needs no removal.
    onAbort(controller.signal, () => calls.push('late'))();
    expect(calls).toEqual(['a', 'c', 'late']);
  });

  it('keeps the listeners of different signals apart', () => {
    const first = new AbortController();
    const second = new AbortController();
    const calls: string[] = [];
    onAbort(first.signal, () => calls.push('first'));
    onAbort(second.signal, () => calls.push('second'));
    second.abort();
    expect(calls).toEqual(['second']);
    first.abort();
    expect(calls).toEqual(['second', 'first']);
  });

  it('does nothing without a signal', () => {
    let called = false;
    onAbort(undefined, () => (called = true))();
    expect(called).toBe(false);
  });
});
