// Runner lifecycle with real processes: start to READY under the isolation plan, start failures with
// their codes, a pool that never hands out a runner twice, refills in the background and replaces a warm
// runner that died, and close() that leaves no process behind.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_LIMITS } from '../../sandbox/config.js';
import { planIsolation } from '../../sandbox/isolation.js';
import { removeCgroupParent } from '../../sandbox/memory-cgroup.js';
import { RunnerLauncher } from '../../sandbox/launcher.js';
import { RunnerPool, autoPoolSize } from '../../sandbox/pool.js';
import { SandboxError } from '../../sandbox/errors.js';
import { Sandbox } from '../../sandbox/sandbox.js';
import { processGone, testConfig, tinyAssets, tinyModel, waitFor } from './helpers.js';

const plan = planIsolation({ limits: DEFAULT_LIMITS, networkNamespace: true });
const launcher = new RunnerLauncher({ plan, limits: DEFAULT_LIMITS });

after(async () => {
  await launcher.close();
  if (plan.cgroupParent) removeCgroupParent(plan.cgroupParent);
  await (await tinyModel()).close();
});

test('a runner starts READY in its own process group, network namespace and memory cgroup', async () => {
  const r = await launcher.launch(await tinyAssets());
  try {
    assert.equal(r.ready?.pid, r.pid, 'READY comes from the spawned process itself (prlimit and unshare exec)');
    assert.ok(r.ready!.startupMs > 0 && r.ready!.rssBytes > 0);
    const stat = readFileSync(`/proc/${r.pid}/stat`, 'utf8');
    const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    assert.equal(pgid, r.pid, 'the runner leads its own process group');
    if (plan.isolation.network === 'netns') {
      assert.notEqual(readlinkSync(`/proc/${r.pid}/ns/net`), readlinkSync('/proc/self/ns/net'));
    }
    if (plan.isolation.memory === 'cgroup-v1') {
      const line = readFileSync(`/proc/${r.pid}/cgroup`, 'utf8')
        .split('\n')
        .find((l) => /:memory:/.test(l))!;
      assert.match(line, new RegExp(`ndif-sandbox-${process.pid}-\\d+/${r.id}$`));
      const limit = Number(readFileSync(`/sys/fs/cgroup/memory${line.split(':')[2]}/memory.limit_in_bytes`, 'utf8'));
      assert.equal(limit, DEFAULT_LIMITS.memoryMb * 1024 * 1024);
    }
    const env = readFileSync(`/proc/${r.pid}/environ`, 'utf8').split('\0').filter(Boolean);
    assert.ok(
      env.every((kv) => /^(TZ|LANG|LC_ALL|LC_CTYPE)=/.test(kv)),
      `only allowlisted variables: ${env.join(' ')}`,
    );
    if (plan.isolation.user === 'unprivileged') {
      assert.match(
        readFileSync(`/proc/${r.pid}/status`, 'utf8'),
        /\nUid:\s+65534\s+65534\s+65534\s+65534\n/,
        'runs as nobody',
      );
    }
    const limits = readFileSync(`/proc/${r.pid}/limits`, 'utf8');
    if (plan.isolation.cpu === 'rlimit-cpu')
      assert.match(limits, new RegExp(`Max cpu time\\s+${DEFAULT_LIMITS.cpuSeconds}\\s`));
  } finally {
    r.kill('close');
    await r.exited;
  }
  assert.ok(await processGone(r.pid));
});

test('a runner that cannot start is reported with SANDBOX_RUNNER_START_FAILED and its stderr', async () => {
  const broken = new RunnerLauncher({
    plan,
    limits: DEFAULT_LIMITS,
    script: '/nonexistent/runner-main.js',
    readPaths: ['/nonexistent/'],
  });
  try {
    await assert.rejects(broken.launch(await tinyAssets()), (e: unknown) => {
      assert.ok(e instanceof SandboxError);
      assert.equal(e.code, 'SANDBOX_RUNNER_START_FAILED');
      assert.match(e.message, /exited before it was ready.*(Cannot find module|ERR_ACCESS_DENIED|MODULE_NOT_FOUND)/s);
      return true;
    });
  } finally {
    await broken.close();
  }
});

