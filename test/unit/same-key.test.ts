/**
 * The API key compare: equal only for the same string, whatever the lengths of the two.
 */
import { describe, expect, it } from 'vitest';
import { sameKey } from '../../src/http/auth.js';

describe('sameKey', () => {
  it('accepts the key itself and nothing else', () => {
    const key = 'sk-3f9a2c7e1b';
    expect(sameKey(key, key)).toBe(true);
    expect(sameKey(`${key}`.slice(0), key)).toBe(true);
    for (const presented of [
      '',
      's',
      'sk-3f9a2c7e1',
      'sk-3f9a2c7e1b0',
      'sk-3f9a2c7e1B',
      'Sk-3f9a2c7e1b',
      'sk-3f9a2c7e1bsk-3f9a2c7e1b',
      'ßk-3f9a2c7e1b',
      key.repeat(3),
    ]) {
      expect(sameKey(presented, key), presented).toBe(false);
    }
  });

  it('tells apart a key repeated from the key, and unicode from its look-alikes', () => {
    expect(sameKey('abab', 'ab')).toBe(false);
    expect(sameKey('ab', 'abab')).toBe(false);
    expect(sameKey('clé-😀', 'clé-😀')).toBe(true);
    expect(sameKey('cle\u0301-😀', 'clé-😀')).toBe(false);
  });
});
