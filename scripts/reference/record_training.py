"""Record PyTorch training loops for the fabric's training tests: tests/fixtures/hf/llama/training.json.

Rebuilds the seeded float32 Llama fixture (hf_fixtures.families.build_model: the weights export_families.py
exported) and runs, one prompt per step (cycling PROMPTS), exactly what the test's blocks do:

- `lora`: rank-4 LoRA on model.layers.1.mlp.down_proj (a forward hook: out + (x @ A^T @ B^T) * SCALE), A
  initialised to 0.1 * sin(1 + k) (k the flat index), B to zeros; loss the next-token cross entropy of the prompt;
  Adam (lr 0.01);
- `probe`: a linear probe [2, 64] + bias on model.layers.0's output (detached), label = token id parity at each
  position; SGD (lr 0.5, momentum 0.9, weight decay 1e-3);
- `steering`: a vector [64] added to model.layers.0's output at every position; loss the cross entropy of token 7
  at the last position; AdamW (lr 0.05, weight decay 0.01).

Every step's loss is recorded (before the update), with the token ids of each prompt.

    /work/ref-venv/bin/python scripts/reference/record_training.py [--steps N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_fixtures.families import FAMILIES, build_model  # noqa: E402
from hf_fixtures.tokenizers_build import family_tokenizer  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
OUT = REPO_ROOT / "tests" / "fixtures" / "hf" / "llama" / "training.json"
PROMPTS = ["The Eiffel Tower is in Paris", "Hello world", "The Big Ben is in London"]
SCALE = 2.0
FORMAT = "ndif-training/1"


def sin_init(shape) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    k = torch.arange(n, dtype=torch.float64) + 1
    return (0.1 * torch.sin(k)).to(torch.float32).reshape(shape)


def forward(model, ids):
    t = torch.tensor([ids])
    return model(input_ids=t, attention_mask=torch.ones_like(t), position_ids=torch.arange(len(ids))[None]).logits[0]


def lora(model, prompts, steps):
    A = sin_init([4, 128]).requires_grad_()
    B = torch.zeros(64, 4).requires_grad_()
    opt = torch.optim.Adam([A, B], lr=0.01)
    hook = model.model.layers[1].mlp.down_proj.register_forward_hook(lambda mod, inp, out: out + (inp[0] @ A.T @ B.T) * SCALE)
    losses = []
    for step in range(steps):
        ids = prompts[step % len(prompts)]
        logits = forward(model, ids)
        loss = F.cross_entropy(logits[:-1], torch.tensor(ids[1:]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.remove()
    return losses


def probe(model, prompts, steps):
    W = sin_init([2, 64]).requires_grad_()
    b = torch.zeros(2).requires_grad_()
    opt = torch.optim.SGD([W, b], lr=0.5, momentum=0.9, weight_decay=1e-3)
    got = {}
    hook = model.model.layers[0].register_forward_hook(lambda mod, inp, out: got.__setitem__("h", (out[0] if isinstance(out, tuple) else out).detach()))
    losses = []
    for step in range(steps):
        ids = prompts[step % len(prompts)]
        with torch.no_grad():
            forward(model, ids)
        h = got["h"][0]
        loss = F.cross_entropy(h @ W.T + b, torch.tensor([i % 2 for i in ids]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.remove()
    return losses


def steering(model, prompts, steps):
    v = torch.zeros(64).requires_grad_()
    opt = torch.optim.AdamW([v], lr=0.05, weight_decay=0.01)
    hook = model.model.layers[0].register_forward_hook(
        lambda mod, inp, out: (out[0] + v,) + tuple(out[1:]) if isinstance(out, tuple) else out + v
    )
    losses = []
    for step in range(steps):
        ids = prompts[step % len(prompts)]
        logits = forward(model, ids)
        loss = F.cross_entropy(logits[-1:], torch.tensor([7]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.remove()
    return losses


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args()
    family = FAMILIES["llama"]
    model = build_model(family)
    for p in model.parameters():
        p.requires_grad_(False)
    tokenizer = family_tokenizer(family.tokenizer, model.config.vocab_size)
    prompts = [tokenizer(p).input_ids for p in PROMPTS]
    out = {
        "format": FORMAT,
        "family": "llama",
        "produced_by": "scripts/reference/record_training.py",
        "torch": torch.__version__,
        "prompts": [{"text": t, "ids": ids} for t, ids in zip(PROMPTS, prompts)],
        "lora": {"module": "model.layers.1.mlp.down_proj", "rank": 4, "scale": SCALE, "optimizer": "Adam(lr=0.01)", "losses": lora(model, prompts, a.steps)},
        "probe": {"module": "model.layers.0", "optimizer": "SGD(lr=0.5, momentum=0.9, weight_decay=1e-3)", "losses": probe(model, prompts, a.steps)},
        "steering": {"module": "model.layers.0", "target": 7, "optimizer": "AdamW(lr=0.05, weight_decay=0.01)", "losses": steering(model, prompts, a.steps)},
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: (v["losses"][0], v["losses"][-1]) for k, v in out.items() if isinstance(v, dict) and "losses" in v}))


if __name__ == "__main__":
    main()
