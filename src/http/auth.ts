/**
 * Bearer-key auth for the API routes. The presented key is compared with every configured key in a
 * time that depends on the presented key's length only, so neither a key's content nor its length
 * leaks through timing. The accepted key's SHA-256 digest is kept on the request: routes that keep
 * things per key (search tasks) read it there instead of parsing the header again.
 *
 * Admin keys are API keys that may also manage the server (pull, load and unload models): a route
 * that does so runs `requireAdmin` as its own onRequest hook, after this plugin's. Index write keys
 * (and admin keys) may also change the local search index: its write routes run `requireIndexWrite`.
 * With no keys at all the server listens on loopback only (config.ts) and every request is an
 * admin's, as every request to Ollama is.
 */
import { hash } from 'node:crypto';
import type { onRequestHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** SHA-256 (hex) of the API key the request was let in with; null when the server has no keys. */
    apiKeyDigest: string | null;
    /** Whether the request may manage the server: it sent an admin key, or the server has no keys. */
    isAdmin: boolean;
    /** Whether the request may change the local index: an index write key or an admin's. */
    mayWriteIndex: boolean;
  }
}

/**
 * Whether `presented` is `key`: every code unit of `presented` is compared, with no early exit, and
 * the lengths are folded in. Hashing the presented key to compare digests with timingSafeEqual did
 * the same at 15-25 µs of main thread per request on a busy server; this takes well under one.
 */
export function sameKey(presented: string, key: string): boolean {
  let difference = presented.length ^ key.length;
  for (let i = 0; i < presented.length; i++) difference |= presented.charCodeAt(i) ^ key.charCodeAt(i % key.length);
  return difference === 0;
}

/**
 * A plugin without a context of its own (fastify-plugin), so its hook and its request decoration
 * apply to the routes registered beside it.
 */
export const apiKeyAuth = fp<{ keys: string[]; adminKeys: string[]; indexWriteKeys?: string[] }>(
  async (app, { keys, adminKeys, indexWriteKeys = [] }) => {
    app.decorateRequest('apiKeyDigest', null);
    app.decorateRequest('isAdmin', keys.length === 0);
    app.decorateRequest('mayWriteIndex', keys.length === 0);
    if (keys.length === 0) return;
    const known = [...new Set([...keys, ...adminKeys, ...indexWriteKeys])].map((key) => ({
      key,
      digest: hash('sha256', key, 'hex'),
      admin: adminKeys.includes(key),
      indexWriter: adminKeys.includes(key) || indexWriteKeys.includes(key),
    }));
    app.addHook('onRequest', (request, _reply, done) => {
      const header = request.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
      if (!match) return done(new ApiError('unauthorized'));
      const presented = match[1]!;
      let accepted: (typeof known)[number] | null = null;
      for (const entry of known) if (sameKey(presented, entry.key)) accepted = entry;
      if (accepted === null) return done(new ApiError('unauthorized', 'The API key is not valid.'));
      request.apiKeyDigest = accepted.digest;
      request.isAdmin = accepted.admin;
      request.mayWriteIndex = accepted.indexWriter;
      done();
    });
  },
  { name: 'api-key-auth' },
);

/**
 * The onRequest hook of a route that manages the server: a key that is not an admin key gets 403
 * `forbidden` before its body is read or validated.
 */
export const requireAdmin: onRequestHookHandler = (request, _reply, done) => {
  if (request.isAdmin) return done();
  done(
    new ApiError(
      'forbidden',
      'This route manages the server: it needs an admin key (ONNX_GATEWAY_ADMIN_KEYS), and the key sent is not one.',
    ),
  );
};

/** The onRequest hook of a route that changes the local index: other keys get 403 `forbidden` before the body is read. */
export const requireIndexWrite: onRequestHookHandler = (request, _reply, done) => {
  if (request.mayWriteIndex) return done();
  done(
    new ApiError(
      'forbidden',
      'Changing the local index needs a key with write rights (ONNX_GATEWAY_INDEX_WRITE_KEYS, or an admin key); every key may search it.',
    ),
  );
};
