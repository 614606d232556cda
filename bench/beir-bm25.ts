/**
 * BM25 of the local index on a BEIR collection: nDCG@10 (BEIR's evaluation, own id ignored) and
 * queries per second, one query at a time on one thread.
 *
 *   npx tsx bench/beir-bm25.ts ../shared/eval/arguana [../shared/eval/scifact ...]
 */
import { evaluateBm25, readCollection } from './lib/beir.js';

for (const dir of process.argv.slice(2)) {
  const collection = await readCollection(dir);
  const result = await evaluateBm25(collection);
  console.log(
    `${dir}: ${collection.corpus.length} documents indexed in ${result.indexSeconds.toFixed(1)} s; ${result.queries} queries, ` +
      `BM25 nDCG@10 ${result.ndcg.toFixed(4)}, ${(result.queries / result.seconds).toFixed(0)} queries/s`,
  );
}
