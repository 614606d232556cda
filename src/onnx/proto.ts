/**
 * The ONNX protobuf schema (onnx/onnx.proto, proto2), as a protobufjs
 * reflection root built from a JSON descriptor, plus TypeScript shapes of the
 * decoded messages.
 *
 * Only the part of onnx.proto that an inference model and our tools touch is
 * declared. Everything else (training_info, functions, sparse tensors,
 * multi-device configuration, non-tensor types, ...) still survives a
 * read/write round trip: unknown-fields.ts keeps undeclared fields as raw
 * bytes. Field numbers must match onnx.proto exactly; names are camelCase
 * (protobufjs convention, names never reach the wire).
 */
import protobuf from 'protobufjs/light.js';
import type { Long } from 'protobufjs/light.js';
import { preserveUnknownFields } from './unknown-fields.js';

/** int64 fields decode to Long (protobufjs keeps all 64 bits); number is accepted on write. */
export type Int64 = number | Long;

/** TensorProto.DataType */
export const DataType = {
  UNDEFINED: 0,
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  STRING: 8,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  UINT32: 12,
  UINT64: 13,
  COMPLEX64: 14,
  COMPLEX128: 15,
  BFLOAT16: 16,
  FLOAT8E4M3FN: 17,
  FLOAT8E4M3FNUZ: 18,
  FLOAT8E5M2: 19,
  FLOAT8E5M2FNUZ: 20,
  UINT4: 21,
  INT4: 22,
  FLOAT4E2M1: 23,
  FLOAT8E8M0: 24,
} as const;
export type DataType = (typeof DataType)[keyof typeof DataType];

/** AttributeProto.AttributeType */
export const AttributeType = {
  UNDEFINED: 0,
  FLOAT: 1,
  INT: 2,
  STRING: 3,
  TENSOR: 4,
  GRAPH: 5,
  FLOATS: 6,
  INTS: 7,
  STRINGS: 8,
  TENSORS: 9,
  GRAPHS: 10,
  SPARSE_TENSOR: 11,
  SPARSE_TENSORS: 12,
  TYPE_PROTO: 13,
  TYPE_PROTOS: 14,
} as const;
export type AttributeType = (typeof AttributeType)[keyof typeof AttributeType];

/** TensorProto.DataLocation */
export const DataLocation = { DEFAULT: 0, EXTERNAL: 1 } as const;

export interface StringStringEntryProto {
  key?: string;
  value?: string;
}

export interface OperatorSetIdProto {
  domain?: string;
  version?: Int64;
}

export interface TensorProto {
  dims?: Int64[];
  dataType?: number;
  segment?: { begin?: Int64; end?: Int64 };
  floatData?: number[];
  int32Data?: number[];
  stringData?: Uint8Array[];
  int64Data?: Int64[];
  name?: string;
  rawData?: Uint8Array;
  doubleData?: number[];
  uint64Data?: Int64[];
  docString?: string;
  externalData?: StringStringEntryProto[];
  dataLocation?: number;
  metadataProps?: StringStringEntryProto[];
}

export interface TensorShapeDimension {
  dimValue?: Int64;
  dimParam?: string;
  denotation?: string;
}

export interface TensorShapeProto {
  dim?: TensorShapeDimension[];
}

export interface TypeProto {
  tensorType?: { elemType?: number; shape?: TensorShapeProto };
  denotation?: string;
}

export interface ValueInfoProto {
  name?: string;
  type?: TypeProto;
  docString?: string;
  metadataProps?: StringStringEntryProto[];
}

export interface AttributeProto {
  name?: string;
  f?: number;
  i?: Int64;
  s?: Uint8Array;
  t?: TensorProto;
  g?: GraphProto;
  floats?: number[];
  ints?: Int64[];
  strings?: Uint8Array[];
  tensors?: TensorProto[];
  graphs?: GraphProto[];
  docString?: string;
  tp?: TypeProto;
  typeProtos?: TypeProto[];
  type?: number;
  refAttrName?: string;
}

export interface NodeProto {
  input?: string[];
  output?: string[];
  name?: string;
  opType?: string;
  attribute?: AttributeProto[];
  docString?: string;
  domain?: string;
  overload?: string;
  metadataProps?: StringStringEntryProto[];
}

export interface TensorAnnotation {
  tensorName?: string;
  quantParameterTensorNames?: StringStringEntryProto[];
}

export interface GraphProto {
  node?: NodeProto[];
  name?: string;
  initializer?: TensorProto[];
  docString?: string;
  input?: ValueInfoProto[];
  output?: ValueInfoProto[];
  valueInfo?: ValueInfoProto[];
  quantizationAnnotation?: TensorAnnotation[];
  metadataProps?: StringStringEntryProto[];
}

export interface ModelProto {
  irVersion?: Int64;
  producerName?: string;
  producerVersion?: string;
  domain?: string;
  modelVersion?: Int64;
  docString?: string;
  graph?: GraphProto;
  opsetImport?: OperatorSetIdProto[];
  metadataProps?: StringStringEntryProto[];
}

// --- descriptor -------------------------------------------------------------

type FieldJson = protobuf.IField & { rule?: 'repeated' };

