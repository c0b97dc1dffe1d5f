// The `ndif` CLI (main(), in this process) against a real fabric in this process with auth on: deploy and its
// wait, refusal with numbers, scale, pin, evict, kill, status/queue/agents/env in text and JSON, watch, and
// the failures a user meets (no key, not an operator, unreachable, bad usage).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { main } from '../../client/cli/main.js';
import { type CliRun, runNdif } from '../support/ndif.js';
import { ExitCode } from '../../client/cli/exit-codes.js';
import { Fabric } from '../../client/sdk/index.js';
import { startInProcessFabric } from './fabric-harness.js';
import type { InProcessFabric } from './fabric-harness.js';

let fab: InProcessFabric;

function ndif(args: string[], env: NodeJS.ProcessEnv = {}, signal?: AbortSignal): Promise<CliRun> {
  return runNdif(args, { NDIF_URL: fab.url, NDIF_API_KEY: fab.keys!.operator, ...env }, signal);
}

before(async () => {
  fab = await startInProcessFabric({ auth: true, gpus: '2x16GiB' });
});

after(async () => {
  await fab.close();
});

describe('deploy and the deployment commands', () => {
  it('deploy waits until the replica is HOT and says where', async () => {
    const r = await ndif(['deploy', 'gpt2-tiny']);
    assert.equal(r.code, ExitCode.ok, r.err);
    assert.match(r.out, /^gpt2-tiny#1 HOT on agent-1 GPU [01] \(.+ per GPU\) after /m);
    assert.match(r.err, /gpt2-tiny: deploying gpt2-tiny#1; waiting up to 10 min for HOT/);
    assert.match(r.err, /gpt2-tiny#1 HOT/);
  });

  it('status shows agents, GPU memory and the HOT replica, in text and JSON', async () => {
    const t = await ndif(['status']);
    assert.equal(t.code, 0, t.err);
    assert.match(t.out, /^AGENT +STATE +GPUS/m);
    assert.match(t.out, /^agent-1 +ACTIVE +2 /m);
    assert.match(t.out, /^gpt2-tiny +READY +no +0 +gpt2-tiny#1 HOT \(agent-1 GPU \d\)$/m);
    const j = await ndif(['status', '--json']);
    const c = JSON.parse(j.out);
    const dep = c.deployments.find((d: { modelKey: string }) => d.modelKey === 'gpt2-tiny');
    assert.equal(dep.phase, 'READY');
    assert.equal(dep.replicas[0].level, 'HOT');
  });

  it('a deploy no agent can host exits 4 with the refusal and its numbers', async () => {
    const r = await ndif(['deploy', 'gpt2-tiny', '--size', '64GiB', '--wait', '30s']);
    assert.equal(r.code, ExitCode.notReady, r.out + r.err);
    assert.match(
      r.err,
      /gpt2-tiny#2 was refused: gpt2-tiny needs 64\.00 GiB \(64\.00 GiB on each of 1 GPU\(s\)\); best GPU has 16\.00 GiB free/,
    );
    assert.match(r.err, /best GPU has .* free/);
    const j = await ndif(['deploy', 'gpt2-tiny', '--size', '64GiB', '--json']);
    assert.equal(j.code, ExitCode.notReady);
    const body = JSON.parse(j.out);
    assert.equal(body.error.name, 'NotReadyError');
    assert.equal(body.error.details.kind, 'REFUSED');
    assert.equal(body.error.exitCode, 4);
  });

  it('scale adds a replica on the other GPU and waits for it', async () => {
    const r = await ndif(['scale', 'gpt2-tiny', '2']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /gpt2-tiny: 2 replica\(s\), adding gpt2-tiny#\d: all HOT/);
    const c = JSON.parse((await ndif(['status', '--json'])).out);
    const reps = c.deployments.find((d: { modelKey: string }) => d.modelKey === 'gpt2-tiny').replicas;
    assert.equal(reps.filter((x: { level: string }) => x.level === 'HOT').length, 2);
    assert.deepEqual(reps.map((x: { gpus: number[] }) => x.gpus[0]).sort(), [0, 1]);
  });

  it('pin, evict asks for --force on a pinned model, unpin, evict', async () => {
    assert.equal((await ndif(['pin', 'gpt2-tiny'])).out, 'gpt2-tiny pinned\n');
    assert.match((await ndif(['status'])).out, /^gpt2-tiny +READY +yes/m);
    const refused = await ndif(['evict', '--model', 'gpt2-tiny']);
    assert.equal(refused.code, ExitCode.usage);
    assert.match(refused.err, /gpt2-tiny is pinned; add --force/);
    assert.equal((await ndif(['unpin', 'gpt2-tiny'])).out, 'gpt2-tiny unpinned\n');
    // The audit tells pins from unpins (one event type, DeploymentPinned with pinned true or false).
    const pins = JSON.parse((await ndif(['audit', '--type', 'DeploymentPinned', '--data', '--json'])).out) as {
      events: { type: string; data: { pinned: boolean } }[];
    };
    assert.ok(pins.events.length >= 1);
    assert.ok(
      pins.events.every((e) => e.data.pinned === true),
      JSON.stringify(pins.events),
    );
    const unpins = JSON.parse((await ndif(['audit', '--type', 'DeploymentUnpinned', '--data', '--json'])).out) as {
      events: { type: string; data: { pinned: boolean } }[];
    };
    assert.ok(unpins.events.length >= 1);
    assert.ok(unpins.events.every((e) => e.type === 'DeploymentPinned' && e.data.pinned === false));
    const unfiltered = await ndif(['audit']);
    assert.equal(unfiltered.code, 0, unfiltered.err);
    assert.match(unfiltered.err, /no filter given: the last hour's events/);
    assert.match(unfiltered.out, /unpinned/);
    const one = await ndif(['evict', '--replica', 'gpt2-tiny#2', '--json']);
    assert.equal(one.code, 0, one.err);
    assert.deepEqual(JSON.parse(one.out).evicted, ['gpt2-tiny#2']);
    const all = await ndif(['evict', '--all']);
    assert.equal(all.code, ExitCode.usage);
    assert.match(all.err, /add --force to confirm/);
  });

  it('queue and agents, text and JSON', async () => {
    const q = await ndif(['queue']);
    assert.equal(q.code, 0, q.err);
    assert.equal(q.out, 'every queue is empty\n');
    assert.ok(Array.isArray(JSON.parse((await ndif(['queue', '--json', '--model', 'gpt2-tiny'])).out).queues));
    const a = await ndif(['agents']);
    assert.match(a.out, /^agent-1 +ACTIVE +\S+ .* 0:virtual \(cpu\) 16\.0 GiB, 1:virtual \(cpu\) 16\.0 GiB/m);
    assert.equal(JSON.parse((await ndif(['agents', '--json'])).out).agents[0].agentId, 'agent-1');
  });
});

describe('kill', () => {
  it('kills a running request of another user; a second kill says it was already cancelled', async () => {
    const user = new Fabric({ url: fab.url, apiKey: fab.keys!.user, progress: false });
    try {
      const h = await user.submit(
        'gpt2-tiny',
        'Hello',
        'async () => { await new Promise((r) => setTimeout(r, 2000)); return 1; }',
      );
      for (let i = 0; i < 100 && (await h.status()).status !== 'RUNNING'; i++)
        await new Promise((r) => setTimeout(r, 50));
      // An operator names another key's request by its full id, <key id>:<the id its submitter chose>.
      const full = `${fab.keys!.user.split('_')[1]}:${h.requestId}`;
      // The operator's view of what runs: who, which model, which phase, since when.
      const running = await ndif(['requests']);
      assert.equal(running.code, 0, running.err);
      assert.match(running.out, /^REQUEST +SUBMITTER +MODEL +PHASE +SINCE +RECEIVED +ATTEMPT +AGENT$/m);
      assert.match(
        running.out,
        new RegExp(`^${full} +key:[0-9a-f]{16} +gpt2-tiny +RUNNING +\\d+(\\.\\d+)? (ms|s) +.* +1 +agent-1$`, 'm'),
      );
      const listed = JSON.parse((await ndif(['requests', '--json'])).out) as {
        requests: { requestId: string; status: string; since: string; submitter: string }[];
      };
      const mine = listed.requests.find((x) => x.requestId === full);
      assert.equal(mine?.status, 'RUNNING');
      assert.ok(
        listed.requests.every((x) =>
          ['RECEIVED', 'QUEUED', 'PROVISIONING', 'DEPLOYING', 'DISPATCHED', 'RUNNING'].includes(x.status),
        ),
      );
      const r = await ndif(['kill', full]);
      assert.equal(r.code, 0, r.err);
      assert.equal(r.out, `${full} cancelled\n`);
      assert.equal((await ndif(['kill', full])).out, `${full} was already cancelled\n`);
      const info = await h.wait({ waitMs: 10_000 });
      assert.equal(info.reply.cancelled?.by, 'operator');
      const after = JSON.parse((await ndif(['requests', '--json'])).out) as { requests: { requestId: string }[] };
      assert.ok(!after.requests.some((x) => x.requestId === full), 'a finished request is not listed');
      const all = JSON.parse((await ndif(['requests', '--all', '--json'])).out) as {
        requests: { requestId: string; status: string }[];
      };
      assert.equal(all.requests.find((x) => x.requestId === full)?.status, 'CANCELLED');
    } finally {
      user.close();
    }
  });

  it("an unknown request: exit 1 with the fabric's code", async () => {
    const r = await ndif(['kill', 'no-such-request']);
    assert.equal(r.code, ExitCode.failed);
    assert.match(r.err, /^ndif kill: CP_REQUEST_NOT_FOUND: /);
  });
});

describe('who and where', () => {
  it('env: URL, key source, versions and who the key is', async () => {
    const r = await ndif(['env']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, new RegExp(`^url +${fab.url.replace(/[.]/g, '\\.')} +\\(from env NDIF_URL\\)$`, 'm'));
    assert.match(r.out, /^api key +ndif….{4} +\(from env NDIF_API_KEY\)$/m);
    assert.match(r.out, /^fabric +0\.1\.0, protocol 1\.0 \(embedded API, auth on\)$/m);
    assert.match(r.out, /^caller +key:[0-9a-f]{16} "ops"; tags: trusted, operator$/m);
    assert.ok(!r.out.includes(fab.keys!.operator), 'the key itself is never printed');
    const j = JSON.parse((await ndif(['env', '--json', '--url', fab.url])).out);
    assert.equal(j.urlSource, 'option');
    assert.equal(j.fabric.protocol, '1.0');
  });

  it("no key, a user key on an operator route: the fabric's codes with a pointer to the key's source", async () => {
    const none = await ndif(['status'], { NDIF_API_KEY: '' });
    assert.equal(none.code, ExitCode.failed);
    assert.match(none.err, /AUTH_KEY_MISSING/);
    assert.match(none.err, /--api-key or \$NDIF_API_KEY/);
    const user = await ndif(['deploy', 'gpt2-tiny', '--no-wait'], { NDIF_API_KEY: fab.keys!.user });
    assert.equal(user.code, ExitCode.failed);
    assert.match(user.err, /AUTH_OPERATOR_REQUIRED/);
    const bad = await ndif(['status', '--api-key', 'not-a-key']);
    assert.match(bad.err, /AUTH_KEY_MALFORMED/);
  });

  it('an unreachable fabric: exit 3 with the URL and how to start one', async () => {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as { port: number }).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const r = await ndif(['status'], { NDIF_URL: `http://127.0.0.1:${port}` });
    assert.equal(r.code, ExitCode.unreachable);
    assert.match(
      r.err,
      new RegExp(
        `cannot reach the fabric at http://127\\.0\\.0\\.1:${port} \\(GET /version: connection refused\\).*npm start`,
      ),
    );
    const e = await ndif(['env'], { NDIF_URL: `http://127.0.0.1:${port}` });
    assert.equal(e.code, ExitCode.unreachable);
    assert.match(
      e.out,
      /^url +http:\/\/127\.0\.0\.1:\d+ +\(from env NDIF_URL\)$/m,
      'env still prints the local settings',
    );
  });
});

describe('usage', () => {
  it('help, unknown commands and options, bad values: exit 2 with what was wrong', async () => {
    const h = await ndif(['help']);
    assert.equal(h.code, 0);
    for (const c of ['deploy', 'scale', 'evict', 'pin', 'unpin', 'kill', 'status', 'queue', 'agents', 'env'])
      assert.match(h.out, new RegExp(`^  ${c} `, 'm'));
    assert.match((await ndif(['help', 'deploy'])).out, /^usage: ndif deploy <model>/);
    assert.match((await ndif(['status', '--help'])).out, /--watch/);
    const typo = await ndif(['depoly', 'x']);
    assert.equal(typo.code, ExitCode.usage);
    assert.match(typo.err, /unknown command "depoly"; did you mean `ndif deploy`\?/);
    const opt = await ndif(['deploy', 'gpt2-tiny', '--gpu', '2']);
    assert.equal(opt.code, ExitCode.usage);
    assert.match(opt.err, /Unknown option '--gpu'/);
    assert.match(opt.err, /usage: ndif deploy <model>/);
    assert.equal((await ndif(['deploy', 'gpt2-tiny', '--replicas', 'two'])).code, ExitCode.usage);
    assert.equal((await ndif(['scale', 'gpt2-tiny', '-1'])).code, ExitCode.usage);
    assert.equal((await ndif(['status', '--url', 'ftp://x'])).code, ExitCode.usage);
    assert.equal((await ndif([])).code, ExitCode.usage, 'no command: the help, and exit 2');
  });
});

describe('status --watch', () => {
  it('prints a snapshot, another when the cluster changes, and ends with exit 0 on Ctrl-C', async () => {
    const ac = new AbortController();
    let out = '';
    const done = main(['status', '--watch', '--json'], {
      stdout: { write: (s: string) => (out += s) },
      stderr: { write: () => true },
      env: { NDIF_URL: fab.url, NDIF_API_KEY: fab.keys!.operator },
      signal: ac.signal,
    });
    const waitLines = async (n: number) => {
      for (let i = 0; i < 200 && out.split('\n').filter(Boolean).length < n; i++)
        await new Promise((r) => setTimeout(r, 25));
    };
    await waitLines(1);
    assert.equal((await ndif(['pin', 'gpt2-tiny'])).code, 0);
    await waitLines(2);
    ac.abort();
    assert.equal(await done, 0);
    const snaps = out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    assert.ok(snaps.length >= 2, out);
    const pinnedOf = (s: { deployments: Array<{ modelKey: string; pinned: boolean }> }) =>
      s.deployments.find((d) => d.modelKey === 'gpt2-tiny')?.pinned;
    assert.equal(pinnedOf(snaps[0]), false);
    assert.equal(pinnedOf(snaps.at(-1)), true);
  });
});
