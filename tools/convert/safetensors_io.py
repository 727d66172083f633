"""safetensors by hand: 8-byte little-endian header length, a JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the raw
little-endian tensor bytes (offsets relative to the end of the header)."""
import json
import struct

import numpy as np

_DTYPES = {"U8": np.uint8, "I8": np.int8, "F16": np.float16, "F32": np.float32, "BF16": np.uint16}


def bf16_to_f32(a):
    return (np.asarray(a, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(a):
    """Round to nearest even, as torch's .to(torch.bfloat16) (finite inputs)."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def read(path):
    """-> {name: numpy array}; BF16 comes back as float32, U8/I8 unchanged, F16 as float16."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dt = meta["dtype"]
        if dt not in _DTYPES:
            raise ValueError(f"{path}: {name}: dtype {dt} is not supported")
        b, e = meta["data_offsets"]
        if not 0 <= b <= e <= len(data) - base:
            raise ValueError(f"{path}: {name}: data offsets {b}..{e} outside the file")
        a = np.frombuffer(data[base + b:base + e], dtype=np.dtype(_DTYPES[dt]).newbyteorder("<"))
        shape = meta["shape"]
        if a.size != int(np.prod(shape)):
            raise ValueError(f"{path}: {name}: {a.size} elements for shape {shape}")
        a = a.reshape(shape)
        out[name] = bf16_to_f32(a) if dt == "BF16" else a
    return out


def write(path, tensors, dtypes=None):
    """tensors: {name: numpy array}; dtypes: {name: "BF16"|...} to store float32 arrays as BF16."""
    dtypes = dtypes or {}
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        dt = dtypes.get(name) or {np.dtype(v): k for k, v in _DTYPES.items() if k != "BF16"}[a.dtype]
        raw = (f32_to_bf16(a) if dt == "BF16" else np.ascontiguousarray(a)).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
