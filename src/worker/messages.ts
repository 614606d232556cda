/**
 * The envelopes between the worker pool and its threads (engine/worker-pool.ts). What a task and
 * its result hold is the lane's business: protocol.ts for text, image-protocol.ts for images.
 */

/**
 * A task for a thread, answered by a ThreadMessage with the same id. One sent to wait behind
 * another has a `claim`: its cell in the thread's claims, which the pool may take it back by
 * (claims.ts); the thread then skips it and answers nothing.
 */
export interface TaskMessage {
  id: number;
  task: unknown;
  claim?: number;
}

/** The thread's claim cells (claims.ts), sent once before any task. */
export interface ClaimsMessage {
  claims: Int32Array;
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
