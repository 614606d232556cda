/**
 * The shared, deterministic input mix of the bench suite.
 *
 * Embeddings: SciFact claims (short, ../shared/eval/scifact/queries.jsonl) and SciFact-derived passages
 * (10-600 words, ../shared/eval/texts/passages.jsonl) alternating, each list in a fixed seeded order.
 * Rerank: 1 query (a claim) x 50 documents (passages) per request, rotating through both lists.
 * Pre-tokenised forms (for the ceiling) use `@huggingface/tokenizers` and truncate the way HF tokenizers
 * and sentence-transformers do: to 512 tokens keeping the final [SEP]; pairs `longest_first`.
 */
import { join } from 'node:path';
import { ShippedTokenizer, type LibraryTokenizer } from '../src/text/library-patches.js';
import { SHARED_DIR, modelDir, readJson, readJsonl } from './lib/common.js';

export const CLAIMS_PATH = join(SHARED_DIR, 'eval', 'scifact', 'queries.jsonl');
export const PASSAGES_PATH = join(SHARED_DIR, 'eval', 'texts', 'passages.jsonl');
export const MAX_TOKENS = 512;
export const DOCS_PER_RERANK = 50;

/** mulberry32: small deterministic PRNG. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  const r = rng(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

let cache: { claims: string[]; passages: string[] } | undefined;

export function sources(): { claims: string[]; passages: string[] } {
  if (!cache) {
    const claims = readJsonl<{ text: string }>(CLAIMS_PATH).map((q) => q.text);
    const passages = readJsonl<{ text: string }>(PASSAGES_PATH).map((p) => p.text);
    cache = { claims: shuffled(claims, 20240601), passages: shuffled(passages, 20240602) };
  }
  return cache;
}

/** N texts: claim, passage, claim, passage, ... (deterministic). */
export function embeddingMix(n = 256): string[] {
  const { claims, passages } = sources();
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const k = i >> 1;
    out.push(i % 2 === 0 ? claims[k % claims.length]! : passages[k % passages.length]!);
  }
  return out;
}

export interface RerankRequest {
  query: string;
  documents: string[];
}

/** `count` rerank requests of 1 query x 50 documents (deterministic, rotating). */
export function rerankMix(count = 1, docs = DOCS_PER_RERANK): RerankRequest[] {
  const { claims, passages } = sources();
  const out: RerankRequest[] = [];
  for (let k = 0; k < count; k++) {
    const documents: string[] = [];
    for (let j = 0; j < docs; j++) documents.push(passages[(k * docs + j) % passages.length]!);
    // Claims from the far end of the shuffled list, so rerank queries differ from the embedding mix's.
    out.push({ query: claims[claims.length - 1 - (k % claims.length)]!, documents });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Tokenisation

export interface Encoded {
  /** token ids including [CLS]/[SEP] */
  ids: number[];
  /** token type ids (all 0 for single texts) */
  typeIds: number[];
}

export interface BertTokenizer {
  tokenizer: LibraryTokenizer;
  cls: number;
  sep: number;
  pad: number;
  encode(text: string): Encoded;
  encodePair(a: string, b: string): Encoded;
}

const tokenizers = new Map<string, BertTokenizer>();

export function loadTokenizer(modelId: string): BertTokenizer {
  const cached = tokenizers.get(modelId);
  if (cached) return cached;
  const dir = modelDir(modelId);
  const tokenizer = new ShippedTokenizer(
    readJson<object>(join(dir, 'tokenizer.json')),
    readJson<object>(join(dir, 'tokenizer_config.json')),
  );
  const id = (t: string): number => {
    const v = tokenizer.token_to_id(t);
    if (v === undefined) throw new Error(`${modelId}: tokenizer has no ${t}`);
    return v;
  };
  const cls = id('[CLS]');
  const sep = id('[SEP]');
  const pad = id('[PAD]');
  const bare = (text: string): number[] => tokenizer.encode(text, { add_special_tokens: false }).ids;
  const tok: BertTokenizer = {
    tokenizer,
    cls,
    sep,
    pad,
    encode(text) {
      let ids = tokenizer.encode(text, { add_special_tokens: true }).ids;
      if (ids.length > MAX_TOKENS) ids = [...ids.slice(0, MAX_TOKENS - 1), sep];
      return { ids, typeIds: new Array<number>(ids.length).fill(0) };
    },
    encodePair(a, b) {
      let qa = bare(a);
      let qb = bare(b);
      const budget = MAX_TOKENS - 3;
      if (qa.length + qb.length > budget) {
        // HF tokenizers' longest_first (Rust `truncate_encodings`), exactly.
        // n1: the shorter's length, n2: the longer's share.
        const swap = qa.length > qb.length;
        let n1 = Math.min(qa.length, qb.length);
        let n2 = n1 > budget ? n1 : Math.max(n1, budget - n1);
        if (n1 + n2 > budget) {
          n1 = Math.floor(budget / 2);
          n2 = n1 + (budget % 2);
        }
        if (swap) [n1, n2] = [n2, n1];
        qa = qa.slice(0, n1);
        qb = qb.slice(0, n2);
      }
      const ids = [cls, ...qa, sep, ...qb, sep];
      const typeIds = [...new Array<number>(qa.length + 2).fill(0), ...new Array<number>(qb.length + 1).fill(1)];
      return { ids, typeIds };
    },
  };
  tokenizers.set(modelId, tok);
  return tok;
}

export function tokenizeMix(modelId: string, texts: readonly string[]): Encoded[] {
  const tok = loadTokenizer(modelId);
  return texts.map((t) => tok.encode(t));
}

export function tokenizePairs(modelId: string, requests: readonly RerankRequest[]): Encoded[] {
  const tok = loadTokenizer(modelId);
  return requests.flatMap((r) => r.documents.map((d) => tok.encodePair(r.query, d)));
}

export interface LengthStats {
  count: number;
  tokens: number;
  min: number;
  mean: number;
  median: number;
  max: number;
  truncated: number;
}

export function lengthStats(enc: readonly Encoded[]): LengthStats {
  const ls = enc.map((e) => e.ids.length).sort((a, b) => a - b);
  const tokens = ls.reduce((a, b) => a + b, 0);
  return {
    count: ls.length,
    tokens,
    min: ls[0] ?? 0,
    mean: ls.length ? Math.round((tokens / ls.length) * 10) / 10 : 0,
    median: ls[ls.length >> 1] ?? 0,
    max: ls[ls.length - 1] ?? 0,
    truncated: ls.filter((l) => l >= MAX_TOKENS).length,
  };
}

/** Length buckets used to report single-input latency. */
export const LENGTH_BUCKETS: ReadonlyArray<readonly [number, number]> = [
  [1, 32],
  [33, 64],
  [65, 128],
  [129, 256],
  [257, 512],
];

export function bucketOf(len: number): string {
  const b = LENGTH_BUCKETS.find(([lo, hi]) => len >= lo && len <= hi) ?? LENGTH_BUCKETS[LENGTH_BUCKETS.length - 1]!;
  return `${b[0]}-${b[1]}`;
}
