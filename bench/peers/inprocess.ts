/**
 * The peer libraries in-process, no HTTP: what a developer gets from calling them directly.
 * transformers.js feature-extraction: one input per call over the mix, and 32 inputs per call in mix
 * order (unsorted, padded to the longest); rerank: 1 query x 50 documents per call.
 */
import { pathToFileURL } from 'node:url';
import {
  DEFAULT_EMBED_MODEL,
  DEFAULT_RERANK_MODEL,
  type Spread,
  flagNumber,
  log,
  nowMs,
  parseFlags,
  roundSpread,
  spread,
} from '../lib/common.js';
import { embeddingMix, rerankMix } from '../mix.js';
import { loadTransformersPeer } from './transformers-models.js';

export interface PeerPoint {
  peer: string;
  case: string;
  unit: 'inputs' | 'pairs';
  perSec: Spread;
  note?: string;
}

export interface PeerOptions {
  n: number;
  repeats: number;
  rerankRequests: number;
  embedModel: string;
  rerankModel: string;
}

export async function runPeersInProcess(opts: PeerOptions): Promise<PeerPoint[]> {
  const peer = await loadTransformersPeer(opts.embedModel, opts.rerankModel);
  const texts = embeddingMix(opts.n);
  const reranks = rerankMix(opts.rerankRequests);
  // Warm-up: a short and a long input, one rerank call.
  await peer.embed([texts[0]!]);
  await peer.embed([texts[1]!]);
  await peer.rerank(reranks[0]!.query, reranks[0]!.documents.slice(0, 4));

  const cases: Array<{
    name: string;
    unit: 'inputs' | 'pairs';
    units: number;
    run: () => Promise<void>;
    note: string;
  }> = [
    {
      name: 'embed 1 input per call',
      unit: 'inputs',
      units: texts.length,
      note: 'pipeline(texts[i]) sequentially over the mix',
      run: async () => {
        for (const t of texts) await peer.embed([t]);
      },
    },
    {
      name: 'embed 32 inputs per call',
      unit: 'inputs',
      units: texts.length,
      note: 'mix order (unsorted), padded to the longest of each call',
      run: async () => {
        for (let i = 0; i < texts.length; i += 32) await peer.embed(texts.slice(i, i + 32));
      },
    },
    {
      name: 'rerank 1x50 per call',
      unit: 'pairs',
      units: reranks.length * 50,
      note: 'AutoModelForSequenceClassification on 50 padded pairs',
      run: async () => {
        for (const r of reranks) await peer.rerank(r.query, r.documents);
      },
    },
  ];
  const out: PeerPoint[] = [];
  for (const c of cases) {
    const rates: number[] = [];
    for (let r = 0; r < opts.repeats; r++) {
      const t0 = nowMs();
      await c.run();
      rates.push(c.units / ((nowMs() - t0) / 1000));
    }
    const p: PeerPoint = {
      peer: 'transformers.js',
      case: c.name,
      unit: c.unit,
      perSec: roundSpread(spread(rates), 1),
      note: c.note,
    };
    log(`  peer transformers.js ${c.name}: ${p.perSec.median} ${c.unit}/s`);
    out.push(p);
  }
  return out;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const f = parseFlags(process.argv.slice(2));
  const quick = f.quick === true;
  runPeersInProcess({
    n: flagNumber(f, 'n', quick ? 64 : 256),
    repeats: flagNumber(f, 'repeats', quick ? 1 : 3),
    rerankRequests: flagNumber(f, 'rerank-requests', quick ? 1 : 4),
    embedModel: DEFAULT_EMBED_MODEL,
    rerankModel: DEFAULT_RERANK_MODEL,
  }).then(
    (r) => process.stdout.write(JSON.stringify(r, null, 2) + '\n'),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
