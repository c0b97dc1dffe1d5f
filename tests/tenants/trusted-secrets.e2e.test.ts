// Issue 20, finding 1: a trusted block runs inside the agent process, so whatever the agent can read a trusted key
// can read. The embedded fabric is started with the bootstrap operator key, a result secret and a database URL in
// its environment: a trusted block finds none of them in its own environment, and the fabric's environment block
// (/proc/<pid>/environ, readable by any process of the same user, the agent included) no longer holds them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newKey } from '../../auth/key-format.js';
import { operatorSecretsVisible } from '../../fabric/operator-secrets.js';
import { startEmbedded } from '../faults/embedded.js';
import type { FaultFabric } from '../faults/fabric.js';
import { call, until } from '../faults/http.js';
import { controlPlaneOf, descendantsOf } from '../faults/process.js';

const bootstrap = newKey().key;
const secrets = {
  NDIF_BOOTSTRAP_KEY: bootstrap,
  NDIF_RESULT_SECRET: 'result-secret-0123456789abcdef',
  // Unused by the SQLite store; an operator's environment often holds it anyway.
  DATABASE_URL: 'postgres://ndif:hunter2-db-password@127.0.0.1:1/ndif',
  NDIF_EXTRA_API_TOKEN: 'some-other-token-0123456789',
};

// What a trusted block sees: the names of the secret variables set in its environment, and the values found.
const PEEK = `async () => {
  const names = ${JSON.stringify(Object.keys(secrets))};
  const found = names.filter((n) => process.env[n] !== undefined);
  const values = Object.values(process.env).filter((v) => ${JSON.stringify(Object.values(secrets))}.includes(v));
  throw new Error('PEEK ' + JSON.stringify({ found, values: values.length }));
}`;

describe('a trusted block and the operator’s secrets', () => {
  let f: FaultFabric;
  before(async () => {
    f = await startEmbedded({
      apiKeys: [
        { label: 'trusty', trusted: true },
        { label: 'op', operator: true },
      ],
      env: secrets,
    });
  });
  after(async () => {
    await f?.close();
  });

  it('sees no operator-grade secret in its environment, nor in the fabric process’s environment block', async () => {
    const headers = { authorization: `Bearer ${f.keys.get('trusty')}` };
    const sub = await call(f.commandUrl, '/requests', {
      body: { requestId: 'peek', model: 'gpt2-tiny', invokes: [{ input: 'hi', block: PEEK }] },
      headers,
    });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    const done = await until(
      'the request to end',
      async () => {
        const r = await call(f.queryUrl, '/requests/peek', { headers });
        return ['COMPLETED', 'ERROR'].includes(String(r.body.status)) ? r.body : undefined;
      },
      60_000,
    );
    // The block reports what it saw in its error's message.
    const seen = String((done.error as { message?: string } | null)?.message);
    assert.match(seen, /PEEK /, JSON.stringify(done));
    assert.match(seen, /"found":\[\]/, `the block saw ${seen}`);
    assert.match(seen, /"values":0/, `the block saw ${seen}`);

    // The bootstrap key works (it was stored) …
    const who = await call(f.queryUrl, '/whoami', { headers: { authorization: `Bearer ${bootstrap}` } });
    assert.equal(who.status, 200, JSON.stringify(who.body));
    // … and no process of the fabric (the control plane and its agent) shows it, or another secret, in /proc.
    const fabricPid = f.processes()[0]!.pid;
    const controlPlanePid = controlPlaneOf(fabricPid);
    const agentPid = descendantsOf(fabricPid, 'gpu-agent.js')[0];
    assert.ok(controlPlanePid !== undefined, 'the control-plane process runs under the fabric’s supervisor');
    assert.ok(agentPid !== undefined, 'the agent process is running');
    // The fabric overwrites the operator-grade secrets it knows; the agent holds none of the four.
    const { NDIF_EXTRA_API_TOKEN: _other, ...known } = secrets;
    assert.deepEqual(
      operatorSecretsVisible(known, {}, [`/proc/${fabricPid}/environ`, `/proc/${controlPlanePid}/environ`]),
      [],
    );
    assert.deepEqual(operatorSecretsVisible(secrets, {}, [`/proc/${agentPid}/environ`]), []);
  });
});
