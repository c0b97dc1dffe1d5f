"""The fixture families: seeded small random configs, the export signature of each, and what is recorded.

Every family is a transformers model class at a tiny shape (2 layers, d_model 64) with float32
weights drawn from a seed. `export_class` is a subclass of that class whose forward takes only the
graph's tensor inputs and returns the graph's outputs, so the exporters' scopes start at the model
itself (`/transformer/h.0/...`, `model.layers.0...`) as nnsight users name modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import (
    BertConfig,
    BertModel,
    DynamicCache,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

SEED = 0
VOCAB = 512
PROMPTS = ["The Eiffel Tower is in Paris", "Hello world"]
TOKENIZER_TEXTS = PROMPTS + [
    "The quick brown fox jumps over the lazy dog.",
    "Café naïve ✓ 1999",
    "  two  spaces and\nnewline",
]


@dataclass
class Variant:
    """One model folder of a family: how it is exported."""

    folder: str
    exporter: str  # torchscript | dynamo | with-past | dynamo-static
    external_data: str | None = None  # file name of the external data, or None (weights inside model.onnx)
    dtype: str = "float32"
    note: str = ""


@dataclass
class Family:
    name: str
    tokenizer: str
    causal: bool
    input_names: list[str]
    output_names: list[str]
    output_modules: list[str]
    input_modules: list[str]
    zero_output: str
    scale_input: str
    grad_modules: list[str]
    variants: list[Variant] = field(default_factory=list)

    def config(self):
        return CONFIGS[self.name]()

    def base_class(self):
        return BASE_CLASSES[self.name]

    def export_class(self, with_past: bool = False):
        if with_past:
            return _with_past_class(self.base_class())
        return _causal_lm_class(self.base_class()) if self.causal else _encoder_class(self.base_class())


def _gpt2_config() -> GPT2Config:
    c = GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=4,
        n_positions=64,
        vocab_size=VOCAB,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    c.architectures = ["GPT2LMHeadModel"]
    return c


def _decoder_shape(**extra) -> dict:
    """The Llama-family shape the fixtures share: 2 layers, hidden 64, 4 heads over 2 KV heads."""
    return dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        **extra,
    )


def _llama_config() -> LlamaConfig:
    c = LlamaConfig(**_decoder_shape(rope_theta=10000.0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False))
    c.architectures = ["LlamaForCausalLM"]
    return c


def _qwen2_config() -> Qwen2Config:
    c = Qwen2Config(**_decoder_shape(bos_token_id=0, eos_token_id=0, tie_word_embeddings=True, use_sliding_window=False))
    c.architectures = ["Qwen2ForCausalLM"]
    return c


def _bert_config() -> BertConfig:
    c = BertConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=0,
    )
    c.architectures = ["BertModel"]
    return c


CONFIGS = {"gpt2": _gpt2_config, "llama": _llama_config, "qwen2": _qwen2_config, "bert": _bert_config}
BASE_CLASSES = {"gpt2": GPT2LMHeadModel, "llama": LlamaForCausalLM, "qwen2": Qwen2ForCausalLM, "bert": BertModel}


def _causal_lm_class(base):
    class Exported(base):
        def forward(self, input_ids, attention_mask, position_ids):  # type: ignore[override]
            out = super().forward(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
            )
            return out.logits

    Exported.__name__ = f"Exported{base.__name__}"
    return Exported


def _encoder_class(base):
    class Exported(base):
        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[override]
            out = super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    Exported.__name__ = f"Exported{base.__name__}"
    return Exported


def _with_past_class(base):
    """Optimum's with-past layout: past_key_values.<i>.key/value in, logits and present.<i>.key/value out."""

    class ExportedWithPast(base):
        def forward(self, input_ids, attention_mask, position_ids, *past):  # type: ignore[override]
            layers = self.config.num_hidden_layers
            cache = DynamicCache(config=self.config)
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = super().forward(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache, use_cache=True
            )
            present = []
            for i in range(layers):
                present += [out.cache.layers[i].keys, out.cache.layers[i].values]
            return (out.logits, *present)

    ExportedWithPast.__name__ = f"Exported{base.__name__}WithPast"
    return ExportedWithPast


