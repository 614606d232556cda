/**
 * Starting and stopping the OpenTelemetry SDK. Nothing of the SDK is imported unless tracing is
 * on (tracing/settings.ts): the imports below are dynamic, so a server without an OTLP endpoint
 * loads only @opentelemetry/api, whose calls are no-ops without an SDK.
 *
 * The SDK reads the standard OTEL_* variables itself (exporter protocol and headers, sampler,
 * propagators, resource, batch processor); this file adds only what the server decides: its
 * service name by default, traces alone (its metrics are Prometheus', at /metrics), fastify's
 * request spans and the trace context on outgoing fetches (SearXNG, the web reader, Hub downloads).
 */
import type { FastifyPluginCallback } from 'fastify';
import fp from 'fastify-plugin';
import { version } from '../version.js';
import { defaultServiceName, tracingWanted } from './settings.js';
import { setTracer } from './spans.js';

/** Paths whose requests get no span. */
const untraced = new Set(['/health', '/metrics']);

export interface Tracing {
  /** fastify's request spans (@fastify/otel): registered on the app before its routes. */
  fastifyPlugin: FastifyPluginCallback;
  /** Exports the spans still held and stops the SDK. */
  shutdown(): Promise<void>;
}

/** Starts the SDK when tracing is wanted; undefined (and nothing loaded) when it is not. */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<Tracing | undefined> {
  if (!tracingWanted(env)) return undefined;
  const [{ NodeSDK }, { FastifyOtelInstrumentation }, { UndiciInstrumentation }, api] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@fastify/otel'),
    import('@opentelemetry/instrumentation-undici'),
    import('@opentelemetry/api'),
  ]);
  const fastify = new FastifyOtelInstrumentation({
    // One span per request: none per hook (a dozen per request) and none for the handler, whose
    // part of the request is the operation's span (the request's context is made active for it
    // below, at less cost than a span of its own).
    instrumentHooks: false,
    instrumentHandler: false,
    // Probes and scrapes every few seconds are no one's request: not traced.
    ignorePaths: ({ url }) => {
      const query = url.indexOf('?');
      return untraced.has(query < 0 ? url : url.slice(0, query));
    },
    // HTTP's span name: the method and the route template, never the raw path.
    requestHook: (span, request) => {
      const route = request.routeOptions.url;
      span.updateName(route ? `${request.method} ${route}` : request.method);
    },
  });
  const named =
    Boolean(env.OTEL_SERVICE_NAME?.trim()) || /(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const sdk = new NodeSDK({
    ...(named ? {} : { serviceName: defaultServiceName }),
    instrumentations: [
      fastify,
      // fetch (undici) reports each request on diagnostics_channel: no patching, whenever it loaded.
      // Redis commands are not traced: ioredis's instrumentation patches the module as it is
      // required, and in this ES module build ioredis is loaded before the SDK starts.
      new UndiciInstrumentation(),
    ],
    // Traces only, unless metrics or logs exporters are asked for by name.
    ...(env.OTEL_METRICS_EXPORTER ? {} : { metricReaders: [] }),
    ...(env.OTEL_LOGS_EXPORTER ? {} : { logRecordProcessors: [] }),
  });
  sdk.start();
  setTracer(api.trace.getTracer('onnx-gateway', version));
  const requestSpans = fastify.plugin();
  // The request's body is read on socket events, out of the request span's context: the handler is
  // run in it again (from the last hook before it, so the context flows into the handler), so that
  // the operation's spans are the request's children and log lines carry its ids.
  const fastifyPlugin = fp((app, _options, done) => {
    app.register(requestSpans);
    app.addHook('preHandler', (request, _reply, next) => {
      const requestContext = request.opentelemetry().context;
      if (requestContext) api.context.with(requestContext, next);
      else next();
    });
    done();
  });
  return {
    fastifyPlugin,
    async shutdown() {
      setTracer(undefined);
      await sdk.shutdown();
    },
  };
}
