"""A small GGUF reader (v1-v3) and writer (v3), numpy only. Shared by tools/convert and tools/train.

File layout (ggml/docs/gguf.md): magic "GGUF", u32 version, tensor count, key/value count
(u64 from v2, u32 in v1), the key/values, the tensor infos (name, n_dims, dims ne[0] first = the
innermost, contiguous dimension, u32 type, u64 offset relative to the data section), padding
to general.alignment (32), the tensor data, each tensor at an aligned offset.
"""
import struct

import numpy as np

# Key/value types.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

# Tensor types this project writes. Sizes are (block elements, block bytes); I2_S is special:
# n/4 bytes of codes + a 32-byte trailer (f32 scale + 28 zero bytes) per tensor.
F32, F16, TQ1_0, TQ2_0, I2_S = 0, 1, 34, 35, 36
TYPE_NAMES = {F32: "f32", F16: "f16", TQ1_0: "tq1_0", TQ2_0: "tq2_0", I2_S: "i2_s"}
_BLOCK = {F32: (1, 4), F16: (1, 2), TQ1_0: (256, 54), TQ2_0: (256, 66)}

ALIGNMENT = 32


def tensor_nbytes(ggml_type, n_elems):
    if ggml_type == I2_S:
        return n_elems // 4 + 32
    blk, size = _BLOCK[ggml_type]
    if n_elems % blk:
        raise ValueError(f"{TYPE_NAMES[ggml_type]} needs a multiple of {blk} elements, got {n_elems}")
    return n_elems // blk * size


class Reader:
    """Parses the metadata and tensor table of a GGUF file (v1, v2 or v3)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        self.pos = 0
        if self.data[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        self.version = self._u32()
        if self.version not in (1, 2, 3):
            raise ValueError(f"{path}: GGUF version {self.version} is not supported")
        count = self._u32 if self.version == 1 else self._u64
        n_tensors, n_kv = count(), count()
        self.fields = {}   # key -> (value type, value); arrays: (ARRAY, (element type, list))
        for _ in range(n_kv):
            key = self._str()
            t = self._u32()
            self.fields[key] = (t, self._value(t))
        self.tensors = {}  # name -> (type, ne list, absolute offset)
        infos = []
        for _ in range(n_tensors):
            name = self._str()
            n_dims = self._u32()
            ne = [count() for _ in range(n_dims)]
            infos.append((name, self._u32(), ne, self._u64()))
        align = self.fields.get("general.alignment", (UINT32, ALIGNMENT))[1]
        data_start = (self.pos + align - 1) // align * align
        for name, t, ne, off in infos:
            self.tensors[name] = (t, ne, data_start + off)

    def _u32(self):
        (v,) = struct.unpack_from("<I", self.data, self.pos)
        self.pos += 4
        return v

    def _u64(self):
        (v,) = struct.unpack_from("<Q", self.data, self.pos)
        self.pos += 8
        return v

    def _str(self):
        n = self._u32() if self.version == 1 else self._u64()
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def _value(self, t):
        if t == STRING:
            return self._str()
        if t == ARRAY:
            et = self._u32()
            n = self._u32() if self.version == 1 else self._u64()
            return (et, [self._value(et) for _ in range(n)])
        (v,) = struct.unpack_from(_SCALAR[t], self.data, self.pos)
        self.pos += struct.calcsize(_SCALAR[t])
        return v

    def value(self, key, default=None):
        if key not in self.fields:
            return default
        t, v = self.fields[key]
        return v[1] if t == ARRAY else v

    def tensor_bytes(self, name):
        t, ne, off = self.tensors[name]
        return self.data[off:off + tensor_nbytes(t, int(np.prod(ne)))]

    def tensor_f32(self, name):
        """F32 / F16 tensors as a numpy array of shape ne reversed (row-major)."""
        t, ne, _ = self.tensors[name]
        dt = {F32: "<f4", F16: "<f2"}[t]
        return np.frombuffer(self.tensor_bytes(name), dtype=dt).astype(np.float32).reshape(ne[::-1])


class Writer:
    """Collects key/values and tensors, then writes a GGUF v3 file in one go."""

    def __init__(self):
        self.kv = []       # (key, type, value); arrays: type ARRAY, value (element type, list)
        self.tensors = []  # (name, ggml type, ne, bytes)

    def add(self, key, vtype, value):
        if any(k == key for k, _, _ in self.kv):
            raise ValueError(f"duplicate key {key}")
        self.kv.append((key, vtype, value))

    def add_string(self, key, value):
        self.add(key, STRING, value)

    def add_u32(self, key, value):
        self.add(key, UINT32, int(value))

    def add_f32(self, key, value):
        self.add(key, FLOAT32, float(value))

    def add_array(self, key, etype, values):
        self.add(key, ARRAY, (etype, list(values)))

    def add_tensor(self, name, ggml_type, ne, data):
        """ne: dims innermost first (GGUF order); data: the tensor's bytes in that type."""
        data = bytes(data)
        want = tensor_nbytes(ggml_type, int(np.prod(ne)))
        if len(data) != want:
            raise ValueError(f"{name}: {len(data)} bytes, {TYPE_NAMES[ggml_type]} {ne} needs {want}")
        self.tensors.append((name, ggml_type, [int(n) for n in ne], data))

    @staticmethod
    def _pack_str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _pack_value(self, t, v):
        if t == STRING:
            return self._pack_str(v)
        if t == ARRAY:
            et, items = v
            return (struct.pack("<IQ", et, len(items)) +
                    b"".join(self._pack_value(et, x) for x in items))
        return struct.pack(_SCALAR[t], v)

    def write(self, path):
        out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for key, t, v in self.kv:
            out += self._pack_str(key) + struct.pack("<I", t) + self._pack_value(t, v)
        offset = 0
        offsets = []
        for name, t, ne, data in self.tensors:
            offsets.append(offset)
            out += self._pack_str(name) + struct.pack("<I", len(ne))
            out += b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", t, offset)
            offset += (len(data) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        out += bytes(-len(out) % ALIGNMENT)
        for (_, _, _, data), off in zip(self.tensors, offsets):
            out += data + bytes(-len(data) % ALIGNMENT)
        with open(path, "wb") as f:
            f.write(out)


TOKENIZER_PREFIX = "tokenizer."


def copy_tokenizer(reader, writer):
    """Copies every tokenizer.* key/value of reader into writer unchanged."""
    for key, (t, v) in reader.fields.items():
        if key.startswith(TOKENIZER_PREFIX):
            writer.add(key, t, v)
