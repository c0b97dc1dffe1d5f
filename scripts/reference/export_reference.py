"""Export a small seeded GPT-2 to ONNX and record reference activations with PyTorch hooks.

Writes tests/fixtures/gpt2-reference/: model.onnx (TorchScript exporter), model-dynamo.onnx
(dynamo exporter), config.json, reference.json, reference.safetensors. The layout of those files
is specified in tests/fixtures/gpt2-reference/README.md. Not run by CI; see README.md here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_fixtures import safetensors_io  # noqa: E402
from hf_fixtures.families import redraw_small_parameters  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "gpt2-reference"

SEED = 0
OPSET = 17
TOLERANCE = 1e-4
# Two prompts of 8 tokens, no padding. Fixed ids (vocab 512), no tokenizer involved.
INPUT_IDS = [
    [464, 2, 37, 101, 256, 7, 300, 511],
    [15, 480, 22, 0, 199, 64, 333, 128],
]

# Module addresses recorded in every case. Only modules that exist as scopes in the ONNX graph
# (transformer.drop exports no node in eval mode, so it is not listed).
OUTPUT_MODULES = [
    "transformer.wte",
    "transformer.wpe",
    "transformer.h.0.attn",
    "transformer.h.0.mlp",
    "transformer.h.0",
    "transformer.h.1.attn",
    "transformer.h.1.mlp",
    "transformer.h.1",
    "transformer.ln_f",
]
INPUT_MODULES = ["transformer.h.1.mlp"]

CASES = [
    {"name": "plain", "intervention": None},
    {
        "name": "zero_h0_mlp",
        "intervention": {"path": "transformer.h.0.mlp", "point": "output", "what": "zeros"},
    },
    {
        "name": "zero_h1_mlp_input",
        "intervention": {"path": "transformer.h.1.mlp", "point": "input", "what": "zeros"},
    },
]


def build_config() -> GPT2Config:
    config = GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=4,
        n_positions=64,
        vocab_size=512,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
        # The default 50256 lies outside this vocabulary.
        bos_token_id=511,
        eos_token_id=511,
    )
    config.architectures = ["GPT2LMHeadModel"]
    # Eager attention exports as plain MatMul/Softmax nodes inside each attn scope.
    config._attn_implementation = "eager"
    return config


class ExportedGPT2(GPT2LMHeadModel):
    """GPT2LMHeadModel whose forward takes input_ids only and returns the logits tensor.

    A subclass rather than a wrapper module, so the export's scopes start at the model itself
    (/transformer/h.0/...) instead of under a wrapper attribute (/m/transformer/...).
    The all-ones attention mask is built inside the graph: with attention_mask None,
    transformers' mask code calls torch.diff (packed-sequence detection), which the TorchScript
    exporter cannot export. An all-ones mask is numerically the plain causal mask.
    """

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        out = super().forward(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
        return out.logits


def build_model() -> ExportedGPT2:
    torch.manual_seed(SEED)
    model = ExportedGPT2(build_config())
    redraw_small_parameters(model)
    model.eval()
    return model.float()


def first(value):
    """Element 0 of a tuple output (GPT2Attention returns (attn_output, attn_weights))."""
    return value[0] if isinstance(value, (tuple, list)) else value


def run_case(model: ExportedGPT2, input_ids: torch.Tensor, case: dict) -> dict[str, np.ndarray]:
    recorded: dict[str, np.ndarray] = {}
    handles = []
    intervention = case["intervention"]

    # Intervention hooks are registered first so the recording hooks see the replaced value.
    if intervention is not None:
        target = model.get_submodule(intervention["path"])
        if intervention["point"] == "output":

            def zero_output(_module, _args, output):
                if isinstance(output, tuple):
                    return (torch.zeros_like(output[0]),) + output[1:]
                return torch.zeros_like(output)

            handles.append(target.register_forward_hook(zero_output))
        else:

            def zero_input(_module, args):
                return (torch.zeros_like(args[0]),) + tuple(args[1:])

            handles.append(target.register_forward_pre_hook(zero_input))

    def record_output(address):
        def hook(_module, _args, output):
            recorded[address] = first(output).detach().cpu().numpy().copy()

        return hook

    def record_input(address):
        def hook(_module, args):
            recorded[address] = args[0].detach().cpu().numpy().copy()

        return hook

    for path in OUTPUT_MODULES:
        handles.append(model.get_submodule(path).register_forward_hook(record_output(f"{path}.output")))
    for path in INPUT_MODULES:
        handles.append(model.get_submodule(path).register_forward_pre_hook(record_input(f"{path}.input")))

    try:
        with torch.no_grad():
            logits = model(input_ids)
    finally:
        for handle in handles:
            handle.remove()
    recorded["logits"] = logits.detach().cpu().numpy().copy()
    return recorded


def export_torchscript(model: ExportedGPT2, input_ids: torch.Tensor, path: Path) -> None:
    with torch.no_grad():
        torch.onnx.export(
            model,
            (input_ids,),
            str(path),
            dynamo=False,
            opset_version=OPSET,
            do_constant_folding=True,
            input_names=["input_ids"],
            output_names=["logits"],
            dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}},
        )


def export_dynamo(model: ExportedGPT2, input_ids: torch.Tensor, path: Path) -> None:
    batch = torch.export.Dim("batch", min=1, max=64)
    sequence = torch.export.Dim("sequence", min=2, max=64)
    with torch.no_grad():
        program = torch.onnx.export(
            model,
            (input_ids,),
            dynamo=True,
            opset_version=18,
            input_names=["input_ids"],
            output_names=["logits"],
            dynamic_shapes={"input_ids": {0: batch, 1: sequence}},
            external_data=False,
        )
    program.save(str(path), external_data=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--skip-dynamo", action="store_true", help="do not write model-dynamo.onnx")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    model = build_model()
    input_ids = torch.tensor(INPUT_IDS, dtype=torch.int64)

    tensors: dict[str, np.ndarray] = {"input_ids": input_ids.numpy()}
    cases_json = []
    for case in CASES:
        recorded = run_case(model, input_ids, case)
        names = {}
        for key in [f"{p}.output" for p in OUTPUT_MODULES] + [f"{p}.input" for p in INPUT_MODULES] + ["logits"]:
            names[key] = f"{case['name']}/{key}"
            tensors[names[key]] = recorded[key]
        cases_json.append({"name": case["name"], "intervention": case["intervention"], "tensors": names})

    import onnx
    import transformers

    versions = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "numpy": np.__version__,
    }
    safetensors_io.write(out / "reference.safetensors", tensors, {"format": "ndif-reference/1", "seed": str(SEED)})
    reference = {
        "format": "ndif-reference/1",
        "tolerance": TOLERANCE,
        "seed": SEED,
        "input_ids": INPUT_IDS,
        "input_ids_tensor": "input_ids",
        "produced_by": {"script": "scripts/reference/export_reference.py", "versions": versions},
        "cases": cases_json,
    }
    (out / "reference.json").write_text(json.dumps(reference, indent=2) + "\n")
    model.config.to_json_file(str(out / "config.json"), use_diff=False)

    export_torchscript(model, input_ids, out / "model.onnx")
    if not args.skip_dynamo:
        export_dynamo(model, input_ids, out / "model-dynamo.onnx")
    print(json.dumps({"out": str(out), "tensors": len(tensors), "versions": versions}))


if __name__ == "__main__":
    main()
