/**
 * Retrieval over the local index in stages: the rankings named in the settings (BM25, dense
 * vectors), fused, then the cross-encoder over the top of the fused list. Each stage is reachable
 * on its own, for evaluation.
 */
import type { CoreContext } from '../../core/context.js';
import { rerank } from '../../core/rerank.js';
import { fuse, type FusionMethod, type Scored } from '../fusion.js';
import type { DocumentIndex, IndexDocument, IndexFilter, StoredDocument } from './document-index.js';
import { rankImages } from './images.js';
import { createRankings, servedModel, servedReranker, type Ranking, type RankingName } from './rankings.js';
import type { SearchImage } from '../types.js';

export interface RetrieverOptions {
  fusion: FusionMethod;
  /** The rankings hybrid search fuses, in this order. */
  rankings: readonly RankingName[];
  /** Fused candidates the cross-encoder scores (0: no reranking). */
  rerankDepth: number;
  /** The multimodal model whose vectors the image documents hold (searchImageModel); absent: none. */
  imageModel?: string;
}

export type RetrievalMode = RankingName | 'hybrid' | 'rerank';

/** Characters of a document given to the models; the models' windows cut far earlier anyway. */
const modelTextChars = 8000;

export function modelText(doc: Pick<IndexDocument, 'title' | 'text'>): string {
  const text = doc.title ? `${doc.title} ${doc.text}` : doc.text;
  return text.length > modelTextChars ? text.slice(0, modelTextChars) : text;
}

export class LocalRetriever {
  readonly rankings: Record<RankingName, Ranking>;

  constructor(
    private readonly ctx: CoreContext,
    readonly index: DocumentIndex,
    readonly options: RetrieverOptions,
  ) {
    this.rankings = createRankings(ctx, index);
  }

  /** The served embedder whose vectors the index holds, if any model embeds here. */
  get embedder(): string | undefined {
    return servedModel(this.ctx, 'dense');
  }

  get reranker(): string | undefined {
    return servedReranker(this.ctx);
  }

  rank(name: RankingName, query: string, limit: number, filter?: IndexFilter, signal?: AbortSignal): Promise<Scored[]> {
    return this.rankings[name].rank(query, limit, filter, signal);
  }

  /**
   * The configured rankings fused. A ranking with nothing to rank with (no vectors yet) stays
   * out, so one ranking left alone is returned as it is.
   */
  async hybrid(query: string, limit: number, filter?: IndexFilter, signal?: AbortSignal): Promise<Scored[]> {
    const lists: Scored[][] = [];
    for (const name of this.options.rankings) {
      const list = await this.rank(name, query, limit, filter, signal);
      if (list.length > 0) lists.push(list);
    }
    if (lists.length <= 1) return lists[0] ?? [];
    return fuse(this.options.fusion, lists).slice(0, limit);
  }

  /**
   * Reranks the first `depth` of `candidates` with the cross-encoder (or a late-interaction model);
   * the rest keep their order behind them. Scores of reranked documents are the reranker's: a
   * cross-encoder's in (0, 1), a ColBERT model's MaxSim sums.
   */
  async rerank(
    query: string,
    candidates: Scored[],
    depth: number,
    signal?: AbortSignal,
  ): Promise<{ ranked: Scored[]; reranked: number }> {
    const model = this.reranker;
    const head = candidates.slice(0, depth);
    if (!model || head.length === 0) return { ranked: candidates, reranked: 0 };
    const docs = this.index.documents(head.map((c) => c.id));
    const present = head.filter((c) => docs.has(c.id));
    const result = await rerank(
      this.ctx,
      { model, query, documents: present.map((c) => modelText(docs.get(c.id)!)) },
      signal,
    );
    const ranked = result.results.map(({ index, score }) => ({ id: present[index]!.id, score }));
    return { ranked: [...ranked, ...candidates.slice(depth)], reranked: ranked.length };
  }

  /** The full pipeline up to `mode`, best first. */
  async retrieve(
    query: string,
    mode: RetrievalMode,
    limit: number,
    filter?: IndexFilter,
    signal?: AbortSignal,
  ): Promise<{ ranked: Scored[]; reranked: number }> {
    switch (mode) {
      case 'hybrid':
        return { ranked: await this.hybrid(query, limit, filter, signal), reranked: 0 };
      case 'rerank': {
        const candidates = await this.hybrid(query, Math.max(limit, this.options.rerankDepth), filter, signal);
        return this.rerank(query, candidates, Math.max(this.options.rerankDepth, 0), signal);
      }
      default:
        return { ranked: await this.rank(mode, query, limit, filter, signal), reranked: 0 };
    }
  }

  /** The image documents most like the query, best first; none without an image model. */
  images(query: string, limit: number, filter?: IndexFilter, signal?: AbortSignal): Promise<SearchImage[]> {
    const model = this.options.imageModel;
    if (!model) return Promise.resolve([]);
    return rankImages(this.ctx, this.index, model, query, limit, filter, signal);
  }

  documents(ids: readonly number[]): Map<number, StoredDocument> {
    return this.index.documents(ids);
  }
}
