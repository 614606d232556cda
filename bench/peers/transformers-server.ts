/**
 * Peer server: the minimal fastify + transformers.js embeddings/rerank server a Node developer would
 * write. One model instance, requests handled as they come (ONNX Runtime runs block the event loop).
 *
 *   node --import tsx bench/peers/transformers-server.ts [--port 0] [--host 127.0.0.1]
 *        [--embed-model ID] [--rerank-model ID] [--api-key KEY]      (env BENCH_API_KEY)
 *
 * Routes: POST /v1/embeddings (OpenAI shape, encoding_format float|base64), POST /v1/rerank
 * ({query, documents, top_n?} -> {results: [{index, relevance_score}]}), GET /health.
 * Prints one JSON line `{"listening": "<url>"}` on stdout once ready.
 */
import Fastify from 'fastify';
import { DEFAULT_EMBED_MODEL, DEFAULT_RERANK_MODEL, flagNumber, flagString, parseFlags } from '../lib/common.js';
import { loadTransformersPeer } from './transformers-models.js';

const f = parseFlags(process.argv.slice(2));
const embedModel = flagString(f, 'embed-model', DEFAULT_EMBED_MODEL);
const rerankModel = flagString(f, 'rerank-model', DEFAULT_RERANK_MODEL);
const apiKey = flagString(f, 'api-key', process.env.BENCH_API_KEY ?? '');

const peer = await loadTransformersPeer(embedModel, rerankModel);
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
  const { vectors, dim, tokens } = await peer.embed(texts);
  const data = texts.map((_, i) => {
    const row = vectors.subarray(i * dim, (i + 1) * dim);
    const embedding =
      format === 'base64'
        ? Buffer.from(row.buffer, row.byteOffset, row.byteLength).toString('base64')
        : Array.from(row);
    return { object: 'embedding', index: i, embedding };
  });
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
  const scores = await peer.rerank(query, documents);
  const results = scores
    .map((relevance_score, index) => ({ index, relevance_score }))
    .sort((a, b) => b.relevance_score - a.relevance_score);
  return { model: req.body.model ?? rerankModel, results: topN ? results.slice(0, topN) : results };
});

const url = await app.listen({ port: flagNumber(f, 'port', 0), host: flagString(f, 'host', '127.0.0.1') });
process.stdout.write(JSON.stringify({ listening: url }) + '\n');

const stop = (): void => {
  void app.close().then(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
