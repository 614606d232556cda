/**
 * Listening to a cancellation: a request's signal (the client went away) or a task's.
 */

/**
 * The listeners of each signal, behind one listener of its own on the signal. An AbortSignal is an
 * EventTarget, and adding and removing a listener there costs more than the rest of queueing a
 * small request; a request's signal is its connection's (http/client-signal.ts), so one listener
 * serves every request of the connection.
 */
const listeners = new WeakMap<AbortSignal, Set<() => void>>();
const nothing = (): void => undefined;

/** The listeners waiting on `signal`, the one listener on the signal itself added with the first. */
function listenersOf(signal: AbortSignal): Set<() => void> {
  const known = listeners.get(signal);
  if (known) return known;
  const waiting = new Set<() => void>();
  listeners.set(signal, waiting);
  signal.addEventListener(
    'abort',
    () => {
      listeners.delete(signal);
      for (const call of waiting) {
        // As an EventTarget does: one listener's error does not keep the others from running.
        try {
          call();
        } catch (error) {
          queueMicrotask(() => {
            throw error;
          });
        }
      }
    },
    { once: true },
  );
  return waiting;
}

/**
 * Calls `listener` once when `signal` aborts, at once if it already has. Returns the function that
 * stops listening, for when the work finishes first (a listener left behind keeps its closure alive
 * as long as the signal).
 */
export function onAbort(signal: AbortSignal | undefined, listener: () => void): () => void {
  if (!signal) return nothing;
  if (signal.aborted) {
    listener();
    return nothing;
  }
  const waiting = listenersOf(signal);
  waiting.add(listener);
  return () => {
    waiting.delete(listener);
  };
}
