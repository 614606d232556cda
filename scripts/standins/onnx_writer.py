"""
A small ONNX writer for the stand-in models: protobuf encoding of the few messages a graph needs,
so that generating a model takes numpy alone (no onnx or torch package).

Large models keep their weights in an external data file (`<model>.onnx_data`), as exports over
the 2 GB protobuf limit do: each initializer then names its file, offset and length.
"""
import struct

import numpy as np

FLOAT, UINT8, INT8, INT32, INT64, BOOL, FLOAT16 = 1, 2, 3, 6, 7, 9, 10
_DTYPES = {
    np.dtype(np.float32): FLOAT,
    np.dtype(np.float16): FLOAT16,
    np.dtype(np.int64): INT64,
    np.dtype(np.int32): INT32,
    np.dtype(np.int8): INT8,
    np.dtype(np.uint8): UINT8,
    np.dtype(np.bool_): BOOL,
}
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_TENSOR, _ATTR_FLOATS, _ATTR_INTS = 1, 2, 3, 4, 6, 7


def varint(v):
    v = int(v)
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _key(field, wire):
    return varint((field << 3) | wire)


def pb_int(field, v):
    return _key(field, 0) + varint(v)


def pb_bytes(field, b):
    return b"".join((_key(field, 2), varint(len(b)), b))


def pb_str(field, s):
    return pb_bytes(field, s.encode("utf-8"))


def pb_float(field, v):
    return _key(field, 5) + struct.pack("<f", v)


def pb_packed_ints(field, values):
    return pb_bytes(field, b"".join(varint(x) for x in values))


def pb_packed_floats(field, values):
    return pb_bytes(field, b"".join(struct.pack("<f", float(x)) for x in values))


def _raw(arr):
    return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def tensor_proto(name, arr, external=None):
    """TensorProto: dims=1, data_type=2, name=8, raw_data=9, external_data=13, data_location=14.

    `external` is (location, offset) for a tensor whose bytes live in an external data file."""
    arr = np.asarray(arr)
    parts = [pb_packed_ints(1, arr.shape) if arr.ndim else b"", pb_int(2, _DTYPES[arr.dtype]), pb_str(8, name)]
    if external is None:
        parts.append(pb_bytes(9, _raw(arr)))
    else:
        location, offset = external
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(arr.nbytes))):
            # StringStringEntryProto: key=1, value=2
            parts.append(pb_bytes(13, pb_str(1, key) + pb_str(2, value)))
        parts.append(pb_int(14, 1))
    return b"".join(parts)


def attribute_proto(name, value):
    """AttributeProto: name=1, f=2, i=3, s=4, t=5, floats=7, ints=8, type=20."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float):
        return pb_str(1, name) + pb_float(2, value) + pb_int(20, _ATTR_FLOAT)
    if isinstance(value, int):
        return pb_str(1, name) + pb_int(3, value) + pb_int(20, _ATTR_INT)
    if isinstance(value, str):
        return pb_str(1, name) + pb_str(4, value) + pb_int(20, _ATTR_STRING)
    if isinstance(value, np.ndarray):
        return pb_str(1, name) + pb_bytes(5, tensor_proto("", value)) + pb_int(20, _ATTR_TENSOR)
    if isinstance(value, (list, tuple)) and all(isinstance(x, float) for x in value) and value:
        return pb_str(1, name) + pb_packed_floats(7, value) + pb_int(20, _ATTR_FLOATS)
    if isinstance(value, (list, tuple)):
        return pb_str(1, name) + pb_packed_ints(8, value) + pb_int(20, _ATTR_INTS)
    raise TypeError(f"attribute {name}: {value!r}")


def node_proto(op_type, inputs, outputs, name, attrs, domain=""):
    """NodeProto: input=1, output=2, name=3, op_type=4, attribute=5, domain=7."""
    parts = [pb_str(1, x) for x in inputs] + [pb_str(2, x) for x in outputs]
    parts += [pb_str(3, name), pb_str(4, op_type)]
    parts += [pb_bytes(5, attribute_proto(k, v)) for k, v in attrs.items()]
    if domain:
        parts.append(pb_str(7, domain))
    return b"".join(parts)


def value_info_proto(name, elem_type, dims):
    """ValueInfoProto{name=1, type=2}; string dims are symbolic (dim_param), ints fixed."""
    dim_msgs = b"".join(pb_bytes(1, pb_str(2, d) if isinstance(d, str) else pb_int(1, d)) for d in dims)
    tensor_type = pb_int(1, elem_type) + pb_bytes(2, dim_msgs)
    return pb_str(1, name) + pb_bytes(2, pb_bytes(1, tensor_type))


class Graph:
    """Nodes and initializers of one graph, named as they are added."""

    def __init__(self):
        self.nodes = []
        self.initializers = []  # (name, array)
        self.names = set()
        self.domains = set()  # operator domains other than ai.onnx that nodes use (opset 1 of each)
        self._count = 0

    def init(self, name, arr):
        assert name not in self.names, name
        self.names.add(name)
        self.initializers.append((name, np.asarray(arr)))
        return name

    def const(self, arr, name=None):
        """A small constant as an initializer, named automatically."""
        self._count += 1
        return self.init(name or f"const_{self._count}", np.asarray(arr))

    def op(self, op_type, inputs, name=None, attrs=None, outputs=1, domain=""):
        """Adds a node; returns its output name (or names, when `outputs` is a count > 1 or a list)."""
        self._count += 1
        name = name or f"{op_type}_{self._count}"
        if isinstance(outputs, int):
            outs = [f"{name}_output_{i}" for i in range(outputs)]
        else:
            outs = list(outputs)
        self.nodes.append(node_proto(op_type, inputs, outs, name, attrs or {}, domain))
        if domain:
            self.domains.add(domain)
        return outs[0] if len(outs) == 1 else outs

    def serialize(self, graph_name, inputs, outputs, opset=17, ir_version=8, external_data=None, producer="onnx-gateway stand-ins"):
        """The ModelProto bytes. With `external_data` (a file name), initializers of 1 KiB or more
        are written to that file instead; returns (model bytes, external bytes or None)."""
        tensors = []
        blob = bytearray()
        for name, arr in self.initializers:
            if external_data and arr.nbytes >= 1024:
                # Aligned like onnx's own writer, so the runtime can map the file.
                blob.extend(b"\0" * (-len(blob) % 4096))
                tensors.append(tensor_proto(name, arr, (external_data, len(blob))))
                blob.extend(_raw(arr))
            else:
                tensors.append(tensor_proto(name, arr))
        # GraphProto: node=1, name=2, initializer=5, input=11, output=12
        graph = b"".join(
            [pb_bytes(1, n) for n in self.nodes]
            + [pb_str(2, graph_name)]
            + [pb_bytes(5, t) for t in tensors]
            + [pb_bytes(11, value_info_proto(*i)) for i in inputs]
            + [pb_bytes(12, value_info_proto(*o)) for o in outputs]
        )
        # ModelProto: ir_version=1, producer_name=2, producer_version=3, graph=7, opset_import=8
        model = b"".join(
            (
                pb_int(1, ir_version),
                pb_str(2, producer),
                pb_str(3, "1"),
                pb_bytes(7, graph),
                pb_bytes(8, pb_str(1, "") + pb_int(2, opset)),
            )
            + tuple(pb_bytes(8, pb_str(1, d) + pb_int(2, 1)) for d in sorted(self.domains))
        )
        return model, (bytes(blob) if external_data else None)
