/**
 * The request logger: lines carry the request id as with fastify's own child, and a request that
 * logs nothing at the server's level makes no pino child.
 */
import Fastify from 'fastify';
import pino from 'pino';
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { requestLoggerFactory } from '../../src/http/request-logger.js';

async function serverAt(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = pino({ level }, stream);
  // Counts children made; pino's children inherit the spy, which calls through on `this`.
  const child = vi.spyOn(logger, 'child');
  const app = Fastify({ loggerInstance: logger, childLoggerFactory: requestLoggerFactory, genReqId: () => 'req-1' });
  app.get('/ok', () => ({ ok: true }));
  app.get('/warns', (request) => {
    request.log.warn({ detail: 7 }, 'something odd');
    request.log.child({ part: 'inner' }).error('from a child');
    return { ok: true };
  });
  await app.ready();
  return { app, lines, children: () => child.mock.calls.length };
}

describe('request logger', () => {
  it('makes no child for a request that logs nothing at the level', async () => {
    const { app, lines, children } = await serverAt('warn');
    const before = children();
    expect((await app.inject({ url: '/ok' })).statusCode).toBe(200);
    expect(children()).toBe(before);
    expect(lines).toEqual([]);
    await app.close();
  });

  it("writes what a request logs with its request id, its own fields and a child's bindings", async () => {
    const { app, lines } = await serverAt('warn');
    expect((await app.inject({ url: '/warns' })).statusCode).toBe(200);
    expect(lines).toMatchObject([
      { level: 40, reqId: 'req-1', detail: 7, msg: 'something odd' },
      { level: 50, reqId: 'req-1', part: 'inner', msg: 'from a child' },
    ]);
    await app.close();
  });

  it("writes fastify's request lines at level info", async () => {
    const { app, lines } = await serverAt('info');
    await app.inject({ url: '/ok' });
    const messages = lines.filter((line) => line.reqId === 'req-1').map((line) => line.msg);
    expect(messages).toEqual(['incoming request', 'request completed']);
    await app.close();
  });
});
