/**
 * Image results of a search engine ranked by what they show: each result's thumbnail (else the
 * image) is fetched under the web reader's address policy and limits, embedded by the search image
 * model's image tower, and scored against the model's vector of the query. An image whose
 * thumbnail can not be fetched or read keeps its place after the scored ones: the engine found it,
 * and we could not look.
 */
import type { CoreContext } from '../../core/context.js';
import { embed } from '../../core/embeddings.js';
import { ApiError } from '../../errors.js';
import { checkImageBytes, type ImageLimits } from '../../image-header.js';
import { cosine } from '../../vectors/scores.js';
import { fetchBody, type FetchLimits, type FetchTarget } from '../reader/fetch-page.js';
import type { SearchImage } from '../types.js';

export interface ThumbnailRanking {
  /** The search image model. */
  model: string;
  /** How thumbnails are fetched (the reader's policy and time limit); maxBytes comes from `image`. */
  fetch: Omit<FetchLimits, 'maxBytes'>;
  image: ImageLimits;
}

/** Thumbnails fetched and embedded at once for one search. */
const atOnce = 8;

const thumbnail: FetchTarget = {
  what: 'thumbnail',
  subject: 'the thumbnail URL',
  param: 'thumbnail_url',
  accept: 'image/png,image/jpeg,image/webp,*/*;q=0.1',
};

export async function rankByThumbnail(
  ctx: CoreContext,
  ranking: ThumbnailRanking,
  query: string,
  images: readonly SearchImage[],
  signal: AbortSignal,
): Promise<SearchImage[]> {
  if (images.length === 0) return [];
  const [queryVector] = splitRows(
    await embed(ctx, { model: ranking.model, input: [query], inputType: 'query', truncate: true }, signal),
  );
  const scores = new Array<number | undefined>(images.length);
  let next = 0;
  const scoreInTurn = async () => {
    while (next < images.length && !signal.aborted) {
      const i = next++;
      scores[i] = await scoreOne(ctx, ranking, images[i]!, queryVector!, signal);
    }
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, images.length) }, scoreInTurn));
  if (signal.aborted) throw signal.reason;
  const scored = images
    .map((image, i) => ({ image, score: scores[i] }))
    .filter((entry): entry is { image: SearchImage; score: number } => entry.score !== undefined)
    .sort((a, b) => b.score - a.score)
    .map(({ image, score }) => ({ ...image, score }));
  return [...scored, ...images.filter((_, i) => scores[i] === undefined)];
}

/** The image's similarity to the query; undefined when its picture can not be had or read. */
async function scoreOne(
  ctx: CoreContext,
  ranking: ThumbnailRanking,
  image: SearchImage,
  query: Float32Array,
  signal: AbortSignal,
): Promise<number | undefined> {
  try {
    const fetched = await fetchBody(
      image.thumbnail_url ?? image.url,
      { ...ranking.fetch, maxBytes: ranking.image.maxBytes },
      thumbnail,
      signal,
    );
    const bytes = new Uint8Array(fetched.body);
    checkImageBytes(bytes, ranking.image, thumbnail.param);
    const [vector] = splitRows(await embed(ctx, { model: ranking.model, input: [{ image: bytes }] }, signal));
    return cosine(query, vector!);
  } catch (error) {
    // A refused address, a slow host, a broken or unsupported picture: unscored, not a failed search.
    if (error instanceof ApiError && !signal.aborted) return undefined;
    throw error;
  }
}

function splitRows(result: { vectors: Float32Array; dimensions: number; count: number }): Float32Array[] {
  return Array.from({ length: result.count }, (_, i) =>
    result.vectors.subarray(i * result.dimensions, (i + 1) * result.dimensions),
  );
}
