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
    // One span per request, one for its handler (which makes the request's context active for the
    // operation's spans); none per hook, which would be a dozen per request.
    instrumentHooks: false,
    instrumentHandler: true,
    // Probes and scrapes every few seconds are no one's request: not traced.
    ignorePaths: ({ url }) => untraced.has(url.split('?')[0]!),
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
  return {
    fastifyPlugin: fastify.plugin(),
    async shutdown() {
      setTracer(undefined);
      await sdk.shutdown();
    },
  };
}
