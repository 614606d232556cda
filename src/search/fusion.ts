/**
 * Fusing ranked lists from different retrievers (BM25, dense vectors) into one ranking.
 *
 * - Reciprocal rank fusion (Cormack et al., 2009) uses ranks only: sum of 1 / (k + rank). It needs
 *   no calibration between score scales, which differ wildly between BM25 and cosine.
 * - The normalised mix min-max scales each list's scores to [0, 1] and adds them with weights.
 */

export interface Scored {
  id: number;
  score: number;
}

export type FusionMethod = 'rrf' | 'mix';

/** Lists are sorted best first. Returns ids by fused score, best first (ties by id). */
export function reciprocalRankFusion(lists: readonly (readonly Scored[])[], k = 60): Scored[] {
  const fused = new Map<number, number>();
  for (const list of lists) {
    list.forEach((item, rank) => fused.set(item.id, (fused.get(item.id) ?? 0) + 1 / (k + rank + 1)));
  }
  return sortScores(fused);
}

/**
 * Weighted sum of min-max normalised scores; a document missing from a list gets 0 from it.
 * `weights[i]` belongs to `lists[i]` (default: equal).
 */
export function normalisedScoreMix(lists: readonly (readonly Scored[])[], weights?: readonly number[]): Scored[] {
  const fused = new Map<number, number>();
  lists.forEach((list, i) => {
    if (list.length === 0) return;
    const weight = weights?.[i] ?? 1 / lists.length;
    let min = Infinity;
    let max = -Infinity;
    for (const { score } of list) {
      if (score < min) min = score;
      if (score > max) max = score;
    }
    const span = max - min;
    for (const { id, score } of list) {
      const normalised = span > 0 ? (score - min) / span : 1;
      fused.set(id, (fused.get(id) ?? 0) + weight * normalised);
    }
  });
  return sortScores(fused);
}

export function fuse(method: FusionMethod, lists: readonly (readonly Scored[])[]): Scored[] {
  return method === 'rrf' ? reciprocalRankFusion(lists) : normalisedScoreMix(lists);
}

function sortScores(scores: Map<number, number>): Scored[] {
  return [...scores].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score || a.id - b.id);
}
