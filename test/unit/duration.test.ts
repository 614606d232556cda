/**
 * Ollama's keep_alive values: Go duration strings, numbers of seconds, negative for forever, 0 for
 * at once; anything else refused with a message that names the field.
 */
import { describe, expect, it } from 'vitest';
import { FOREVER, keepAliveOf, parseGoDuration, parseKeepAlive } from '../../src/duration.js';
import { ApiError } from '../../src/errors.js';

describe('parseGoDuration', () => {
  it.each([
    ['5m', 300_000],
    ['30s', 30_000],
    ['1h30m', 5_400_000],
    ['500ms', 500],
    ['1.5h', 5_400_000],
    ['.5s', 500],
    ['2us', 0.002],
    ['3µs', 0.003],
    ['1m30s250ms', 90_250],
    ['-1m', -60_000],
    ['+10s', 10_000],
    ['0', 0],
  ])('reads %s as time.ParseDuration does', (text, ms) => {
    expect(parseGoDuration(text)).toBeCloseTo(ms, 9);
  });

  it.each(['', '5', '5 m', 'm', '1.s5', '5min', '1h 30m', '--1s', '.s', '1d'])('refuses %j', (text) => {
    expect(parseGoDuration(text)).toBeUndefined();
  });
});

describe('parseKeepAlive', () => {
  it('takes numbers and numeric text as seconds, negative as forever and 0 as at once', () => {
    expect(parseKeepAlive(300)).toBe(300_000);
    expect(parseKeepAlive(0.5)).toBe(500);
    expect(parseKeepAlive('300')).toBe(300_000);
    expect(parseKeepAlive(' 5m ')).toBe(300_000);
    for (const forever of [-1, '-1', '-5m', -0.5]) expect(parseKeepAlive(forever)).toBe(FOREVER);
    for (const atOnce of [0, '0', '-0', '0s']) expect(Object.is(parseKeepAlive(atOnce), 0)).toBe(true);
  });

  it('refuses what is no duration', () => {
    for (const value of ['soon', '5 minutes', '', NaN, Infinity, true, null, {}])
      expect(parseKeepAlive(value)).toBeUndefined();
  });
});

describe('keepAliveOf', () => {
  it('leaves an absent value absent and reads the others', () => {
    expect(keepAliveOf(undefined)).toBeUndefined();
    expect(keepAliveOf('1h')).toBe(3_600_000);
    expect(keepAliveOf(-1)).toBe(FOREVER);
  });

  it('refuses a malformed value with a 400 that names the field', () => {
    const error = (() => {
      try {
        keepAliveOf('tomorrow');
      } catch (thrown) {
        return thrown;
      }
    })();
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 400, code: 'invalid_request', param: 'keep_alive' });
    expect((error as Error).message).toMatch(/^keep_alive must be a duration such as "5m".*; got "tomorrow"\.$/);
  });
});
