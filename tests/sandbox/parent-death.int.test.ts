// Runners never outlive their agent. A stand-in agent (fixtures/dying-agent.ts) warms a pool and holds one
// runner parked mid-request and one spinning in a synchronous loop; the test SIGKILLs it and checks that
// every runner pid disappears: through the spawner when only the agent dies, and on their own (socket end,
// parent-pid poll, CPU rlimit for the spinning one) when the agent and the spawner die together.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { sweepStaleCgroups } from '../../sandbox/memory-cgroup.js';
import { sweepDeadAgents } from '../../sandbox/runner-dir.js';
import { processGone } from './helpers.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/dying-agent.js', import.meta.url));

interface Pids {
  parked: number;
  spinning: number;
  warm: number[];
  first: string;
}

async function startAgent(env: Record<string, string> = {}): Promise<{ pid: number; pids: Pids }> {
  const child = spawn(process.execPath, [FIXTURE], {
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
    env: { ...process.env, ...env },
  });
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(buf.slice(0, nl));
    });
    child.once('exit', (code) => reject(new Error(`the stand-in agent exited early (code ${code})`)));
  });
  child.stdout.destroy();
  child.unref();
  return { pid: child.pid!, pids: JSON.parse(line) as Pids };
}

function allRunners(p: Pids): number[] {
  return [p.parked, p.spinning, ...p.warm];
}

test('when the agent is SIGKILLed, every runner (warm, parked mid-request, spinning) exits', async () => {
  const { pid, pids } = await startAgent();
  assert.equal(pids.first, 'WAIT', 'the parked runner is mid-request, waiting on its agent');
  assert.equal(pids.warm.length, 2);
  for (const p of allRunners(pids))
    assert.equal(await processGone(p, 0), false, `runner ${p} runs before the agent dies`);
  process.kill(pid, 'SIGKILL');
  for (const p of allRunners(pids)) assert.ok(await processGone(p, 3000), `runner ${p} exited after its agent died`);
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    /* the spawner already went */
  }
  await assertCgroupsSwept(pid);
});

/** A dead agent's runner directory and memory cgroups are removed by the next sandbox that starts. */
async function assertCgroupsSwept(agentPid: number): Promise<void> {
  const own = /:memory:(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1];
  const parent = own === undefined ? undefined : `/sys/fs/cgroup/memory${own}`;
  const left = () =>
    parent === undefined || !existsSync(parent)
      ? []
      : readdirSync(parent).filter((n) => n.startsWith(`ndif-sandbox-${agentPid}-`));
  // A killed task leaves its cgroup a moment after it stops running; sweep until it has.
  sweepDeadAgents();
  assert.deepEqual(
    readdirSync(tmpdir()).filter((n) => n.startsWith(`ndif-runner-${agentPid}-`)),
    [],
    'its runner directory is removed',
  );
  for (let i = 0; i < 40; i++) {
    sweepStaleCgroups();
    if (left().length === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`${left().join(', ')} still exist under ${parent} after the agent's runners are gone`);
}

test('when the agent and its spawner die together, runners exit on their own; a spinning one by its CPU rlimit', async () => {
  const { pid, pids } = await startAgent({ FIXTURE_CPU_SECONDS: '2' });
  process.kill(-pid, 'SIGKILL');
  for (const p of [pids.parked, ...pids.warm])
    assert.ok(await processGone(p, 3000), `idle runner ${p} noticed its parent died`);
  assert.ok(await processGone(pids.spinning, 15_000), 'the spinning runner was stopped by RLIMIT_CPU');
  await assertCgroupsSwept(pid);
});
