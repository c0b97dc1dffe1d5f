"""Export seeded small Hugging Face models of each family with each exporter, and record PyTorch.

Writes tests/fixtures/hf/<family>/: reference.json and reference.safetensors (activations recorded
with forward hooks, gradients, greedy generation with the KV cache, tokenizer ids) and one model
folder per variant (model.onnx [+ external data], config.json, tokenizer.json,
tokenizer_config.json), each a folder the fabric can register as is. Format:
tests/fixtures/hf/README.md. Not run by CI; see README.md here.

    .cache/ref-venv/bin/python scripts/reference/export_families.py [--family gpt2 ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_fixtures import record, safetensors_io  # noqa: E402
from hf_fixtures.exporters import export_variant  # noqa: E402
from hf_fixtures.families import FAMILIES, PROMPTS, SEED, TOKENIZER_TEXTS, Family, build_model, export_copy  # noqa: E402
from hf_fixtures.tokenizers_build import family_tokenizer  # noqa: E402
from hf_fixtures.verify import verify_variant  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "hf"
FORMAT = "ndif-reference/2"
TOLERANCE = {"float32": 1e-4, "float16": 1e-2}
NEW_TOKENS = 6


def versions() -> dict[str, str]:
    import onnx
    import onnxruntime
    import tokenizers
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
    }


def record_reference(family: Family, model, prompt_ids: list[list[int]], dtype: str, tokenizer) -> tuple[dict, dict]:
    tensors: dict[str, np.ndarray] = {}
    cases_json = []
    for case in record.cases(family):
        per_prompt = []
        for p, ids in enumerate(prompt_ids):
            recorded = record.run_case(family, model, ids, case)
            names = {}
            for key in sorted(recorded):
                names[key] = f"{case['name']}/{p}/{key}"
                tensors[names[key]] = recorded[key]
            per_prompt.append(names)
        cases_json.append({"name": case["name"], "intervention": case["intervention"], "tensors": per_prompt})
    ref: dict = {
        "format": FORMAT,
        "family": family.name,
        "dtype": dtype,
        "tolerance": TOLERANCE[dtype],
        "seed": SEED,
        "padding_side": "left" if family.causal else "right",
        "prompts": [{"text": t, "ids": ids} for t, ids in zip(PROMPTS, prompt_ids)],
        "input_names": family.input_names,
        "output_names": family.output_names,
        "cases": cases_json,
        "produced_by": {"script": "scripts/reference/export_families.py", "versions": versions()},
    }
    if dtype == "float32":
        model.float()
        grads, spec = record.gradients(family, model, prompt_ids[0])
        for key, g in grads.items():
            tensors[f"grad/{key}"] = g
        ref["gradients"] = {"prompt": 0, "metric": spec, "tensors": {k: f"grad/{k}" for k in grads}}
        if family.causal:
            tokens, logits = record.greedy_generate(model, prompt_ids[0], NEW_TOKENS)
            tensors["generate/logits"] = logits
            ref["generate"] = {"prompt": 0, "new_tokens": NEW_TOKENS, "tokens": tokens, "logits": "generate/logits", "cache": True}
        ref["tokenizer"] = {
            "kind": family.tokenizer,
            "cases": [
                {"text": t, "ids": tokenizer(t).input_ids, "decoded": tokenizer.decode(tokenizer(t).input_ids)}
                for t in TOKENIZER_TEXTS
            ],
        }
    return ref, tensors


def write_reference(folder: Path, ref: dict, tensors: dict[str, np.ndarray]) -> None:
    safetensors_io.write(folder / "reference.safetensors", tensors, {"format": FORMAT, "seed": str(SEED)})
    (folder / "reference.json").write_text(json.dumps(ref, indent=2, ensure_ascii=False) + "\n")


def export_family(family: Family, out_root: Path) -> list[dict]:
    out = out_root / family.name
    out.mkdir(parents=True, exist_ok=True)
    model = build_model(family)
    tokenizer = family_tokenizer(family.tokenizer, model.config.vocab_size)
    prompt_ids = [tokenizer(p).input_ids for p in PROMPTS]
    ref, tensors = record_reference(family, model, prompt_ids, "float32", tokenizer)
    write_reference(out, ref, tensors)
    report = []
    for variant in family.variants:
        folder = out / variant.folder
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        source = model
        if variant.dtype == "float16":
            source = build_model(family).half()
            vref, vtensors = record_reference(family, source, prompt_ids, "float16", tokenizer)
            write_reference(folder, vref, vtensors)
        exported = export_copy(family, source, with_past=variant.exporter == "with-past")
        config = exported.config
        config.architectures = [family.base_class().__name__]
        config.dtype = variant.dtype
        config.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))
        export_variant(family, exported, folder, variant)
        report.append({"variant": f"{family.name}/{variant.folder}", **verify_variant(family, folder, variant)})
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES), help="only these families (repeatable)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    report = []
    for name in args.family or list(FAMILIES):
        report += export_family(FAMILIES[name], args.out)
    print(json.dumps({"out": str(args.out), "variants": report}, indent=1))


if __name__ == "__main__":
    main()
