// Issue 20, finding 3: `models add` on hostile folders. A FIFO as model.onnx froze the control plane until
// something wrote into it, /dev/zero grew its memory by 150 MB/s, and external data linked out of the folder was
// refused with a message giving the target's size. Every file registration reads must be a regular file within
// its cap, checked without blocking before it is read; external data must resolve inside the folder, and its
// refusal says nothing about the target. The control plane answers /ping throughout; nothing is appended.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startInProcessFabric, type InProcessFabric } from '../client/fabric-harness.js';
import { hfDir } from '../runtime/hf-fixtures.js';

let fab: InProcessFabric;
let tmp: string;

async function post(body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${fab.url}/models`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${fab.keys!.operator}` },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

function folder(name: string, edit: (dir: string) => void): string {
  const dir = join(tmp, name);
  cpSync(join(hfDir, 'llama', 'dynamo'), dir, { recursive: true });
  edit(dir);
  return dir;
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-hostile-folders-'));
  fab = await startInProcessFabric({ auth: true });
});
after(async () => {
  await fab.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('models add on hostile folders', () => {
  it('FIFOs, devices, oversized files and external data linked out of the folder are refused with codes', async () => {
    const outside = join(tmp, 'elsewhere');
    mkdirSync(outside);
    cpSync(join(hfDir, 'llama', 'dynamo', 'model.onnx.data'), join(outside, 'secret-weights.bin'));
    const fifoDir = folder('fifo', (d) => {
      rmSync(join(d, 'model.onnx'));
      execFileSync('mkfifo', [join(d, 'model.onnx')]);
    });
    // On a build that blocks on the FIFO, a writer frees it after 5 s so the test fails instead of hanging.
    const writer = spawn('sh', ['-c', `sleep 5; echo x > ${join(fifoDir, 'model.onnx')}`], { stdio: 'ignore' });
    const cases: Array<[string, string, RegExp]> = [
      [fifoDir, 'CATALOG_MODEL_FILE_NOT_REGULAR', /model\.onnx .* is a FIFO/],
      [
        folder('zero-onnx', (d) => {
          rmSync(join(d, 'model.onnx'));
          symlinkSync('/dev/zero', join(d, 'model.onnx'));
        }),
        'CATALOG_MODEL_FILE_NOT_REGULAR',
        /model\.onnx .* is a device/,
      ],
      [
        folder('zero-tokenizer', (d) => {
          rmSync(join(d, 'tokenizer.json'));
          symlinkSync('/dev/zero', join(d, 'tokenizer.json'));
        }),
        'CATALOG_MODEL_FILE_NOT_REGULAR',
        /tokenizer\.json .* is a device/,
      ],
      [
        // Sparse: 65 MiB by its size, no disk used.
        folder('huge-tokenizer', (d) => truncateSync(join(d, 'tokenizer.json'), 65 * 1024 * 1024)),
        'CATALOG_MODEL_FILE_TOO_LARGE',
        /tokenizer\.json .* over the 67108864-byte limit/,
      ],
      [
        folder('data-outside', (d) => {
          rmSync(join(d, 'model.onnx.data'));
          symlinkSync(join(outside, 'secret-weights.bin'), join(d, 'model.onnx.data'));
        }),
        'CATALOG_EXTERNAL_DATA_OUTSIDE',
        /not a file inside the model folder/,
      ],
      [
        folder('data-zero', (d) => {
          rmSync(join(d, 'model.onnx.data'));
          symlinkSync('/dev/zero', join(d, 'model.onnx.data'));
        }),
        'CATALOG_EXTERNAL_DATA_OUTSIDE',
        /not a file inside the model folder/,
      ],
    ];
    const head = await fab.cp.context.store.headPosition();
    let pings = 0;
    let pinging = true;
    const pinger = (async () => {
      while (pinging) {
        const r = await fetch(`${fab.url}/ping`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
        if (r?.status === 200) pings++;
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    try {
      for (const [dir, code, message] of cases) {
        const r = await post({ model: 'hostile', dir });
        assert.equal(r.json.code, code, `${dir}: ${JSON.stringify(r.json)}`);
        assert.equal(r.status, 422);
        assert.match(String(r.json.message), message);
        if (code === 'CATALOG_EXTERNAL_DATA_OUTSIDE') {
          const said = JSON.stringify(r.json);
          assert.doesNotMatch(
            said,
            /secret-weights|elsewhere|\/dev\/zero|557056/,
            `says nothing of the target: ${said}`,
          );
        }
      }
    } finally {
      pinging = false;
      await pinger;
      writer.kill();
    }
    assert.ok(pings > 0, 'the control plane answered /ping meanwhile');
    assert.equal(await fab.cp.context.store.headPosition(), head, 'no refused registration appended anything');
  });
});
