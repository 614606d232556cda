/**
 * The fp16 variant of an fp32 graph, made as exporters make theirs (onnxconverter-common's
 * float-to-float16 without kept I/O types): every float tensor in half precision, values beyond
 * half's range clamped to it, casts to float cast to half, the float outputs given in half. For
 * graphs of plain float arithmetic (the BERT-family stand-ins); tests serve it as `onnx/model_fp16.onnx`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { initializerToFloat32, readModel, tensor, toNumber, writeModel } from '../../src/onnx/model.js';
import { DataType, type TensorProto, type ValueInfoProto } from '../../src/onnx/proto.js';

export function writeHalfPrecision(fp32Path: string, fp16Path: string): void {
  const model = readModel(readFileSync(fp32Path));
  const graph = model.graph!;
  graph.initializer = graph.initializer!.map(half);
  for (const node of graph.node ?? []) {
    for (const attribute of node.attribute ?? []) {
      if (node.opType === 'Cast' && attribute.name === 'to' && toNumber(attribute.i) === DataType.FLOAT)
        attribute.i = DataType.FLOAT16;
      if (attribute.t) attribute.t = half(attribute.t);
    }
  }
  for (const info of [...(graph.output ?? []), ...(graph.valueInfo ?? [])]) halfType(info);
  writeFileSync(fp16Path, writeModel(model));
}

function half(t: TensorProto): TensorProto {
  if (t.dataType !== DataType.FLOAT) return t;
  const values = initializerToFloat32(t);
  return tensor(t.name ?? '', DataType.FLOAT16, (t.dims ?? []).map(toNumber), Uint16Array.from(values, toHalfBits));
}

function halfType(info: ValueInfoProto): void {
  const type = info.type?.tensorType;
  if (type?.elemType === DataType.FLOAT) type.elemType = DataType.FLOAT16;
}

const float = new Float32Array(1);
const bits = new Uint32Array(float.buffer);

/** IEEE 754 half-precision bits of `value`, rounded to nearest even, clamped to ±65504. */
function toHalfBits(value: number): number {
  float[0] = Math.max(-65504, Math.min(65504, value));
  const x = bits[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exponent = ((x >>> 23) & 0xff) - 127 + 15;
  const mantissa = x & 0x7fffff;
  if (exponent >= 0x1f) return sign | 0x7bff;
  if (exponent <= 0) {
    if (exponent < -10) return sign;
    // Subnormal: the implicit bit made explicit, shifted into place, rounded to nearest even.
    const full = mantissa | 0x800000;
    const shift = 14 - exponent;
    const rounded =
      (full >>> shift) +
      ((full >>> (shift - 1)) & 1 & (((full & ((1 << (shift - 1)) - 1)) !== 0 ? 1 : 0) | ((full >>> shift) & 1)));
    return sign | rounded;
  }
  let result = sign | (exponent << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (result & 1) === 1)) result += 1;
  return result;
}
