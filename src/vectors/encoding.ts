/**
 * Vectors to response text: OpenAI's `encoding_format` "base64" (raw little-endian float32) and
 * "float" (a JSON array of numbers).
 */

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Base64 of the vector's bytes as little-endian float32, what OpenAI clients decode. */
export function float32ToBase64(v: Float32Array): string {
  const bytes = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  return (LITTLE_ENDIAN ? bytes : Buffer.from(bytes).swap32()).toString('base64');
}

// Powers of ten for the decimal exponents a float32 can have, correctly rounded (parsed).
const POW10_BIAS = 60;
const POW10 = Float64Array.from({ length: 2 * POW10_BIAS + 1 }, (_, i) => Number(`1e${i - POW10_BIAS}`));
const LOG10_2 = Math.log10(2);
// The decimal exponent of 2^(b - 127) for each biased binary exponent b: a load, not a multiply and a floor.
const DECIMAL_EXPONENT = Int8Array.from({ length: 256 }, (_, b) => Math.floor((b - 127) * LOG10_2));
// "00" .. "99" as character codes.
const DIGIT_PAIRS = Uint8Array.from({ length: 200 }, (_, i) => 48 + (i % 2 === 0 ? Math.floor(i / 20) : (i >> 1) % 10));

// The longest numbers: "-0.000ddddddddd," and "-d.dddddddde-45,".
const MAX_BYTES = 16;
/** Most bytes one number takes in `float32ToJson`'s text, its comma included. */
export const MAX_NUMBER_BYTES = MAX_BYTES;
const ZERO = 48;
const MINUS = 45;
const POINT = 46;
const COMMA = 44;

/**
 * The JSON array text of a vector: each number with 9 significant digits, trailing zeros dropped
 * (OpenAI sends 9-10). Nine digits always read back as the same float32, so no number needs a
 * check: they are within 5e-9 of its value, and every decimal within 2^-25 (3e-8) of it rounds to
 * it (half the gap to either neighbour; subnormals have far more room). Written as bytes: 2-3 times faster than
 * `JSON.stringify(Array.from(v))`, and a third shorter (that prints the float64 widening, 17
 * digits). Throws on NaN and infinities, which JSON cannot carry.
 */
export function float32ToJson(v: Float32Array): string {
  const n = v.length;
  const out = scratchOf(n * MAX_BYTES + 2);
  // The float's bits, for its binary exponent: cheaper than Math.log10.
  const bits = new Uint32Array(v.buffer, v.byteOffset, n);
  let o = 0;
  out[o++] = 91; // [
  for (let i = 0; i < n; i++) {
    if (i !== 0) out[o++] = COMMA;
    const x = v[i]!;
    if (x === 0) {
      if (1 / x < 0) out[o++] = MINUS;
      out[o++] = ZERO;
      continue;
    }
    if (!Number.isFinite(x)) throw new RangeError(`float32ToJson: element ${i} is ${x}, which JSON cannot represent`);
    let a = x;
    if (a < 0) {
      out[o++] = MINUS;
      a = -a;
    }
    // Decimal exponent e (10^e <= a < 10^(e+1)): from the binary one, off by at most one.
    const binary = (bits[i]! >>> 23) & 0xff;
    let e: number;
    if (binary === 0) {
      e = Math.floor(Math.log10(a)); // subnormal
    } else {
      e = DECIMAL_EXPONENT[binary]!;
      if (a >= POW10[POW10_BIAS + e + 1]!) e++;
    }
    // The 9 significant digits, as an integer in [1e8, 1e9); the checks absorb an e off by one.
    let m = Math.round(a * POW10[POW10_BIAS + 8 - e]!);
    if (m >= 1e9) m = Math.round(a * POW10[POW10_BIAS + 8 - ++e]!);
    else if (m < 1e8) m = Math.round(a * POW10[POW10_BIAS + 8 - --e]!);

    if (e < 0 && e >= -4) {
      // 0.000ddddddddd; smaller numbers take the shorter exponent form, as Python prints them
      out[o++] = ZERO;
      out[o++] = POINT;
      for (let z = -1; z > e; z--) out[o++] = ZERO;
      writeNineDigits(out, o, m);
      o = trimZeros(out, o + 9);
    } else if (e >= 0 && e < 8) {
      // ddd.dddddd: write the digits, open a gap for the point
      writeNineDigits(out, o, m);
      const point = o + e + 1;
      out.copyWithin(point + 1, point, o + 9);
      out[point] = POINT;
      o = trimZeros(out, o + 10);
    } else if (e === 8) {
      writeNineDigits(out, o, m);
      o += 9;
    } else {
      // d.ddddddddde±x
      writeNineDigits(out, o, m);
      out.copyWithin(o + 2, o + 1, o + 9);
      out[o + 1] = POINT;
      o = trimZeros(out, o + 10);
      out[o++] = 101; // e
      out[o++] = e < 0 ? MINUS : 43; // + (JSON allows both)
      let exponent = e < 0 ? -e : e;
      if (exponent >= 10) {
        out[o++] = ZERO + Math.floor(exponent / 10);
        exponent %= 10;
      }
      out[o++] = ZERO + exponent;
    }
  }
  out[o++] = 93; // ]
  // Writes past the end of a Buffer are dropped silently: never let that pass as JSON.
  if (o > n * MAX_BYTES + 2) throw new Error('float32ToJson: output overflow');
  return out.toString('latin1', 0, o);
}

/**
 * The bytes the JSON is written into before it is copied out as a string: one buffer kept between
 * calls (they run to the end without yielding), as a new one per vector was a malloc and an
 * external ArrayBuffer to track and free, each time.
 */
let scratch = Buffer.allocUnsafe(0);
/** Above this, a vector gets a buffer of its own, so one huge vector does not stay held. */
const SCRATCH_MAX = 1 << 20;
function scratchOf(bytes: number): Buffer {
  if (bytes > SCRATCH_MAX) return Buffer.allocUnsafe(bytes);
  if (scratch.length < bytes) scratch = Buffer.allocUnsafe(Math.min(SCRATCH_MAX, Math.max(bytes, 2 * scratch.length)));
  return scratch;
}

/** Writes m (9 digits) at out[o..o+8], two digits at a time; m < 2^31, so `| 0` truncates. */
function writeNineDigits(out: Buffer, o: number, m: number): void {
  const high = (m / 10000) | 0; // 5 digits
  let low = m - high * 10000; // 4 digits
  const first = (high / 10000) | 0;
  let rest = high - first * 10000;
  out[o] = ZERO + first;
  let pair = (rest / 100) | 0;
  rest -= pair * 100;
  out[o + 1] = DIGIT_PAIRS[2 * pair]!;
  out[o + 2] = DIGIT_PAIRS[2 * pair + 1]!;
  out[o + 3] = DIGIT_PAIRS[2 * rest]!;
  out[o + 4] = DIGIT_PAIRS[2 * rest + 1]!;
  pair = (low / 100) | 0;
  low -= pair * 100;
  out[o + 5] = DIGIT_PAIRS[2 * pair]!;
  out[o + 6] = DIGIT_PAIRS[2 * pair + 1]!;
  out[o + 7] = DIGIT_PAIRS[2 * low]!;
  out[o + 8] = DIGIT_PAIRS[2 * low + 1]!;
}

/** Drops trailing zeros of a fraction, then a bare point; returns the new end. */
function trimZeros(out: Buffer, end: number): number {
  while (out[end - 1] === ZERO) end--;
  return out[end - 1] === POINT ? end - 1 : end;
}
