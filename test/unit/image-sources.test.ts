/**
 * Images sent as text (data URIs, bare base64) to bytes: http/image-sources.ts decodes base64 first
 * and checks it by the length of what it decoded, instead of scanning a photo's megabyte of text
 * with a pattern before. It must take and refuse exactly what the pattern took and refused: held
 * here to that definition (the pattern, line breaks stripped, then Node's decoder).
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { decodeImageText } from '../../src/http/image-sources.js';

/** What a text decodes to by the pattern's definition; null: refused. */
function byPattern(text: string): Uint8Array | null {
  const plain = text.replace(/\s+/g, '');
  if (plain.length === 0 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(plain) || plain.length % 4 === 1) return null;
  return new Uint8Array(Buffer.from(plain, 'base64'));
}

function decoded(text: string): Uint8Array | null {
  try {
    return decodeImageText(text, 'input[0]');
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe('invalid_image');
    return null;
  }
}

const base64Chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_';
// Mostly base64, with what makes a text not base64 (or base64 with line breaks) now and then.
const character = fc.oneof(
  { weight: 30, arbitrary: fc.constantFrom(...base64Chars) },
  { weight: 1, arbitrary: fc.constantFrom('=', ' ', '\n', '\r\n', '\t', '.', '*', '"', '\u0000', 'é', '😀', '\u2028') },
);

it('takes and refuses what the pattern does, with the same bytes', () => {
  fc.assert(
    fc.property(
      fc.array(character, { maxLength: 64 }).map((chars) => chars.join('')),
      fc.constantFrom('', '=', '=='),
      (body, padding) => {
        const text = body + padding;
        expect(decoded(text)).toEqual(byPattern(text));
        expect(decoded(`data:image/png;base64,${text}`)).toEqual(byPattern(text));
      },
    ),
    { numRuns: 2000 },
  );
});

it('decodes real base64 of every length and refuses it with anything spliced in', () => {
  const bytes = Uint8Array.from({ length: 64 }, (_, i) => (i * 37 + 11) & 0xff);
  for (let n = 1; n <= bytes.length; n++) {
    const sent = bytes.subarray(0, n);
    const padded = Buffer.from(sent).toString('base64');
    const urlSafe = Buffer.from(sent).toString('base64url');
    expect(decoded(padded)).toEqual(sent);
    expect(decoded(urlSafe)).toEqual(sent);
    expect(decoded(padded.replace(/(.{8})/g, '$1\n'))).toEqual(sent);
    for (const junk of ['*', '=', 'é', '\u0000', '😀']) {
      for (const at of [0, 1, padded.length >> 1, padded.length - 1]) {
        const text = padded.slice(0, at) + junk + padded.slice(at);
        expect(decoded(text), JSON.stringify(text)).toEqual(byPattern(text));
      }
    }
  }
  expect(decoded('==')).toBeNull();
  expect(decoded('QQ===')).toBeNull();
  expect(decoded('QUJDQ')).toBeNull();
  expect(decoded('')).toBeNull();
});
