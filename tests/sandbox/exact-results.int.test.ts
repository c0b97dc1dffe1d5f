// Issue 20, finding 7: a block's BigInt, Map and Set come back exactly, trusted and untrusted alike (one encoding,
// gpu-agent/block/saved-tree.ts, decoded by the SDK's decodeResult); values that cannot be saved are refused with
// InvalidResult naming their path, on both paths.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeResult } from '../../client/sdk/results.js';
import type { HostedModel, RunRequest } from '../../gpu-agent/runtime/index.js';
import { encodeResultContainer } from '../../protocol/result-container.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { inProcess, tinySandbox } from './helpers.js';

let sb: Sandbox;
let hm: HostedModel;
before(async () => {
  ({ sb, hm } = await tinySandbox({ poolSize: 1 }));
});
after(async () => {
  await sb?.close();
  await hm?.close();
});

const EXACT: RunRequest = {
  invokes: [
    {
      tokens: [1, 2, 3],
      block: `async () => ({
        big: 2n ** 64n + 1n,
        neg: -(10n ** 30n),
        m: new Map([['a', 1n], [2, new Set(['x', 'y'])], [true, null]]),
        s: new Set([1, 2, 3]),
      })`,
    },
  ],
};

for (const path of ['trusted', 'untrusted'] as const) {
  test(`${path}: BigInt, Map and Set round-trip exactly to the SDK`, async () => {
    const r = await hm.run(EXACT, path === 'trusted' ? inProcess(hm) : sb.opener('gpt2-tiny'));
    const bytes = encodeResultContainer({ meta: {}, invokes: r.invokes.map((i) => i.result) });
    const v = decodeResult(bytes).values[0] as { big: bigint; neg: bigint; m: Map<unknown, unknown>; s: Set<number> };
    assert.equal(v.big, 18446744073709551617n);
    assert.equal(v.neg, -(10n ** 30n));
    assert.ok(v.m instanceof Map);
    assert.deepEqual([...v.m.keys()], ['a', 2, true]);
    assert.equal(v.m.get('a'), 1n);
    assert.deepEqual(v.m.get(2), new Set(['x', 'y']));
    assert.ok(v.s instanceof Set);
    assert.deepEqual([...v.s], [1, 2, 3]);
  });

  test(`${path}: a value that cannot be saved inside a Map is refused with InvalidResult and its path`, async () => {
    const req: RunRequest = {
      invokes: [{ tokens: [1, 2], block: "async () => ({ m: new Map([['k', new Date(0)]]) })" }],
    };
    await assert.rejects(
      hm.run(req, path === 'trusted' ? inProcess(hm) : sb.opener('gpt2-tiny')),
      (e: Error & { type?: string; blockError?: { type: string } }) => {
        assert.match(`${e.message} ${JSON.stringify(e)}`, /InvalidResult|INVALID_RESULT/);
        assert.match(e.message, /result\.m\.get\("k"\) is a Date instance/);
        return true;
      },
    );
  });
}
