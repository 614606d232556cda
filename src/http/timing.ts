/**
 * Where a request's time went, in ms by phase: one record a route reports once. The Server-Timing
 * header is written from it and the metrics count it (from the record, never from the header);
 * clients of a running server, the bench, read the header back with parseServerTiming.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Timings } from '../core/context.js';
import type { EditResult } from '../images/edit.js';
import type { ImageLoadTimings } from './image-sources.js';

/**
 * Every phase a route may report, in the order the header lists them. A request with images also
 * reports `parse` (its JSON body parsed), `base64` (its images' base64 to bytes), `header` (their
 * headers checked), all on the main thread, and `preprocess` (their decoding and preprocessing in
 * the vision tower's workers, summed over the batches that held them, as inference is).
 */
export const phases = [
  'parse',
  'base64',
  'header',
  'tokenize',
  'load',
  'queue',
  'decode',
  'preprocess',
  'edit',
  'inference',
  'encode',
] as const;
export type Phase = (typeof phases)[number];
export type PhaseTimings = Partial<Record<Phase, number>>;

declare module 'fastify' {
  interface FastifyRequest {
    /** What the route reported with reportTimings; null for routes that report none. */
    timings: PhaseTimings | null;
  }
}

/**
 * Embed, rerank and the compatibility routes over them: tokenise, queue (longest wait), inference (summed over
 * batches), and load (the part of the queue's wait the model spent loading) where the request waited for one.
 */
export function operationPhases({ tokenizeMs, loadMs, queueMs, inferenceMs, preprocessMs }: Timings): PhaseTimings {
  const timings: PhaseTimings =
    loadMs > 0
      ? { tokenize: tokenizeMs, load: loadMs, queue: queueMs, inference: inferenceMs }
      : { tokenize: tokenizeMs, queue: queueMs, inference: inferenceMs };
  if (preprocessMs !== undefined) timings.preprocess = preprocessMs;
  return timings;
}

/** The main thread's part of a request with images: its body parsed, its images' base64 decoded and headers checked. */
export function imagePhases(request: FastifyRequest, images: ImageLoadTimings | undefined): PhaseTimings {
  if (!images) return {};
  return {
    ...(request.parseMs !== null ? { parse: request.parseMs } : {}),
    base64: images.base64Ms,
    header: images.headerMs,
  };
}

/** An image edit: decoding the inputs, the pipelines' whole run, the model runs within it, encoding. */
export function editPhases({ decodeMs, runMs, inferenceMs, encodeMs }: EditResult['timings']): PhaseTimings {
  return { decode: decodeMs, edit: runMs, inference: inferenceMs, encode: encodeMs };
}

export function reportTimings(reply: FastifyReply, timings: PhaseTimings): void {
  reply.request.timings = timings;
  reply.header('server-timing', formatServerTiming(timings));
}

/** `tokenize;dur=1.20, queue;dur=0.10, inference;dur=8.50` */
export function formatServerTiming(timings: PhaseTimings): string {
  // Written on every response: a plain loop, no arrays.
  let header = '';
  for (const phase of phases) {
    const ms = timings[phase];
    if (ms !== undefined) header += `${header ? ', ' : ''}${phase};dur=${ms.toFixed(2)}`;
  }
  return header;
}

/** The phases of a Server-Timing header this server wrote; entries it does not know are left out. */
export function parseServerTiming(header: string | null | undefined): PhaseTimings {
  const timings: PhaseTimings = {};
  for (const entry of (header ?? '').split(',')) {
    const [name, ...params] = entry.trim().split(';');
    const duration = params.find((param) => param.trim().startsWith('dur='));
    if (duration && (phases as readonly string[]).includes(name!))
      timings[name as Phase] = Number(duration.trim().slice('dur='.length));
  }
  return timings;
}
