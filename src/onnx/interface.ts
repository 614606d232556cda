/**
 * The interface of an ONNX graph (its inputs and outputs with element types and shapes), read from
 * the file without loading it: the protobuf is walked field by field and everything else (nodes,
 * weights) is skipped by seeking, so a 2 GB model costs a few small reads. The registry uses it at
 * start to learn what a model takes and gives before any worker opens a session.
 */
import { open, type FileHandle } from 'node:fs/promises';

export type ElementType =
  'float32' | 'float16' | 'bfloat16' | 'float64' | 'int64' | 'int32' | 'int8' | 'uint8' | 'bool' | 'string' | 'other';

export interface TensorInfo {
  name: string;
  type: ElementType;
  /** Fixed sizes as numbers, symbolic ones by their name; null where the graph says nothing. */
  shape: Array<number | string | null>;
}

export interface GraphInterface {
  inputs: TensorInfo[];
  outputs: TensorInfo[];
  /**
   * The external-data files the graph's tensors are stored in (initializers and constants'
   * attribute tensors), as their `location`s say: paths relative to the graph's folder.
   */
  externalData: string[];
}

// TensorProto.DataType numbers.
const elementTypes: Record<number, ElementType> = {
  1: 'float32',
  2: 'uint8',
  3: 'int8',
  6: 'int32',
  7: 'int64',
  8: 'string',
  9: 'bool',
  10: 'float16',
  11: 'float64',
  16: 'bfloat16',
};

/** Reads a graph's inputs (initializers excluded, as old exports list them among the inputs) and outputs. */
export async function readGraphInterface(path: string): Promise<GraphInterface> {
  const file = await open(path, 'r');
  try {
    const reader = new Reader(file, (await file.stat()).size);
    let graph: { start: number; end: number } | undefined;
    // ModelProto: graph = 7.
    await reader.fields(0, reader.size, async (field, wire, start, end) => {
      if (field === 7 && wire === 2) graph = { start, end };
    });
    if (!graph) throw new Error('no graph in the model');
    const inputs: TensorInfo[] = [];
    const outputs: TensorInfo[] = [];
    const initializers = new Set<string>();
    const externalData = new Set<string>();
    // TensorProto: name = 8, external_data = 13 (key = 1, value = 2); its data fields are skipped, never read.
    const readTensor = (start: number, end: number, names?: Set<string>) =>
      reader.fields(start, end, async (f, w, s, e) => {
        if (f === 8 && w === 2) names?.add(await reader.string(s, e));
        if (f === 13 && w === 2) {
          const entry = new Map<number, string>();
          for (const [k, v] of messageFields(await reader.bytes(s, e)))
            if (v instanceof Uint8Array) entry.set(k, utf8.decode(v));
          if (entry.get(1) === 'location' && entry.get(2)) externalData.add(entry.get(2)!);
        }
      });
    // GraphProto: node = 1, initializer = 5, input = 11, output = 12.
    await reader.fields(graph.start, graph.end, async (field, wire, start, end) => {
      if (wire !== 2) return;
      if (field === 5) {
        await readTensor(start, end, initializers);
      } else if (field === 1) {
        // NodeProto: attribute = 5; AttributeProto: t = 5 (a Constant's value may be stored outside too).
        await reader.fields(start, end, async (f, w, s, e) => {
          if (f !== 5 || w !== 2) return;
          await reader.fields(s, e, async (af, aw, as, ae) => {
            if (af === 5 && aw === 2) await readTensor(as, ae);
          });
        });
      } else if (field === 11 || field === 12) {
        (field === 11 ? inputs : outputs).push(parseValueInfo(await reader.bytes(start, end)));
      }
    });
    return {
      inputs: inputs.filter((input) => !initializers.has(input.name)),
      outputs,
      externalData: [...externalData].sort(),
    };
  } finally {
    await file.close();
  }
}

