/**
 * The OpenAPI document at /openapi.json is complete: every route the app serves is in it with its
 * schemas, tags, security and error responses, except the operational routes and the 501 stubs,
 * which are left out on purpose. The document needs no model run: the app is over a fake core.
 */
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startFakeApp, type FakeApp } from '../helpers/fake-core.js';
import { auth } from '../helpers/server.js';

// Every route as fastify registers it, collected by an onRoute hook added to each new app before
// any plugin runs (fastify offers no list of routes afterwards, only a printed tree).
const registered = vi.hoisted(() => [] as { method: string; url: string; hidden: boolean }[]);
vi.mock('fastify', async (importOriginal) => {
  const original = await importOriginal<typeof import('fastify')>();
  const create = ((options?: object) => {
    const app = original.default(options);
    app.addHook('onRoute', (route: RouteOptions) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const hidden = Boolean(route.schema?.hide);
      for (const method of methods) registered.push({ method, url: route.url, hidden });
    });
    return app;
  }) as unknown as typeof original.default;
  return { ...original, default: Object.assign(create, original.default) };
});

/** Routes for running the server, not part of the API: deliberately not documented. */
const operational = [/^\/$/, /^\/playground\//, /^\/health$/, /^\/metrics$/, /^\/openapi\.json$/, /^\/docs(\/.*)?$/];
/** TEI's root route, an alias of its /embed or /rerank (whichever the primary model serves). */
const aliases = [/^\/$/];

interface Operation {
  tags?: string[];
  summary?: string;
  requestBody?: { content: Record<string, { schema: object }> };
  parameters?: { in: string; name: string }[];
  responses: Record<
    string,
    {
      content?: Record<string, { schema: Record<string, unknown> }>;
      headers?: Record<string, { schema: { type: string }; description?: string }>;
    }
  >;
}
interface Document {
  openapi: string;
  security?: Record<string, string[]>[];
  components: { securitySchemes: Record<string, { type: string; scheme: string }> };
  paths: Record<string, Record<string, Operation>>;
}

/** "/v1/models/:model" -> "/v1/models/{model}", as @fastify/swagger writes paths. */
const openApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}');

let server: FakeApp;
let doc: Document;
beforeAll(async () => {
  server = await startFakeApp();
  const res = await server.app.inject({ method: 'GET', url: '/openapi.json' });
  expect(res.statusCode).toBe(200);
  doc = res.json();
});
afterAll(() => server?.close());

