"""The three tokenizer kinds of the fixture families, trained on a fixed corpus (no download).

- byte-level BPE (GPT-2): ByteLevel pre-tokenizer and decoder, `<|endoftext|>` as BOS/EOS/UNK.
- sentencepiece-style BPE (Llama, Qwen2-style layout of Llama): `▁` for spaces (Prepend + Replace
  normalizer), byte fallback through `<0x00>`..`<0xFF>` tokens, `<s>` added in front by the
  post-processor (`add_bos_token`), as transformers' LlamaTokenizer writes it.
- WordPiece (BERT): lower-casing BertNormalizer, BertPreTokenizer, `[CLS] $A [SEP]` template; the
  vocabulary is built from the corpus's characters and words (deterministic), not trained.

Each is wrapped in the family's transformers tokenizer class and written with save_pretrained, so
tokenizer.json and tokenizer_config.json are what transformers itself writes.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

CORPUS = [
    "The Eiffel Tower is in Paris, the capital of France.",
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! Researchers study how language models represent facts about the world.",
    "Interventions read and replace the activations of named modules during the forward pass.",
    "Colosseum, Rome; Big Ben, London; Brandenburg Gate, Berlin.",
    "Numbers like 42, 1999 and 3.14159 appear in text, and so do emoji and accents: café, naïve.",
]


def byte_level_bpe(vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    return tok


def sentencepiece_bpe(vocab_size: int) -> Tokenizer:
    """BPE over `▁`-joined text with byte fallback: specials, then 256 byte tokens, then the trained pieces."""
    specials = ["<unk>", "<s>", "</s>"]
    normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trained = Tokenizer(models.BPE(unk_token="<unk>"))
    trained.normalizer = normalizer
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 256, special_tokens=specials, show_progress=False)
    trained.train_from_iterator(CORPUS * 4, trainer)
    import json

    model = json.loads(trained.to_str())["model"]
    pieces = [p for p, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]) if p not in specials]
    vocab = {p: i for i, p in enumerate(specials + [f"<0x{b:02X}>" for b in range(256)] + pieces)}
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizer
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    return tok


def wordpiece(vocab_size: int) -> Tokenizer:
    """WordPiece with a vocabulary built directly (tokenizers' WordPiece trainer breaks ties between
    equally frequent merges differently from run to run): specials, every character of the normalized
    corpus alone and as a `##` continuation, a few common suffixes, then the corpus's words, sorted."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    words: set[str] = set()
    for text in CORPUS:
        words.update(w for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for w in words for c in w})
    suffixes = ["##s", "##ed", "##ing", "##er", "##ly", "##tion"]
    pieces = chars + [f"##{c}" for c in chars] + suffixes + sorted(w for w in words if len(w) > 1)
    vocab: dict[str, int] = {}
    for p in specials + pieces:
        vocab.setdefault(p, len(vocab))
    if len(vocab) > vocab_size:
        raise ValueError(f"the WordPiece vocabulary has {len(vocab)} entries, more than {vocab_size}")
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.WordPiece()
    return tok


def family_tokenizer(kind: str, vocab_size: int):
    """The transformers tokenizer of a family, built around the trained tokenizers.Tokenizer."""
    if kind == "byte-level-bpe":
        from transformers import GPT2Tokenizer

        t = byte_level_bpe(vocab_size)
        return GPT2Tokenizer(
            tokenizer_object=t, bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>"
        )
    if kind == "sentencepiece-bpe":
        from transformers import LlamaTokenizer

        t = sentencepiece_bpe(vocab_size)
        return LlamaTokenizer(
            tokenizer_object=t, add_bos_token=True, add_eos_token=False, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
        )
    if kind == "wordpiece":
        from transformers import BertTokenizer

        t = wordpiece(vocab_size)
        return BertTokenizer(
            tokenizer_object=t,
            unk_token="[UNK]",
            sep_token="[SEP]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            mask_token="[MASK]",
        )
    raise ValueError(kind)


def save(tokenizer, out: Path) -> None:
    tokenizer.save_pretrained(str(out))
