/**
 * Tracing off costs nothing: without an OTLP endpoint (or with the SDK disabled) the SDK is never
 * imported, and nothing in src/ imports any OpenTelemetry package but the API statically.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startTracing } from '../../src/tracing/sdk.js';
import { tracingTable, tracingVariables, tracingWanted } from '../../src/tracing/settings.js';
import { tracer } from '../../src/tracing/spans.js';

const src = fileURLToPath(new URL('../../src', import.meta.url));
/** Packages only tracing/sdk.ts may load, and only dynamically. */
const sdkPackages = /^(@opentelemetry\/(?!api$)|@fastify\/otel$)/;

describe('tracingWanted', () => {
  it('is on with an OTLP endpoint or a traces endpoint, off without either or with OTEL_SDK_DISABLED', () => {
    expect(tracingWanted({})).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toBe(
      false,
    );
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' })).toBe(
      false,
    );
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'false' })).toBe(
      true,
    );
  });
});

describe('tracing off', () => {
  it('loads nothing of the SDK and leaves the span helpers without a tracer', async () => {
    expect(await startTracing({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' })).toBe(
      undefined,
    );
    expect(await startTracing({})).toBe(undefined);
    expect(tracer).toBe(undefined);
    // CommonJS packages, as OpenTelemetry's are, are in node's module cache once anything loads
    // them: the API is (spans.ts imports it), the SDK is not.
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    expect(loaded.some((file) => file.includes('@opentelemetry/api'))).toBe(true);
    const sdk = loaded.filter((file) => /@opentelemetry\/(sdk|exporter|instrumentation)|@fastify\/otel/.test(file));
    expect(sdk).toEqual([]);
  });

  it('finds the SDK in the module cache once it is loaded (the check above can fail)', async () => {
    await import('@opentelemetry/sdk-trace-base');
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    expect(loaded.some((file) => file.includes('@opentelemetry/sdk-trace-base'))).toBe(true);
  });

  it('has no static import of an OpenTelemetry package but the API anywhere in src/', () => {
    const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    const wrong: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(src, file), 'utf8');
      for (const [, specifier] of text.matchAll(/^import\s[^;]*?from\s+'([^']+)'/gms))
        if (sdkPackages.test(specifier!)) wrong.push(`${relative(src, join(src, file))} imports ${specifier}`);
    }
    expect(wrong).toEqual([]);
    // And the SDK's dynamic imports are all in one place.
    const dynamic = files.filter((file) =>
      /import\('@opentelemetry\/sdk-node'\)/.test(readFileSync(join(src, file), 'utf8')),
    );
    expect(dynamic).toEqual(['tracing/sdk.ts']);
  });
});

describe('the tracing variables in docs/configuration.md', () => {
  it('are the table generated from src/tracing/settings.ts, naming every variable tracingWanted reads', () => {
    expect(readFileSync('docs/configuration.md', 'utf8')).toContain(tracingTable());
    const names = tracingVariables.map((variable) => variable.env);
    for (const read of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_SDK_DISABLED'])
      expect(names).toContain(read);
  });
});
