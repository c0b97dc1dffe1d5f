"""Record PyTorch's attention probabilities, for the fabric's operations inside a module (`.source`).

For each family (the seeded models of export_families.py, rebuilt with the same seed), prompt 0 alone, with
transformers' eager attention (`output_attentions=True`):
- every layer's attention probabilities, [1, heads, tokens, tokens] (what the fabric reads at
  `<attention>.source.softmax_0.output`);
- the model's output (causal: logits; BERT: last_hidden_state) with layer 1's attention probabilities replaced by
  zeros — `torch.nn.functional.softmax` swapped while that attention module runs, as a hook on the operation would.
Prompt 0 must tokenize as in reference.json (a check of the rebuild).
Writes tests/fixtures/hf/<family>/attention.json and attention.safetensors. Not run by CI.

    .cache/ref-venv/bin/python scripts/reference/record_attention.py [--family gpt2 ...]
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
FORMAT = "ndif-attention/1"

# Per family: the attention module of layer i (the fabric reads `<module>.source.softmax_0`).
ATTENTION = {
    "gpt2": "transformer.h.{i}.attn",
    "llama": "model.layers.{i}.self_attn",
    "qwen2": "model.layers.{i}.self_attn",
    "bert": "encoder.layer.{i}.attention.self",
}
SWAP_LAYER = 1


def output_of(family, out) -> torch.Tensor:
    return out.logits if family.causal else out.last_hidden_state


def record_family(name: str) -> dict:
    family = FAMILIES[name]
    model = build_model(family)
    model.set_attn_implementation("eager")
    tokenizer = family_tokenizer(family.tokenizer, model.config.vocab_size)
    ids = tokenizer(PROMPTS[0]).input_ids
    reference = json.loads((OUT / name / "reference.json").read_text())
    if reference["prompts"][0]["ids"] != ids:
        raise SystemExit(f"{name}: prompt 0 tokenizes to {ids}, reference.json has {reference['prompts'][0]['ids']}")
    feeds = record.graph_inputs(family, ids)
    kwargs = {"use_cache": False} if family.causal else {}
    with torch.no_grad():
        out = model(**feeds, output_attentions=True, **kwargs)
    tensors: dict[str, np.ndarray] = {}
    layers = []
    for i, a in enumerate(out.attentions):
        tensors[f"layer{i}/attention"] = a.detach().numpy()
        layers.append({"layer": i, "module": ATTENTION[name].format(i=i), "attention": f"layer{i}/attention"})
    tensors["plain/output"] = output_of(family, out).numpy()

    # Layer SWAP_LAYER's probabilities replaced by zeros while its attention runs.
    target = model.get_submodule(ATTENTION[name].format(i=SWAP_LAYER))
    original = torch.nn.functional.softmax
    swapped = {"calls": 0}

    def zeros_softmax(*args, **kw):
        swapped["calls"] += 1
        return torch.zeros_like(original(*args, **kw))

    def pre(_m, _a, _k=None):
        torch.nn.functional.softmax = zeros_softmax

    def post(_m, _a, _o):
        torch.nn.functional.softmax = original

    h1 = target.register_forward_pre_hook(pre)
    h2 = target.register_forward_hook(post)
    try:
        with torch.no_grad():
            swapped_out = model(**feeds, **kwargs)
    finally:
        h1.remove()
        h2.remove()
        torch.nn.functional.softmax = original
    if swapped["calls"] != 1:
        raise SystemExit(f"{name}: the attention of layer {SWAP_LAYER} called softmax {swapped['calls']} times, not once")
    tensors["swap/output"] = output_of(family, swapped_out).numpy()
    changed = float(np.abs(tensors["swap/output"] - tensors["plain/output"]).max())
    doc = {
        "format": FORMAT,
        "family": name,
        "seed": SEED,
        "tolerance": 1e-4,
        "prompt": {"text": PROMPTS[0], "ids": ids},
        "layers": layers,
        "output": "logits" if family.causal else "last_hidden_state",
        "swap": {"layer": SWAP_LAYER, "module": ATTENTION[name].format(i=SWAP_LAYER), "what": "zeros",
                 "output": "swap/output"},
        "plain": "plain/output",
        "produced_by": {"script": "scripts/reference/record_attention.py", "torch": torch.__version__},
    }
    safetensors_io.write_fixture(OUT / name, "attention", doc, tensors, {"format": FORMAT, "seed": str(SEED)})
    return {"family": name, "layers": len(layers), "swap_changes_output_by": changed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", action="append", choices=sorted(ATTENTION))
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(json.dumps([record_family(n) for n in args.family or sorted(ATTENTION)], indent=1))


if __name__ == "__main__":
    main()
