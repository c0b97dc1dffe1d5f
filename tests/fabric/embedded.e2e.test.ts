// The embedded fabric as `npm start` runs it: a real process on a free port with its agent child. A request
// submitted over HTTP deploys gpt2-tiny on demand and completes with the result the runtime gives directly;
// SIGTERM stops both processes cleanly; a request submitted while no agent runs survives two restarts over the
// same data folder and completes once the agent is back; earlier results are still there.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { loadModel, type HostedModel } from '../../gpu-agent/runtime/index.js';
import { decodeResultContainer } from '../../protocol/result-container.js';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { descendantsOf } from '../faults/process.js';

const MAIN = fileURLToPath(new URL('../../fabric/embedded/main.js', import.meta.url));
const BLOCK = `async (m) => {
  const h = await m.transformer.h[1].output;
  console.log('layer 1', h.shape.join('x'));
  return h;
}`;
const PROMPT = 'The Eiffel Tower is in';

interface Fabric {
  child: ChildProcess;
  url: string;
  out: () => string;
  exited: Promise<[number | null, string | null]>;
}

/** Every fabric process a test started: the ones a failed assertion left running are killed after the tests. */
const started: ChildProcess[] = [];

async function startFabric(dataDir: string, env: NodeJS.ProcessEnv = {}): Promise<Fabric> {
  const child = spawn(process.execPath, ['--enable-source-maps', MAIN], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NDIF_DATA_DIR: dataDir,
      NDIF_PORT: '0',
      NDIF_LOG_LEVEL: process.env.NDIF_TEST_LOG_LEVEL ?? 'warn',
      NDIF_AGENT_HEARTBEAT_MS: '500',
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      ...env,
    },
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    if (process.env.NDIF_TEST_LOG_LEVEL) process.stderr.write(d);
  });
  started.push(child);
  const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
  const end = Date.now() + 60_000;
  for (;;) {
    const m = /listening on (http:\/\/\S+)/.exec(out);
    if (m) return { child, url: m[1], out: () => out, exited };
    if (child.exitCode !== null || Date.now() > end)
      throw new Error(`the fabric did not start: ${out}\n${err.slice(-3000)}`);
    await sleep(25);
  }
}

async function stopFabric(f: Fabric): Promise<number | null> {
  f.child.kill('SIGTERM');
  const [code] = await f.exited;
  return code;
}

async function json(url: string, init?: RequestInit): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(url, init);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

function submit(f: Fabric, requestId: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return json(`${f.url}/requests`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ requestId, model: 'gpt2-tiny', invokes: [{ input: PROMPT, block: BLOCK }] }),
  });
}

async function until(
  f: Fabric,
  requestId: string,
  status: string,
  timeoutMs = 40_000,
): Promise<Record<string, unknown>> {
  const end = Date.now() + timeoutMs;
  let last: Record<string, unknown> = {};
  while (Date.now() < end) {
    last = (await json(`${f.url}/requests/${requestId}`)).body;
    if (last.status === status) return last;
    await sleep(50);
  }
  throw new Error(
    `request ${requestId} is ${String(last.status)}, not ${status}: ${JSON.stringify(last).slice(0, 1500)}`,
  );
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('embedded fabric (npm start)', () => {
  let dir: string;
  let direct: HostedModel;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ndif-embedded-'));
    direct = await loadModel(ensureModel('gpt2-tiny'), { key: 'gpt2-tiny' });
  });
  after(async () => {
    for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await direct.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves a request end to end, stops on SIGTERM, and keeps queued requests and results across restarts', async () => {
    const data = join(dir, 'data');
    let f = await startFabric(data);
    // The hint is its own write after the listening line; the two may arrive in separate chunks.
    for (let end = Date.now() + 5000; !/try it: /.test(f.out()) && Date.now() < end; )
      await new Promise((r) => setTimeout(r, 25));
    assert.match(f.out(), /try it: /);
    const sub = await submit(f, 'first');
    assert.equal(sub.status, 202);
    const done = await until(f, 'first', 'COMPLETED');
    assert.deepEqual(
      (done.logs as Array<{ line: string }>).map((l) => l.line),
      ['layer 1 1x7x64'],
    );
    const result = done.result as { inline: string; sha256: string };
    const container = decodeResultContainer(Buffer.from(result.inline, 'base64'));
    const expected = await direct.run({ invokes: [{ prompt: PROMPT, block: BLOCK }] }, () =>
      createInProcessBlocks({ manifest: direct.manifest(), tokenizer: direct.tokenizer }),
    );
    assert.ok(
      Buffer.from(container.invokes[0].tensors[0].data).equals(Buffer.from(expected.invokes[0].result.tensors[0].data)),
      'the result equals the runtime run directly',
    );
    assert.equal(await stopFabric(f), 0);
    assert.match(f.out(), /fabric stopped/);

    // No agent: the request waits (the old agent's replica looks HOT until its heartbeats are missed).
    f = await startFabric(data, { NDIF_AGENT: 'off' });
    assert.equal((await submit(f, 'queued')).status, 202);
    await sleep(500);
    const waiting = (await json(`${f.url}/requests/queued`)).body;
    assert.ok(
      ['QUEUED', 'DISPATCHED', 'PROVISIONING', 'DEPLOYING'].includes(String(waiting.status)),
      `waiting: ${String(waiting.status)}`,
    );
    assert.equal(await stopFabric(f), 0);

    // Back with the agent: the earlier result is still there and the waiting request completes.
    f = await startFabric(data);
    try {
      const first = (await json(`${f.url}/requests/first`)).body;
      assert.equal(first.status, 'COMPLETED');
      assert.equal((first.result as { sha256: string }).sha256, result.sha256);
      const later = await until(f, 'queued', 'COMPLETED', 45_000);
      assert.equal((later.logs as Array<{ line: string }>).at(-1)?.line, 'layer 1 1x7x64');
    } finally {
      assert.equal(await stopFabric(f), 0);
    }
  });

  it('starts the agent child again after kill -9, and the child exits when the fabric process is killed', async () => {
    const f = await startFabric(join(dir, 'data-kill'));
    // The agent runs under the control plane, which runs under the fabric's supervisor.
    const agentPids = () => descendantsOf(f.child.pid!, 'gpu-agent.js');
    const first = agentPids();
    assert.equal(first.length, 1, 'one agent child runs');
    process.kill(first[0], 'SIGKILL');
    let end = Date.now() + 15_000;
    let second: number[] = [];
    while (Date.now() < end) {
      second = agentPids().filter((p) => p !== first[0]);
      if (second.length === 1) break;
      await sleep(50);
    }
    assert.equal(second.length, 1, 'a new agent child was started');
    assert.equal((await submit(f, 'after-kill')).status, 202);
    await until(f, 'after-kill', 'COMPLETED', 40_000);
    const agents = (await json(`${f.url}/agents`)).body.agents as Array<{
      agentId: string;
      health: { restarts: number };
    }>;
    assert.equal(agents.length, 1);
    assert.equal(agents[0].agentId, 'local-agent');
    f.child.kill('SIGKILL');
    await f.exited;
    end = Date.now() + 10_000;
    while (second.some(pidAlive) && Date.now() < end) await sleep(50);
    assert.deepEqual(second.filter(pidAlive), [], 'the agent child exited with its parent');
  });
});
