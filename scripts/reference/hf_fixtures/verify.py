"""onnxruntime (Python) against the recorded plain outputs of each variant, for the export report."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from .families import Family, Variant


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        b, e = h["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b : 8 + n + e], dtype=kinds[h["dtype"]]).reshape(h["shape"])
    return out


def feeds_for(family: Family, session: ort.InferenceSession, ids: list[int]) -> dict[str, np.ndarray]:
    t = np.array([ids], dtype=np.int64)
    feeds = {}
    for inp in session.get_inputs():
        if inp.name == "input_ids":
            feeds[inp.name] = t
        elif inp.name == "attention_mask":
            feeds[inp.name] = np.ones_like(t)
        elif inp.name == "position_ids":
            feeds[inp.name] = np.arange(len(ids), dtype=np.int64)[None]
        elif inp.name == "token_type_ids":
            feeds[inp.name] = np.zeros_like(t)
        elif inp.name.startswith("past_key_values."):
            dims = [d if isinstance(d, int) else 0 for d in inp.shape]
            dims[0] = 1
            elem = np.float16 if "float16" in inp.type else np.float32
            feeds[inp.name] = np.zeros(dims, dtype=elem)
    return feeds


def verify_variant(family: Family, folder: Path, variant: Variant) -> dict:
    ref_dir = folder if (folder / "reference.json").exists() else folder.parent
    ref = json.loads((ref_dir / "reference.json").read_text())
    tensors = read_safetensors(ref_dir / "reference.safetensors")
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    worst = 0.0
    for p, prompt in enumerate(ref["prompts"]):
        ids = prompt["ids"]
        if variant.exporter == "dynamo-static" and len(ids) != 8:
            continue
        outs = session.run(None, feeds_for(family, session, ids))
        for name, got in zip([o.name for o in session.get_outputs()], outs):
            key = ref["cases"][0]["tensors"][p].get(name)
            if key is None:
                continue
            worst = max(worst, float(np.abs(got.astype(np.float32) - tensors[key].astype(np.float32)).max()))
    proto = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    return {
        "plain_outputs_max_abs_diff": worst,
        "tolerance": ref["tolerance"],
        "nodes": len(proto.graph.node),
        "inputs": [i.name for i in proto.graph.input],
        "files": sorted(f.name for f in folder.iterdir()),
    }
