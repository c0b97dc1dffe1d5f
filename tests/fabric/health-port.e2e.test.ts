// Issue 20, found by an operator: with NDIF_HEALTH_PORT on a port in use, the embedded fabric's agent registered,
// died on EADDRINUSE and was restarted forever while `ndif status` said ACTIVE. A configuration fault is refused
// once, before the agent registers, with a coded error the fabric prints; the agent is not started again, and
// `ndif agents` / `ndif status` (GET /agents, /cluster) show it FAULTED with the code.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { runNdif } from '../support/ndif.js';

const MAIN = fileURLToPath(new URL('../../fabric/embedded/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ndif-health-port-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('NDIF_HEALTH_PORT in use', () => {
  it('the agent refuses once with AGENT_HEALTH_PORT_IN_USE, never registers, and is not restarted', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as { port: number }).port;
    const child = spawn(process.execPath, [MAIN], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        NDIF_DATA_DIR: join(dir, 'data'),
        NDIF_PORT: '0',
        NDIF_HEALTH_PORT: String(port),
        NDIF_HEALTH_HOST: '127.0.0.1',
        NDIF_AGENT_RESTART_MS: '10',
        NDIF_LOG_LEVEL: 'warn',
      },
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    try {
      const end = Date.now() + 90_000; // a loaded machine: three processes start before the banner
      while (!/listening on http/.test(out)) {
        if (Date.now() > end || child.exitCode !== null) throw new Error(`no banner: ${out}\n${err.slice(-3000)}`);
        await sleep(50);
      }
      assert.match(out, /agent: local-agent REFUSED AGENT_HEALTH_PORT_IN_USE: NDIF_HEALTH_PORT=\d+ cannot be used/);
      const url = /listening on (http:\/\/\S+)/.exec(out)![1]!;
      // Two seconds later (≥ 100 restarts at 10 ms apiece before): one refusal, no agent registered.
      await sleep(2000);
      const refusals = err.split('\n').filter((l) => l.startsWith('gpu-agent: AGENT_HEALTH_PORT_IN_USE'));
      assert.equal(refusals.length, 1, err.slice(-3000));
      // The operator sees the fault where agents are shown: one row FAULTED with the code, never ACTIVE.
      for (const path of ['/cluster', '/agents']) {
        const reply = (await (await fetch(`${url}${path}`)).json()) as {
          agents: Array<{ agentId: string; state: string; fault?: { code: string } }>;
          faults: Array<{ agentId: string; code: string }>;
        };
        assert.deepEqual(
          reply.agents.map((a) => [a.agentId, a.state, a.fault?.code]),
          [['local-agent', 'FAULTED', 'AGENT_HEALTH_PORT_IN_USE']],
          path,
        );
        assert.deepEqual(
          reply.faults.map((f) => [f.agentId, f.code]),
          [['local-agent', 'AGENT_HEALTH_PORT_IN_USE']],
        );
      }
      for (const command of ['agents', 'status']) {
        const r = await runNdif([command], { NDIF_URL: url });
        assert.equal(r.code, 0, r.err);
        assert.match(r.out, /local-agent\s+FAULTED/, `ndif ${command}: the row`);
        assert.match(
          r.out,
          /agent local-agent FAULTED AGENT_HEALTH_PORT_IN_USE: NDIF_HEALTH_PORT=\d+ cannot be used/,
          `ndif ${command}: the fault`,
        );
      }
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      blocker.close();
    }
  });
});
