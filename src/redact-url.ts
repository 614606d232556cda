/**
 * A URL as messages and logs may show it: the credentials it may carry (a Redis password, a
 * SearXNG behind basic auth) replaced, the rest kept so that an operator knows which server it is.
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username) parsed.username = '***';
    if (parsed.password) parsed.password = '***';
    return parsed.href;
  } catch {
    return 'the configured URL';
  }
}
