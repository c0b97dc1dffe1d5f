"""Record PyTorch activation patching, for the fabric's barriers, sessions and caches.

For the causal families (the seeded models of export_families.py, rebuilt here with the same seed): a clean prompt
(prompt 0) and a corrupt one of the same token count ("The Big Ben is in London"), each alone; then for every decoder
layer l and every position p, the corrupt run with the output of layer l at position p replaced by the clean run's
(a forward hook on the layer, element 0 of what it returns), and the last position's logits of that run. Also the
clean and corrupt runs' own last-position logits and every layer's clean output.
Writes tests/fixtures/hf/<family>/patching.json and patching.safetensors. Not run by CI.

    /work/main/.cache/ref-venv/bin/python scripts/reference/record_patching.py [--family gpt2 ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_fixtures import record, safetensors_io  # noqa: E402
from hf_fixtures.families import FAMILIES, PROMPTS, SEED, build_model  # noqa: E402
from hf_fixtures.tokenizers_build import family_tokenizer  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
OUT = REPO_ROOT / "tests" / "fixtures" / "hf"
FORMAT = "ndif-patching/1"
CORRUPT = "The Big Ben is in London"
LAYERS = {"gpt2": "transformer.h", "llama": "model.layers", "qwen2": "model.layers"}


def run(family, model, ids, layers: str, n: int, patch=None):
    """Last-position logits and every layer's output; `patch` = (layer, position, value) replaces one row."""
    got: dict[int, torch.Tensor] = {}
    handles = []
    for i in range(n):
        def hook(_m, _a, output, i=i):
            out = record.tensor_elements(output)[0]
            if patch is not None and patch[0] == i:
                out = out.clone()
                out[:, patch[1]] = patch[2]
                got[i] = out.detach().clone()
                return (out,) + tuple(output[1:]) if isinstance(output, tuple) else out
            got[i] = out.detach().clone()
            return None
        handles.append(model.get_submodule(f"{layers}.{i}").register_forward_hook(hook))
    try:
        with torch.no_grad():
            logits = record.forward_outputs(family, model, record.graph_inputs(family, ids))["logits"]
    finally:
        for h in handles:
            h.remove()
    return logits[0, -1].numpy(), [got[i] for i in range(n)]


def record_family(name: str) -> dict:
    family = FAMILIES[name]
    model = build_model(family)
    tokenizer = family_tokenizer(family.tokenizer, model.config.vocab_size)
    clean_ids = tokenizer(PROMPTS[0]).input_ids
    corrupt_ids = tokenizer(CORRUPT).input_ids
    if len(clean_ids) != len(corrupt_ids):
        raise SystemExit(f"{name}: the clean prompt has {len(clean_ids)} tokens, the corrupt one {len(corrupt_ids)}")
    layers = LAYERS[name]
    n = model.config.num_hidden_layers
    clean_last, clean_hidden = run(family, model, clean_ids, layers, n)
    corrupt_last, _ = run(family, model, corrupt_ids, layers, n)
    tensors: dict[str, np.ndarray] = {"clean/last": clean_last, "corrupt/last": corrupt_last}
    for i, h in enumerate(clean_hidden):
        tensors[f"clean/layer{i}"] = h.numpy()
    patches = []
    for layer in range(n):
        for pos in range(len(clean_ids)):
            last, _ = run(family, model, corrupt_ids, layers, n, (layer, pos, clean_hidden[layer][:, pos]))
            key = f"patch/layer{layer}/pos{pos}"
            tensors[key] = last
            patches.append({"layer": layer, "position": pos, "last": key})
    doc = {
        "format": FORMAT,
        "family": name,
        "seed": SEED,
        "tolerance": 1e-4,
        "clean": {"text": PROMPTS[0], "ids": clean_ids, "last": "clean/last", "layers": [f"clean/layer{i}" for i in range(n)]},
        "corrupt": {"text": CORRUPT, "ids": corrupt_ids, "last": "corrupt/last"},
        "layers": layers,
        "patches": patches,
        "produced_by": {"script": "scripts/reference/record_patching.py", "torch": torch.__version__},
    }
    safetensors_io.write_fixture(OUT / name, "patching", doc, tensors, {"format": FORMAT, "seed": str(SEED)})
    effect = max(float(np.abs(tensors[p["last"]] - corrupt_last).max()) for p in patches)
    return {"family": name, "patches": len(patches), "largest_effect": effect}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", action="append", choices=sorted(LAYERS))
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(json.dumps([record_family(n) for n in args.family or sorted(LAYERS)], indent=1))


if __name__ == "__main__":
    main()
