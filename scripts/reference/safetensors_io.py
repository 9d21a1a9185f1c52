"""Minimal safetensors reader/writer (no dependency on the `safetensors` package).

File format: 8-byte little-endian header length N, then N bytes of UTF-8 JSON
{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}
(offsets relative to the end of the header), then the raw little-endian data.
The header is padded with spaces to a multiple of 8 bytes.
"""
import json
import struct
from collections import OrderedDict

import numpy as np
import torch

_NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
       "I32": np.int32, "U8": np.uint8}
_TORCH_TO_ST = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
                torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8"}


def save(path, tensors):
    """tensors: ordered mapping name -> torch tensor (dtype kept as given)."""
    header = OrderedDict()
    blobs = []
    off = 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        dt = _TORCH_TO_ST[t.dtype]
        raw = t.numpy().astype(np.dtype(_NP[dt]).newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def load(path):
    """Returns an OrderedDict name -> torch tensor (file dtype), in header order."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=OrderedDict)
    base = 8 + n
    out = OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[base + b:base + e], dtype=np.dtype(_NP[info["dtype"]]).newbyteorder("<"))
        out[name] = torch.from_numpy(arr.astype(_NP[info["dtype"]]).reshape(info["shape"]).copy())
    return out