const one = (id: number, type: string): FieldJson => ({ id, type });
const many = (id: number, type: string): FieldJson => ({ id, type, rule: 'repeated' });
// onnx.proto marks only the *_data arrays [packed = true]; proto2 leaves dims/ints/floats unpacked.
const packed = (id: number, type: string): FieldJson => ({ id, type, rule: 'repeated', options: { packed: true } });

// Without an explicit edition protobufjs treats JSON-defined types as proto3
// (packed repeated scalars, implicit presence); ONNX is proto2.
// (`edition` is read by Type.fromJSON but missing from the IType typings.)
const message = (fields: Record<string, FieldJson>, nested?: Record<string, protobuf.IType>): protobuf.IType =>
  ({ edition: 'proto2', fields, ...(nested ? { nested } : {}) }) as protobuf.IType;

const descriptor: protobuf.INamespace = {
  nested: {
    onnx: {
      nested: {
        StringStringEntryProto: message({ key: one(1, 'string'), value: one(2, 'string') }),
        OperatorSetIdProto: message({ domain: one(1, 'string'), version: one(2, 'int64') }),
        TensorProto: message(
          {
            dims: many(1, 'int64'),
            dataType: one(2, 'int32'),
            segment: one(3, 'Segment'),
            floatData: packed(4, 'float'),
            int32Data: packed(5, 'int32'),
            stringData: many(6, 'bytes'),
            int64Data: packed(7, 'int64'),
            name: one(8, 'string'),
            rawData: one(9, 'bytes'),
            doubleData: packed(10, 'double'),
            uint64Data: packed(11, 'uint64'),
            docString: one(12, 'string'),
            externalData: many(13, 'StringStringEntryProto'),
            dataLocation: one(14, 'int32'), // enum DataLocation, kept numeric
            metadataProps: many(16, 'StringStringEntryProto'),
          },
          { Segment: message({ begin: one(1, 'int64'), end: one(2, 'int64') }) },
        ),
        // oneof groups are not declared: they do not change the wire format.
        TensorShapeProto: message(
          { dim: many(1, 'Dimension') },
          {
            Dimension: message({
              dimValue: one(1, 'int64'),
              dimParam: one(2, 'string'),
              denotation: one(3, 'string'),
            }),
          },
        ),
        TypeProto: message(
          { tensorType: one(1, 'Tensor'), denotation: one(6, 'string') },
          { Tensor: message({ elemType: one(1, 'int32'), shape: one(2, 'TensorShapeProto') }) },
        ),
        ValueInfoProto: message({
          name: one(1, 'string'),
          type: one(2, 'TypeProto'),
          docString: one(3, 'string'),
          metadataProps: many(4, 'StringStringEntryProto'),
        }),
        AttributeProto: message({
          name: one(1, 'string'),
          f: one(2, 'float'),
          i: one(3, 'int64'),
          s: one(4, 'bytes'),
          t: one(5, 'TensorProto'),
          g: one(6, 'GraphProto'),
          floats: many(7, 'float'),
          ints: many(8, 'int64'),
          strings: many(9, 'bytes'),
          tensors: many(10, 'TensorProto'),
          graphs: many(11, 'GraphProto'),
          docString: one(13, 'string'),
          tp: one(14, 'TypeProto'),
          typeProtos: many(15, 'TypeProto'),
          type: one(20, 'int32'), // enum AttributeType, kept numeric
          refAttrName: one(21, 'string'),
        }),
        NodeProto: message({
          input: many(1, 'string'),
          output: many(2, 'string'),
          name: one(3, 'string'),
          opType: one(4, 'string'),
          attribute: many(5, 'AttributeProto'),
          docString: one(6, 'string'),
          domain: one(7, 'string'),
          overload: one(8, 'string'),
          metadataProps: many(9, 'StringStringEntryProto'),
        }),
        TensorAnnotation: message({
          tensorName: one(1, 'string'),
          quantParameterTensorNames: many(2, 'StringStringEntryProto'),
        }),
        GraphProto: message({
          node: many(1, 'NodeProto'),
          name: one(2, 'string'),
          initializer: many(5, 'TensorProto'),
          docString: one(10, 'string'),
          input: many(11, 'ValueInfoProto'),
          output: many(12, 'ValueInfoProto'),
          valueInfo: many(13, 'ValueInfoProto'),
          quantizationAnnotation: many(14, 'TensorAnnotation'),
          metadataProps: many(16, 'StringStringEntryProto'),
        }),
        ModelProto: message({
          irVersion: one(1, 'int64'),
          producerName: one(2, 'string'),
          producerVersion: one(3, 'string'),
          domain: one(4, 'string'),
          modelVersion: one(5, 'int64'),
          docString: one(6, 'string'),
          graph: one(7, 'GraphProto'),
          opsetImport: many(8, 'OperatorSetIdProto'),
          metadataProps: many(14, 'StringStringEntryProto'),
        }),
      },
    },
  },
};

export const onnxRoot = protobuf.Root.fromJSON(descriptor);
preserveUnknownFields(onnxRoot);

export const ModelProtoType = onnxRoot.lookupType('onnx.ModelProto');