test('a runner given a manifest it cannot read refuses with SANDBOX_RUNNER_REFUSED', async () => {
  await assert.rejects(launcher.launch({ ...(await tinyAssets()), manifest: '{not json' }), (e: unknown) => {
    assert.ok(e instanceof SandboxError);
    assert.equal(e.code, 'SANDBOX_RUNNER_REFUSED');
    assert.match(e.message, /RUNNER_BAD_INIT/);
    return true;
  });
});

test('a runner not ready in time is killed and reported with SANDBOX_RUNNER_START_TIMEOUT', async () => {
  // A runner that starts and never answers INIT (a real runner can be ready within a 1 ms limit once the spawner
  // has its modules loaded, so the limit alone does not make one late).
  const dir = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');
  const script = join(dir, 'silent-runner.js');
  const silent = new RunnerLauncher({
    plan,
    limits: { ...DEFAULT_LIMITS, startTimeoutMs: 300 },
    script,
    readPaths: [`${dir}/`],
  });
  try {
    await assert.rejects(silent.launch(await tinyAssets()), (e: unknown) => {
      assert.ok(e instanceof SandboxError, String(e));
      assert.equal(e.code, 'SANDBOX_RUNNER_START_TIMEOUT');
      assert.match(e.message, /was not ready within 300 ms/);
      return true;
    });
  } finally {
    await silent.close();
  }
});

test('the pool hands out each runner once, refills in the background and replaces a warm runner that died', async () => {
  const assets = await tinyAssets();
  const pool = new RunnerPool('tiny', () => launcher.launch(assets), { size: 2, maxSize: 2 });
  try {
    await pool.whenReady(2);
    const a = await pool.acquire();
    const b = await pool.acquire();
    assert.notEqual(a.pid, b.pid);
    assert.throws(() => a.claim(), /already used/);
    await waitFor(() => pool.stats().ready === 2, 10_000, 'the pool refills to its size');
    const warm = pool.pids().filter((p) => p !== a.pid && p !== b.pid);
    assert.equal(warm.length, 2);
    process.kill(warm[0]!, 'SIGKILL');
    await waitFor(
      () => pool.stats().ready === 2 && !pool.pids().includes(warm[0]!),
      10_000,
      'a dead warm runner is replaced',
    );
    const c = await pool.acquire();
    assert.ok(![a.pid, b.pid, warm[0]].includes(c.pid), 'never a runner that served or died');
    a.kill('finished');
    b.kill('finished');
    c.kill('finished');
  } finally {
    const pids = pool.pids();
    await pool.close();
    for (const p of pids) assert.ok(await processGone(p), `runner ${p} is gone after close`);
  }
});

test('automatic pool size is ceil(spawn / execute) + 1, bounded', () => {
  assert.equal(autoPoolSize(undefined, undefined, 8), 2);
  assert.equal(autoPoolSize(4000, 700, 8), 7, "NDIF's own numbers give its pool of 7");
  assert.equal(autoPoolSize(100, 50, 8), 3);
  assert.equal(autoPoolSize(100, 5, 8), 8);
  assert.equal(autoPoolSize(100, 500, 8), 2);
});

test('runUntrusted refuses an unregistered model with SANDBOX_UNKNOWN_MODEL', async () => {
  const sb = new Sandbox({ config: testConfig({ poolSize: 0 }) });
  try {
    await assert.rejects(
      sb.runUntrusted({ model: 'nope' }),
      (e: unknown) => e instanceof SandboxError && e.code === 'SANDBOX_UNKNOWN_MODEL',
    );
  } finally {
    await sb.close();
  }
});

test('if the spawner dies, its runners go with it and the pool recovers with a new spawner', async () => {
  const assets = await tinyAssets();
  const own = new RunnerLauncher({ plan, limits: DEFAULT_LIMITS });
  const pool = new RunnerPool('tiny', () => own.launch(assets), { size: 2, maxSize: 2 });
  try {
    await pool.whenReady(2);
    const before = pool.warmPids();
    const spawner = own.spawnerPid!;
    process.kill(spawner, 'SIGKILL');
    for (const p of before) assert.ok(await processGone(p, 3000), `runner ${p} died with the spawner`);
    await waitFor(
      () => pool.stats().ready === 2 && pool.warmPids().every((p) => !before.includes(p)),
      10_000,
      'the pool refills',
    );
    assert.notEqual(own.spawnerPid, spawner, 'a new spawner');
    const r = await pool.acquire();
    assert.ok(r.alive);
    r.kill('finished');
  } finally {
    await pool.close();
    await own.close();
  }
});
