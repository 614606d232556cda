/**
 * The two passes of resample.ts as WebAssembly SIMD kernels: the same fixed-point sums, one pixel's
 * three channels (and one unused lane) in an i32x4, so a tap costs one widening load, one multiply
 * and one add instead of three of each. Integer lanes wrap as C's int and JS's `| 0` do, and the
 * saturating narrows (i32 -> i16 -> u8) are Pillow's clip8 of `sum >> 22`, so the pixels are the
 * same as the scalar passes', bit for bit.
 *
 * The module is a few hundred bytes, assembled here from its instructions (no toolchain, nothing
 * binary in the repository). Each thread has its own instance and memory; an image larger than
 * KEEP_BYTES gets a memory of its own that is dropped after it, so a worker holds at most that much.
 */

/** Memory a thread keeps between images: a 1920x1080 RGB image and its horizontal pass fit. */
const KEEP_BYTES = 16 << 20;
const PAGE = 65_536;

// Instruction encodings (WebAssembly core spec, with the SIMD proposal's 0xfd opcodes).
const I32 = 0x7f;
const V128 = 0x7b;
const op = {
  block: [0x02, 0x40],
  loop: [0x03, 0x40],
  end: [0x0b],
  br: (depth: number) => [0x0c, depth],
  brIf: (depth: number) => [0x0d, depth],
  get: (i: number) => [0x20, i],
  set: (i: number) => [0x21, i],
  tee: (i: number) => [0x22, i],
  i32Load: (offset = 0) => [0x28, 2, ...uleb(offset)],
  i32Store: [0x36, 0, 0],
  i32Const: (value: number) => [0x41, ...sleb(value)],
  i32GeU: [0x4f],
  i32Add: [0x6a],
  i32Mul: [0x6c],
  v128Load: [0xfd, 0x00, 0, 0],
  v128Load8x8U: [0xfd, 0x02, 0, 0],
  v128Load32Splat: [0xfd, 0x09, 2, 0],
  v128Store: [0xfd, 0x0b, 0, 0],
  v128Const: (lanes: number[]) => [
    0xfd,
    0x0c,
    ...lanes.flatMap((v) => [v & 255, (v >> 8) & 255, (v >> 16) & 255, v >>> 24]),
  ],
  i32x4ExtractLane0: [0xfd, 0x1b, 0],
  i8x16NarrowI16x8U: [0xfd, 0x66],
  i16x8NarrowI32x4S: [0xfd, 0x85, 0x01],
  i16x8ExtendLowU: [0xfd, 0x89, 0x01],
  i16x8ExtendHighU: [0xfd, 0x8a, 0x01],
  i32x4ExtendLowU: [0xfd, 0xa9, 0x01],
  i32x4ExtendHighU: [0xfd, 0xaa, 0x01],
  i32x4ShrS: [0xfd, 0xac, 0x01],
  i32x4Add: [0xfd, 0xae, 0x01],
  i32x4Mul: [0xfd, 0xb5, 0x01],
};

function uleb(value: number): number[] {
  const out: number[] = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
  return out;
}

function sleb(value: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = value & 0x7f;
    value >>= 7;
    if ((value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0)) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}

const section = (id: number, body: number[]) => [id, ...uleb(body.length), ...body];
const vec = (items: number[][]) => [...uleb(items.length), ...items.flat()];
const name = (s: string) => [...uleb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];

const PRECISION_BITS = 22;
const HALF = 1 << (PRECISION_BITS - 1);

/** `acc` (v128 local) to u8 lanes: `>> 22`, then saturated to 0..255 (Pillow's clip8). Leaves a v128. */
const clip8 = (acc: number) => [
  ...op.get(acc),
  ...op.i32Const(PRECISION_BITS),
  ...op.i32x4ShrS,
  ...op.tee(acc),
  ...op.get(acc),
  ...op.i16x8NarrowI32x4S,
  ...op.tee(acc),
  ...op.get(acc),
  ...op.i8x16NarrowI16x8U,
];

