// Issue 20, found by an operator: with NDIF_HEALTH_PORT on a port in use, the embedded fabric's agent registered,
// died on EADDRINUSE and was restarted forever while `ndif status` said ACTIVE. A configuration fault is refused
// once, before the agent registers, with a coded error the fabric prints; the agent is not started again.
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
      const end = Date.now() + 30_000;
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
      const cluster = (await (await fetch(`${url}/cluster`)).json()) as { agents: Array<{ state: string }> };
      assert.deepEqual(cluster.agents, [], 'the agent never registered, so nothing shows it ACTIVE');
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      blocker.close();
    }
  });
});
