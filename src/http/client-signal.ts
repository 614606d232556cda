/**
 * `request.clientSignal`: aborts when the client goes away before its answer is written, so queued
 * work for it is dropped. Not fastify's `request.signal`, which listens to the request's 'close':
 * Node emits that once the body has been read, client still there, so a handler that asks for the
 * signal before that event (any handler reached without an async hook in between) is aborted at
 * once.
 *
 * The signal is the connection's: it aborts when the socket closes, which before an answer is
 * written is the client leaving (requests of one keep-alive connection come one after another, so
 * they share it). One per connection rather than per request: an AbortController costs more than
 * the rest of a small request's routing.
 */
import type { Socket } from 'node:net';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** Aborts when the client's connection closes. Created on first use, once per connection. */
    readonly clientSignal: AbortSignal;
  }
}

const signals = new WeakMap<Socket, AbortSignal>();
/** For a request without a socket of its own (an injected one): never aborts. */
const never = new AbortController().signal;

export const clientSignal = fp(
  async (app) => {
    app.decorateRequest('clientSignal', {
      getter() {
        const socket = this.raw.socket as Socket | null | undefined;
        if (!socket || typeof socket.once !== 'function') return never;
        let signal = signals.get(socket);
        if (signal) return signal;
        const controller = new AbortController();
        signal = controller.signal;
        signals.set(socket, signal);
        if (socket.destroyed) controller.abort();
        else socket.once('close', () => controller.abort());
        return signal;
      },
    });
  },
  { name: 'client-signal' },
);