/**
 * horizontal(src, inStride, rows, dst, outWidth, weights, bounds, ksize): each of `rows` rows of
 * packed RGB at `src` resampled along x into `dst`. Reads 8 bytes at each tap's pixel and writes 4
 * at each output pixel (the 4th overwritten by the next): src needs 5 bytes after it, dst 1.
 */
function horizontalBody(): number[] {
  const [src, inStride, rows, dst, outWidth, weights, bounds, ksize] = [0, 1, 2, 3, 4, 5, 6, 7];
  const [yy, xx, p, k, end, o, b, kbase] = [8, 9, 10, 11, 12, 13, 14, 15];
  const acc = 16;
  const code = [
    ...op.get(dst),
    ...op.set(o),
    ...op.i32Const(0),
    ...op.set(yy),
    ...op.block,
    ...op.loop,
    ...op.get(yy),
    ...op.get(rows),
    ...op.i32GeU,
    ...op.brIf(1),
    ...op.i32Const(0),
    ...op.set(xx),
    ...op.get(bounds),
    ...op.set(b),
    ...op.get(weights),
    ...op.set(kbase),
    ...op.block,
    ...op.loop,
    ...op.get(xx),
    ...op.get(outWidth),
    ...op.i32GeU,
    ...op.brIf(1),
    // p = src + first * 3; k = kbase; end = kbase + count * 4
    ...op.get(src),
    ...op.get(b),
    ...op.i32Load(),
    ...op.i32Const(3),
    ...op.i32Mul,
    ...op.i32Add,
    ...op.set(p),
    ...op.get(kbase),
    ...op.tee(k),
    ...op.get(b),
    ...op.i32Load(4),
    ...op.i32Const(4),
    ...op.i32Mul,
    ...op.i32Add,
    ...op.set(end),
    ...op.v128Const([HALF, HALF, HALF, HALF]),
    ...op.set(acc),
    ...op.block,
    ...op.loop,
    ...op.get(k),
    ...op.get(end),
    ...op.i32GeU,
    ...op.brIf(1),
    ...op.get(acc),
    ...op.get(p),
    ...op.v128Load8x8U,
    ...op.i32x4ExtendLowU,
    ...op.get(k),
    ...op.v128Load32Splat,
    ...op.i32x4Mul,
    ...op.i32x4Add,
    ...op.set(acc),
    ...op.get(p),
    ...op.i32Const(3),
    ...op.i32Add,
    ...op.set(p),
    ...op.get(k),
    ...op.i32Const(4),
    ...op.i32Add,
    ...op.set(k),
    ...op.br(0),
    ...op.end,
    ...op.end,
    ...op.get(o),
    ...clip8(acc),
    ...op.i32x4ExtractLane0,
    ...op.i32Store,
    ...op.get(o),
    ...op.i32Const(3),
    ...op.i32Add,
    ...op.set(o),
    ...op.get(b),
    ...op.i32Const(8),
    ...op.i32Add,
    ...op.set(b),
    ...op.get(kbase),
    ...op.get(ksize),
    ...op.i32Const(4),
    ...op.i32Mul,
    ...op.i32Add,
    ...op.set(kbase),
    ...op.get(xx),
    ...op.i32Const(1),
    ...op.i32Add,
    ...op.set(xx),
    ...op.br(0),
    ...op.end,
    ...op.end,
    ...op.get(src),
    ...op.get(inStride),
    ...op.i32Add,
    ...op.set(src),
    ...op.get(yy),
    ...op.i32Const(1),
    ...op.i32Add,
    ...op.set(yy),
    ...op.br(0),
    ...op.end,
    ...op.end,
    ...op.end,
  ];
  return [
    ...vec([
      [8, I32],
      [1, V128],
    ]),
    ...code,
  ];
}

