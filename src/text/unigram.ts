/**
 * The Unigram model of HF tokenizers, exactly, for @huggingface/tokenizers.
 *
 * The library finds the best segmentation with a lattice of node objects and breaks ties between
 * equally scored segmentations otherwise than HF tokenizers (and sentencepiece) do, so repeated
 * characters can come out in another order of pieces. This is HF tokenizers' `encode_optimized`:
 * one forward pass over the character positions keeping, at each, the best path ending there
 * (a later candidate wins only with a strictly higher score; pieces from a start are tried
 * shortest first), unknown characters scored `min score - 10`, consecutive unknowns fused into
 * one token. The pieces live in a compact trie, which also replaces the library's much larger one.
 */

/** Builds HF tokenizers' Unigram segmentation (pieces as strings) for a vocabulary of `[piece, score]`. */
export function unigramSegmenter(
  vocab: readonly (readonly [string, number])[],
  unkId: number,
): (text: string) => string[] {
  const trie = new PieceTrie(vocab.map(([piece]) => piece));
  const scores = Float64Array.from(vocab, ([, score]) => score);
  let minScore = Infinity;
  for (const score of scores) minScore = Math.min(minScore, score);
  const unkScore = minScore - 10;

  return (text) => {
    const n = text.length;
    if (n === 0) return [];
    // Best path ending at each UTF-16 position: its score, where its last piece starts, which piece.
    const best = new Float64Array(n + 1);
    const from = new Int32Array(n + 1).fill(-1);
    const piece = new Int32Array(n + 1);
    const { firstEdge, labels, targets, pieceOf, rootChild } = trie;
    for (let start = 0; start < n;) {
      const base = best[start]!;
      const width = isSurrogatePair(text, start) ? 2 : 1;
      let single = false;
      let node = rootChild[text.charCodeAt(start)]!;
      for (let end = start + 1; end <= n; end++) {
        if (end > start + 1) node = child(firstEdge, labels, targets, node, text.charCodeAt(end - 1));
        if (node < 0) break;
        const id = pieceOf[node]!;
        if (id < 0) continue;
        const score = base + scores[id]!;
        if (from[end]! < 0 || score > best[end]!) {
          best[end] = score;
          from[end] = start;
          piece[end] = id;
        }
        if (end - start === width) single = true;
      }
      if (!single) {
        const end = start + width;
        const score = base + unkScore;
        if (from[end]! < 0 || score > best[end]!) {
          best[end] = score;
          from[end] = start;
          piece[end] = unkId;
        }
      }
      start += width;
    }
    // Back from the end; runs of unknown pieces become one token.
    const tokens: string[] = [];
    let unknownEnd = -1;
    for (let end = n; end > 0;) {
      const start = from[end]!;
      if (piece[end] === unkId) {
        if (unknownEnd < 0) unknownEnd = end;
      } else {
        if (unknownEnd >= 0) tokens.push(text.slice(end, unknownEnd));
        unknownEnd = -1;
        tokens.push(text.slice(start, end));
      }
      end = start;
    }
    if (unknownEnd >= 0) tokens.push(text.slice(0, unknownEnd));
    return tokens.reverse();
  };
}

/**
 * A trie of the pieces over UTF-16 code units in compressed-row form: the edges of node k are
 * labels/targets[firstEdge[k] .. firstEdge[k + 1]), sorted by label. About 10 bytes an edge.
 */
class PieceTrie {
  readonly firstEdge: Int32Array;
  readonly labels: Uint16Array;
  readonly targets: Int32Array;
  /** The piece id a node spells, or -1 (the last id when a piece repeats, as a map would keep). */
  readonly pieceOf: Int32Array;
  /** The root's child along each code unit, or -1: the root has thousands of edges. */
  readonly rootChild = new Int32Array(65536).fill(-1);

  constructor(pieces: readonly string[]) {
    // Inserting in sorted order creates each node's edges in label order.
    const order = pieces
      .map((_, id) => id)
      .sort((a, b) => (pieces[a]! < pieces[b]! ? -1 : pieces[a]! > pieces[b]! ? 1 : a - b));
    const parents: number[] = [];
    const edgeLabels: number[] = [];
    const path: number[] = [0]; // node at each depth of the previous piece
    let previous = '';
    let nodes = 1;
    const ends = new Int32Array(pieces.length);
    for (const id of order) {
      const text = pieces[id]!;
      let shared = 0;
      while (
        shared < text.length &&
        shared < previous.length &&
        text.charCodeAt(shared) === previous.charCodeAt(shared)
      )
        shared++;
      path.length = shared + 1;
      for (let i = shared; i < text.length; i++) {
        parents.push(path[i]!);
        edgeLabels.push(text.charCodeAt(i));
        path.push(nodes++);
      }
      ends[id] = path[text.length]!;
      previous = text;
    }
    // Edge e leads to node e + 1; group the edges by parent, keeping their (label) order.
    this.firstEdge = new Int32Array(nodes + 1);
    for (const parent of parents) this.firstEdge[parent + 1]!++;
    for (let k = 0; k < nodes; k++) this.firstEdge[k + 1]! += this.firstEdge[k]!;
    const fill = this.firstEdge.slice(0, nodes);
    this.labels = new Uint16Array(parents.length);
    this.targets = new Int32Array(parents.length);
    for (let e = 0; e < parents.length; e++) {
      const at = fill[parents[e]!]!++;
      this.labels[at] = edgeLabels[e]!;
      this.targets[at] = e + 1;
    }
    for (let at = this.firstEdge[0]!; at < this.firstEdge[1]!; at++)
      this.rootChild[this.labels[at]!] = this.targets[at]!;
    this.pieceOf = new Int32Array(nodes).fill(-1);
    for (let id = 0; id < pieces.length; id++) this.pieceOf[ends[id]!] = id;
  }
}

/** The child of `node` along code unit `label`, or -1. */
function child(firstEdge: Int32Array, labels: Uint16Array, targets: Int32Array, node: number, label: number): number {
  let lo = firstEdge[node]!;
  let hi = firstEdge[node + 1]! - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const at = labels[mid]!;
    if (at === label) return targets[mid]!;
    if (at < label) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

function isSurrogatePair(text: string, i: number): boolean {
  const code = text.charCodeAt(i);
  if (code < 0xd800 || code > 0xdbff) return false;
  const next = text.charCodeAt(i + 1);
  return next >= 0xdc00 && next <= 0xdfff;
}
