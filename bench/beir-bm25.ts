/**
 * BM25 of the local index on a BEIR collection: nDCG@10 (BEIR's evaluation, own id ignored) and
 * queries per second, one query at a time on one thread.
 *
 *   npx tsx bench/beir-bm25.ts ../shared/eval/arguana [../shared/eval/scifact ...]
 */
import { DocumentIndex } from '../src/core/search/index/document-index.js';
import { evaluateNdcg10, readCollection } from './lib/beir.js';

for (const dir of process.argv.slice(2)) {
  const collection = await readCollection(dir);
  const index = DocumentIndex.open(':memory:');
  let started = performance.now();
  const { ids } = index.upsert(collection.corpus);
  const keys = new Map([...index.documents(ids)].map(([id, doc]) => [id, doc.key]));
  // The first query builds the in-memory inverted index.
  index.bm25('warm up', 1);
  const indexSeconds = (performance.now() - started) / 1000;
  started = performance.now();
  // One more than 10: the query's own document, when found, is dropped before the cut.
  const result = await evaluateNdcg10(collection, (query) => index.bm25(query.text, 11).map((s) => keys.get(s.id)!));
  console.log(
    `${dir}: ${collection.corpus.length} documents indexed in ${indexSeconds.toFixed(1)} s; ${result.queries} queries, ` +
      `BM25 nDCG@10 ${result.ndcg.toFixed(4)}, ${(result.queries / result.seconds).toFixed(0)} queries/s`,
  );
  index.close();
}
