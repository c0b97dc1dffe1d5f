"""Record the training bench's PyTorch reference: bench/families/training-reference.json.

Loads the families bench's generated Llama model (bench/families/model-llama.ts, written to
.cache/models/bench-llama-8x512-gqa2-v2 by `npm run bench -- families` or `-- training`) into transformers'
LlamaForCausalLM (MatMul weights [in, out] transposed into nn.Linear's [out, in]), checks its logits against
onnxruntime on the first prompt, then runs the bench's loop: a rank-4 LoRA on MODULE (a forward hook: out +
(x @ A^T @ B^T) * SCALE; A = 0.01 * sin(1 + k) over its flat index, B = zeros), next-token cross entropy,
Adam(lr=LR), one prompt per step (cycling PROMPTS 32-token prompts, each a seeded 4-token pattern repeated), STEPS steps; every step's loss
(before its update) is recorded.

    /work/ref-venv/bin/python scripts/reference/record_bench_training.py [--model DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import numpy_helper
from transformers import LlamaConfig, LlamaForCausalLM

REPO_ROOT = Path(__file__).resolve().parents[2]
OUT = REPO_ROOT / "bench" / "families" / "training-reference.json"
MODULE = "model.layers.4.mlp.down_proj"
RANK, SCALE, LR, STEPS, PROMPTS, TOKENS = 4, 2.0, 0.01, 50, 2, 32


def load(model_dir: Path) -> LlamaForCausalLM:
    cfg = json.loads((model_dir / "config.json").read_text())
    config = LlamaConfig(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"], intermediate_size=cfg["intermediate_size"],
        num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg["num_key_value_heads"], max_position_embeddings=cfg["max_position_embeddings"],
        rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
    )
    model = LlamaForCausalLM(config)
    graph = onnx.load(str(model_dir / "model.onnx"), load_external_data=True).graph
    weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in graph.initializer}
    state = {}
    for name, p in model.state_dict().items():
        w = weights[name]
        state[name] = w.T.contiguous() if name.endswith("proj.weight") or name == "lm_head.weight" else w
    model.load_state_dict(state)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def forward(model, ids):
    t = torch.tensor([ids])
    return model(input_ids=t, attention_mask=torch.ones_like(t), position_ids=torch.arange(len(ids))[None]).logits[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(REPO_ROOT / ".cache" / "models" / "bench-llama-8x512-gqa2-v2"))
    a = ap.parse_args()
    torch.set_num_threads(2)
    model = load(Path(a.model))
    g = torch.Generator().manual_seed(23)
    # Each prompt repeats a 4-token pattern: a rank-4 adapter can fit its next tokens (on uniformly random tokens the
    # adapter's 4 output directions cannot, and 50 steps end at 0.70x the first loss).
    patterns = [torch.randint(3, model.config.vocab_size, (4,), generator=g).tolist() for _ in range(PROMPTS)]
    prompts = [[1] + (p * TOKENS)[: TOKENS - 1] for p in patterns]
    sess = ort.InferenceSession(str(Path(a.model) / "model.onnx"), providers=["CPUExecutionProvider"])
    ids = np.array([prompts[0]], dtype=np.int64)
    want = sess.run(["logits"], {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(TOKENS)[None]})[0][0]
    with torch.no_grad():
        got = forward(model, prompts[0]).numpy()
    err = float(np.abs(got - want).max())
    if err > 1e-4:
        raise SystemExit(f"the PyTorch model's logits differ from onnxruntime's by {err}")
    inter, d = model.config.intermediate_size, model.config.hidden_size
    A = (0.01 * torch.sin(torch.arange(RANK * inter, dtype=torch.float64) + 1)).to(torch.float32).reshape(RANK, inter).requires_grad_()
    B = torch.zeros(d, RANK).requires_grad_()
    opt = torch.optim.Adam([A, B], lr=LR)
    model.get_submodule(MODULE).register_forward_hook(lambda mod, inp, out: out + (inp[0] @ A.T @ B.T) * SCALE)
    losses = []
    for step in range(STEPS):
        ids = prompts[step % len(prompts)]
        loss = F.cross_entropy(forward(model, ids)[:-1], torch.tensor(ids[1:]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    OUT.write_text(json.dumps({
        "format": "ndif-bench-training/1", "produced_by": "scripts/reference/record_bench_training.py",
        "torch": torch.__version__, "logits_max_abs_diff_vs_onnxruntime": err,
        "module": MODULE, "rank": RANK, "scale": SCALE, "lr": LR, "optimizer": f"Adam(lr={LR})",
        "prompts": prompts, "losses": losses,
    }, indent=1) + "\n")
    print(json.dumps({"logits_err": err, "first": losses[0], "last": losses[-1]}))


if __name__ == "__main__":
    main()
