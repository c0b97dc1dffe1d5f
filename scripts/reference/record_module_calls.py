"""Record PyTorch applying modules by hand to a layer's output: the logit lens, for the fabric's module calls.

For each family (the seeded models of export_families.py, rebuilt here with the same seed), prompt 0 alone:
- causal LMs: for every decoder layer i, its output h_i (element 0 of what the layer returns, read by a forward
  hook) and `lm_head(norm(h_i))` — the logit lens, [1, tokens, vocab] — plus the same for the last position only
  (`h_i[:, -1:]`, [1, 1, vocab]) and `norm(h_i)` itself;
- BERT: `pooler(h_i)` for every encoder layer, [1, d].
The last layer's lens must equal the model's own logits (pooler: its pooler_output), and prompt 0 must tokenize as in
reference.json: checks of the rebuild.
Writes tests/fixtures/hf/<family>/module-calls.json and module-calls.safetensors. Not run by CI.

    /work/main/.cache/ref-venv/bin/python scripts/reference/record_module_calls.py [--family gpt2 ...]
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
FORMAT = "ndif-module-calls/1"

# Per family: the layer list, the final norm (None: none applied) and the head applied by hand.
MODULES = {
    "gpt2": ("transformer.h", "transformer.ln_f", "lm_head"),
    "llama": ("model.layers", "model.norm", "lm_head"),
    "qwen2": ("model.layers", "model.norm", "lm_head"),
    "bert": ("encoder.layer", None, "pooler"),
}


def layer_outputs(model, layers: str, n: int, feeds: dict) -> tuple[list[torch.Tensor], dict]:
    got: dict[int, torch.Tensor] = {}
    handles = []
    for i in range(n):
        def hook(_m, _a, output, i=i):
            got[i] = record.tensor_elements(output)[0].detach().clone()
        handles.append(model.get_submodule(f"{layers}.{i}").register_forward_hook(hook))
    try:
        with torch.no_grad():
            outs = record.forward_outputs(FAMILY, model, feeds)
    finally:
        for h in handles:
            h.remove()
    return [got[i] for i in range(n)], outs


def record_family(name: str) -> dict:
    global FAMILY
    FAMILY = family = FAMILIES[name]
    model = build_model(family)
    tokenizer = family_tokenizer(family.tokenizer, model.config.vocab_size)
    ids = tokenizer(PROMPTS[0]).input_ids
    reference = json.loads((OUT / name / "reference.json").read_text())
    if reference["prompts"][0]["ids"] != ids:
        raise SystemExit(f"{name}: prompt 0 tokenizes to {ids}, reference.json has {reference['prompts'][0]['ids']}")
    layers, norm_path, head_path = MODULES[name]
    n = model.config.num_hidden_layers
    hidden, outs = layer_outputs(model, layers, n, record.graph_inputs(family, ids))
    norm = model.get_submodule(norm_path) if norm_path else None
    head = model.get_submodule(head_path)
    tensors: dict[str, np.ndarray] = {}
    calls = []
    with torch.no_grad():
        for i, h in enumerate(hidden):
            tensors[f"layer{i}/hidden"] = h.numpy()
            x = norm(h) if norm is not None else h
            if norm is not None:
                tensors[f"layer{i}/normed"] = x.numpy()
            tensors[f"layer{i}/lens"] = head(x).numpy()
            entry = {"layer": i, "hidden": f"layer{i}/hidden", "lens": f"layer{i}/lens"}
            if norm is not None:
                tensors[f"layer{i}/lens_last"] = head(norm(h[:, -1:])).numpy()
                entry.update({"normed": f"layer{i}/normed", "lens_last": f"layer{i}/lens_last"})
            calls.append(entry)
    final = tensors[f"layer{n - 1}/lens"]
    own = outs["logits" if family.causal else "pooler_output"].numpy()
    worst = float(np.abs(final - own).max())
    if worst > 1e-5:
        raise SystemExit(f"{name}: the last layer's lens differs from the model's own output by {worst}")
    doc = {
        "format": FORMAT,
        "family": name,
        "seed": SEED,
        "tolerance": 1e-4,
        "prompt": {"text": PROMPTS[0], "ids": ids},
        "layers": layers,
        "norm": norm_path,
        "head": head_path,
        "calls": calls,
        "produced_by": {"script": "scripts/reference/record_module_calls.py", "torch": torch.__version__},
    }
    safetensors_io.write_fixture(OUT / name, "module-calls", doc, tensors, {"format": FORMAT, "seed": str(SEED)})
    return {"family": name, "layers": n, "last_lens_vs_model": worst}


FAMILY = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", action="append", choices=sorted(MODULES))
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(json.dumps([record_family(n) for n in args.family or sorted(MODULES)], indent=1))


if __name__ == "__main__":
    main()
