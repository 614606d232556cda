/**
 * A real OTLP/HTTP traces receiver for the tests: POST /v1/traces in protobuf (decoded with the
 * messages of test/fixtures/otlp-trace.proto) or JSON, every span kept in one plain shape. It
 * also serves a page (GET /page) and keeps the headers each fetch of it came with.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

export type AttributeValue = string | number | boolean | AttributeValue[];

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState: string;
  name: string;
  kind: number;
  attributes: Record<string, AttributeValue>;
  links: { traceId: string; spanId: string }[];
  status: { code: number; message: string };
  /** The resource's attributes (service.name). */
  resource: Record<string, AttributeValue>;
  scope: string;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the exports received. */
  contentTypes: string[];
  /** The request headers of every GET /page. */
  pageFetches: IncomingHttpHeaders[];
  /** Resolves with the spans once `test` holds for them (checked at every export). */
  waitFor(test: (spans: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const root = protobuf.loadSync(fileURLToPath(new URL('../fixtures/otlp-trace.proto', import.meta.url)));
const exportRequest = root.lookupType('otlp.ExportTraceServiceRequest');

interface WireValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: WireValue[] };
}
interface WireKeyValue {
  key: string;
  value?: WireValue;
}
interface WireSpan {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  traceState?: string;
  name?: string;
  kind?: number;
  attributes?: WireKeyValue[];
  links?: { traceId?: string; spanId?: string }[];
  status?: { code?: number; message?: string };
}
interface WireExport {
  resourceSpans?: {
    resource?: { attributes?: WireKeyValue[] };
    scopeSpans?: { scope?: { name?: string }; spans?: WireSpan[] }[];
  }[];
}

function valueOf(value: WireValue | undefined): AttributeValue {
  if (!value) return '';
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(valueOf);
  return '';
}

function attributesOf(list: WireKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]));
}

/** Ids as OTLP/JSON writes them (hex); protobuf's bytes come here as base64. */
function hex(id: string | undefined, base64: boolean): string {
  if (!id) return '';
  return base64 ? Buffer.from(id, 'base64').toString('hex') : id.toLowerCase();
}

function spansOf(body: WireExport, base64: boolean): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of body.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scopeSpans of resourceSpans.scopeSpans ?? [])
      for (const span of scopeSpans.spans ?? [])
        spans.push({
          traceId: hex(span.traceId, base64),
          spanId: hex(span.spanId, base64),
          parentSpanId: hex(span.parentSpanId, base64),
          traceState: span.traceState ?? '',
          name: span.name ?? '',
          kind: span.kind ?? 0,
          attributes: attributesOf(span.attributes),
          links: (span.links ?? []).map((link) => ({
            traceId: hex(link.traceId, base64),
            spanId: hex(link.spanId, base64),
          })),
          status: { code: span.status?.code ?? 0, message: span.status?.message ?? '' },
          resource,
          scope: scopeSpans.scope?.name ?? '',
        });
  }
  return spans;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const pageFetches: IncomingHttpHeaders[] = [];
  let waiters: { test: (spans: ReceivedSpan[]) => boolean; resolve: (spans: ReceivedSpan[]) => void }[] = [];
  const server: Server = createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/page') {
      pageFetches.push(request.headers);
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end(
        '<html><head><title>A page</title></head><body><article><p>Traced text.</p></article></body></html>',
      );
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url !== '/v1/traces') {
        // Metrics or logs would come here: not asked for, so not expected.
        response.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks);
      const type = request.headers['content-type'] ?? '';
      contentTypes.push(type);
      const protobufBody = type.includes('protobuf');
      const decoded = protobufBody
        ? (exportRequest.toObject(exportRequest.decode(body), { longs: String, bytes: String }) as WireExport)
        : (JSON.parse(body.toString('utf8')) as WireExport);
      spans.push(...spansOf(decoded, protobufBody));
      waiters = waiters.filter((waiter) => !(waiter.test(spans) && (waiter.resolve(spans), true)));
      response.writeHead(200, { 'content-type': protobufBody ? 'application/x-protobuf' : 'application/json' });
      response.end(protobufBody ? Buffer.alloc(0) : '{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    pageFetches,
    waitFor(test) {
      if (test(spans)) return Promise.resolve(spans);
      return new Promise((resolve) => waiters.push({ test, resolve }));
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
