"""Save each seeded family model as a Hugging Face snapshot folder beside its exports.

Writes tests/fixtures/hf/<family>/snapshot/ (`save_pretrained`: config.json, model.safetensors,
generation_config.json for the causal families, plus the family's tokenizer.json and
tokenizer_config.json) and tests/fixtures/hf/llama/snapshot-sharded/ (the same weights in several
model-0000N-of-0000M.safetensors shards with model.safetensors.index.json) and tests/fixtures/hf/llama/snapshot-float16/ (model.half(), checked against the
float16 variant's own reference by the tests). It rebuilds the seeded models of
export_families.py and stops unless each reproduces the committed reference's plain logits, so the snapshots
hold exactly the weights every recorded activation, gradient and generation came from.

    /work/ref-venv/bin/python scripts/reference/save_snapshots.py [--family gpt2 ...]
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

from safetensors.numpy import load_file  # noqa: E402
from hf_fixtures.families import FAMILIES, build_model  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
HF = REPO_ROOT / "tests" / "fixtures" / "hf"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def check_reference(name: str, model) -> float:
    ref = json.loads((HF / name / "reference.json").read_text())
    tensors = load_file(str(HF / name / "reference.safetensors"))
    plain = ref["cases"][0]
    worst = 0.0
    out_key = ref["output_names"][0]
    for p, prompt in enumerate(ref["prompts"]):
        ids = torch.tensor([prompt["ids"]])
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
        got = out.logits if hasattr(out, "logits") and out.logits is not None else out.last_hidden_state
        want = tensors[plain["tensors"][p][out_key]]
        worst = max(worst, float(np.abs(got.numpy() - want).max()))
    if worst > 1e-6:
        raise SystemExit(f"{name}: the rebuilt model differs from the committed reference by {worst}")
    return worst


def save(name: str, model, folder: Path, shard: str | None) -> list[str]:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(str(folder), **kwargs)
    source = next(p for p in sorted((HF / name).iterdir()) if (p / "tokenizer.json").exists())
    for f in TOKENIZER_FILES:
        shutil.copyfile(source / f, folder / f)
    return sorted(p.name for p in folder.iterdir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES))
    args = parser.parse_args()
    torch.set_num_threads(2)
    report = {}
    for name in args.family or list(FAMILIES):
        model = build_model(FAMILIES[name])
        worst = check_reference(name, model)
        report[f"{name}/snapshot"] = {"files": save(name, model, HF / name / "snapshot", None), "vs_reference": worst}
        if name == "llama":
            files = save(name, model, HF / name / "snapshot-sharded", "100KB")
            report[f"{name}/snapshot-sharded"] = {"files": files}
            # float16 weights: the model the float16 variant's own reference was recorded with (model.half()).
            files = save(name, build_model(FAMILIES[name]).half(), HF / name / "snapshot-float16", None)
            report[f"{name}/snapshot-float16"] = {"files": files}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
