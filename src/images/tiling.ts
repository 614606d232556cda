/**
 * Tiled inference: an image is cut into overlapping tiles, each runs through the model on its
 * own, and the outputs are blended back with linear ramps across the overlaps, so seams do not
 * show and memory depends on the tile and the image width, not on the image area.
 *
 * Pure functions and one accumulator; no I/O. Coordinates are pixels, spans are half-open.
 */

export interface Span {
  start: number;
  end: number;
}

/**
 * Tile spans along one axis. Tiles have the full tile length wherever the axis allows and are
 * spread evenly, so every overlap is at least `overlap`. A fixed-size model gets one tile-long
 * span even when the axis is shorter (the tile is filled by repeating the edge; the excess is
 * cropped); a dynamic-size model gets a span of the axis's own length.
 */
export function tileSpans(length: number, tile: number, overlap: number, fixed: boolean): Span[] {
  if (length <= tile) return [{ start: 0, end: fixed ? tile : length }];
  const step = tile - overlap;
  const count = Math.ceil((length - overlap) / step);
  const spans: Span[] = [];
  for (let i = 0; i < count; i++) {
    const start = Math.round((i * (length - tile)) / (count - 1));
    spans.push({ start, end: start + tile });
  }
  return spans;
}

/**
 * Blend weights of span `i` along one axis, in output pixels (`scale` x the input span): 1 in its
 * own part, rising across the overlap with the previous span and falling across the overlap with
 * the next. Where only neighbours overlap, the weights of the two sum to 1 at every pixel.
 */
export function spanWeights(spans: readonly Span[], i: number, scale: number): Float32Array {
  const span = spans[i]!;
  const length = (span.end - span.start) * scale;
  const rise = i > 0 ? Math.max(0, spans[i - 1]!.end - span.start) * scale : 0;
  const fall = i < spans.length - 1 ? Math.max(0, span.end - spans[i + 1]!.start) * scale : 0;
  const weights = new Float32Array(length);
  for (let x = 0; x < length; x++) {
    let w = 1;
    if (rise > 0) w = Math.min(w, (x + 0.5) / rise);
    if (fall > 0) w = Math.min(w, (length - x - 0.5) / fall);
    weights[x] = w;
  }
  return weights;
}

/**
 * Copies a tile out of an interleaved 8-bit image; pixels outside the image repeat the nearest
 * edge pixel. Always a fresh buffer: it is transferred to a worker.
 */
export function extractTile(
  source: Uint8Array,
  width: number,
  height: number,
  channels: number,
  x0: number,
  y0: number,
  tileWidth: number,
  tileHeight: number,
): Uint8Array {
  const tile = new Uint8Array(tileWidth * tileHeight * channels);
  const inside = x0 >= 0 && y0 >= 0 && x0 + tileWidth <= width && y0 + tileHeight <= height;
  const rowBytes = tileWidth * channels;
  for (let y = 0; y < tileHeight; y++) {
    const sy = Math.min(height - 1, Math.max(0, y0 + y));
    if (inside) {
      const from = (sy * width + x0) * channels;
      tile.set(source.subarray(from, from + rowBytes), y * rowBytes);
      continue;
    }
    for (let x = 0; x < tileWidth; x++) {
      const sx = Math.min(width - 1, Math.max(0, x0 + x));
      const from = (sy * width + sx) * channels;
      const to = (y * tileWidth + x) * channels;
      for (let c = 0; c < channels; c++) tile[to + c] = source[from + c]!;
    }
  }
  return tile;
}

/**
 * Accumulates weighted tile outputs into an 8-bit image. Output rows are held as floats only
 * while a tile that touches them is outstanding; once every tile of a tile row is in, the rows no
 * later tile row touches are normalised into `pixels` and their floats dropped.
 */
export class TileBlender {
  /** The blended image, width x height x channels. */
  readonly pixels: Uint8Array;
  private readonly rows = new Map<number, { values: Float32Array; weights: Float32Array }>();
  private readonly remaining: number[];
  private readonly weightsX: Float32Array[];
  private readonly weightsY: Float32Array[];
  private nextTileRow = 0;
  private flushedRows = 0;
  /** Most output rows held as floats at once (for memory accounting). */
  peakRows = 0;

  constructor(
    readonly width: number,
    readonly height: number,
    readonly channels: number,
    private readonly xSpans: readonly Span[],
    private readonly ySpans: readonly Span[],
    private readonly scale: number,
  ) {
    this.pixels = new Uint8Array(width * height * channels);
    this.remaining = ySpans.map(() => xSpans.length);
    this.weightsX = xSpans.map((_, i) => spanWeights(xSpans, i, scale));
    this.weightsY = ySpans.map((_, j) => spanWeights(ySpans, j, scale));
  }

  /** Adds the output of tile (column i, row j): (span width x scale) x (span height x scale) x channels floats. */
  add(i: number, j: number, output: Float32Array): void {
    const { channels, width, height, scale } = this;
    const x0 = this.xSpans[i]!.start * scale;
    const y0 = this.ySpans[j]!.start * scale;
    const wx = this.weightsX[i]!;
    const wy = this.weightsY[j]!;
    const tileWidth = wx.length;
    if (output.length !== tileWidth * wy.length * channels) {
      throw new Error(`tile (${i}, ${j}) has ${output.length} values; expected ${tileWidth}x${wy.length}x${channels}`);
    }
    const columns = Math.min(tileWidth, width - x0);
    for (let ty = 0; ty < wy.length; ty++) {
      const y = y0 + ty;
      if (y >= height) break;
      const row = this.row(y);
      const rowWeight = wy[ty]!;
      let from = ty * tileWidth * channels;
      let to = x0 * channels;
      for (let tx = 0; tx < columns; tx++) {
        const w = rowWeight * wx[tx]!;
        row.weights[x0 + tx]! += w;
        for (let c = 0; c < channels; c++) row.values[to + c]! += w * output[from + c]!;
        from += channels;
        to += channels;
      }
    }
    this.remaining[j]! -= 1;
    this.flushFinished();
  }

  /** True once every tile has been added (and so every row written). */
  get complete(): boolean {
    return this.flushedRows >= this.height;
  }

  private row(y: number) {
    let row = this.rows.get(y);
    if (!row) {
      row = { values: new Float32Array(this.width * this.channels), weights: new Float32Array(this.width) };
      this.rows.set(y, row);
      this.peakRows = Math.max(this.peakRows, this.rows.size);
    }
    return row;
  }

  private flushFinished(): void {
    while (this.nextTileRow < this.ySpans.length && this.remaining[this.nextTileRow] === 0) {
      this.nextTileRow += 1;
      const until =
        this.nextTileRow < this.ySpans.length
          ? Math.min(this.height, this.ySpans[this.nextTileRow]!.start * this.scale)
          : this.height;
      for (let y = this.flushedRows; y < until; y++) this.flushRow(y);
      this.flushedRows = Math.max(this.flushedRows, until);
    }
  }

  private flushRow(y: number): void {
    const row = this.rows.get(y);
    if (!row) throw new Error(`row ${y} was not covered by any tile`);
    const { channels } = this;
    const base = y * this.width * channels;
    for (let x = 0; x < this.width; x++) {
      const inverse = 1 / row.weights[x]!;
      for (let c = 0; c < channels; c++) {
        const value = row.values[x * channels + c]! * inverse;
        this.pixels[base + x * channels + c] = value < 0 ? 0 : value > 255 ? 255 : Math.round(value);
      }
    }
    this.rows.delete(y);
  }
}
