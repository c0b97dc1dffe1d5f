"""The standard safetensors layout written with numpy/struct (F32, F16, I64), keys sorted."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

DTYPES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64"}


def write(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    header: dict[str, object] = {"__metadata__": metadata}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype not in DTYPES:
            raise ValueError(f"{name}: dtype {a.dtype} is not one of {sorted(DTYPES.values())}")
        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for c in chunks:
            f.write(c)


def write_fixture(folder: Path, stem: str, doc: dict, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """A recorded fixture: `<stem>.safetensors` with its tensors and `<stem>.json` describing them."""
    write(folder / f"{stem}.safetensors", tensors, metadata)
    (folder / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
