// The spawner (sandbox/spawner-main.ts) hands each runner's pipes to the agent over IPC, one handle message at a
// time, each waiting for the agent's acknowledgement. What a runner writes before the agent has its pipes — a
// runner that fails at once writes its whole error then — must reach the agent: here the agent is busy while the
// runner writes, so the handoff lags the writes (before the fix, the spawner had read them and they were lost).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { RunnerSpawner } from '../../sandbox/spawner.js';

const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));

function readAll(s: Socket): Promise<string> {
  let text = '';
  s.setEncoding('utf8').on('data', (d: string) => (text += d));
  return new Promise((r) => s.once('close', () => r(text)));
}

test("a runner's output written before the agent took its pipes arrives whole", async () => {
  const spawner = new RunnerSpawner(env);
  try {
    // The spawner process up first (its own start is not what this is about).
    const warm = await spawner.spawn('warm', [process.execPath, '-e', ''], env);
    await Promise.all([readAll(warm.stdout), readAll(warm.stderr), warm.exited]);
    warm.socket.destroy();

    const script =
      "process.stdout.write('early out\\n'); process.stderr.write('early err\\n');" +
      "setTimeout(() => process.stderr.write('late err\\n'), 1500);";
    const spawned = spawner.spawn('early', [process.execPath, '-e', script], env);
    // The agent busy for a second: the runner starts and writes, its pipes still on the spawner's side.
    const end = Date.now() + 1000;
    while (Date.now() < end) {
      // spin: no IPC message is acknowledged meanwhile
    }
    const r = await spawned;
    const [out, err] = await Promise.all([readAll(r.stdout), readAll(r.stderr)]);
    await r.exited;
    r.socket.destroy();
    assert.equal(out, 'early out\n');
    assert.equal(err, 'early err\nlate err\n');
  } finally {
    await spawner.close();
  }
});
