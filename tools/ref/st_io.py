"""Minimal safetensors reader/writer (float32 only) so the reference scripts need nothing beyond torch."""
import json
import struct

import numpy as np


def save(path, tensors, metadata=None):
    """tensors: dict name -> array-like (written as float32 in the given order)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, value in tensors.items():
        a = np.ascontiguousarray(np.asarray(value, dtype=np.float32))
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def load(path):
    """Returns (dict name -> float32 array, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", f"{name}: dtype {e['dtype']}"
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + end], dtype=np.float32).reshape(e["shape"])
    return out, meta
