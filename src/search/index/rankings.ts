/**
 * The rankings of the local index that hybrid search fuses. Each ranks the whole index on its
 * own terms; the setting searchRankings names which take part. A new kind (learned sparse
 * vectors, say) is one more Ranking here plus the storage it ranks from in DocumentIndex.
 */
import type { CoreContext } from '../../core/context.js';
import { embed } from '../../core/embeddings.js';
import { embedSparse } from '../../core/sparse.js';
import type { Scored } from '../fusion.js';
import type { DocumentIndex, IndexFilter } from './document-index.js';

export const rankingNames = ['bm25', 'dense', 'sparse'] as const;
export type RankingName = (typeof rankingNames)[number];

export interface Ranking {
  readonly name: RankingName;
  /** Best first; empty when the ranking has nothing to rank with (no model served, no vectors). */
  rank(query: string, limit: number, filter?: IndexFilter, signal?: AbortSignal): Promise<Scored[]>;
}

/**
 * The first served embedding model that gives `kind` of vectors (a SPLADE model gives no dense
 * ones), a text embedder before an image-text model: those embed short captions, and rank images.
 */
export function servedModel(ctx: CoreContext, kind: 'dense' | 'sparse'): string | undefined {
  const models = ctx.registry.list().filter((m) => m.task === 'embedding' && m.heads.kinds.includes(kind));
  return (models.find((m) => !m.images) ?? models[0])?.id;
}

/**
 * The model of the reranking stage: the first served cross-encoder, else the first late-interaction
 * (ColBERT) model, which core's rerank scores by MaxSim.
 */
export function servedReranker(ctx: CoreContext): string | undefined {
  const models = ctx.registry.list();
  return (models.find((m) => m.task === 'rerank') ?? models.find((m) => m.lateInteraction !== undefined))?.id;
}

/** BM25 over title and text (in memory, see bm25.ts). */
export class Bm25Ranking implements Ranking {
  readonly name = 'bm25';

  constructor(private readonly index: DocumentIndex) {}

  rank(query: string, limit: number, filter?: IndexFilter): Promise<Scored[]> {
    return Promise.resolve(this.index.bm25(query, limit, filter));
  }
}

/** Cosine similarity to the query's vector from the served embedder. */
export class DenseRanking implements Ranking {
  readonly name = 'dense';

  constructor(
    private readonly ctx: CoreContext,
    private readonly index: DocumentIndex,
  ) {}

  /** The served embedder whose vectors the index holds, if any model embeds here. */
  get model(): string | undefined {
    return servedModel(this.ctx, 'dense');
  }

  async rank(query: string, limit: number, filter?: IndexFilter, signal?: AbortSignal): Promise<Scored[]> {
    const model = this.model;
    if (!model || this.index.vectorCount(model) === 0) return [];
    const { vectors } = await embed(this.ctx, { model, input: [query], inputType: 'query', truncate: true }, signal);
    return this.index.dense(vectors, model, limit, filter);
  }
}

/** The dot product of the query's and each document's sparse vector from the served sparse model (SPLADE). */
export class SparseRanking implements Ranking {
  readonly name = 'sparse';

  constructor(
    private readonly ctx: CoreContext,
    private readonly index: DocumentIndex,
  ) {}

  get model(): string | undefined {
    return servedModel(this.ctx, 'sparse');
  }

  async rank(query: string, limit: number, filter?: IndexFilter, signal?: AbortSignal): Promise<Scored[]> {
    const model = this.model;
    if (!model || this.index.sparseCount(model) === 0) return [];
    const { vectors } = await embedSparse(
      this.ctx,
      { model, input: [query], inputType: 'query', truncate: true },
      signal,
    );
    return this.index.sparse(vectors[0]!, model, limit, filter);
  }
}

export function createRankings(ctx: CoreContext, index: DocumentIndex): Record<RankingName, Ranking> {
  return { bm25: new Bm25Ranking(index), dense: new DenseRanking(ctx, index), sparse: new SparseRanking(ctx, index) };
}
