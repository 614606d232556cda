/**
 * `request.clientSignal`: aborts when the client goes away before its answer is written, so queued
 * work for it is dropped, or when the request's work has run longer than the requestTimeout setting.
 * Not fastify's `request.signal`, which listens to the request's 'close': Node emits that once the
 * body has been read, client still there, so a handler that asks for the signal before that event
 * (any handler reached without an async hook in between) is aborted at once.
 *
 * The signal is the connection's: it aborts when the socket closes, which before an answer is
 * written is the client leaving (requests of one keep-alive connection come one after another, so
 * they share it). One per connection rather than per request: an AbortController costs more than
 * the rest of a small request's routing. Only a request timeout makes one per request, for the
 * requests that ask for the signal (those that hand work to the models, the search or the reader).
 */
import type { Socket } from 'node:net';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** Aborts when the client's connection closes, or the request's time is up. Created on first use. */
    readonly clientSignal: AbortSignal;
  }
}

export interface ClientSignalOptions {
  /** How long a request's work may run, from its first use of the signal; 0: as long as it takes. */
  timeoutMs: number;
}

const signals = new WeakMap<Socket, AbortSignal>();
/** Per request, where a timeout is set: the connection's signal or the request's time. */
const deadlines = new WeakMap<FastifyRequest, AbortSignal>();
/** For a request without a socket of its own (an injected one): never aborts. */
const never = new AbortController().signal;

/** Aborts only when the client's connection closes: for work that may run longer than requests do (a pull). */
export function connectionSignal(request: FastifyRequest): AbortSignal {
  const socket = request.raw.socket as Socket | null | undefined;
  if (!socket || typeof socket.once !== 'function') return never;
  let signal = signals.get(socket);
  if (signal) return signal;
  const controller = new AbortController();
  signal = controller.signal;
  signals.set(socket, signal);
  if (socket.destroyed) controller.abort();
  else socket.once('close', () => controller.abort());
  return signal;
}

/** Whether the request's work was stopped because its time was up (not because its client left). */
export function timedOut(request: FastifyRequest): boolean {
  const signal = deadlines.get(request);
  return signal?.aborted === true && (signal.reason as Error | undefined)?.name === 'TimeoutError';
}

export const clientSignal = fp<ClientSignalOptions>(
  async (app, { timeoutMs }) => {
    app.decorateRequest('clientSignal', {
      getter(this: FastifyRequest) {
        const connection = connectionSignal(this);
        if (timeoutMs === 0) return connection;
        let signal = deadlines.get(this);
        if (!signal) {
          signal = AbortSignal.any([connection, AbortSignal.timeout(timeoutMs)]);
          deadlines.set(this, signal);
        }
        return signal;
      },
    });
  },
  { name: 'client-signal' },
);
