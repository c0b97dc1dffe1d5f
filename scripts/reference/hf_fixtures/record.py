"""PyTorch forward hooks: what the runtime must reproduce.

Per prompt (batch 1, no padding: the runtime batches and pads the prompts itself, and each invoke's
real positions must equal the prompt alone):
- `plain`: no intervention;
- `zero_<module>`: that module's output replaced by zeros (a forward hook; a tuple output has its
  element 0 replaced);
- `scale_<module>_input`: that module's first input multiplied by 0.5 (a forward pre-hook; the first
  positional argument, or the first keyword argument when the module is called with keywords only).

Recorded keys: `<path>.output` (element 0 of a tuple; further tensor elements as
`<path>.output#<i>`), `<path>.input` (the first input), and each graph output by name. At the
intervention point the recorded value is the replacement.
"""

from __future__ import annotations

import numpy as np
import torch

from .families import Family

SCALE = 0.5
GRAD_TOKENS = (7, 11)


def tensor_elements(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    raise TypeError(f"module returned {type(value).__name__}")


def first_input(args, kwargs) -> tuple[str, object]:
    if args:
        return "args", args[0]
    key = next(k for k, v in kwargs.items() if isinstance(v, torch.Tensor))
    return key, kwargs[key]


def replace_first_input(args, kwargs, fn):
    where, value = first_input(args, kwargs)
    if where == "args":
        return (fn(args[0]),) + tuple(args[1:]), kwargs
    return args, {**kwargs, where: fn(value)}


def graph_inputs(family: Family, ids: list[int], dtype=torch.int64) -> dict[str, torch.Tensor]:
    t = torch.tensor([ids], dtype=dtype)
    feeds = {"input_ids": t, "attention_mask": torch.ones_like(t)}
    if family.causal:
        feeds["position_ids"] = torch.arange(len(ids), dtype=dtype)[None]
    else:
        feeds["token_type_ids"] = torch.zeros_like(t)
    return feeds


def forward_outputs(family: Family, model, feeds) -> dict[str, torch.Tensor]:
    if family.causal:
        out = model(**feeds, use_cache=False)
        return {"logits": out.logits}
    out = model(**feeds)
    return {"last_hidden_state": out.last_hidden_state, "pooler_output": out.pooler_output}


def cases(family: Family) -> list[dict]:
    return [
        {"name": "plain", "intervention": None},
        {
            "name": f"zero_{family.zero_output.replace('.', '_')}",
            "intervention": {"path": family.zero_output, "point": "output", "what": "zeros"},
        },
        {
            "name": f"scale_{family.scale_input.replace('.', '_')}_input",
            "intervention": {"path": family.scale_input, "point": "input", "what": "scale", "factor": SCALE},
        },
    ]


def run_case(family: Family, model, ids: list[int], case: dict) -> dict[str, np.ndarray]:
    recorded: dict[str, np.ndarray] = {}
    handles = []
    iv = case["intervention"]
    if iv is not None:
        target = model.get_submodule(iv["path"])
        if iv["point"] == "output":

            def zero_output(_m, _a, output):
                if isinstance(output, tuple):
                    return (torch.zeros_like(output[0]),) + output[1:]
                return torch.zeros_like(output)

            handles.append(target.register_forward_hook(zero_output))
        else:

            def scale_input(_m, args, kwargs):
                return replace_first_input(args, kwargs, lambda x: x * iv["factor"])

            handles.append(target.register_forward_pre_hook(scale_input, with_kwargs=True))

    def record_output(path):
        def hook(_m, _a, output):
            for i, t in enumerate(tensor_elements(output)):
                recorded[f"{path}.output" if i == 0 else f"{path}.output#{i}"] = t.detach().float().numpy().copy()

        return hook

    def record_input(path):
        def hook(_m, args, kwargs):
            recorded[f"{path}.input"] = first_input(args, kwargs)[1].detach().float().numpy().copy()

        return hook

    for path in family.output_modules:
        handles.append(model.get_submodule(path).register_forward_hook(record_output(path)))
    for path in family.input_modules:
        handles.append(model.get_submodule(path).register_forward_pre_hook(record_input(path), with_kwargs=True))
    try:
        with torch.no_grad():
            outs = forward_outputs(family, model, graph_inputs(family, ids))
    finally:
        for h in handles:
            h.remove()
    for name, t in outs.items():
        recorded[name] = t.detach().float().numpy().copy()
    return recorded


def gradients(family: Family, model, ids: list[int]) -> tuple[dict[str, np.ndarray], dict]:
    """d(metric)/d(module output) for family.grad_modules, and the metric's definition.

    Causal LMs: logits[0, -1, a] - logits[0, -1, b]; encoders: pooler_output[0, 0] - pooler_output[0, 1].
    """
    kept: dict[str, torch.Tensor] = {}
    handles = []

    def keep(path):
        def hook(_m, _a, output):
            t = tensor_elements(output)[0]
            t.retain_grad()
            kept[path] = t

        return hook

    for path in family.grad_modules:
        handles.append(model.get_submodule(path).register_forward_hook(keep(path)))
    try:
        outs = forward_outputs(family, model, graph_inputs(family, ids))
        if family.causal:
            a, b = GRAD_TOKENS
            metric = outs["logits"][0, -1, a] - outs["logits"][0, -1, b]
            spec = {"output": "logits", "index_a": [0, -1, a], "index_b": [0, -1, b]}
        else:
            metric = outs["pooler_output"][0, 0] - outs["pooler_output"][0, 1]
            spec = {"output": "pooler_output", "index_a": [0, 0], "index_b": [0, 1]}
        model.zero_grad(set_to_none=True)
        metric.backward()
    finally:
        for h in handles:
            h.remove()
    grads = {f"{p}.output": kept[p].grad.detach().float().numpy().copy() for p in family.grad_modules}
    spec["value"] = float(metric.detach())
    return grads, spec


def greedy_generate(model, ids: list[int], new_tokens: int) -> tuple[list[int], np.ndarray]:
    """Greedy decoding with the KV cache, step by step: step 0 runs the prompt, each later step only the
    token chosen before (with the cache). No stopping at EOS. Returns the chosen tokens and, per step,
    the logits of the last position."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    tokens: list[int] = []
    logits: list[np.ndarray] = []
    step_ids = torch.tensor([ids])
    length = len(ids)
    with torch.no_grad():
        for _ in range(new_tokens):
            start = length - step_ids.shape[1]
            out = model(
                input_ids=step_ids,
                attention_mask=torch.ones(1, length, dtype=torch.int64),
                position_ids=torch.arange(start, length)[None],
                cache=cache,
                use_cache=True,
            )
            last = out.logits[0, -1].float()
            logits.append(last.numpy().copy())
            nxt = int(torch.argmax(last))
            tokens.append(nxt)
            step_ids = torch.tensor([[nxt]])
            length += 1
    return tokens, np.stack(logits)
