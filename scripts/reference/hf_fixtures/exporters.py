"""The exporters a researcher uses, each writing `model.onnx` (+ external data) into a folder.

- torchscript: `torch.onnx.export(dynamo=False)`, opset 17, dynamic batch and sequence.
- dynamo: `torch.onnx.export(dynamo=True)`, opset 18, traced with a batch-2 example and
  `dynamic_shapes` (a batch-1 example would fix the batch dim at 1).
- with-past: optimum's layout for decoder models with a KV cache (TorchScript exporter, as optimum
  uses): inputs input_ids, attention_mask [batch, past + sequence], position_ids and
  past_key_values.<i>.key/value [batch, kv_heads, past, head_dim]; outputs logits and
  present.<i>.key/value. Produced by this script rather than by optimum (optimum does not support
  transformers 5.24), with optimum's input and output names and dynamic axes.
- dynamo-static: the dynamo exporter on a batch-1 example without dynamic_shapes: every dim static.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import torch

from .families import Family, Variant

OPSET_TORCHSCRIPT = 17
OPSET_DYNAMO = 18


def example_inputs(family: Family, batch: int, seq: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 300, (batch, seq), generator=g)
    mask = torch.ones_like(ids)
    third = torch.arange(seq).expand(batch, seq).contiguous() if family.causal else torch.zeros_like(ids)
    return ids, mask, third


def _save(model_proto: onnx.ModelProto, out: Path, external: str | None) -> None:
    path = out / "model.onnx"
    if external is None:
        onnx.save_model(model_proto, str(path))
    else:
        onnx.save_model(
            model_proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=external, size_threshold=1024
        )


def export_torchscript(family: Family, model, out: Path, variant: Variant) -> None:
    args = example_inputs(family, 2, 8)
    tmp = out / "model.tmp.onnx"
    axes = {n: {0: "batch", 1: "sequence"} for n in family.input_names}
    for n in family.output_names:
        axes[n] = {0: "batch", 1: "sequence"} if n != "pooler_output" else {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(
            model,
            args,
            str(tmp),
            dynamo=False,
            opset_version=OPSET_TORCHSCRIPT,
            do_constant_folding=True,
            input_names=family.input_names,
            output_names=family.output_names,
            dynamic_axes=axes,
        )
    proto = onnx.load(str(tmp))
    tmp.unlink()
    _save(proto, out, variant.external_data)


def export_dynamo(family: Family, model, out: Path, variant: Variant, static: bool = False) -> None:
    if static:
        args = example_inputs(family, 1, 8)
        shapes = None
    else:
        args = example_inputs(family, 2, 8)
        batch = torch.export.Dim("batch", min=1, max=64)
        seq = torch.export.Dim("sequence", min=2, max=64)
        shapes = tuple({0: batch, 1: seq} for _ in family.input_names)
    with torch.no_grad():
        program = torch.onnx.export(
            model,
            args,
            dynamo=True,
            opset_version=OPSET_DYNAMO,
            input_names=family.input_names,
            output_names=family.output_names,
            dynamic_shapes=shapes,
        )
    _save(program.model_proto, out, variant.external_data)


def export_with_past(family: Family, model, out: Path, variant: Variant) -> None:
    cfg = model.config
    layers = cfg.num_hidden_layers
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    batch, seq, past_len = 2, 3, 4
    ids, _, _ = example_inputs(family, batch, seq)
    mask = torch.ones(batch, past_len + seq, dtype=torch.int64)
    pos = (torch.arange(seq) + past_len).expand(batch, seq).contiguous()
    g = torch.Generator().manual_seed(2)
    past = [torch.randn(batch, heads, past_len, head_dim, generator=g) for _ in range(2 * layers)]
    past_names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present_names = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    axes = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "past_sequence_length + sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
    }
    for n in past_names:
        axes[n] = {0: "batch_size", 2: "past_sequence_length"}
    for n in present_names:
        axes[n] = {0: "batch_size", 2: "past_sequence_length + sequence_length"}
    tmp = out / "model.tmp.onnx"
    with torch.no_grad():
        torch.onnx.export(
            model,
            (ids, mask, pos, *past),
            str(tmp),
            dynamo=False,
            opset_version=OPSET_TORCHSCRIPT,
            do_constant_folding=True,
            input_names=family.input_names + past_names,
            output_names=["logits"] + present_names,
            dynamic_axes=axes,
        )
    proto = onnx.load(str(tmp))
    tmp.unlink()
    _save(proto, out, variant.external_data)


def export_variant(family: Family, model, out: Path, variant: Variant) -> None:
    if variant.exporter == "torchscript":
        export_torchscript(family, model, out, variant)
    elif variant.exporter == "dynamo":
        export_dynamo(family, model, out, variant)
    elif variant.exporter == "dynamo-static":
        export_dynamo(family, model, out, variant, static=True)
    elif variant.exporter == "with-past":
        export_with_past(family, model, out, variant)
    else:
        raise ValueError(variant.exporter)
