// Issue 20, "Found by an operator": the CLI's exit codes agree with docs/cli.md (a malformed --to is usage, exit 2;
// a queue of a model nobody serves is the fabric's API_UNKNOWN_MODEL, exit 1, not "every queue is empty"), and
// an operator drains an agent from the CLI.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { main } from '../../client/cli/main.js';
import { ExitCode } from '../../client/cli/exit-codes.js';
import { startInProcessFabric, type InProcessFabric } from './fabric-harness.js';

let fab: InProcessFabric;

async function ndif(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    env: { NDIF_URL: fab.url, NDIF_API_KEY: fab.keys!.operator },
  });
  return { code, out, err };
}

before(async () => {
  fab = await startInProcessFabric({ auth: true });
});
after(async () => {
  await fab.close();
});

describe('operator CLI', () => {
  it('replay --to or --from that is neither a position nor a time: exit 2 with what was wrong', async () => {
    const r = await ndif(['replay', '--to', 'yesterday']);
    assert.equal(r.code, ExitCode.usage, r.err);
    assert.match(r.err, /--to "yesterday" is neither a log position .* nor an ISO-8601 UTC time/);
    assert.equal((await ndif(['replay', '--to', '3', '--from', 'last week'])).code, ExitCode.usage);
    assert.equal((await ndif(['replay', '--to', '0'])).code, ExitCode.ok);
  });

  it('queue --model of a model that is not served: API_UNKNOWN_MODEL, exit 1', async () => {
    const r = await ndif(['queue', '--model', 'nosuch']);
    assert.equal(r.code, ExitCode.failed, r.out);
    assert.match(r.err, /API_UNKNOWN_MODEL/);
    assert.doesNotMatch(r.out, /every queue is empty/);
    const ok = await ndif(['queue', '--model', 'gpt2-tiny']);
    assert.equal(ok.code, ExitCode.ok, ok.err);
  });

  it('drain <agent>: the agent is DRAINING; an unknown agent is refused with exit 1', async () => {
    const r = await ndif(['drain', 'agent-1']);
    assert.equal(r.code, ExitCode.ok, r.err);
    assert.match(r.out, /agent-1 draining/);
    let agents = '';
    for (let i = 0; i < 100 && !/DRAIN/.test(agents); i++) {
      agents = (await ndif(['agents'])).out;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.match(agents, /^agent-1 +DRAIN/m);
    const unknown = await ndif(['drain', 'no-such-agent']);
    assert.equal(unknown.code, ExitCode.failed, unknown.out);
  });
});