/**
 * vertical(src, stride, height, dst, weights, bounds, ksize): each of `height` output rows from the
 * rows of `src` its taps cover (bounds relative to src), 16 bytes of the row at a time in four
 * i32x4 sums. Reads and writes whole 16-byte blocks: src and dst need 15 bytes after them.
 */
function verticalBody(): number[] {
  const [src, stride, height, dst, weights, bounds, ksize] = [0, 1, 2, 3, 4, 5, 6];
  const [yy, i, p, k, end, o, b] = [7, 8, 9, 10, 11, 12, 13];
  const [a0, a1, a2, a3, pix, w, half] = [14, 15, 16, 17, 18, 19, 20];
  const accumulate = (acc: number, extendI16: number[], extendI32: number[]) => [
    ...op.get(acc),
    ...op.get(pix),
    ...extendI16,
    ...extendI32,
    ...op.get(w),
    ...op.i32x4Mul,
    ...op.i32x4Add,
    ...op.set(acc),
  ];
  const narrowPair = (x: number, y: number) => [
    ...op.get(x),
    ...op.i32Const(PRECISION_BITS),
    ...op.i32x4ShrS,
    ...op.get(y),
    ...op.i32Const(PRECISION_BITS),
    ...op.i32x4ShrS,
    ...op.i16x8NarrowI32x4S,
  ];
  const code = [
    ...op.v128Const([HALF, HALF, HALF, HALF]),
    ...op.set(half),
    ...op.get(dst),
    ...op.set(o),
    ...op.get(bounds),
    ...op.set(b),
    ...op.i32Const(0),
    ...op.set(yy),
    ...op.block,
    ...op.loop,
    ...op.get(yy),
    ...op.get(height),
    ...op.i32GeU,
    ...op.brIf(1),
    ...op.i32Const(0),
    ...op.set(i),
    ...op.block,
    ...op.loop,
    ...op.get(i),
    ...op.get(stride),
    ...op.i32GeU,
    ...op.brIf(1),
    // p = src + first * stride + i; k = weights + yy * ksize * 4; end = k + count * 4
    ...op.get(src),
    ...op.get(b),
    ...op.i32Load(),
    ...op.get(stride),
    ...op.i32Mul,
    ...op.i32Add,
    ...op.get(i),
    ...op.i32Add,
    ...op.set(p),
    ...op.get(weights),
    ...op.get(yy),
    ...op.get(ksize),
    ...op.i32Mul,
    ...op.i32Const(4),
    ...op.i32Mul,
    ...op.i32Add,
    ...op.tee(k),
    ...op.get(b),
    ...op.i32Load(4),
    ...op.i32Const(4),
    ...op.i32Mul,
    ...op.i32Add,
    ...op.set(end),
    ...op.get(half),
    ...op.tee(a0),
    ...op.tee(a1),
    ...op.tee(a2),
    ...op.set(a3),
    ...op.block,
    ...op.loop,
    ...op.get(k),
    ...op.get(end),
    ...op.i32GeU,
    ...op.brIf(1),
    ...op.get(p),
    ...op.v128Load,
    ...op.set(pix),
    ...op.get(k),
    ...op.v128Load32Splat,
    ...op.set(w),
    ...accumulate(a0, op.i16x8ExtendLowU, op.i32x4ExtendLowU),
    ...accumulate(a1, op.i16x8ExtendLowU, op.i32x4ExtendHighU),
    ...accumulate(a2, op.i16x8ExtendHighU, op.i32x4ExtendLowU),
    ...accumulate(a3, op.i16x8ExtendHighU, op.i32x4ExtendHighU),
    ...op.get(p),
    ...op.get(stride),
    ...op.i32Add,
    ...op.set(p),
    ...op.get(k),
    ...op.i32Const(4),
    ...op.i32Add,
    ...op.set(k),
    ...op.br(0),
    ...op.end,
    ...op.end,
    ...op.get(o),
    ...op.get(i),
    ...op.i32Add,
    ...narrowPair(a0, a1),
    ...narrowPair(a2, a3),
    ...op.i8x16NarrowI16x8U,
    ...op.v128Store,
    ...op.get(i),
    ...op.i32Const(16),
    ...op.i32Add,
    ...op.set(i),
    ...op.br(0),
    ...op.end,
    ...op.end,
    ...op.get(o),
    ...op.get(stride),
    ...op.i32Add,
    ...op.set(o),
    ...op.get(b),
    ...op.i32Const(8),
    ...op.i32Add,
    ...op.set(b),
    ...op.get(yy),
    ...op.i32Const(1),
    ...op.i32Add,
    ...op.set(yy),
    ...op.br(0),
    ...op.end,
    ...op.end,
    ...op.end,
  ];
  return [
    ...vec([
      [7, I32],
      [7, V128],
    ]),
    ...code,
  ];
}

