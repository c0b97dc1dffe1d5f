// The GPU agent's V8 flags: the benches re-run themselves under them, and the image's gpu-agent line starts with them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { AGENT_NODE_FLAGS, withAgentFlags } from '../../fabric/agent-node-flags.js';

test('a process without the agent flags is re-run with them, its own node arguments and the script arguments kept', () => {
  assert.ok(AGENT_NODE_FLAGS.length > 0);
  assert.deepEqual(withAgentFlags(['--enable-source-maps'], 'run.js', ['surface', '--rounds', '3']), [
    '--enable-source-maps',
    ...AGENT_NODE_FLAGS,
    'run.js',
    'surface',
    '--rounds',
    '3',
  ]);
  assert.equal(withAgentFlags([...AGENT_NODE_FLAGS], 'run.js', ['surface']), null, 'one that has them runs as it is');
});

test('the image starts a GPU agent with the agent flags', () => {
  const cmd = readFileSync('Dockerfile', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('CMD '));
  const agentLine = /gpu-agent\) exec node ([^;]*) dist\/fabric\/gpu-agent\.js/.exec(cmd ?? '')?.[1];
  assert.ok(agentLine, 'the CMD has a gpu-agent case');
  for (const f of AGENT_NODE_FLAGS) assert.ok(agentLine.split(' ').includes(f), `${f} on the gpu-agent line`);
});
