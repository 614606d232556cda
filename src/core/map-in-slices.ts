/**
 * Tokenising many texts without holding the event loop: the work is cut into slices of a few
 * milliseconds with a yield between them, so a 2,000-input request does not stall other requests.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { ApiError } from '../errors.js';

const sliceMs = 4;

export async function mapInSlices<T, R>(
  items: readonly T[],
  fn: (item: T, index: number) => R,
  signal?: AbortSignal,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let sliceStart = performance.now();
  for (let i = 0; i < items.length; i++) {
    results[i] = fn(items[i]!, i);
    if (performance.now() - sliceStart > sliceMs && i + 1 < items.length) {
      await yieldToEventLoop();
      if (signal?.aborted) throw new ApiError('client_closed');
      sliceStart = performance.now();
    }
  }
  return results;
}
