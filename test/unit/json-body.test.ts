/**
 * JSON bodies (http/json-body.ts): a large body's long string values are lifted out of the raw bytes
 * before JSON.parse and put back after it. Whatever the body, the parsed value and every error must
 * be what fastify's own parser gives for the same bytes.
 */
import fastify, { type FastifyInstance } from 'fastify';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liftLongStrings, parseJsonBodies } from '../../src/http/json-body.js';

let ours: FastifyInstance;
let theirs: FastifyInstance;

async function echo(withOurs: boolean): Promise<FastifyInstance> {
  const app = fastify({ bodyLimit: 8 * 1024 * 1024 });
  if (withOurs) parseJsonBodies(app);
  app.post('/echo', async (request) => ({ body: request.body }));
  await app.ready();
  return app;
}

beforeAll(async () => {
  [ours, theirs] = await Promise.all([echo(true), echo(false)]);
});
afterAll(async () => {
  await Promise.all([ours.close(), theirs.close()]);
});

const post = (app: FastifyInstance, payload: string | Buffer) =>
  app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload });

/** Base64 as a photo's data URI holds it; enough of it to make any body large. */
const base64 = Buffer.from(Array.from({ length: 60_000 }, (_, i) => (i * 7919) % 251)).toString('base64');
const dataUri = `data:image/jpeg;base64,${base64}`;

/** Long strings of characters that JSON must escape or that are not ASCII, beside plain ones. */
const longString = fc
  .array(fc.constantFrom('A', 'z', '/', '+', '=', ' ', '"', '\\', 'é', '\u0001', '\u007f', '\u2028', '😀'), {
    minLength: 1,
    maxLength: 6,
  })
  .map((chars) => chars.join('').repeat(Math.ceil(4500 / chars.join('').length)));

describe('JSON bodies with long strings lifted out', () => {
  it("parse to what fastify's parser gives, whatever the strings, keys and layout", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.jsonValue({ maxDepth: 3 }),
        fc.array(longString, { maxLength: 3 }),
        fc.constantFrom(undefined, 0, 2, '\t'),
        fc.boolean(),
        async (value, longs, indent, longKey) => {
          const document = {
            input: [dataUri, ...longs, { type: 'image_url', image_url: { url: dataUri } }],
            value,
            ...(longKey ? { [longs[0] ?? base64.slice(0, 5000)]: 'a long key is never lifted' } : {}),
            last: dataUri.slice(0, 4096),
          };
          const text = JSON.stringify(document, null, indent);
          const [mine, fastifys] = await Promise.all([post(ours, Buffer.from(text)), post(theirs, Buffer.from(text))]);
          // fastify refuses a `__proto__` or `constructor` key, which the drawn values may hold.
          expect(mine.statusCode).toBe(fastifys.statusCode);
          expect(mine.json()).toEqual(fastifys.json());
          if (mine.statusCode === 200) expect(mine.json<{ body: unknown }>().body).toEqual(JSON.parse(text));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('lifts the long printable values only, and leaves keys, escapes and short strings in place', () => {
    const text = `{"a" : "${base64}", "${base64.slice(0, 5000)}"\n: 1, "b": ["${base64.slice(0, 4095)}", "${'\\u0041'.repeat(2000)}", "${base64}"]}`;
    const lifted = liftLongStrings(Buffer.from(text))!;
    expect(lifted.strings).toEqual([base64, base64]);
    expect(lifted.text.length).toBeLessThan(text.length - 2 * base64.length + 200);
    expect(liftLongStrings(Buffer.from(`{"a": "${base64}`))).toBeUndefined();
  });

  it('lifts a value only when every byte of it is printable ASCII, wherever the bytes lie', () => {
    // The check reads four bytes at a time from a word boundary: a byte out of range at any place
    // of a word, before the first word and after the last, in a Buffer at any offset of its memory.
    const value = Buffer.from(base64.slice(0, 4099));
    const backing = Buffer.alloc(value.length + 32);
    for (const offset of [0, 1, 2, 3]) {
      for (const at of [0, 1, 2, 3, 4, 5, 6, 7, 2048, 2049, 2050, 2051, 4095, 4096, 4097, 4098]) {
        for (const byte of [0x00, 0x0a, 0x1f, 0x7f, 0x80, 0xc3, 0xff, 0x20, 0x7e]) {
          const body = backing.subarray(offset, offset + value.length + 2);
          body[0] = body[value.length + 1] = 0x22;
          value.copy(body, 1);
          body[1 + at] = byte;
          const lifted = liftLongStrings(body);
          if (byte === 0x20 || byte === 0x7e)
            expect(lifted?.strings).toEqual([body.toString('latin1', 1, value.length + 1)]);
          else expect(lifted, `byte ${byte} at ${at}, offset ${offset}`).toBeUndefined();
        }
      }
    }
  });

  it('refuses what fastify refuses, with the same message', async () => {
    const bodies = [
      `{"input": "${base64}", }`,
      `{"input": "${base64}"`,
      `{"input": "${base64}" "x"}`,
      `{"input": x"${base64}"}`,
      `{"input": "${base64}\u0001"}`,
      `{"__proto__": {"polluted": true}, "input": "${base64}"}`,
      `{"constructor": {"prototype": {"polluted": true}}, "input": "${base64}"}`,
      `["${base64}"]]`,
    ];
    for (const body of bodies) {
      const [mine, fastifys] = await Promise.all([post(ours, body), post(theirs, body)]);
      expect(mine.statusCode, body.slice(0, 40)).toBe(fastifys.statusCode);
      expect(mine.statusCode).toBe(400);
      expect(mine.json<{ message: string }>().message).toBe(fastifys.json<{ message: string }>().message);
    }
  });

  it('reads a body that is one long string, and bodies with a byte order mark', async () => {
    for (const text of [`"${base64}"`, `\ufeff{"input": "${base64}"}`]) {
      const [mine, fastifys] = await Promise.all([post(ours, Buffer.from(text)), post(theirs, Buffer.from(text))]);
      expect(mine.statusCode).toBe(fastifys.statusCode);
      expect(mine.json()).toEqual(fastifys.json());
    }
  });
});
