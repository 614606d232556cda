/**
 * A search task queued in this process runs in the trace of the request that created it, even
 * when it starts later, as another task ends (and so from that task's context). With an
 * in-memory SDK: the spans are read back from its exporter.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normaliseSearchRequest } from '../../src/search/request.js';
import { SearchTasks } from '../../src/search/tasks/local-tasks.js';
import { SqliteTaskStore } from '../../src/search/tasks/task-store.js';
import type { SearchOutcome, SearchProvider, SearchRequest } from '../../src/search/types.js';
import { openDatabase } from '../../src/sqlite.js';
import { setTracer } from '../../src/tracing/spans.js';

/** A provider whose searches end when the test says so. */
class GateProvider implements SearchProvider {
  readonly name = 'gate';
  readonly calls: { request: SearchRequest; resolve(outcome: SearchOutcome): void }[] = [];
  search(request: SearchRequest): Promise<SearchOutcome> {
    return new Promise((resolve) => this.calls.push({ request, resolve }));
  }
}

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  setTracer(provider.getTracer('test'));
});
afterAll(async () => {
  setTracer(undefined);
  context.disable();
  await provider.shutdown();
});

describe('local search tasks, traced', () => {
  it('run a queued task in its creating request trace, not in the trace of the task before it', async () => {
    const gate = new GateProvider();
    const tasks = await SearchTasks.open(new SqliteTaskStore(openDatabase(':memory:')), gate, {
      concurrency: 1,
      retentionMs: 60_000,
      taskTimeoutMs: 60_000,
      maxPending: 10,
    });
    try {
      const tracer = provider.getTracer('caller');
      const create = (name: string) =>
        tracer.startActiveSpan(name, async (span) => {
          const task = await tasks.create('me', normaliseSearchRequest({ query: name }));
          span.end();
          return { id: task.id, traceId: span.spanContext().traceId };
        });
      const first = await create('first');
      // Queued behind the first (one slot): it starts when the first ends.
      const second = await create('second');
      expect(gate.calls).toHaveLength(1);
      gate.calls[0]!.resolve({ results: [] });
      await tasks.wait('me', first.id, 5_000);
      await expect.poll(() => gate.calls.length).toBe(2);
      gate.calls[1]!.resolve({ results: [] });
      expect((await tasks.wait('me', second.id, 5_000))!.state).toBe('succeeded');

      const runs = exporter.getFinishedSpans().filter((span) => span.name === 'search task');
      const traceOf = (id: string) =>
        runs.find((span) => span.attributes['onnx_gateway.search.task'] === id)?.spanContext().traceId;
      expect(traceOf(first.id)).toBe(first.traceId);
      expect(traceOf(second.id)).toBe(second.traceId);
      expect(second.traceId).not.toBe(first.traceId);
      // Nothing of the tasks' is left active here.
      expect(trace.getSpan(context.active())).toBeUndefined();
    } finally {
      await tasks.close();
    }
  });
});
