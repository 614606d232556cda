/**
 * A table from a span of a text to the token ids of that span, looked up without cutting the span
 * out: the caller hashes the span's code units as it scans them (`step`), and a hit compares the
 * stored span in place (`startsWith` at the offset). A Map keyed by strings needs a new string per
 * span and a hash of it, which was most of the tokeniser's cost on the main thread.
 *
 * Open addressing with linear probing; the table starts over when it is half full at its largest.
 */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

export class ChunkTable<V> {
  /** The hash of an empty span; `step(hash, code)` extends it by one code unit (FNV-1a). */
  static readonly seed = FNV_OFFSET | 0;

  static step(hash: number, code: number): number {
    return Math.imul(hash ^ code, FNV_PRIME);
  }

  private hashes: Int32Array;
  private keys: Array<string | undefined>;
  private values: Array<V | undefined>;
  private mask: number;
  private size = 0;

  constructor(private readonly maxEntries: number, initialSlots = 4096) {
    this.hashes = new Int32Array(initialSlots);
    this.keys = new Array<string | undefined>(initialSlots);
    this.values = new Array<V | undefined>(initialSlots);
    this.mask = initialSlots - 1;
  }

  /** The value stored for `text.slice(start, end)`, whose hash is `hash`, if any. */
  get(text: string, start: number, end: number, hash: number): V | undefined {
    const length = end - start;
    const { hashes, keys, mask } = this;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const key = keys[slot];
      if (key === undefined) return undefined;
      if (hashes[slot] === hash && key.length === length && text.startsWith(key, start)) return this.values[slot];
    }
  }

  /** Stores `value` for `key` (a span not in the table), whose hash is `hash`. */
  set(key: string, hash: number, value: V): void {
    if (2 * (this.size + 1) > this.keys.length) {
      if (2 * this.keys.length <= 2 * this.maxEntries) this.grow();
      else this.clear();
    }
    const { hashes, keys, mask } = this;
    let slot = hash & mask;
    while (keys[slot] !== undefined) slot = (slot + 1) & mask;
    hashes[slot] = hash;
    keys[slot] = key;
    this.values[slot] = value;
    this.size += 1;
  }

  private clear(): void {
    this.keys.fill(undefined);
    this.values.fill(undefined);
    this.size = 0;
  }

  private grow(): void {
    const { hashes, keys, values } = this;
    const slots = keys.length * 2;
    this.hashes = new Int32Array(slots);
    this.keys = new Array<string | undefined>(slots);
    this.values = new Array<V | undefined>(slots);
    this.mask = slots - 1;
    this.size = 0;
    for (let i = 0; i < keys.length; i++) if (keys[i] !== undefined) this.set(keys[i]!, hashes[i]!, values[i]!);
  }
}