describe('GET /openapi.json', () => {
  it("collected the app's routes", () => {
    expect(registered.some((r) => r.url === '/v1/embeddings' && r.method === 'POST')).toBe(true);
  });

  it('documents every route except the operational routes and the 501 stubs', async () => {
    const missing: string[] = [];
    for (const route of registered) {
      if (route.method === 'HEAD') continue;
      const documented = doc.paths[openApiPath(route.url)]?.[route.method.toLowerCase()] !== undefined;
      if (documented) {
        expect(route.hidden, `${route.method} ${route.url} is documented although hidden`).toBe(false);
        continue;
      }
      if ([...operational, ...aliases].some((pattern) => pattern.test(route.url))) continue;
      // A route left out of the document must be one that says it is not supported.
      const url = route.url.replace(/\*$/, 'anything').replace(/:(\w+)/g, 'x');
      const res = await server.app.inject({
        method: route.method as 'GET',
        url,
        headers: auth,
        payload: route.method === 'GET' ? undefined : {},
      });
      if (res.statusCode !== 501) missing.push(`${route.method} ${route.url} (answers ${res.statusCode})`);
    }
    expect(missing).toEqual([]);
  });

  it('documents no path the app does not serve', () => {
    const served = new Set(registered.map((r) => `${r.method.toLowerCase()} ${openApiPath(r.url)}`));
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const method of Object.keys(operations)) expect(served, `${method} ${path}`).toContain(`${method} ${path}`);
    }
  });

  it('gives every operation a tag, a summary, a success schema and the error responses', () => {
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ name: `${method} ${path}`, method, op })),
    );
    expect(operations.length).toBeGreaterThanOrEqual(5);
    for (const { name, method, op } of operations) {
      expect(op.tags?.length, name).toBeGreaterThan(0);
      expect(op.summary, name).toBeTruthy();
      const success = Object.keys(op.responses).find((status) => status.startsWith('2'));
      expect(success, name).toBeDefined();
      expect(op.responses[success!]!.content?.['application/json']?.schema, name).toBeDefined();
      // A model that is not served: 404, or on TEI's routes TEI's 424 (its process serves one model, named by none).
      const missingModel = op.tags?.[0] === 'TEI compatibility' ? '424' : '404';
      for (const status of ['400', '401', missingModel, '500'])
        expect(Object.keys(op.responses), `${name} ${status}`).toContain(status);
      if (method === 'post') expect(op.requestBody?.content['application/json']?.schema, name).toBeDefined();
    }
  });

  it('describes the error body of the OpenAI-style routes with the catalogue shape', () => {
    for (const [path, method] of [
      ['/v1/embeddings', 'post'],
      ['/v1/rerank', 'post'],
      ['/v1/models/{model}', 'get'],
    ] as const) {
      const schema = doc.paths[path]![method]!.responses['400']!.content!['application/json']!.schema as {
        properties: { error: { required: string[] } };
      };
      expect(schema.properties.error.required).toEqual(expect.arrayContaining(['message', 'type', 'param', 'code']));
    }
  });

  it('documents path parameters and request bodies from the route schemas', () => {
    const engines = doc.paths['/v1/engines/{model}/embeddings']!.post!;
    expect(engines.parameters).toEqual(
      expect.arrayContaining([expect.objectContaining({ in: 'path', name: 'model' })]),
    );
    const body = doc.paths['/v1/embeddings']!.post!.requestBody!.content['application/json']!.schema as {
      required: string[];
      properties: Record<string, unknown>;
    };
    // input, or vLLM's messages in its place: the schema requires neither, the route refuses a body with neither.
    expect(body.required ?? []).not.toContain('input');
    expect(Object.keys(body.properties)).toEqual(
      expect.arrayContaining(['input', 'messages', 'modality', 'model', 'encoding_format', 'dimensions']),
    );
  });

  it('documents the response headers: x-request-id on every success, Server-Timing on the model routes, x-cache-hits on the dense embedding routes', () => {
    const successHeaders = (path: string, method: string) => {
      const responses = doc.paths[path]![method]!.responses;
      return responses[Object.keys(responses).find((status) => status.startsWith('2'))!]!.headers ?? {};
    };
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const method of Object.keys(operations))
        expect(successHeaders(path, method)['x-request-id']?.schema.type, `${method} ${path}`).toBe('string');
    }
    const dense = [
      '/v1/embeddings',
      '/v1/engines/{model}/embeddings',
      '/v1/engines/{owner}/{name}/embeddings',
      '/embed',
      '/api/embed',
      '/api/embeddings',
      '/v2/embed',
    ];
    const timed = [
      ...dense,
      '/v1/rerank',
      '/v2/rerank',
      '/rerank',
      '/v1/classify',
      '/v1/moderations',
      '/v1/images/edits',
      '/predict',
      '/embed_sparse',
      '/embed_all',
      '/similarity',
    ];
    for (const path of Object.keys(doc.paths)) {
      const headers = successHeaders(path, Object.keys(doc.paths[path]!)[0]!);
      expect(Boolean(headers['server-timing']), path).toBe(timed.includes(path));
      expect(Boolean(headers['x-cache-hits']), path).toBe(dense.includes(path));
      if (headers['server-timing']) expect(headers['server-timing'].description, path).toMatch(/tokenize/);
    }
  });

  it('sends the headers it documents', async () => {
    const requests = [
      { url: '/v1/embeddings', payload: { input: 'hello' } },
      { url: '/v1/rerank', payload: { query: 'a', documents: ['b', 'c'] } },
      { url: '/embed', payload: { inputs: 'hello' } },
    ];
    for (const { url, payload } of requests) {
      const res = await server.app.inject({ method: 'POST', url, headers: auth, payload });
      expect(res.statusCode, url).toBe(200);
      const responses = doc.paths[url]!.post!.responses;
      // No cache in this app: x-cache-hits is documented as absent then.
      for (const header of Object.keys(responses['200']!.headers ?? {}).filter((name) => name !== 'x-cache-hits'))
        expect(res.headers[header], `${url} ${header}`).toBeTruthy();
    }
  });

  it('declares bearer auth for the whole API when keys are configured', () => {
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.components.securitySchemes.bearer).toEqual({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearer: [] }]);
  });
});

describe('GET /docs', () => {
  it('serves the interactive page over the same document', async () => {
    const page = await server.app.inject({ method: 'GET', url: '/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.body).toMatch(/swagger-ui/i);
    const json = await server.app.inject({ method: 'GET', url: '/docs/json' });
    expect(Object.keys(json.json<Document>().paths)).toEqual(Object.keys(doc.paths));
  });
});

describe('without API keys', () => {
  it('declares no security requirement', async () => {
    const open = await startFakeApp({ apiKeys: [] });
    try {
      const res = await open.app.inject({ method: 'GET', url: '/openapi.json' });
      expect(res.json<Document>().security).toEqual([]);
    } finally {
      await open.close();
    }
  });
});