/** ValueInfoProto { name = 1; type = 2 { tensor_type = 1 { elem_type = 1; shape = 2 { dim = 1 { dim_value = 1; dim_param = 2 } } } } } */
function parseValueInfo(bytes: Uint8Array): TensorInfo {
  const info: TensorInfo = { name: '', type: 'other', shape: [] };
  for (const [field, value] of messageFields(bytes)) {
    if (field === 1 && value instanceof Uint8Array) info.name = utf8.decode(value);
    if (field !== 2 || !(value instanceof Uint8Array)) continue;
    for (const [typeField, tensorType] of messageFields(value)) {
      if (typeField !== 1 || !(tensorType instanceof Uint8Array)) continue;
      for (const [f, v] of messageFields(tensorType)) {
        if (f === 1 && typeof v === 'number') info.type = elementTypes[v] ?? 'other';
        if (f !== 2 || !(v instanceof Uint8Array)) continue;
        for (const [dimField, dim] of messageFields(v)) {
          if (dimField !== 1 || !(dim instanceof Uint8Array)) continue;
          let size: number | string | null = null;
          for (const [df, dv] of messageFields(dim)) {
            if (df === 1 && typeof dv === 'number') size = dv;
            if (df === 2 && dv instanceof Uint8Array) size = utf8.decode(dv);
          }
          info.shape.push(size);
        }
      }
    }
  }
  return info;
}

const utf8 = new TextDecoder();

/** The fields of a small in-memory message: varints as numbers, length-delimited ones as bytes. */
function* messageFields(bytes: Uint8Array): Generator<[number, number | Uint8Array]> {
  let at = 0;
  const varint = (): number => {
    let result = 0;
    let scale = 1;
    for (;;) {
      const byte = bytes[at++];
      if (byte === undefined) throw new Error('truncated protobuf message');
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return result;
      scale *= 128;
    }
  };
  while (at < bytes.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) yield [field, varint()];
    else if (wire === 2) {
      const length = varint();
      yield [field, bytes.subarray(at, at + length)];
      at += length;
    } else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else throw new Error(`unsupported protobuf wire type ${wire}`);
  }
}

/** Reads a protobuf file through a small window, seeking over what is not asked for. */
class Reader {
  private buffer = Buffer.alloc(1 << 16);
  private bufferStart = 0;
  private bufferEnd = 0;

  constructor(
    private readonly file: FileHandle,
    readonly size: number,
  ) {}

  /** Calls `visit` for each field of the message between `start` and `end`; length-delimited fields get their bounds. */
  async fields(
    start: number,
    end: number,
    visit: (field: number, wire: number, start: number, end: number) => Promise<void>,
  ): Promise<void> {
    let at = start;
    while (at < end) {
      const [key, afterKey] = await this.varint(at);
      const field = Math.floor(key / 8);
      const wire = key & 7;
      if (wire === 0) {
        at = (await this.varint(afterKey))[1];
      } else if (wire === 2) {
        const [length, dataStart] = await this.varint(afterKey);
        at = dataStart + length;
        if (at > end) throw new Error('truncated protobuf field');
        await visit(field, wire, dataStart, at);
      } else if (wire === 1) at = afterKey + 8;
      else if (wire === 5) at = afterKey + 4;
      else throw new Error(`unsupported protobuf wire type ${wire}`);
    }
  }

  async bytes(start: number, end: number): Promise<Uint8Array> {
    const out = Buffer.alloc(end - start);
    await this.file.read(out, 0, out.length, start);
    return out;
  }

  async string(start: number, end: number): Promise<string> {
    return utf8.decode(await this.bytes(start, end));
  }

  private async byteAt(position: number): Promise<number> {
    if (position < this.bufferStart || position >= this.bufferEnd) {
      const { bytesRead } = await this.file.read(this.buffer, 0, this.buffer.length, position);
      if (bytesRead === 0) throw new Error('unexpected end of the model file');
      this.bufferStart = position;
      this.bufferEnd = position + bytesRead;
    }
    return this.buffer[position - this.bufferStart]!;
  }

  private async varint(position: number): Promise<[number, number]> {
    let result = 0;
    let scale = 1;
    let at = position;
    for (;;) {
      const byte = await this.byteAt(at++);
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return [result, at];
      scale *= 128;
    }
  }
}
