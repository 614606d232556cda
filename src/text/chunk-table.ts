/**
 * A table from a span of a text to the token ids of that span, looked up without cutting the span
 * out: the caller hashes the span's code units as it scans them (`step`), and a hit compares the
 * stored span in place. A Map keyed by strings needs a new string per span and a hash of it, which
 * was most of the tokeniser's cost on the main thread.
 *
 * Everything lives in two typed arrays, not in objects: a slot array (hash, where the entry is, the
 * key's and the ids' lengths) and one pool of entries, each entry its ids followed by its key's code
 * units. A lookup then touches a slot and one entry, usually two cache lines, which matters because
 * the tables are read between inference runs that have evicted them from the CPU's caches.
 *
 * Open addressing with linear probing; the table starts over when it is half full at its largest or
 * when its pool is full.
 */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
/** Int32 fields per slot: hash, entry offset + 1 (0: empty), key length, ids length. */
const SLOT = 4;

/** Where a hit's ids go. */
export interface IdSink {
  append(source: Int32Array, start: number, count: number): void;
}

export class ChunkTable {
  /** The hash of an empty span; `step(hash, code)` extends it by one code unit (FNV-1a). */
  static readonly seed = FNV_OFFSET | 0;

  static step(hash: number, code: number): number {
    return Math.imul(hash ^ code, FNV_PRIME);
  }

  private slots: Int32Array;
  private mask: number;
  private size = 0;
  private pool: Int32Array;
  private used = 0;

  /**
   * @param maxEntries spans kept before the table starts over
   * @param maxPoolBytes memory for the entries (ids and keys, 4 bytes a value) before it starts over
   */
  constructor(
    private readonly maxEntries: number,
    private readonly maxPoolBytes = 64 << 20,
    initialSlots = 4096,
  ) {
    this.slots = new Int32Array(initialSlots * SLOT);
    this.mask = initialSlots - 1;
    this.pool = new Int32Array(Math.min(initialSlots * 8, maxPoolBytes >> 2));
  }

  /** Appends the ids stored for `text.slice(start, end)`, whose hash is `hash`, to `sink`; false when absent. */
  get(text: string, start: number, end: number, hash: number, sink: IdSink): boolean {
    const length = end - start;
    const { slots, mask, pool } = this;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const at = slot * SLOT;
      const offset = slots[at + 1]! - 1;
      if (offset < 0) return false;
      if (slots[at] !== hash || slots[at + 2] !== length) continue;
      const count = slots[at + 3]!;
      if (!sameKey(pool, offset + count, text, start, length)) continue;
      sink.append(pool, offset, count);
      return true;
    }
  }

  /** Stores `ids` for `text.slice(start, end)` (a span not in the table), whose hash is `hash`. */
  set(text: string, start: number, end: number, hash: number, ids: Int32Array): void {
    const length = end - start;
    const need = ids.length + length;
    if (need > this.maxPoolBytes >> 2) return;
    if (this.used + need > this.pool.length && !this.growPool(this.used + need)) this.clear();
    if (2 * (this.size + 1) > this.mask + 1) {
      if (this.mask + 1 < 2 * this.maxEntries) this.growSlots();
      else this.clear();
    }
    const offset = this.used;
    this.pool.set(ids, offset);
    for (let i = 0; i < length; i++) this.pool[offset + ids.length + i] = text.charCodeAt(start + i);
    this.used += need;
    this.place(hash, offset, length, ids.length);
  }

  private place(hash: number, offset: number, keyLength: number, idsLength: number): void {
    const { slots, mask } = this;
    let slot = hash & mask;
    while (slots[slot * SLOT + 1] !== 0) slot = (slot + 1) & mask;
    const at = slot * SLOT;
    slots[at] = hash;
    slots[at + 1] = offset + 1;
    slots[at + 2] = keyLength;
    slots[at + 3] = idsLength;
    this.size += 1;
  }

  private clear(): void {
    this.slots.fill(0);
    this.size = 0;
    this.used = 0;
  }

  /** Doubles the pool up to its cap; false when `need` values do not fit even then. */
  private growPool(need: number): boolean {
    const cap = this.maxPoolBytes >> 2;
    if (need > cap) return false;
    let length = Math.max(this.pool.length, 1);
    while (length < need) length *= 2;
    const grown = new Int32Array(Math.min(length, cap));
    grown.set(this.pool.subarray(0, this.used));
    this.pool = grown;
    return true;
  }

  private growSlots(): void {
    const old = this.slots;
    const slots = (this.mask + 1) * 2;
    this.slots = new Int32Array(slots * SLOT);
    this.mask = slots - 1;
    this.size = 0;
    for (let at = 0; at < old.length; at += SLOT) {
      if (old[at + 1] !== 0) this.place(old[at]!, old[at + 1]! - 1, old[at + 2]!, old[at + 3]!);
    }
  }
}

/** Whether the code units stored at `key` in `pool` are those of `text` from `start`, `length` of them. */
function sameKey(pool: Int32Array, key: number, text: string, start: number, length: number): boolean {
  for (let i = 0; i < length; i++) if (pool[key + i] !== text.charCodeAt(start + i)) return false;
  return true;
}
