/**
 * Admission of image edits: each holds its decoded images in memory, so at most `concurrency` are
 * processed at once and up to `waitingCapacity` more wait in arrival order; beyond that an edit is
 * refused with `overloaded`. A waiting edit whose client goes away leaves the line.
 */
import { onAbort } from '../abort.js';
import { ApiError } from '../errors.js';

export interface AdmissionLimits {
  /** Edits processed at once. */
  concurrency: number;
  /** Edits waiting for their turn before new ones are refused. */
  waitingCapacity: number;
}

interface Waiter {
  start: () => void;
  fail: (error: ApiError) => void;
}

export class EditAdmission {
  private processing = 0;
  private readonly waiting: Waiter[] = [];

  constructor(private readonly limits: AdmissionLimits) {}

  /** Edits being processed now. */
  get running(): number {
    return this.processing;
  }

  /** Waits for an edit's turn; call the returned function when the edit is done. */
  admit(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(new ApiError('client_closed'));
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.processing -= 1;
      this.waiting.shift()?.start();
    };
    if (this.processing < this.limits.concurrency) {
      this.processing += 1;
      return Promise.resolve(release);
    }
    if (this.waiting.length >= this.limits.waitingCapacity) {
      return Promise.reject(
        new ApiError('overloaded', `${this.waiting.length} image edits are waiting already; retry later.`, {
          retryAfterSeconds: 10,
        }),
      );
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        start: () => {
          stopListening();
          this.processing += 1;
          resolve(release);
        },
        fail: reject,
      };
      this.waiting.push(waiter);
      const stopListening = onAbort(signal, () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(new ApiError('client_closed'));
      });
    });
  }

  /** Refuses the edits still waiting: the server is going down. */
  close(): void {
    for (const waiter of this.waiting.splice(0)) waiter.fail(new ApiError('shutting_down'));
  }
}
