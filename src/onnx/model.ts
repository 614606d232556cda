/**
 * Reading, writing and building ONNX models.
 *
 * A model is the decoded ModelProto message tree: edit it in place and write it
 * back. Messages from readModel keep the fields our schema does not declare
 * (see unknown-fields.ts), so edit them rather than rebuilding copies.
 */
import {
  AttributeType,
  DataLocation,
  DataType,
  ModelProtoType,
  type AttributeProto,
  type GraphProto,
  type Int64,
  type ModelProto,
  type NodeProto,
  type OperatorSetIdProto,
  type TensorProto,
  type ValueInfoProto,
} from './proto.js';

export type OnnxModel = ModelProto;

export function readModel(bytes: Uint8Array): OnnxModel {
  return ModelProtoType.decode(bytes) as OnnxModel;
}

export function writeModel(model: OnnxModel): Uint8Array {
  return ModelProtoType.encode(model).finish();
}

/** An int64 field as a bigint (exact). */
export function toBigInt(value: Int64 | undefined | null): bigint {
  if (value == null) return 0n;
  if (typeof value === 'number') return BigInt(value);
  // Long keeps two 32-bit halves; read them as unsigned and reinterpret.
  const bits = (BigInt(value.high >>> 0) << 32n) | BigInt(value.low >>> 0);
  return value.unsigned ? bits : BigInt.asIntN(64, bits);
}

/** An int64 field as a number; throws rather than silently losing precision. */
export function toNumber(value: Int64 | undefined | null): number {
  if (typeof value === 'number') return value;
  const big = toBigInt(value);
  const n = Number(big);
  if (!Number.isSafeInteger(n)) throw new RangeError(`int64 value ${big} is not a safe integer`);
  return n;
}

// --- tensors -------------------------------------------------------------------

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

type TypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/** A tensor stored as raw_data, little-endian as ONNX requires; one array element per tensor element (no 4-bit types). */
export function tensor(name: string, dataType: DataType, dims: readonly number[], data: TypedArray): TensorProto {
  const count = dims.reduce((a, b) => a * b, 1);
  if (data.length !== count)
    throw new RangeError(`tensor ${name}: ${data.length} values for dims [${dims.join(', ')}]`);
  if (!littleEndian && data.BYTES_PER_ELEMENT > 1)
    throw new Error('writing tensors on a big-endian host is not supported');
  return {
    name,
    dataType,
    dims: [...dims],
    // Copy so later edits to `data` cannot change the model.
    rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice(),
  };
}

export function tensorFromFloat32(name: string, dims: readonly number[], data: Float32Array): TensorProto {
  return tensor(name, DataType.FLOAT, dims, data);
}

export function tensorFromInt64(
  name: string,
  dims: readonly number[],
  data: readonly (number | bigint)[] | BigInt64Array,
): TensorProto {
  return tensor(
    name,
    DataType.INT64,
    dims,
    BigInt64Array.from(data, (v) => BigInt(v)),
  );
}

/** The values of a FLOAT tensor, from raw_data or float_data (always a copy). */
export function initializerToFloat32(t: TensorProto): Float32Array {
  if (t.dataType !== DataType.FLOAT) throw new TypeError(`tensor ${t.name}: data type ${t.dataType} is not FLOAT`);
  if (t.dataLocation === DataLocation.EXTERNAL) throw new Error(`tensor ${t.name}: data is stored in an external file`);
  const count = (t.dims ?? []).reduce<number>((a, d) => a * toNumber(d), 1);
  let values: Float32Array;
  if (t.rawData && t.rawData.length > 0) {
    if (!littleEndian) throw new Error('reading tensors on a big-endian host is not supported');
    const raw = t.rawData;
    // slice() of the underlying buffer: raw_data is usually an unaligned view into the model bytes.
    values = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
  } else {
    values = Float32Array.from(t.floatData ?? []);
  }
  if (values.length !== count) throw new RangeError(`tensor ${t.name}: ${values.length} values for ${count} elements`);
  return values;
}

