"""Record PyTorch autograd for the fabric's gradient tests: tests/fixtures/hf/<family>/gradients.{json,safetensors}.

Rebuilds each family's seeded float32 model (hf_fixtures.families.build_model: the same weights export_families.py
exported, checked against the committed reference logits) and records, for prompt 0:

- `logit_diff`: d(metric)/d(output) at the embedding module and the family's grad_modules, where the metric is the
  one reference.json's `gradients` names (logits[0, -1, 7] - logits[0, -1, 11]; BERT: pooler_output[0, 0] -
  pooler_output[0, 1]);
- `swap`: the same backward with a tensor hook on the swap module's output that replaces its gradient g by
  cat(2·g[..., :d/2], 0·g[..., d/2:]) (what the fabric's `m.<swap>.output.grad = …` does), and the gradients it
  leaves at the modules upstream of it;
- `attribution`: attribution patching at the swap module between the clean prompt (prompt 0) and a corrupt one of
  the same length: per position, sum over hidden of (a_clean − a_corrupt) · d(metric on corrupt)/d(a_corrupt),
  with a_clean recorded so the fabric's block can compute the same estimate.

    .cache/ref-venv/bin/python scripts/reference/record_gradients.py [--family gpt2 ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_fixtures import safetensors_io  # noqa: E402
from hf_fixtures.families import FAMILIES, PROMPTS, Family, build_model  # noqa: E402
from hf_fixtures.record import backward_through  # noqa: E402
from hf_fixtures.tokenizers_build import family_tokenizer  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "hf"
FORMAT = "ndif-gradients/1"
CORRUPT = "The Big Ben is in London"

# Per family: the embedding module, the module whose output gradient is swapped (and where attribution patching
# is estimated), and modules upstream of it whose gradients the swap changes.
POINTS = {
    "gpt2": {"embedding": "transformer.wte", "swap": "transformer.h.0", "upstream": ["transformer.h.0.attn", "transformer.wte"]},
    "llama": {"embedding": "model.embed_tokens", "swap": "model.layers.0", "upstream": ["model.layers.0.self_attn", "model.embed_tokens"]},
    "qwen2": {"embedding": "model.embed_tokens", "swap": "model.layers.0", "upstream": ["model.layers.0.self_attn", "model.embed_tokens"]},
    "bert": {"embedding": "embeddings", "swap": "encoder.layer.0", "upstream": ["encoder.layer.0.attention.self", "embeddings"]},
}


def swapped(g: torch.Tensor) -> torch.Tensor:
    half = g.shape[-1] // 2
    return torch.cat([2 * g[..., :half], 0 * g[..., half:]], dim=-1)


def record_family(family: Family) -> dict:
    out = FIXTURES / family.name
    model = build_model(family)
    tokenizer = family_tokenizer(family.tokenizer, model.config.vocab_size)
    ref = json.loads((out / "reference.json").read_text())
    clean = tokenizer(PROMPTS[0]).input_ids
    corrupt_text = CORRUPT
    corrupt = tokenizer(corrupt_text).input_ids
    if len(corrupt) != len(clean):
        raise SystemExit(f"{family.name}: corrupt prompt has {len(corrupt)} tokens, the clean one {len(clean)}; pick another")
    pts = POINTS[family.name]
    tensors: dict[str, np.ndarray] = {}

    names = list(dict.fromkeys([pts["embedding"], *family.grad_modules]))
    _, grads, value, spec = backward_through(family, model, clean, names)
    if abs(value - ref["gradients"]["metric"]["value"]) > 1e-5:
        raise SystemExit(f"{family.name}: the rebuilt model's metric {value} differs from reference.json's {ref['gradients']['metric']['value']}")
    for p, g in grads.items():
        tensors[f"logit_diff/{p}.output"] = g

    _, hooked, hooked_value, _ = backward_through(family, model, clean, pts["upstream"] + [pts["swap"]], hook=(pts["swap"], swapped))
    for p in pts["upstream"] + [pts["swap"]]:
        tensors[f"swap/{p}.output"] = hooked[p]

    clean_values, _, _, _ = backward_through(family, model, clean, [pts["swap"]])
    corrupt_values, corrupt_grads, corrupt_metric, _ = backward_through(family, model, corrupt, [pts["swap"]])
    a_clean = clean_values[pts["swap"]]
    estimate = ((a_clean - corrupt_values[pts["swap"]]) * corrupt_grads[pts["swap"]]).sum(-1)
    tensors["attribution/clean"] = a_clean
    tensors["attribution/estimate"] = estimate

    doc = {
        "format": FORMAT,
        "family": family.name,
        "metric": {**spec, "value": value},
        "prompt": {"text": PROMPTS[0], "ids": clean},
        "logit_diff": {"points": [f"{p}.output" for p in names], "tensors": {f"{p}.output": f"logit_diff/{p}.output" for p in names}},
        "swap": {
            "point": f"{pts['swap']}.output",
            "rule": "g -> cat(2 * g[..., :d/2], 0 * g[..., d/2:]) along the last dim",
            "metric_value": hooked_value,
            "tensors": {f"{p}.output": f"swap/{p}.output" for p in pts["upstream"] + [pts["swap"]]},
        },
        "attribution": {
            "point": f"{pts['swap']}.output",
            "clean": {"text": PROMPTS[0], "ids": clean},
            "corrupt": {"text": corrupt_text, "ids": corrupt, "metric_value": corrupt_metric},
            "clean_value": "attribution/clean",
            "estimate": "attribution/estimate",
            "rule": "sum over the last dim of (a_clean - a_corrupt) * d(metric on corrupt)/d(a_corrupt), per position",
        },
        "produced_by": {"script": "scripts/reference/record_gradients.py", "versions": {"torch": torch.__version__}},
    }
    safetensors_io.write_fixture(out, "gradients", doc, tensors, {"format": FORMAT})
    return {"family": family.name, "metric": value, "swap_metric": hooked_value, "corrupt_metric": corrupt_metric, "tensors": len(tensors)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES))
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(json.dumps([record_family(FAMILIES[n]) for n in args.family or list(FAMILIES)], indent=1))


if __name__ == "__main__":
    main()
