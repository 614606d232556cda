/**
 * Peer server: the "minimal server" the architecture says our engine must beat. fastify + piscina
 * with one worker per core, each 1 intra-op thread; tokenising on the main thread; one input (or
 * pair) per run, no batching, no queue of its own beyond piscina's.
 *
 *   node --import tsx bench/peers/minimal-server.ts [--port 0] [--host 127.0.0.1] [--workers N]
 *        [--embed-model ID] [--rerank-model ID] [--api-key KEY]      (env BENCH_API_KEY)
 *
 * Same routes and shapes as transformers-server.ts. Prints `{"listening": "<url>"}` once ready.
 */
import { availableParallelism } from 'node:os';
import Fastify from 'fastify';
import { Piscina } from 'piscina';
import {
  DEFAULT_EMBED_MODEL,
  DEFAULT_RERANK_MODEL,
  flagNumber,
  flagString,
  modelOnnxPath,
  parseFlags,
} from '../lib/common.js';
import { loadTokenizer } from '../mix.js';
import type { MinimalTask } from './minimal-worker.js';

const f = parseFlags(process.argv.slice(2));
const embedModel = flagString(f, 'embed-model', DEFAULT_EMBED_MODEL);
const rerankModel = flagString(f, 'rerank-model', DEFAULT_RERANK_MODEL);
const apiKey = flagString(f, 'api-key', process.env.BENCH_API_KEY ?? '');
const workers = flagNumber(f, 'workers', availableParallelism());

const pool = new Piscina<MinimalTask, Float32Array>({
  filename: new URL('./minimal-worker.mjs', import.meta.url).href,
  minThreads: workers,
  maxThreads: workers,
  idleTimeout: 2 ** 31 - 1,
  workerData: { models: { [embedModel]: modelOnnxPath(embedModel), [rerankModel]: modelOnnxPath(rerankModel) } },
});
const embedTok = loadTokenizer(embedModel);
const rerankTok = loadTokenizer(rerankModel);
// Warm every worker (sessions are created at worker start).
await Promise.all(
  Array.from({ length: workers * 2 }, () =>
    pool.run({ model: embedModel, ids: Int32Array.from(embedTok.encode('warm up').ids) }),
  ),
);

const app = Fastify({ logger: false, bodyLimit: 32 * 1024 * 1024 });

app.addHook('onRequest', async (req, reply) => {
  if (!apiKey || req.url === '/health') return;
  if (req.headers.authorization !== `Bearer ${apiKey}`) {
    await reply.code(401).send({
      error: { message: 'Invalid API key', type: 'invalid_request_error', param: null, code: 'unauthorized' },
    });
  }
});

app.get('/health', async () => ({ status: 'ok' }));

interface EmbeddingsBody {
  input: string | string[];
  model?: string;
  encoding_format?: 'float' | 'base64';
}

app.post<{ Body: EmbeddingsBody }>('/v1/embeddings', async (req, reply) => {
  const { input, encoding_format: format = 'float' } = req.body ?? ({} as EmbeddingsBody);
  const texts = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(texts) || texts.length === 0 || texts.some((t) => typeof t !== 'string')) {
    return reply.code(400).send({
      error: {
        message: '`input` must be a string or an array of strings',
        type: 'invalid_request_error',
        param: 'input',
        code: 'invalid_request',
      },
    });
  }
  let tokens = 0;
  const rows = await Promise.all(
    texts.map((t) => {
      const ids = Int32Array.from(embedTok.encode(t).ids);
      tokens += ids.length;
      return pool.run({ model: embedModel, ids });
    }),
  );
  const data = rows.map((row, index) => ({
    object: 'embedding',
    index,
    embedding:
      format === 'base64'
        ? Buffer.from(row.buffer, row.byteOffset, row.byteLength).toString('base64')
        : Array.from(row),
  }));
  return {
    object: 'list',
    data,
    model: req.body.model ?? embedModel,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
});

interface RerankBody {
  query: string;
  documents: string[];
  model?: string;
  top_n?: number;
}

app.post<{ Body: RerankBody }>('/v1/rerank', async (req, reply) => {
  const { query, documents, top_n: topN } = req.body ?? ({} as RerankBody);
  if (typeof query !== 'string' || !Array.isArray(documents) || documents.length === 0) {
    return reply.code(400).send({
      error: {
        message: '`query` and `documents` are required',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_request',
      },
    });
  }
  const logits = await Promise.all(
    documents.map((d) => {
      const e = rerankTok.encodePair(query, d);
      return pool.run({ model: rerankModel, ids: Int32Array.from(e.ids), typeIds: Int32Array.from(e.typeIds) });
    }),
  );
  const results = logits
    .map((l, index) => ({ index, relevance_score: 1 / (1 + Math.exp(-l[0]!)) }))
    .sort((a, b) => b.relevance_score - a.relevance_score);
  return { model: req.body.model ?? rerankModel, results: topN ? results.slice(0, topN) : results };
});

const url = await app.listen({ port: flagNumber(f, 'port', 0), host: flagString(f, 'host', '127.0.0.1') });
process.stdout.write(JSON.stringify({ listening: url }) + '\n');

const stop = (): void => {
  void app
    .close()
    .then(() => pool.destroy())
    .then(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
