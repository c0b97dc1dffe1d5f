// The first operator of a fabric with auth on: `ndif keys new` makes a key text, the embedded fabric started
// with NDIF_AUTH=on and NDIF_BOOTSTRAP_KEY=<it> stores it as an operator key, and through the CLI that operator
// creates a user key, lists and revokes it; a restart with the same text changes nothing; a malformed bootstrap
// key stops the fabric at start with the key error.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { runNdif } from '../support/ndif.js';

const MAIN = fileURLToPath(new URL('../../fabric/embedded/main.js', import.meta.url));
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ndif = runNdif;

function startFabric(dataDir: string, bootstrapKey: string) {
  const child = spawn(process.execPath, ['--enable-source-maps', MAIN], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NDIF_DATA_DIR: dataDir,
      NDIF_PORT: '0',
      NDIF_AGENT: 'off',
      NDIF_AUTH: 'on',
      NDIF_BOOTSTRAP_KEY: bootstrapKey,
      NDIF_LOG_LEVEL: 'info',
    },
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
  return {
    child,
    exited,
    output: () => out + err,
    async url(): Promise<string> {
      const end = Date.now() + 60_000;
      for (;;) {
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m) return m[1]!;
        if (child.exitCode !== null || Date.now() > end)
          throw new Error(`the fabric did not start: ${out}\n${err.slice(-3000)}`);
        await sleep(25);
      }
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

describe('the bootstrap operator key', () => {
  it('ndif keys new → NDIF_BOOTSTRAP_KEY → an operator who creates, lists and revokes keys', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-bootstrap-'));
    dirs.push(dir);
    const made = await ndif(['keys', 'new'], {});
    assert.equal(made.code, 0, made.err);
    const bootstrap = made.out.trim();
    assert.match(bootstrap, /^ndif_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    const bootstrapId = bootstrap.slice(5, 21);

    let fabric = startFabric(dir, bootstrap);
    try {
      const url = await fabric.url();
      // The log line is written by pino's asynchronous destination: it may follow the listening line by a moment.
      const said = new RegExp(`bootstrap operator key ${bootstrapId}`);
      for (let end = Date.now() + 5000; !said.test(fabric.output()) && Date.now() < end; ) await sleep(25);
      assert.match(fabric.output(), said);
      const asOperator = { NDIF_URL: url, NDIF_API_KEY: bootstrap };
      const me = JSON.parse((await ndif(['env', '--json'], asOperator)).out);
      assert.ok(JSON.stringify(me).includes(bootstrapId), JSON.stringify(me));

      const created = await ndif(['keys', 'create', 'alice', '--priority'], asOperator);
      assert.equal(created.code, 0, created.err);
      const alice = created.out.trim();
      assert.match(alice, /^ndif_[0-9a-f]{16}_/);
      assert.match(created.err, /key [0-9a-f]{16} "alice" \(priority\); the secret is shown only now/);
      const aliceId = alice.slice(5, 21);
      const whoami = (await fetch(`${url}/whoami`, { headers: { authorization: `Bearer ${alice}` } }).then((r) =>
        r.json(),
      )) as { actor: string; tags: Record<string, boolean> };
      assert.deepEqual(
        [whoami.actor, whoami.tags],
        [`key:${aliceId}`, { trusted: false, priority: true, operator: false }],
      );

      // Alice is no operator: the key routes refuse her.
      const refused = await ndif(['keys', 'list'], { NDIF_URL: url, NDIF_API_KEY: alice });
      assert.notEqual(refused.code, 0);
      assert.match(refused.err, /AUTH_OPERATOR_REQUIRED/);

      const listed = await ndif(['keys', 'list'], asOperator);
      assert.equal(listed.code, 0, listed.err);
      assert.match(listed.out, /^ID +LABEL +TAGS +CREATED +BY +REVOKED$/m);
      assert.match(
        listed.out,
        new RegExp(`^${bootstrapId} +bootstrap operator +trusted,operator +\\S+ +system:bootstrap +-$`, 'm'),
      );
      assert.match(listed.out, new RegExp(`^${aliceId} +alice +priority +\\S+ +key:${bootstrapId} +-$`, 'm'));

      const revoked = await ndif(['keys', 'revoke', aliceId], asOperator);
      assert.equal(revoked.code, 0, revoked.err);
      assert.match(revoked.out, new RegExp(`^key ${aliceId} revoked at `));
      assert.equal((await fetch(`${url}/whoami`, { headers: { authorization: `Bearer ${alice}` } })).status, 403);

      const usage = await ndif(['keys', 'create'], asOperator);
      assert.equal(usage.code, 2);
      assert.match(usage.err, /create needs <label>/);
    } finally {
      await fabric.stop();
    }

    // The same bootstrap text again: the key is there once, still an operator.
    fabric = startFabric(dir, bootstrap);
    try {
      const url = await fabric.url();
      const keys = JSON.parse(
        (await ndif(['keys', 'list', '--json'], { NDIF_URL: url, NDIF_API_KEY: bootstrap })).out,
      ) as { keys: { id: string }[] };
      assert.deepEqual(
        keys.keys.map((k) => k.id).filter((id) => id === bootstrapId),
        [bootstrapId],
      );
      assert.equal(keys.keys.length, 2);
    } finally {
      await fabric.stop();
    }
  });

  it('a malformed NDIF_BOOTSTRAP_KEY stops the fabric at start with the key error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-bootstrap-'));
    dirs.push(dir);
    const fabric = startFabric(dir, 'not-a-key');
    const [code] = await fabric.exited;
    assert.notEqual(code, 0);
    assert.match(fabric.output(), /AUTH_KEY_MALFORMED/);
    assert.match(fabric.output(), /the bootstrap key/);
  });
});
