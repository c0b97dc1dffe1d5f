// The services the test runner starts (scripts/services) come up configured as documented and leave
// nothing behind: not when stopped, and not when the runner is killed (the reaper cleans up then).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import kafkajs from 'kafkajs';
import pg from 'pg';

const root = fileURLToPath(new URL('../../../', import.meta.url));

interface Started {
  child: ChildProcessWithoutNullStreams;
  env: Record<string, string>;
  info: Record<string, { dir: string; pid: number }>;
}

/** Starts services through the CLI in a fresh environment (no DATABASE_URL/KAFKA_BROKERS to reuse). */
async function start(names: string): Promise<Started> {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  delete env.KAFKA_BROKERS;
  delete env.NDIF_SERVICES;
  const child = spawn(process.execPath, ['scripts/services/cli.mjs', names], {
    cwd: root,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`services CLI exited with ${code}: ${stderr}`)));
  });
  return { child, ...(JSON.parse(line) as Omit<Started, 'child'>) };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function gone(pid: number, dir: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (alive(pid) || existsSync(dir)) {
    if (Date.now() > end)
      assert.fail(`pid ${pid} alive=${alive(pid)}, ${dir} exists=${existsSync(dir)} after ${timeoutMs} ms`);
    await sleep(50);
  }
}

test('PostgreSQL runs on loopback with fsync on, and is stopped and removed at the end of the run', async () => {
  const s = await start('postgres');
  const { dir, pid } = s.info.postgres;
  assert.ok(existsSync(dir) && alive(pid));
  const client = new pg.Client({ connectionString: s.env.DATABASE_URL });
  await client.connect();
  const setting = async (name: string) =>
    (await client.query(`SELECT current_setting('${name}') AS v`)).rows[0].v as string;
  assert.equal(await setting('fsync'), 'on');
  assert.equal(await setting('listen_addresses'), '127.0.0.1');
  assert.equal(await setting('unix_socket_directories'), dir);
  assert.equal((await client.query('SELECT current_database() AS d')).rows[0].d, 'ndif_test');
  await client.end();
  const exited = new Promise<number | null>((resolve) => s.child.once('exit', resolve));
  s.child.stdin.end(); // the CLI's "stop" signal
  assert.equal(await exited, 0);
  assert.equal(alive(pid), false, 'postgres stopped before the CLI exited');
  assert.equal(existsSync(dir), false, 'its folder removed before the CLI exited');
});

test('a PostgreSQL whose runner was killed is shut down and removed by the reaper', async () => {
  const s = await start('postgres');
  const { dir, pid } = s.info.postgres;
  s.child.kill('SIGKILL');
  await gone(pid, dir, 15_000);
});

test('a Kafka broker whose runner was killed is ended with its process group and removed', async () => {
  const s = await start('kafka');
  const { dir, pid } = s.info.kafka;
  const kafka = new kafkajs.Kafka({
    clientId: 'lifecycle-test',
    brokers: s.env.KAFKA_BROKERS.split(','),
    logLevel: kafkajs.logLevel.NOTHING,
  });
  const admin = kafka.admin();
  await admin.connect();
  assert.ok(Array.isArray(await admin.listTopics()));
  await admin.disconnect();
  assert.match(s.env.KAFKA_BROKERS, /^127\.0\.0\.1:\d+$/);
  s.child.kill('SIGKILL');
  await gone(pid, dir, 20_000);
});
