/**
 * Placement on a real-size model: the multilingual-e5-small stand-in at its real size (470 MB of
 * weights, about 550 MB resident a session), generated at test time, served with 8 workers (what an
 * 8-core machine gets by default) and a budget of 1500 MB that holds two sessions, not eight. The
 * server's resident memory stays inside the budget, with the cores shared among fewer sessions.
 */
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeStandins } from '../../src/cli/bench-standins.js';
import type { Server } from '../../src/main.js';
import type { EmbeddingList, ModelCard } from '../helpers/bodies.js';
import { missing } from '../helpers/resources.js';
import { auth, startServer } from '../helpers/server.js';
import { generateStandins, standinsHint } from '../helpers/standins.js';

const repo = 'intfloat/multilingual-e5-small';
const dir = resolve('.data/standins-real');
const budgetMb = 1500;
const skip = missing(generateStandins(resolve('.data/standins')) === undefined, standinsHint);

describe.skipIf(skip)('placement of a real-size model', () => {
  let server: Server;
  let before: number;
  beforeAll(async () => {
    // Kept while the generator is unchanged, so only the first run pays for it (about 30 s).
    writeStandins([repo], dir, 'real');
    before = process.memoryUsage.rss();
    server = await startServer({
      modelsDir: dir,
      models: [repo],
      workers: 8,
      intraOpThreads: 1,
      soloThreads: 8,
      memoryBudgetMb: budgetMb,
    });
  }, 300_000);
  afterAll(async () => {
    await server?.close();
  });

  it('holds fewer sessions with more threads each, and stays inside the budget', async () => {
    const res = await server.app.inject({
      method: 'POST',
      url: '/v1/embeddings',
      headers: auth,
      payload: { model: repo, input: ['query: how much memory does a session hold?'] },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<EmbeddingList>().data[0]!.embedding).toHaveLength(384);
    const model = (
      await server.app.inject({ method: 'GET', url: `/v1/models/${repo}`, headers: auth })
    ).json<ModelCard>();
    expect(model.status).toBe('loaded');
    const placement = model.placement!;
    // What the whole process grew by, sessions, tokenizer and all: the budget holds whatever was placed.
    expect(process.memoryUsage.rss() - before).toBeLessThanOrEqual(budgetMb * 2 ** 20);
    expect(placement.resident_bytes).toBeLessThanOrEqual(budgetMb * 2 ** 20);
    // Eight sessions of ~550 MB would hold 4.4 GB: two fit, sharing the eight cores. A solo session
    // (all eight cores) is added only where the first session measured small enough for one more to
    // fit; the resident growth a session's opening shows varies from run to run (node 24 once
    // measured it under 500 MB), so the test holds the rule, not one measurement's outcome.
    expect(placement.device).toBe('cpu');
    expect(placement.sessions).toBeGreaterThanOrEqual(1);
    expect(placement.sessions).toBeLessThan(8);
    expect(placement.sessions * placement.threads_per_session).toBe(8);
    expect([0, 8]).toContain(placement.solo_threads);
  });
});