function moduleBytes(): Uint8Array {
  const i32s = (n: number) => [...uleb(n), ...Array<number>(n).fill(I32)];
  const body = (code: number[]) => [...uleb(code.length), ...code];
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(
      1,
      vec([
        [0x60, ...i32s(8), 0],
        [0x60, ...i32s(7), 0],
      ]),
    ),
    ...section(2, vec([[...name('env'), ...name('memory'), 0x02, 0x00, 0x01]])),
    ...section(3, vec([[0], [1]])),
    ...section(
      7,
      vec([
        [...name('horizontal'), 0x00, 0],
        [...name('vertical'), 0x00, 1],
      ]),
    ),
    ...section(10, vec([body(horizontalBody()), body(verticalBody())])),
  ]);
}

/** The part of the WebAssembly JS API used here (the project's lib settings declare none of it). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
type WasmModule = object;
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => WasmModule;
  Memory: new (descriptor: { initial: number }) => WasmMemory;
  Instance: new (module: WasmModule, imports: object) => { exports: Record<string, unknown> };
}
const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;

type Horizontal = (...args: [number, number, number, number, number, number, number, number]) => void;
type Vertical = (...args: [number, number, number, number, number, number, number]) => void;

interface Kernels {
  memory: WasmMemory;
  horizontal: Horizontal;
  vertical: Vertical;
}

let compiled: WasmModule | null | undefined;
let kept: Kernels | undefined;

/** The compiled module, or null where this runtime has no WebAssembly SIMD. */
function compiledModule(): WasmModule | null {
  if (compiled === undefined) {
    const bytes = moduleBytes();
    compiled = wasm?.validate(bytes) ? new wasm.Module(bytes) : null;
  }
  return compiled;
}

function instantiate(module: WasmModule, bytes: number): Kernels {
  const memory = new wasm!.Memory({ initial: Math.ceil(bytes / PAGE) });
  const { exports } = new wasm!.Instance(module, { env: { memory } });
  return { memory, horizontal: exports.horizontal as Horizontal, vertical: exports.vertical as Vertical };
}

/**
 * Kernels whose memory holds at least `bytes`: this thread's kept instance, or a fresh one for a
 * large image; undefined where there is no SIMD, or no memory that large (the scalar passes run then).
 */
export function simdKernels(bytes: number): Kernels | undefined {
  const module = compiledModule();
  if (!module) return undefined;
  if (bytes > KEEP_BYTES) {
    try {
      return instantiate(module, bytes);
    } catch (error) {
      if (error instanceof RangeError) return undefined;
      throw error;
    }
  }
  kept ??= instantiate(module, KEEP_BYTES);
  return kept;
}

/** A bump allocator over a kernel's memory, 16-byte aligned. */
export function arena(kernels: Kernels): (bytes: number) => number {
  let next = 0;
  return (bytes) => {
    const at = next;
    next = (next + bytes + 15) & ~15;
    if (next > kernels.memory.buffer.byteLength) throw new RangeError('the resample arena is too small');
    return at;
  };
}
