"""Record PyTorch values and gradients of the block tensor API's ops: tests/fixtures/tensor-ops.json.

Inputs are x = sin(1 + k) * 2 and y = cos(1 + k) over the flat index k (float32), shape [3, 4]; each op's
gradient is of sum(out * cos(2 + k)) with respect to x (and y where the op takes it).

    /work/ref-venv/bin/python scripts/reference/record_tensor_ops.py
"""

import json
from pathlib import Path

import torch
import torch.nn.functional as F

OUT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "tensor-ops.json"


def init(fn, shape, scale=1.0):
    n = 1
    for s in shape:
        n *= s
    return (scale * fn(torch.arange(n, dtype=torch.float64) + 1)).to(torch.float32).reshape(shape)


def main():
    idx = torch.tensor([[0, 2, 1, 0], [1, 1, 0, 2], [2, 0, 2, 1]])
    cases = {
        "relu": lambda x, y: x.relu(),
        "gelu": lambda x, y: F.gelu(x),
        "silu": lambda x, y: F.silu(x),
        "tanh": lambda x, y: x.tanh(),
        "sigmoid": lambda x, y: x.sigmoid(),
        "clamp": lambda x, y: x.clamp(-0.5, 1.0),
        "maximum": lambda x, y: torch.maximum(x, y),
        "minimum": lambda x, y: torch.minimum(x, y),
        "where": lambda x, y: torch.where(x > 0, x, y),
        "cat": lambda x, y: torch.cat([x, y], 1),
        "stack": lambda x, y: torch.stack([x, y], 1),
        "permute": lambda x, y: x.reshape(3, 2, 2).permute(2, 0, 1),
        "expand": lambda x, y: x[:1].expand(3, 4) * y,
        "gather": lambda x, y: x.gather(0, idx),
        "scatterAdd": lambda x, y: x.scatter_add(0, idx[:2], y[:2]),
        "cumsum": lambda x, y: x.cumsum(1),
        "sort": lambda x, y: x.sort(1, descending=True).values,
        "norm": lambda x, y: x.norm(2, 1),
        "cosineSimilarity": lambda x, y: F.cosine_similarity(x, y, 1),
        "mseLoss": lambda x, y: F.mse_loss(x, y),
        "crossEntropy": lambda x, y: F.cross_entropy(x, torch.tensor([3, 0, 2])),
        "einsum": lambda x, y: torch.einsum("ij,kj->ik", x, y),
        "einsumSum": lambda x, y: torch.einsum("ij,ij->j", x, y),
        "squeezeFlatten": lambda x, y: x.unsqueeze(0).flatten(1).squeeze(0),
    }
    out = {"format": "ndif-tensor-ops/1", "produced_by": "scripts/reference/record_tensor_ops.py", "cases": {}}
    for name, fn in cases.items():
        x = init(torch.sin, [3, 4], 2.0).requires_grad_()
        y = init(torch.cos, [3, 4]).requires_grad_()
        r = fn(x, y)
        w = init(torch.cos, list(r.shape)) if r.dim() > 0 else torch.tensor(1.0)
        (r * init(lambda k: torch.cos(k + 1), list(r.shape)) if r.dim() > 0 else r).sum().backward()
        out["cases"][name] = {
            "shape": list(r.shape),
            "value": r.detach().reshape(-1).tolist(),
            "grad_x": x.grad.reshape(-1).tolist(),
            "grad_y": (y.grad if y.grad is not None else torch.zeros(3, 4)).reshape(-1).tolist(),
        }
        del w
    OUT.write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
