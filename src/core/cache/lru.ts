/**
 * A least-recently-used map of vectors bounded by bytes, not entries: vectors of different models
 * differ in width, and the bound is what the operator sizes memory by. A Map keeps insertion order,
 * so re-inserting on a hit makes its first key the least recently used one.
 */

/** What one entry costs beyond its vector's bytes: the key string, the Map slot, the typed array object. */
export const entryOverheadBytes = 160;

export class VectorLru {
  private readonly entries = new Map<string, Float32Array>();
  private used = 0;
  evictions = 0;

  constructor(readonly maxBytes: number) {}

  /** Bytes held, as counted for the bound. */
  get bytes(): number {
    return this.used;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The vector under `key`, now the most recently used; undefined when absent. */
  get(key: string): Float32Array | undefined {
    const vector = this.entries.get(key);
    if (vector === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, vector);
    return vector;
  }

  /** Stores `vector` (kept as given: callers hand over a copy), evicting the least recently used entries to stay within the bound. */
  set(key: string, vector: Float32Array): void {
    const cost = costOf(key, vector);
    if (cost > this.maxBytes) return;
    const previous = this.entries.get(key);
    if (previous !== undefined) {
      this.entries.delete(key);
      this.used -= costOf(key, previous);
    }
    while (this.used + cost > this.maxBytes) {
      const oldest = this.entries.keys().next().value as string;
      this.used -= costOf(oldest, this.entries.get(oldest)!);
      this.entries.delete(oldest);
      this.evictions++;
    }
    this.entries.set(key, vector);
    this.used += cost;
  }

  clear(): void {
    this.entries.clear();
    this.used = 0;
  }
}

function costOf(key: string, vector: Float32Array): number {
  return vector.byteLength + key.length * 2 + entryOverheadBytes;
}
