/**
 * The envelopes between the worker pool and its threads (engine/worker-pool.ts). What a task and
 * its result hold is the lane's business: protocol.ts for text, image-protocol.ts for images.
 */

/** A task for a thread, answered by a ThreadMessage with the same id. */
export interface TaskMessage {
  id: number;
  task: unknown;
}

/** The pool ends the thread: it releases its sessions first, and says `closed`. */
export interface CloseMessage {
  close: true;
}

export type ThreadMessage =
  /** A thread's sessions are open and warm; `ready` is its report. */
  | { ready: unknown }
  /** A thread could not start (a model that does not open, say): the pool does not start. */
  | { failed: string }
  /** The thread's sessions are released: it may be ended. */
  | { closed: true }
  | { id: number; result: unknown }
  | { id: number; error: string; name?: string };
