/**
 * Who may address the server, and which web pages may call it.
 *
 * Without API keys the server listens on loopback, but a browser on the same machine is a client
 * too: a page that rebinds its own name to 127.0.0.1 (DNS rebinding) sends requests with its name
 * in `Host`, and a page may POST a form or multipart body cross-origin without a preflight. So a
 * keyless server answers only requests addressed to a loopback name or address (or a name in
 * `allowedHosts`), and refuses browser requests whose `Origin` is another site.
 *
 * With keys, the key is what admits a request. Browsers may call the API only from the origins in
 * `corsOrigins` (CORS headers and preflights); with none named, CORS is off.
 */
import fp from 'fastify-plugin';
import { ApiError } from '../errors.js';

export interface HostGuardOptions {
  keys: string[];
  allowedHosts: string[];
  corsOrigins: string[];
}

/** The host name of a `Host` header value or an origin's host: no port, no IPv6 brackets, lower case. */
function hostName(host: string): string {
  const bracketed = /^\[([^\]]*)\]/.exec(host);
  const name = bracketed ? bracketed[1]! : host.replace(/:\d*$/, '');
  return name.toLowerCase().replace(/\.$/, '');
}

function isLoopbackName(name: string): boolean {
  return name === 'localhost' || name === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
}

/** The response headers a browser may read beside the simple ones. */
const exposed = 'x-request-id, server-timing, x-cache-hits, retry-after, x-should-retry';

export const hostGuard = fp<HostGuardOptions>(
  async (app, { keys, allowedHosts, corsOrigins }) => {
    const allowed = new Set(allowedHosts.map((host) => hostName(host)));
    const origins = new Set(corsOrigins.map((origin) => new URL(origin).origin));
    const keyless = keys.length === 0;
    const localName = (name: string) => isLoopbackName(name) || allowed.has(name);
    const localOrigin = (origin: string) => {
      try {
        const url = new URL(origin);
        return (url.protocol === 'http:' || url.protocol === 'https:') && localName(hostName(url.host));
      } catch {
        return false; // "null" (a sandboxed frame, a file) and anything else that is not an origin
      }
    };

    app.addHook('onRequest', (request, reply, done) => {
      const origin = request.headers.origin;
      if (keyless) {
        // A request without Host (HTTP/1.0) comes from no browser: browsers always send it.
        const host = request.headers.host;
        if (host !== undefined && !localName(hostName(host))) {
          return done(
            new ApiError(
              'forbidden',
              `This server has no API keys, so it answers only requests addressed to loopback (localhost, 127.0.0.1, [::1]); "${host}" is not. Add the name to ONNX_GATEWAY_ALLOWED_HOSTS, or set API keys.`,
            ),
          );
        }
        if (origin !== undefined && !origins.has(origin) && !localOrigin(origin)) {
          return done(
            new ApiError(
              'forbidden',
              `This server has no API keys, so it answers no web page from another site; the request came from "${origin}". Name the site in ONNX_GATEWAY_CORS_ORIGINS to let it call the API.`,
            ),
          );
        }
      }
      if (origin !== undefined && origins.has(origin)) {
        reply.header('access-control-allow-origin', origin);
        reply.header('access-control-expose-headers', exposed);
      }
      if (origins.size > 0) reply.header('vary', 'origin');
      done();
    });

    if (origins.size === 0) return;
    // Preflights: the allowed origins may send JSON and the bearer key. No key is asked of a
    // preflight (browsers send none); the request that follows needs one.
    app.options('/*', { schema: { hide: true } }, async (request, reply) => {
      if (!origins.has(request.headers.origin ?? '')) return reply.code(204).send();
      return reply
        .code(204)
        .header('access-control-allow-methods', 'GET, POST, PUT, PATCH, DELETE')
        .header('access-control-allow-headers', 'authorization, content-type, x-request-id')
        .header('access-control-max-age', '600')
        .send();
    });
  },
  { name: 'host-guard' },
);
