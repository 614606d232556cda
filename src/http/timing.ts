import type { FastifyReply } from 'fastify';
import type { Timings } from '../core/context.js';

/** Server-Timing: where a request's time went (tokenisation, queue, inference), in ms. */
export function setTimingHeaders(reply: FastifyReply, timings: Timings): void {
  reply.header(
    'server-timing',
    `tokenize;dur=${timings.tokenizeMs.toFixed(2)}, queue;dur=${timings.queueMs.toFixed(2)}, inference;dur=${timings.inferenceMs.toFixed(2)}`,
  );
}
