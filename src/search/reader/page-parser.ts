/**
 * Runs the reader's conversion of a page (convert.ts) in worker threads, with a time limit. The
 * requester chooses the page, and parsing, Readability and turndown take time that grows with it,
 * faster than linearly for some shapes of page, so none of it runs on the main thread. A page not
 * converted within the limit answers `page_too_complex`; its thread is terminated and a fresh one
 * takes its place for the next page. Threads start with the first page and stay for the next ones.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { onAbort } from '../../abort.js';
import { ApiError } from '../../errors.js';
import type { ConvertedPage } from './convert.js';
import type { ParseReply, ParseTask } from './parse-messages.js';

/** The worker script: beside this file when running the build, else in dist/ (tests run the sources). */
function workerFile(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const beside = join(here, 'parse-worker.js');
  if (existsSync(beside)) return beside;
  const built = join(here, '..', '..', '..', 'dist', 'search', 'reader', 'parse-worker.js');
  if (existsSync(built)) return built;
  throw new Error(`The reader's worker script is missing (${built}): run "npm run build" first.`);
}

export interface PageParserOptions {
  /** Most pages converted at once; more wait for a thread. */
  threads: number;
  /** Longest one page's conversion may take, in ms. */
  timeoutMs: number;
  /** Heap of one thread, in MB: a page that needs more fails like one over the time limit. */
  heapMb?: number;
}

interface Job {
  task: ParseTask;
  signal?: AbortSignal;
  resolve: (page: ConvertedPage) => void;
  reject: (error: Error) => void;
}

interface Thread {
  worker: Worker;
  ready: boolean;
  job?: { job: Job; timer: NodeJS.Timeout; stopListening: () => void };
}

export class PageParser {
  private readonly threads = new Set<Thread>();
  private readonly waiting: Job[] = [];
  private closed = false;
  /** Threads terminated (over the time limit, the client gone) or lost, and so replaced. */
  replaced = 0;

  constructor(private readonly options: PageParserOptions) {}

  convert(task: ParseTask, signal?: AbortSignal): Promise<ConvertedPage> {
    if (this.closed) return Promise.reject(new ApiError('shutting_down'));
    if (signal?.aborted) return Promise.reject(new ApiError('client_closed'));
    return new Promise<ConvertedPage>((resolve, reject) => {
      const job: Job = { task, signal, resolve, reject };
      this.waiting.push(job);
      // A page still waiting for a thread leaves the queue when its client goes.
      const stopWaiting = onAbort(signal, () => {
        const at = this.waiting.indexOf(job);
        if (at >= 0) {
          this.waiting.splice(at, 1);
          reject(new ApiError('client_closed'));
        }
      });
      job.resolve = (page) => (stopWaiting(), resolve(page));
      job.reject = (error) => (stopWaiting(), reject(error));
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) job.reject(new ApiError('shutting_down'));
    const threads = [...this.threads];
    this.threads.clear();
    for (const thread of threads) if (thread.job) this.finish(thread, new ApiError('shutting_down'));
    await Promise.all(threads.map((thread) => thread.worker.terminate()));
  }

  private dispatch(): void {
    if (this.closed) return;
    let starting = 0;
    for (const thread of this.threads) {
      if (!thread.ready) starting++;
      else if (!thread.job && this.waiting.length > 0) this.start(thread, this.waiting.shift()!);
    }
    // Start threads for the pages no starting thread will take, up to the limit.
    for (; this.waiting.length > starting && this.threads.size < this.options.threads; starting++) this.spawn();
  }

  private spawn(): void {
    const heap = this.options.heapMb;
    const worker = new Worker(workerFile(), heap ? { resourceLimits: { maxOldGenerationSizeMb: heap } } : {});
    const thread: Thread = { worker, ready: false };
    this.threads.add(thread);
    worker.on('message', (reply: ParseReply) => this.onReply(thread, reply));
    worker.on('error', (error) => this.onLost(thread, error));
    worker.on('exit', (code) => this.onLost(thread, new Error(`The reader's worker thread exited with code ${code}.`)));
  }

  private start(thread: Thread, job: Job): void {
    const timer = setTimeout(() => {
      this.discard(
        thread,
        new ApiError(
          'page_too_complex',
          `The page took longer than ${this.options.timeoutMs} ms to read; the reader gives up on pages this complex.`,
        ),
      );
    }, this.options.timeoutMs);
    // A page being converted for a client that has gone is not worth the thread's time.
    const stopListening = onAbort(job.signal, () => this.discard(thread, new ApiError('client_closed')));
    thread.job = { job, timer, stopListening };
    thread.worker.ref();
    thread.worker.postMessage(job.task);
  }

  /** Ends the thread's job with `error` (or its page), leaving the thread free. */
  private finish(thread: Thread, outcome: Error | ConvertedPage): void {
    const running = thread.job;
    if (!running) return;
    thread.job = undefined;
    clearTimeout(running.timer);
    running.stopListening();
    // An idle thread does not keep the process alive.
    thread.worker.unref();
    if (outcome instanceof Error) running.job.reject(outcome);
    else running.job.resolve(outcome);
  }

  /** Ends the thread's job with `error` and terminates the thread; a new one is started if pages wait. */
  private discard(thread: Thread, error: Error): void {
    this.finish(thread, error);
    if (!this.threads.delete(thread)) return;
    this.replaced++;
    void thread.worker.terminate();
    this.dispatch();
  }

  private onReply(thread: Thread, reply: ParseReply): void {
    if ('ready' in reply) {
      thread.ready = true;
      thread.worker.unref();
    } else if ('page' in reply) {
      this.finish(thread, reply.page);
    } else {
      // A stack overflow is a page nested too deeply; anything else is a bug.
      this.finish(
        thread,
        reply.error.name === 'RangeError'
          ? new ApiError('page_too_complex', `The page is too complex to read: ${reply.error.message}.`)
          : Object.assign(new Error(reply.error.message), { name: reply.error.name }),
      );
    }
    this.dispatch();
  }

  private onLost(thread: Thread, error: Error): void {
    if (!this.threads.has(thread)) return;
    if (!thread.ready) {
      // A thread that can not even start would fail again: the waiting pages fail instead.
      this.threads.delete(thread);
      for (const job of this.waiting.splice(0)) job.reject(error);
      return;
    }
    const outOfMemory = (error as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
    this.discard(
      thread,
      outOfMemory
        ? new ApiError('page_too_complex', 'The page needs more memory to read than the reader gives one page.')
        : error,
    );
  }
}
