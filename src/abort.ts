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
  let waiting = listeners.get(signal);
  if (!waiting) {
    const set = new Set<() => void>();
    waiting = set;
    listeners.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        listeners.delete(signal);
        for (const call of set) {
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
  }
  const set = waiting;
  set.add(listener);
  return () => {
    set.delete(listener);
  };
}
