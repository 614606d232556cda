/**
 * The request and batch paths' own counters and histograms: /metrics must read exactly as it did
 * with prom-client's, so each family is checked against prom-client's own metric fed the same values.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CounterFamily, HistogramFamily } from '../../src/http/metric-families.js';

/** The exposition's sample lines as a set of `name{sorted labels} value`, so label order does not matter. */
async function samples(registry: Registry): Promise<string[]> {
  const lines: string[] = [];
  for (const line of (await registry.metrics()).split('\n')) {
    const match = /^([^{ ]+)(?:\{(.*)\})? (.+)$/.exec(line);
    if (!match || line.startsWith('#')) {
      if (line) lines.push(line);
      continue;
    }
    const labels = [...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => `${m[1]}="${m[2]}"`).sort();
    lines.push(`${match[1]}{${labels.join(',')}} ${match[3]}`);
  }
  return lines.sort();
}

describe('metric families', () => {
  it('write a histogram as prom-client does: cumulative buckets, +Inf, sum and count per series', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const buckets = [0.5, 1, 2.5, 5];
    const family = new HistogramFamily({
      name: 'h_seconds',
      help: 'A histogram.',
      labelNames: ['route', 'phase'],
      buckets,
      registry: ours,
    });
    const reference = new Histogram({
      name: 'h_seconds',
      help: 'A histogram.',
      labelNames: ['route', 'phase'],
      buckets,
      registers: [theirs],
    });
    const values: [string, string, number][] = [
      ['/a', 'tokenize', 0.1],
      ['/a', 'tokenize', 0.5],
      ['/a', 'tokenize', 0.50001],
      ['/a', 'tokenize', 5],
      ['/a', 'tokenize', 7],
      ['/b', 'queue', 2.5],
      ['/b', 'queue', 0],
      ['/a', 'queue', 1e6],
    ];
    for (const [route, phase, value] of values) {
      family.labels({ route, phase }).observe(value);
      reference.observe({ route, phase }, value);
    }
    // A series made before any observation is written with zero counts, as prom-client's zero() does.
    family.labels({ route: '/c', phase: 'inference' });
    reference.zero({ route: '/c', phase: 'inference' });
    expect(await samples(ours)).toEqual(await samples(theirs));
    const text = await ours.metrics();
    expect(text).toContain('h_seconds_bucket{route="/a",phase="tokenize",le="0.5"} 2');
    expect(text).toContain('h_seconds_bucket{route="/a",phase="tokenize",le="+Inf"} 5');
  });

  it('write a counter as prom-client does, and bind a series once for every later count', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const family = new CounterFamily({
      name: 'c_total',
      help: 'A counter.',
      labelNames: ['method', 'status'],
      registry: ours,
    });
    const reference = new Counter({
      name: 'c_total',
      help: 'A counter.',
      labelNames: ['method', 'status'],
      registers: [theirs],
    });
    const get = family.labels({ method: 'GET', status: '200' });
    expect(family.labels({ status: '200', method: 'GET' })).toBe(get);
    get.inc();
    get.inc(4);
    family.labels({ method: 'POST', status: '400' }).inc(0);
    reference.inc({ method: 'GET', status: '200' }, 5);
    reference.inc({ method: 'POST', status: '400' }, 0);
    expect(await samples(ours)).toEqual(await samples(theirs));
  });

  it('refuse a label the family does not have, and start again from zero on reset', async () => {
    const registry = new Registry();
    const counter = new CounterFamily({ name: 'c_total', help: 'A counter.', labelNames: ['model'], registry });
    const histogram = new HistogramFamily({
      name: 'h',
      help: 'A histogram.',
      labelNames: ['model'],
      buckets: [1],
      registry,
    });
    expect(() => counter.labels({ modle: 'm' })).toThrow(/no label modle/);
    const held = counter.labels({ model: 'm' });
    held.inc(3);
    histogram.labels({ model: 'm' }).observe(0.5);
    registry.resetMetrics();
    let text = await registry.metrics();
    expect(text).toContain('c_total{model="m"} 0');
    expect(text).toContain('h_bucket{model="m",le="1"} 0');
    expect(text).toContain('h_sum{model="m"} 0');
    // A series a hot path holds keeps counting into what /metrics writes.
    held.inc();
    text = await registry.metrics();
    expect(text).toContain('c_total{model="m"} 1');
  });
});
