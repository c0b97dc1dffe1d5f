"""Record PyTorch's cached greedy generation with interventions at one step, for the causal families.

For each causal family (the seeded models of export_families.py, rebuilt here with the same seed), greedy
decoding with transformers' KV cache (DynamicCache), step by step as hf_fixtures.record.greedy_generate does,
for prompt 0 and NEW_TOKENS tokens:
- `plain`: no intervention (its tokens must equal reference.json's `generate`, a check of the rebuild);
- `zero_<module>_step<k>`: a forward hook replaces the module's output by zeros during the k-th forward pass
  only (step 0: the prompt; step k >= 1: the one new token), so later steps see the change only through the
  keys and values the cache kept.
Writes tests/fixtures/hf/<family>/generation.json and generation.safetensors (per case the tokens and the
last-position logits of every step). Not run by CI.

    /work/main/.cache/ref-venv/bin/python scripts/reference/record_generation.py [--family gpt2 ...]
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
FORMAT = "ndif-generation/1"
NEW_TOKENS = 6
SWAP_STEPS = (0, 2)


def generate(model, ids: list[int], new_tokens: int, swap: tuple[str, int] | None) -> tuple[list[int], np.ndarray]:
    """record.greedy_generate, with `swap`'s module output zeroed by a forward hook during one forward pass only."""
    if swap is None:
        return record.greedy_generate(model, ids, new_tokens)
    path, at = swap
    step = {"i": 0}

    def zero(_m, _a, output):
        if step["i"] != at:
            return None
        if isinstance(output, tuple):
            return (torch.zeros_like(output[0]),) + output[1:]
        return torch.zeros_like(output)

    handle = model.get_submodule(path).register_forward_hook(zero)
    try:
        return record.greedy_generate(model, ids, new_tokens, on_step=lambda i: step.__setitem__("i", i))
    finally:
        handle.remove()


def record_family(name: str) -> dict:
    family = FAMILIES[name]
    model = build_model(family)
    tokenizer = family_tokenizer(family.tokenizer, model.config.vocab_size)
    ids = tokenizer(PROMPTS[0]).input_ids
    reference = json.loads((OUT / name / "reference.json").read_text())
    cases = [("plain", None)] + [(f"zero_{family.zero_output.replace('.', '_')}_step{k}", (family.zero_output, k)) for k in SWAP_STEPS]
    tensors: dict[str, np.ndarray] = {}
    out_cases = []
    for case, swap in cases:
        tokens, logits = generate(model, ids, NEW_TOKENS, swap)
        if case == "plain" and tokens != reference["generate"]["tokens"]:
            raise SystemExit(f"{name}: rebuilt model generates {tokens}, reference.json has {reference['generate']['tokens']}")
        tensors[f"{case}/logits"] = logits
        entry = {"name": case, "tokens": tokens, "logits": f"{case}/logits", "intervention": None}
        if swap is not None:
            entry["intervention"] = {"path": swap[0], "point": "output", "what": "zeros", "step": swap[1]}
        out_cases.append(entry)
    doc = {
        "format": FORMAT,
        "family": name,
        "seed": SEED,
        "tolerance": 1e-4,
        "prompt": {"text": PROMPTS[0], "ids": ids},
        "new_tokens": NEW_TOKENS,
        "cache": True,
        "cases": out_cases,
        "produced_by": {"script": "scripts/reference/record_generation.py", "torch": torch.__version__},
    }
    safetensors_io.write_fixture(OUT / name, "generation", doc, tensors, {"format": FORMAT, "seed": str(SEED)})
    return {"family": name, "cases": [(c["name"], c["tokens"]) for c in out_cases]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    causal = sorted(n for n, f in FAMILIES.items() if f.causal)
    parser.add_argument("--family", action="append", choices=causal)
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(json.dumps([record_family(n) for n in args.family or causal], indent=1))


if __name__ == "__main__":
    main()
