/**
 * Ollama's `keep_alive`: how long a model stays loaded after its last request. Ollama takes a Go
 * duration string (`5m`, `30s`, `1h30m`, `500ms`), a number of seconds, a negative value for
 * "until the server stops" and 0 for "unload after the request". Its `OLLAMA_KEEP_ALIVE` also
 * takes a whole number of seconds as text (`"-1"`, `"300"`), and so do the setting and the
 * request field here.
 */
import { invalid } from './errors.js';

/** A keep-alive of "never unload". Compare with it, never hand it to setTimeout (which fires at once). */
export const FOREVER = Number.POSITIVE_INFINITY;

/** Milliseconds per unit of Go's time.ParseDuration. */
const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 };
const ELEMENT = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

export const KEEP_ALIVE_SYNTAX =
  'a duration such as "5m", "30s", "1h30m" or "500ms", a number of seconds, a negative number to keep the model loaded, ' +
  'or 0 to unload it after each request';

/**
 * A Go duration string (time.ParseDuration's grammar: a sign, then number-unit pairs; "0" alone)
 * in milliseconds; undefined when it is not one.
 */
export function parseGoDuration(text: string): number | undefined {
  let rest = text;
  let sign = 1;
  if (rest.startsWith('-') || rest.startsWith('+')) {
    sign = rest.startsWith('-') ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === '0') return 0;
  if (rest === '') return undefined;
  let ms = 0;
  ELEMENT.lastIndex = 0;
  while (ELEMENT.lastIndex < rest.length) {
    const match = ELEMENT.exec(rest);
    if (!match) return undefined;
    ms += Number(match[1]) * UNITS[match[2]!]!;
  }
  return sign * ms;
}

/**
 * A keep-alive in milliseconds: FOREVER for a negative value, 0 for "unload after each request";
 * undefined when the value is none of Ollama's forms.
 */
export function parseKeepAlive(value: unknown): number | undefined {
  let ms: number | undefined;
  if (typeof value === 'number') ms = Number.isFinite(value) ? value * 1000 : undefined;
  else if (typeof value === 'string') {
    const text = value.trim();
    ms = /^[-+]?\d+(\.\d+)?$/.test(text) ? Number(text) * 1000 : parseGoDuration(text);
  }
  if (ms === undefined) return undefined;
  if (ms < 0) return FOREVER;
  return ms === 0 ? 0 : ms; // -0 too
}

/** A request's `keep_alive` (absent stays absent); a malformed one is a 400 that names the field. */
export function keepAliveOf(value: string | number | undefined, param = 'keep_alive'): number | undefined {
  if (value === undefined) return undefined;
  const ms = parseKeepAlive(value);
  if (ms === undefined) throw invalid(param, `${param} must be ${KEEP_ALIVE_SYNTAX}; got ${JSON.stringify(value)}.`);
  return ms;
}
