/**
 * `request.clientSignal`: aborts when the client goes away before its answer is written, so queued
 * work for it is dropped. Not fastify's `request.clientSignal`, which listens to the request's 'close':
 * Node emits that once the body has been read, client still there, so a handler that asks for the
 * signal before that event (any handler reached without an async hook in between) is aborted at
 * once. The response's 'close' before it has finished is the client leaving.
 */
import type { ServerResponse } from 'node:http';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** Aborts when the connection closes before the response is written. Created on first use. */
    readonly clientSignal: AbortSignal;
  }
}

const responses = new WeakMap<object, ServerResponse>();
const signals = new WeakMap<object, AbortSignal>();

export const clientSignal = fp(
  async (app) => {
    app.addHook('onRequest', (request, reply, done) => {
      responses.set(request, reply.raw);
      done();
    });
    app.decorateRequest('clientSignal', {
      getter() {
        let signal = signals.get(this);
        if (signal) return signal;
        const controller = new AbortController();
        signal = controller.signal;
        signals.set(this, signal);
        const response = responses.get(this);
        if (response?.writableFinished === false) {
          if (response.destroyed) controller.abort();
          else response.once('close', () => {
            if (!response.writableFinished) controller.abort();
          });
        }
        return signal;
      },
    });
  },
  { name: 'client-signal' },
);
