/**
 * When tracing is on, and the standard OpenTelemetry variables that configure it. They are the
 * SDK's, read by the SDK itself (not settings of src/config.ts); this list is what
 * docs/configuration.md shows of them.
 */

/** Tracing is on when an OTLP endpoint is set and the SDK is not disabled. */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/** The service name spans carry unless OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says another. */
export const defaultServiceName = 'onnx-gateway';

export interface TracingVariable {
  env: string;
  default: string;
  description: string;
}

/** The variables of tracing, as docs/configuration.md lists them. */
export const tracingVariables: TracingVariable[] = [
  {
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    default: '(none: tracing off)',
    description:
      'The OTLP receiver (a collector) spans are sent to, e.g. `http://otel-collector:4318` (HTTP) or `http://otel-collector:4317` (gRPC); traces go to its `/v1/traces` over HTTP. Unset (and no traces endpoint), tracing is off and the SDK is not loaded.',
  },
  {
    env: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    default: '(none)',
    description: 'The full URL of the traces receiver, in place of the endpoint above (used as given, no path added).',
  },
  {
    env: 'OTEL_EXPORTER_OTLP_PROTOCOL',
    default: 'http/protobuf',
    description: '`http/protobuf`, `http/json` or `grpc` (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` for traces alone).',
  },
  {
    env: 'OTEL_EXPORTER_OTLP_HEADERS',
    default: '(none)',
    description: "Headers sent with every export, `key=value` pairs separated by commas (a receiver's API key).",
  },
  {
    env: 'OTEL_SERVICE_NAME',
    default: defaultServiceName,
    description:
      'The `service.name` of every span (`OTEL_RESOURCE_ATTRIBUTES` adds others, e.g. `deployment.environment.name=prod`).',
  },
  {
    env: 'OTEL_TRACES_SAMPLER',
    default: 'parentbased_always_on',
    description:
      "Which traces are recorded: `parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG=0.1` keeps a tenth of the traces that start here and follows the caller's decision for the rest.",
  },
  {
    env: 'OTEL_TRACES_SAMPLER_ARG',
    default: '(none)',
    description: "The sampler's argument: the ratio of the `traceidratio` samplers, 0 to 1.",
  },
  {
    env: 'OTEL_PROPAGATORS',
    default: 'tracecontext,baggage',
    description:
      'How trace context is read from requests and written to outgoing ones: W3C `traceparent` and `tracestate` by default.',
  },
  {
    env: 'OTEL_BSP_SCHEDULE_DELAY',
    default: '5000',
    description:
      'Milliseconds between exports of finished spans (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048, bounds the spans held; more are dropped, never waited for).',
  },
  {
    env: 'OTEL_SDK_DISABLED',
    default: 'false',
    description: '`true` turns tracing off whatever else is set.',
  },
];

/** The tracing variables as docs/configuration.md's table (npm run docs writes it; a test holds it). */
export function tracingTable(): string {
  const rows = tracingVariables.map(
    (variable) => `| \`${variable.env}\` | ${variable.default} | ${variable.description.replaceAll('|', '\\|')} |`,
  );
  return ['| environment | default | description |', '| --- | --- | --- |', ...rows].join('\n');
}
