/**
 * BM25 over an in-memory inverted index of the documents' title and text.
 *
 * Written by hand rather than asked of SQLite FTS5: a whole paragraph as the query (ArguAna's
 * arguments run to 800 words) is an OR of hundreds of terms, which FTS5 answers in tens of
 * milliseconds to seconds; walking the posting lists here takes well under one. It also lets a
 * query term that occurs several times count several times (as in Lucene), which helps long queries.
 *
 * Terms are lower-cased, stripped of diacritics and Porter-stemmed (as FTS5's
 * `porter unicode61 remove_diacritics 2`); stopwords are dropped from queries only.
 */
import type { Scored } from '../fusion.js';
import { porterStem } from './porter-stemmer.js';
import { isStopword } from './stopwords.js';

export interface Bm25Parameters {
  /** Term-frequency saturation. */
  k1: number;
  /** Document-length normalisation, 0 (none) to 1 (full). */
  b: number;
}

/** Lucene's defaults; long argumentative documents and queries do best near them. */
export const defaultBm25Parameters: Bm25Parameters = { k1: 1.2, b: 0.75 };

const wordPattern = /[\p{L}\p{N}]+/gu;
const stems = new Map<string, string>();

/** The index terms of a text, in order (repeats kept). */
export function analyze(text: string): string[] {
  const words =
    text
      .normalize('NFKD')
      .replace(/\p{M}+/gu, '')
      .toLowerCase()
      .match(wordPattern) ?? [];
  return words.map((word) => {
    let stem = stems.get(word);
    if (stem === undefined) {
      stem = porterStem(word);
      if (stems.size < 500_000) stems.set(word, stem);
    }
    return stem;
  });
}

/** The query's terms with how often each occurs; stopwords dropped unless nothing else is left. */
export function queryTerms(query: string): Map<string, number> {
  const words =
    query
      .normalize('NFKD')
      .replace(/\p{M}+/gu, '')
      .toLowerCase()
      .match(wordPattern) ?? [];
  const content = words.filter((word) => !isStopword(word));
  const counts = new Map<string, number>();
  for (const term of analyze((content.length > 0 ? content : words).join(' ')))
    counts.set(term, (counts.get(term) ?? 0) + 1);
  return counts;
}

interface Postings {
  /** Rows, including those of removed documents until the next rebuild. */
  ids: number[];
  frequencies: number[];
  /** Documents in the index with the term. */
  live: number;
}

function termCounts(terms: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const term of terms) counts.set(term, (counts.get(term) ?? 0) + 1);
  return counts;
}

export class Bm25Index {
  private readonly postings = new Map<string, Postings>();
  /** One row per document ever added: its id (-1 once removed) and length in terms. */
  private readonly ids: number[] = [];
  private readonly lengths: number[] = [];
  private readonly rows = new Map<number, number>();
  private totalLength = 0;

  constructor(private readonly parameters: Bm25Parameters = defaultBm25Parameters) {}

  /** Documents in the index. */
  get size(): number {
    return this.rows.size;
  }

  /** Rows of removed documents still in the posting lists (a rebuild drops them). */
  get removed(): number {
    return this.ids.length - this.rows.size;
  }

  /** Adds one document (an id in the index must be removed first). */
  add(id: number, text: string): void {
    if (this.rows.has(id)) throw new Error(`BM25: document ${id} is already in the index`);
    const row = this.ids.length;
    const terms = analyze(text);
    this.ids.push(id);
    this.lengths.push(terms.length);
    this.rows.set(id, row);
    this.totalLength += terms.length;
    for (const [term, frequency] of termCounts(terms)) {
      let list = this.postings.get(term);
      if (!list) this.postings.set(term, (list = { ids: [], frequencies: [], live: 0 }));
      list.ids.push(row);
      list.frequencies.push(frequency);
      list.live++;
    }
  }

  /** Removes a document; `text` is what it was added with (its terms leave the counts). */
  remove(id: number, text: string): void {
    const row = this.rows.get(id);
    if (row === undefined) return;
    this.rows.delete(id);
    this.ids[row] = -1;
    this.totalLength -= this.lengths[row]!;
    for (const term of termCounts(analyze(text)).keys()) {
      const list = this.postings.get(term);
      if (list) list.live--;
    }
  }

  /** Best first; `allowed` (document ids) restricts the candidates. */
  search(query: string, limit: number, allowed?: ReadonlySet<number>): Scored[] {
    const n = this.rows.size;
    if (n === 0 || limit <= 0) return [];
    const { k1, b } = this.parameters;
    const averageLength = this.totalLength / n;
    const scores = new Float64Array(this.ids.length);
    const touched: number[] = [];
    for (const [term, queryFrequency] of queryTerms(query)) {
      const list = this.postings.get(term);
      if (!list || list.live === 0) continue;
      const df = list.live;
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
      const weight = idf * queryFrequency;
      for (let i = 0; i < list.ids.length; i++) {
        const row = list.ids[i]!;
        const tf = list.frequencies[i]!;
        if (scores[row] === 0) touched.push(row);
        scores[row] =
          scores[row]! + (weight * tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * this.lengths[row]!) / averageLength));
      }
    }
    const best: Scored[] = [];
    for (const row of touched) {
      const score = scores[row]!;
      const id = this.ids[row]!;
      if (id < 0 || (allowed && !allowed.has(id))) continue;
      if (
        best.length < limit ||
        score > best[best.length - 1]!.score ||
        (score === best[best.length - 1]!.score && id < best[best.length - 1]!.id)
      ) {
        let at = best.length;
        while (at > 0 && (best[at - 1]!.score < score || (best[at - 1]!.score === score && best[at - 1]!.id > id)))
          at--;
        best.splice(at, 0, { id, score });
        if (best.length > limit) best.pop();
      }
    }
    return best;
  }
}
