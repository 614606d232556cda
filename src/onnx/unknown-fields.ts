/**
 * Unknown-field preservation for protobufjs.
 *
 * protobufjs's generated decoders skip fields the schema does not declare, so
 * rewriting a model would silently drop every part of onnx.proto we did not
 * transcribe (and everything newer ONNX versions add). Here each message type's
 * codec is wrapped: while decoding, the bytes of each skipped field are kept on
 * the message under the UNKNOWN_FIELDS symbol, and encoding writes them back
 * after the known fields (field order carries no meaning in protobuf).
 */
import protobuf from 'protobufjs/light.js';
import type { Reader, Writer } from 'protobufjs/light.js';

export const UNKNOWN_FIELDS: unique symbol = Symbol('onnx.unknownFields');

/** Raw bytes (tag + payload) of the fields of `message` its schema did not declare. */
export function unknownFields(message: object): readonly Uint8Array[] {
  return (message as { [UNKNOWN_FIELDS]?: Uint8Array[] })[UNKNOWN_FIELDS] ?? [];
}

type Decode = (reader: Reader, length?: number, end?: number, depth?: number) => object;

// Unknown-field lists of the messages being decoded, innermost last. Decoding
// is synchronous, so one stack serves every reader.
const frames: Uint8Array[][] = [];
const instrumented = new WeakSet<Reader>();

/** Wraps the codecs of every message type under `root`; call once, after it is resolved. */
export function preserveUnknownFields(root: protobuf.Namespace): void {
  for (const nested of root.nestedArray) {
    if (nested instanceof protobuf.Type) wrapType(nested);
    if (nested instanceof protobuf.Namespace) preserveUnknownFields(nested);
  }
}

function wrapType(type: protobuf.Type): void {
  // setup() generates the codecs; nested messages are decoded through
  // `types[i].decode`, i.e. through the property replaced below.
  type.setup();
  // Bound: the wrappers below are installed on this same type, so `this` is always `type`.
  const decode = (type.decode as unknown as Decode).bind(type);
  const encode = type.encode.bind(type);

  const wrappedDecode = function (
    this: protobuf.Type,
    input: Reader | Uint8Array,
    length?: number,
    end?: number,
    depth?: number,
  ) {
    const reader = input instanceof protobuf.Reader ? input : protobuf.Reader.create(input);
    instrument(reader);
    const frame: Uint8Array[] = [];
    frames.push(frame);
    let message: object;
    try {
      message = decode(reader, length, end, depth);
    } finally {
      frames.pop();
    }
    if (frame.length > 0) Object.assign(message, { [UNKNOWN_FIELDS]: frame });
    return message;
  };

  const wrappedEncode = function (this: protobuf.Type, message: object, writer?: Writer) {
    const w = encode(message, writer);
    for (const raw of unknownFields(message)) writeRawField(w, raw);
    return w;
  };

  type.decode = wrappedDecode as unknown as typeof type.decode;
  type.encode = wrappedEncode;
}

/**
 * Generated decoders read a field's tag with `uint32()` and, for an unknown
 * field, call `skipType()` right after it; remembering where the last uint32
 * began therefore gives the start of the skipped field.
 */
function instrument(reader: Reader): void {
  if (instrumented.has(reader)) return;
  instrumented.add(reader);
  const uint32 = reader.uint32.bind(reader);
  const skipType = reader.skipType.bind(reader);
  let lastUint32At = 0;
  let skipping = false;
  reader.uint32 = function (this: Reader) {
    lastUint32At = this.pos;
    return uint32();
  };
  reader.skipType = function (this: Reader, wireType: number) {
    if (skipping) return skipType(wireType); // inside a group being skipped
    const start = lastUint32At;
    skipping = true;
    try {
      skipType(wireType);
    } finally {
      skipping = false;
    }
    // A plain copy: not a view keeping a 100 MB model alive, nor a Buffer.
    frames.at(-1)?.push(new Uint8Array(this.buf.subarray(start, this.pos)));
    return this;
  };
}

/** Writes one field captured by `instrument` with the public Writer API. */
function writeRawField(writer: Writer, raw: Uint8Array): void {
  const reader = protobuf.Reader.create(raw);
  const tag = reader.uint32();
  writer.uint32(tag);
  switch (tag & 7) {
    case 0:
      writer.uint64(reader.uint64()); // Long: all 64 bits survive
      break;
    case 1:
      writer.fixed64(reader.fixed64());
      break;
    case 2:
      writer.bytes(reader.bytes());
      break;
    case 5:
      writer.fixed32(reader.fixed32());
      break;
    default:
      // Groups (wire types 3/4) are deprecated and never used by ONNX.
      throw new Error(`cannot re-encode unknown protobuf field with wire type ${tag & 7}`);
  }
}
