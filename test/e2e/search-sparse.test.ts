/**
 * The sparse ranking of the local index with the SPLADE stand-in (scripts/standins/) served beside a
 * dense embedder: indexing stores each document's sparse vector, the `sparse` ranking scores by
 * their dot product with the query's (checked against the vectors embedSparse gives for the same
 * texts), and hybrid search fuses the three rankings searchRankings names.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { IndexDocument } from '../../src/search/index/document-index.js';
import { modelText } from '../../src/search/index/retriever.js';
import { rerank } from '../../src/core/rerank.js';
import { embedSparse, sparseDot } from '../../src/core/sparse.js';
import type { Server } from '../../src/main.js';
import { auth, startServer } from '../helpers/server.js';
import { missing } from '../helpers/resources.js';

const SPLADE = 'prithivida/Splade_PP_en_v1';
const DENSE = 'BAAI/bge-small-en-v1.5';
const COLBERT = 'answerdotai/answerai-colbert-small-v1';
const dir = inject('standinsDir');
const present = dir !== '' && [SPLADE, DENSE, COLBERT].every((repo) => existsSync(join(dir, repo, 'golden.json')));

const documents: IndexDocument[] = [
  ['otters', 'Sea otters hold hands while they sleep so they do not drift apart.'],
  ['herons', 'Grey herons stand still in shallow water and wait for fish.'],
  ['beavers', 'Beavers build dams of branches and mud across streams.'],
  ['bats', 'Bats find insects in the dark by echolocation.'],
].map(([key, text]) => ({ key: key!, url: `https://example.org/${key}`, title: key!, text: text!, source: 'test' }));

describe.skipIf(missing(present, `the stand-ins could not be generated: ${inject('standinsMissing')}`))(
  'the sparse ranking of the local index',
  () => {
    let server: Server;

    beforeAll(async () => {
      server = await startServer({
        modelsDir: dir,
        models: [DENSE, SPLADE, COLBERT],
        searchRankings: ['bm25', 'dense', 'sparse'],
        searchRerankDepth: 0,
        workers: 1,
      });
      await server.search.ingest(documents);
    }, 120_000);
    afterAll(async () => {
      await server?.close();
    });

    it('stores a sparse vector per document and ranks by the dot product with the query', async () => {
      expect(server.search.index.stats()).toMatchObject({
        documents: 4,
        vectors: { [DENSE]: 4 },
        sparse: { [SPLADE]: 4 },
      });
      const query = 'otters sleeping in the sea';
      const { ranked } = await server.search.retriever.retrieve(query, 'sparse', 10);
      expect(ranked.length).toBeGreaterThan(0);
      const ctx = { registry: server.registry, scheduler: server.engine.scheduler, limits: loadConfig({}, {}) };
      const [q] = (await embedSparse(ctx, { model: SPLADE, input: [query], inputType: 'query', truncate: true }))
        .vectors;
      const docs = (
        await embedSparse(ctx, {
          model: SPLADE,
          input: documents.map(modelText),
          inputType: 'document',
          truncate: true,
        })
      ).vectors;
      const expected = documents
        .map((doc, i) => ({ key: doc.key, score: sparseDot(q!, docs[i]!) }))
        .filter((e) => e.score > 0)
        .sort((a, b) => b.score - a.score);
      const keys = server.search.retriever.documents(ranked.map((r) => r.id));
      expect(ranked.map((r) => keys.get(r.id)!.key)).toEqual(expected.map((e) => e.key));
      ranked.forEach((r, i) => expect(r.score).toBeCloseTo(expected[i]!.score, 4));
    });

    it('hybrid search fuses bm25, dense and sparse; GET /v1/web-search/index names them', async () => {
      const { ranked } = await server.search.retriever.retrieve('beavers build dams', 'hybrid', 10);
      expect(ranked).toHaveLength(4);
      const response = await server.app.inject({ method: 'GET', url: '/v1/web-search/index', headers: auth });
      expect(response.json()).toMatchObject({
        documents: 4,
        rankings: ['bm25', 'dense', 'sparse'],
        sparse: { [SPLADE]: 4 },
        replication: null,
      });
    });

    it('reranks with a late-interaction model when no cross-encoder is served: its MaxSim scores', async () => {
      const query = 'animals that build dams';
      const { ranked: candidates } = await server.search.retriever.retrieve(query, 'hybrid', 10);
      expect(candidates).toHaveLength(4);
      expect(server.search.retriever.reranker).toBe(COLBERT);
      const { ranked: reranked, reranked: count } = await server.search.retriever.rerank(query, candidates, 4);
      expect(count).toBe(candidates.length);
      const docs = server.search.retriever.documents(candidates.map((c) => c.id));
      const ctx = { registry: server.registry, scheduler: server.engine.scheduler, limits: loadConfig({}, {}) };
      const direct = await rerank(ctx, {
        model: COLBERT,
        query,
        documents: candidates.map((c) => modelText(docs.get(c.id)!)),
      });
      expect(reranked.map((r) => r.score)).toEqual(direct.results.map((r) => r.score));
      expect(reranked.map((r) => r.id)).toEqual(direct.results.map((r) => candidates[r.index]!.id));
    });
  },
);
