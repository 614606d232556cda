/**
 * BEIR evaluation: reads a collection in the BEIR layout (corpus.jsonl[.gz], queries.jsonl,
 * qrels/test.tsv) and scores rankings with nDCG@10 the way BEIR's EvaluateRetrieval does
 * (pytrec_eval ndcg_cut_10; with ignore_identical_ids, a retrieved document whose id is the
 * query's own id is dropped before scoring, as ArguAna needs).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DocumentIndex, type IndexDocument } from '../../src/search/index/document-index.js';
import { readSources } from '../../src/search/index/sources.js';

export type Qrels = Map<string, Map<string, number>>;

export interface BeirQuery {
  id: string;
  text: string;
}

export interface BeirCollection {
  corpus: IndexDocument[];
  /** The test queries (those with judgments), in file order. */
  queries: BeirQuery[];
  qrels: Qrels;
}

export function hasCollection(dir: string): boolean {
  return existsSync(join(dir, 'corpus.jsonl.gz')) || existsSync(join(dir, 'corpus.jsonl'));
}

export function readQrels(dir: string): Qrels {
  const qrels: Qrels = new Map();
  for (const line of readFileSync(join(dir, 'qrels', 'test.tsv'), 'utf8')
    .split('\n')
    .slice(1)) {
    const [query, doc, score] = line.trim().split('\t');
    if (!query || !doc) continue;
    if (!qrels.has(query)) qrels.set(query, new Map());
    qrels.get(query)!.set(doc, Number(score));
  }
  return qrels;
}

export function readQueries(dir: string, qrels: Qrels): BeirQuery[] {
  return readFileSync(join(dir, 'queries.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { _id: string; text: string })
    .filter((q) => qrels.has(q._id))
    .map((q) => ({ id: q._id, text: q.text }));
}

export async function readCollection(dir: string): Promise<BeirCollection> {
  const qrels = readQrels(dir);
  const queries = readQueries(dir, qrels);
  const corpusFile = existsSync(join(dir, 'corpus.jsonl.gz')) ? 'corpus.jsonl.gz' : 'corpus.jsonl';
  const corpus: IndexDocument[] = [];
  for await (const doc of readSources([join(dir, corpusFile)])) corpus.push(doc);
  return { corpus, queries, qrels };
}

/** nDCG@10 with the ideal over every judged document (pytrec_eval ndcg_cut_10, linear gains). */
export function ndcgAt10(ranked: readonly string[], relevant: Map<string, number>): number {
  let dcg = 0;
  ranked.slice(0, 10).forEach((doc, i) => (dcg += (relevant.get(doc) ?? 0) / Math.log2(i + 2)));
  const ideal = [...relevant.values()]
    .sort((a, b) => b - a)
    .slice(0, 10)
    .reduce((sum, gain, i) => sum + gain / Math.log2(i + 2), 0);
  return ideal > 0 ? dcg / ideal : 0;
}

/**
 * Mean nDCG@10 of `search` (document keys, best first) over the queries, with BEIR's
 * ignore_identical_ids: the query's own id is removed from its ranking before the cut at 10,
 * so `search` should return a few more than 10.
 */
export async function evaluateNdcg10(
  collection: Pick<BeirCollection, 'queries' | 'qrels'>,
  search: (query: BeirQuery) => readonly string[] | Promise<readonly string[]>,
): Promise<{ ndcg: number; queries: number; seconds: number }> {
  let total = 0;
  const started = performance.now();
  for (const query of collection.queries) {
    const ranked = (await search(query)).filter((key) => key !== query.id);
    total += ndcgAt10(ranked, collection.qrels.get(query.id)!);
  }
  return {
    ndcg: total / collection.queries.length,
    queries: collection.queries.length,
    seconds: (performance.now() - started) / 1000,
  };
}

/**
 * BM25 of the local index on a collection: the whole corpus in an in-memory index, every query
 * asked for 11 documents (one more than 10: its own document, when found, is dropped before the
 * cut). `seen` gets each ranking as the index gave it.
 */
export async function evaluateBm25(
  collection: BeirCollection,
  seen?: (query: BeirQuery, ranked: readonly string[]) => void,
): Promise<{ ndcg: number; queries: number; seconds: number; indexSeconds: number }> {
  const index = DocumentIndex.open(':memory:');
  try {
    const started = performance.now();
    const { ids } = index.upsert(collection.corpus);
    const keys = new Map([...index.documents(ids)].map(([id, doc]) => [id, doc.key]));
    // The first query builds the in-memory inverted index.
    index.bm25('warm up', 1);
    const indexSeconds = (performance.now() - started) / 1000;
    const result = await evaluateNdcg10(collection, (query) => {
      const ranked = index.bm25(query.text, 11).map((s) => keys.get(s.id)!);
      seen?.(query, ranked);
      return ranked;
    });
    return { ...result, indexSeconds };
  } finally {
    index.close();
  }
}
