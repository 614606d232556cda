/**
 * A tiny ONNX protobuf writer, just enough for one MatMul graph (used to measure the machine's fp32
 * matmul GFLOP/s with ONNX Runtime itself). Field numbers from onnx/onnx.proto3.
 */

function varint(n: number): number[] {
  const out: number[] = [];
  let v = BigInt(n);
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return out;
}

type Bytes = number[];

const tag = (field: number, wire: number): Bytes => varint((field << 3) | wire);
const intField = (field: number, value: number): Bytes => [...tag(field, 0), ...varint(value)];
const bytesField = (field: number, payload: Bytes): Bytes => [...tag(field, 2), ...varint(payload.length), ...payload];
const strField = (field: number, s: string): Bytes => bytesField(field, [...Buffer.from(s, 'utf8')]);

const FLOAT = 1;

function valueInfo(name: string, dims: readonly number[]): Bytes {
  const shape = dims.flatMap((d) => bytesField(1, intField(1, d))); // TensorShapeProto.dim { dim_value }
  const tensorType = [...intField(1, FLOAT), ...bytesField(2, shape)]; // TypeProto.Tensor
  const typeProto = bytesField(1, tensorType); // TypeProto.tensor_type
  return [...strField(1, name), ...bytesField(2, typeProto)];
}

/** ModelProto bytes of `C = MatMul(A[m,k], B[k,n])`, opset 17, inputs A and B. */
export function matmulModel(m: number, k: number, n: number): Uint8Array {
  const node = [
    ...strField(1, 'A'),
    ...strField(1, 'B'),
    ...strField(2, 'C'),
    ...strField(3, 'matmul'),
    ...strField(4, 'MatMul'),
  ];
  const graph = [
    ...bytesField(1, node),
    ...strField(2, 'matmul_peak'),
    ...bytesField(11, valueInfo('A', [m, k])),
    ...bytesField(11, valueInfo('B', [k, n])),
    ...bytesField(12, valueInfo('C', [m, n])),
  ];
  const opset = [...strField(1, ''), ...intField(2, 17)];
  const model = [
    ...intField(1, 8),
    ...strField(2, 'onnx-gateway-bench'),
    ...bytesField(7, graph),
    ...bytesField(8, opset),
  ];
  return Uint8Array.from(model);
}

/**
 * FLOPs of one forward pass of a BERT encoder, per token, for sequence length `seq`
 * (multiply-add = 2 FLOPs; embeddings, LayerNorm, softmax, GELU ignored: < 1%).
 *   per layer and token: Q,K,V,O projections 4 x 2h^2, FFN 2 x 2hi, attention scores QK^T 2Sh and
 *   weighted values AV 2Sh.
 */
export function bertFlopsPerToken(cfg: { hidden: number; layers: number; intermediate: number }, seq: number): number {
  const { hidden: h, layers, intermediate: i } = cfg;
  return layers * (8 * h * h + 4 * h * i + 4 * seq * h);
}

/** FLOPs of a padded batch: count x seq tokens, each costing bertFlopsPerToken(seq). */
export function bertFlopsBatch(
  cfg: { hidden: number; layers: number; intermediate: number },
  count: number,
  seq: number,
): number {
  return count * seq * bertFlopsPerToken(cfg, seq);
}