// --- nodes and attributes ------------------------------------------------------

const utf8 = new TextEncoder();

export const attr = {
  int: (name: string, value: number | bigint): AttributeProto => ({ name, type: AttributeType.INT, i: int64(value) }),
  float: (name: string, value: number): AttributeProto => ({ name, type: AttributeType.FLOAT, f: value }),
  string: (name: string, value: string): AttributeProto => ({
    name,
    type: AttributeType.STRING,
    s: utf8.encode(value),
  }),
  tensor: (name: string, value: TensorProto): AttributeProto => ({ name, type: AttributeType.TENSOR, t: value }),
  graph: (name: string, value: GraphProto): AttributeProto => ({ name, type: AttributeType.GRAPH, g: value }),
  ints: (name: string, values: readonly (number | bigint)[]): AttributeProto => ({
    name,
    type: AttributeType.INTS,
    ints: values.map(int64),
  }),
  floats: (name: string, values: readonly number[]): AttributeProto => ({
    name,
    type: AttributeType.FLOATS,
    floats: [...values],
  }),
  strings: (name: string, values: readonly string[]): AttributeProto => ({
    name,
    type: AttributeType.STRINGS,
    strings: values.map((v) => utf8.encode(v)),
  }),
};

/** Safe integers stay numbers; anything wider is written as Long halves so all 64 bits survive. */
function int64(value: number | bigint): Int64 {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value)) return value;
    throw new RangeError(`${value} is not a safe integer: pass a bigint`);
  }
  const bits = BigInt.asUintN(64, value);
  return { low: Number(bits & 0xffffffffn) | 0, high: Number(bits >> 32n) | 0, unsigned: false };
}

export function node(
  opType: string,
  inputs: readonly string[],
  outputs: readonly string[],
  attrs: readonly AttributeProto[] = [],
  domain = '',
  name?: string,
): NodeProto {
  return {
    ...(name ? { name } : {}),
    opType,
    input: [...inputs],
    output: [...outputs],
    attribute: [...attrs],
    ...(domain ? { domain } : {}),
  };
}

export function findAttribute(n: NodeProto, name: string): AttributeProto | undefined {
  return n.attribute?.find((a) => a.name === name);
}

// --- graphs and models ---------------------------------------------------------

/** A tensor value description; string dims are symbolic (dynamic) dimensions. */
export function valueInfo(name: string, elemType: DataType, dims: readonly (number | string)[]): ValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === 'string' ? { dimParam: d } : { dimValue: d })) },
      },
    },
  };
}

export interface GraphParts {
  name: string;
  nodes: NodeProto[];
  inputs: ValueInfoProto[];
  outputs: ValueInfoProto[];
  initializers?: TensorProto[];
  valueInfo?: ValueInfoProto[];
}

export function createGraph(parts: GraphParts): GraphProto {
  return {
    name: parts.name,
    node: parts.nodes,
    initializer: parts.initializers ?? [],
    input: parts.inputs,
    output: parts.outputs,
    valueInfo: parts.valueInfo ?? [],
  };
}

export interface ModelOptions {
  /** Operator sets; default: the standard domain at opset 17. */
  opsets?: readonly { domain?: string; version: number }[];
  /** Default 8 (ONNX 1.10+), which every onnxruntime release since 1.10 loads. */
  irVersion?: number;
  producerName?: string;
  producerVersion?: string;
}

export function createModel(graph: GraphProto, options: ModelOptions = {}): OnnxModel {
  const opsets: OperatorSetIdProto[] = (options.opsets ?? [{ version: 17 }]).map((o) => ({
    domain: o.domain ?? '',
    version: o.version,
  }));
  return {
    irVersion: options.irVersion ?? 8,
    producerName: options.producerName ?? 'onnx-gateway',
    ...(options.producerVersion ? { producerVersion: options.producerVersion } : {}),
    graph,
    opsetImport: opsets,
  };
}
