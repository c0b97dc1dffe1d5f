// Each family's tokenizer.json through @huggingface/tokenizers gives the ids transformers gives, with the
// family's special tokens added as its tokenizer says (BOS for Llama, [CLS] … [SEP] for BERT, none for GPT-2 and
// Qwen2), and decodes them to transformers' text: byte-level BPE, sentencepiece-style BPE with byte fallback,
// WordPiece.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadTokenizer } from '../../gpu-agent/runtime/load/tokenizer.js';
import { FAMILIES, hfDir, readReference, variants } from './hf-fixtures.js';

for (const family of FAMILIES) {
  test(`${family}: tokenizer ids and decoded text equal transformers'`, () => {
    const ref = readReference(join(hfDir, family));
    assert.ok(ref.tokenizer && ref.tokenizer.cases.length >= 5);
    for (const v of variants().filter((x) => x.family === family)) {
      const tok = loadTokenizer(v.dir);
      assert.ok(tok, `${v.label} has tokenizer.json`);
      for (const c of ref.tokenizer.cases) {
        assert.deepEqual(tok.encode(c.text), c.ids, `${v.label} (${ref.tokenizer.kind}): ${JSON.stringify(c.text)}`);
        assert.equal(tok.decode(c.ids), c.decoded, `${v.label}: decode of ${JSON.stringify(c.text)}`);
      }
    }
    const first = ref.tokenizer.cases[0]!.ids;
    if (family === 'llama') assert.equal(first[0], 1, 'Llama adds <s> (id 1)');
    if (family === 'bert') assert.deepEqual([first[0], first[first.length - 1]], [2, 3], 'BERT wraps in [CLS] … [SEP]');
  });
}