def redraw_small_parameters(model) -> None:
    """transformers initialises biases to 0 and norm weights to 1; seeded noise instead makes the check
    exercise every parameter (and keeps the TorchScript exporter from merging identical initialisers)."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, 0.02)
            elif param.dim() == 1 and ("norm" in name.lower() or ".ln_" in name):
                param.normal_(1.0, 0.1)


def build_model(family: Family):
    """The seeded float32 model in eval mode."""
    torch.manual_seed(SEED)
    model = family.base_class()(family.config())
    redraw_small_parameters(model)
    model.eval()
    return model.float()


def export_copy(family: Family, model, with_past: bool = False):
    """The export subclass holding the same weights as `model`."""
    cls = family.export_class(with_past)
    copy = cls(model.config)
    copy.load_state_dict(model.state_dict())
    copy.eval()
    return copy.to(next(model.parameters()).dtype)


FAMILIES: dict[str, Family] = {
    "gpt2": Family(
        name="gpt2",
        tokenizer="byte-level-bpe",
        causal=True,
        input_names=["input_ids", "attention_mask", "position_ids"],
        output_names=["logits"],
        output_modules=[
            "transformer.wte",
            "transformer.wpe",
            "transformer.h.0.attn",
            "transformer.h.0.mlp",
            "transformer.h.0",
            "transformer.h.1.attn",
            "transformer.h.1.mlp",
            "transformer.h.1",
            "transformer.ln_f",
            "lm_head",
        ],
        input_modules=["transformer.h.0", "transformer.h.1.attn", "transformer.h.1.mlp"],
        zero_output="transformer.h.0.mlp",
        scale_input="transformer.h.1.attn",
        grad_modules=["transformer.h.0.mlp", "transformer.h.1.attn", "transformer.h.1"],
        variants=[
            Variant("torchscript", "torchscript", note="TorchScript exporter (dynamo=False), opset 17, weights inside model.onnx"),
            Variant("dynamo", "dynamo", note="dynamo exporter, opset 18, batch-2 example and dynamic_shapes, weights inside model.onnx"),
            Variant(
                "with-past",
                "with-past",
                note="optimum-style with-past: past_key_values.<i>.key/value inputs, present.<i>.key/value outputs (TorchScript exporter)",
            ),
            Variant(
                "dynamo-static",
                "dynamo-static",
                note="dynamo exporter traced on a batch-1 example without dynamic_shapes: every dim static (a model the fabric refuses)",
            ),
        ],
    ),
    "llama": Family(
        name="llama",
        tokenizer="sentencepiece-bpe",
        causal=True,
        input_names=["input_ids", "attention_mask", "position_ids"],
        output_names=["logits"],
        output_modules=[
            "model.embed_tokens",
            "model.rotary_emb",
            "model.layers.0.input_layernorm",
            "model.layers.0.self_attn",
            "model.layers.0.mlp",
            "model.layers.0",
            "model.layers.1.self_attn",
            "model.layers.1.mlp",
            "model.layers.1",
            "model.norm",
            "lm_head",
        ],
        input_modules=["model.layers.1", "model.layers.1.self_attn", "model.layers.1.mlp"],
        zero_output="model.layers.0.mlp",
        scale_input="model.layers.1.self_attn",
        grad_modules=["model.layers.0.mlp", "model.layers.1.self_attn", "model.layers.1"],
        variants=[
            Variant("torchscript", "torchscript", note="TorchScript exporter, opset 17, weights inside model.onnx"),
            Variant(
                "dynamo",
                "dynamo",
                external_data="model.onnx.data",
                note="dynamo exporter, opset 18, weights as external data in model.onnx.data (torch's naming)",
            ),
            Variant(
                "float16",
                "dynamo",
                dtype="float16",
                note="the same weights cast to float16 (model.half()), dynamo exporter: float16 compute and logits",
            ),
        ],
    ),
    "qwen2": Family(
        name="qwen2",
        tokenizer="byte-level-bpe",
        causal=True,
        input_names=["input_ids", "attention_mask", "position_ids"],
        output_names=["logits"],
        output_modules=[
            "model.embed_tokens",
            "model.layers.0.self_attn",
            "model.layers.0.mlp",
            "model.layers.0",
            "model.layers.1.self_attn",
            "model.layers.1",
            "model.norm",
            "lm_head",
        ],
        input_modules=["model.layers.1", "model.layers.1.self_attn"],
        zero_output="model.layers.0.mlp",
        scale_input="model.layers.1.self_attn",
        grad_modules=["model.layers.0.mlp", "model.layers.1.self_attn", "model.layers.1"],
        variants=[Variant("dynamo", "dynamo", note="dynamo exporter, opset 18, weights inside model.onnx")],
    ),
    "bert": Family(
        name="bert",
        tokenizer="wordpiece",
        causal=False,
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state", "pooler_output"],
        output_modules=[
            "embeddings",
            "encoder.layer.0.attention.self",
            "encoder.layer.0.attention",
            "encoder.layer.0.intermediate",
            "encoder.layer.0.output",
            "encoder.layer.0",
            "encoder.layer.1.attention.self",
            "encoder.layer.1",
            "pooler",
        ],
        input_modules=["encoder.layer.0.output", "encoder.layer.1", "encoder.layer.1.attention.self"],
        zero_output="encoder.layer.0.intermediate",
        scale_input="encoder.layer.1.attention.self",
        grad_modules=["encoder.layer.0.output", "encoder.layer.1.attention.self", "encoder.layer.1"],
        variants=[
            Variant("torchscript", "torchscript", note="TorchScript exporter, opset 17, weights inside model.onnx"),
            Variant(
                "dynamo",
                "dynamo",
                external_data="model.onnx_data",
                note="dynamo exporter, opset 18, weights as external data in model.onnx_data (optimum's naming)",
            ),
        ],
    ),
}
