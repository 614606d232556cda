import type { EmbedResult } from '../../core/embeddings.js';
import { float32ToJson } from '../../vectors/encoding.js';

/** An embed result's vectors as a JSON array of arrays, written straight from the Float32Array. */
export function vectorsToJson({ vectors, dimensions, count }: EmbedResult): string {
  const rows = new Array<string>(count);
  for (let i = 0; i < count; i++) rows[i] = float32ToJson(vectors.subarray(i * dimensions, (i + 1) * dimensions));
  return `[${rows.join(',')}]`;
}
