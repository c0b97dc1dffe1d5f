"""Record PyTorch's module parameters and the output after a parameter swap, for the fabric's parameter reads and
swaps (`await m.<module>.weight`, `m.<module>.weight = t`).

For each family (the seeded models of export_families.py, rebuilt with the same seed), prompt 0 alone:
- a few parameters as PyTorch holds them (PyTorch's layout: a Linear weight is [out, in], GPT-2's Conv1D [in, out]);
- the model's output (causal: logits; BERT: last_hidden_state) with one attention projection's weight scaled by
  SCALE (assigned in place under no_grad, as a swap for one forward).
Prompt 0 must tokenize as in reference.json (a check of the rebuild).
Writes tests/fixtures/hf/<family>/parameters.json and parameters.safetensors. Not run by CI.

    /work/ref-venv/bin/python scripts/reference/record_parameters.py [--family gpt2 ...]
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
FORMAT = "ndif-parameters/1"
SCALE = 0.5

# Per family: parameters read, and the one swapped (its value times SCALE).
PARAMETERS = {
    "gpt2": (["lm_head.weight", "transformer.wte.weight", "transformer.h.0.attn.c_attn.weight",
              "transformer.h.0.attn.c_attn.bias", "transformer.h.1.mlp.c_fc.weight"],
             "transformer.h.0.attn.c_attn.weight"),
    "llama": (["lm_head.weight", "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
               "model.layers.1.mlp.down_proj.weight", "model.norm.weight"],
              "model.layers.0.self_attn.q_proj.weight"),
    "qwen2": (["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.bias"],
              "model.layers.0.self_attn.q_proj.weight"),
    "bert": (["encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.self.query.bias"],
             "encoder.layer.0.attention.self.query.weight"),
}


def output_of(family, out) -> torch.Tensor:
    return out.logits if family.causal else out.last_hidden_state


def record_family(name: str) -> dict:
    family = FAMILIES[name]
    model = build_model(family)
    tokenizer = family_tokenizer(family.tokenizer, model.config.vocab_size)
    ids = tokenizer(PROMPTS[0]).input_ids
    reference = json.loads((OUT / name / "reference.json").read_text())
    if reference["prompts"][0]["ids"] != ids:
        raise SystemExit(f"{name}: prompt 0 tokenizes to {ids}, reference.json has {reference['prompts'][0]['ids']}")
    feeds = record.graph_inputs(family, ids)
    kwargs = {"use_cache": False} if family.causal else {}
    reads, swapped = PARAMETERS[name]
    params = dict(model.named_parameters(remove_duplicate=False))
    tensors: dict[str, np.ndarray] = {}
    for p in reads:
        tensors[f"param/{p}"] = params[p].detach().numpy().copy()
    with torch.no_grad():
        plain = output_of(family, model(**feeds, **kwargs)).numpy()
        target = params[swapped]
        original = target.detach().clone()
        target.mul_(SCALE)
        try:
            out = output_of(family, model(**feeds, **kwargs)).numpy()
        finally:
            target.copy_(original)
    tensors["plain/output"] = plain
    tensors["swap/output"] = out
    doc = {
        "format": FORMAT,
        "family": name,
        "seed": SEED,
        "tolerance": 1e-4,
        "prompt": {"text": PROMPTS[0], "ids": ids},
        "parameters": [{"path": p, "tensor": f"param/{p}"} for p in reads],
        "output": "logits" if family.causal else "last_hidden_state",
        "swap": {"path": swapped, "scale": SCALE, "output": "swap/output"},
        "plain": "plain/output",
        "produced_by": {"script": "scripts/reference/record_parameters.py", "torch": torch.__version__},
    }
    safetensors_io.write_fixture(OUT / name, "parameters", doc, tensors, {"format": FORMAT, "seed": str(SEED)})
    return {"family": name, "parameters": len(reads), "swap_changes_output_by": float(np.abs(out - plain).max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", action="append", choices=sorted(PARAMETERS))
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(json.dumps([record_family(n) for n in args.family or sorted(PARAMETERS)], indent=1))


if __name__ == "__main__":
    main()
