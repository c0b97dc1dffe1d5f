// A GPU agent as a real OS process (dist/fabric/gpu-agent.js) over the IPC transport, executing real assignments
// from a real control plane: it registers, loads gpt2-tiny when the deployment places it, runs a trusted
// read+swap block whose result in the blob store equals HostedModel.run called directly, reports LOG lines (in batches),
// stops a running request when it is cancelled (reporting nothing for it), and after kill -9 a new process of the
// same agent registers a new boot, gets its replica back (RELOAD) and runs the requeued request.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { loadModel, type HostedModel } from '../../gpu-agent/runtime/index.js';
import { decodeResultContainer } from '../../protocol/result-container.js';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { startHarness, spawnAgent, type AgentProcess, type Harness } from './harness.js';
import { HANGING_BLOCK, READ_SWAP_BLOCK, slowBlock } from './payloads.js';

const PROMPT = 'The Eiffel Tower is in';
const HOLD = { NDIF_AGENT_START_HOLD_MS: '10000' };

/** The lines of a RequestLogged event (a batch). */
const linesOf = (e: { data: unknown }): string[] => (e.data as { lines: { line: string }[] }).lines.map((l) => l.line);

describe('GPU agent process', () => {
  let h: Harness;
  let agent: AgentProcess;
  let direct: HostedModel;

  before(async () => {
    h = await startHarness();
    direct = await loadModel(ensureModel('gpt2-tiny'), { key: 'gpt2-tiny' });
  });
  after(async () => {
    await agent?.stop();
    await direct?.close();
    await h?.close();
  });

  it('registers its declared GPUs and loads the replica the control plane places on it', async () => {
    // The start report is held long enough that a quick run always folds it into its end, however loaded the host.
    agent = spawnAgent(h, 'agent-p1', HOLD);
    const bootId = await agent.ready;
    const reg = await h.waitFor('agent-agent-p1', 'AgentRegistered');
    assert.equal(reg.data.bootId, bootId);
    assert.deepEqual(reg.data.gpus, [{ index: 0, memoryBytes: 16 * 2 ** 30, name: 'virtual (cpu)' }]);
    assert.equal(reg.data.ramBytes, 8 * 2 ** 30);
    assert.equal(reg.metadata.actor, 'agent:agent-p1');
    await h.deploy('gpt2-tiny');
    const placed = await h.waitFor('deployment-gpt2-tiny', 'ReplicaPlaced');
    const loading = await h.waitFor('deployment-gpt2-tiny', 'ReplicaLoading');
    const hot = await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
    assert.equal(placed.data.agentId, 'agent-p1');
    assert.equal(hot.data.agentId, 'agent-p1');
    assert.ok(typeof hot.data.loadMs === 'number' && hot.data.loadMs > 0);
    // Agent reports name the assignment as their cause and carry its correlation.
    assert.equal(loading.metadata.causationId, placed.id);
    assert.equal(hot.metadata.correlationId, placed.metadata.correlationId);
  });

  it('a run that ends within the start hold reports its start with its end: one report, both events', async () => {
    await h.submit('r-quick', [{ prompt: PROMPT, block: 'async (m) => 1' }]);
    await h.waitFor('request-r-quick', 'RequestCompleted');
    const stream = await h.events('request-r-quick');
    assert.deepEqual(
      stream.map((e) => e.type),
      ['RequestReceived', 'RequestQueued', 'RequestDispatched', 'RequestStarted', 'RequestCompleted'],
    );
    const [dispatched, started, completed] = stream.slice(2);
    assert.equal(started!.metadata.commandId, completed!.metadata.commandId, 'one command recorded both');
    assert.ok(started!.metadata.commandId !== undefined);
    const at = (e: typeof started, f: string) => Date.parse((e!.data as Record<string, string>)[f]!);
    assert.ok(at(started, 'startedAt') >= at(dispatched, 'dispatchedAt') - 5);
    assert.ok(at(started, 'startedAt') <= at(completed, 'completedAt'));
  });

  it('runs a trusted read+swap block; the result in the blob store equals the runtime called directly', async () => {
    await h.submit('r-swap', [
      { prompt: PROMPT, block: READ_SWAP_BLOCK },
      { tokens: [464, 412, 733], block: READ_SWAP_BLOCK },
    ]);
    const done = await h.waitFor('request-r-swap', 'RequestCompleted');
    const stream = await h.events('request-r-swap');
    // Lines come in batches (one RequestLogged per batch), all of them before the completion.
    const types = stream.map((e) => e.type);
    assert.deepEqual(
      types.filter((t) => t !== 'RequestLogged'),
      ['RequestReceived', 'RequestQueued', 'RequestDispatched', 'RequestStarted', 'RequestCompleted'],
    );
    assert.ok(
      types.indexOf('RequestLogged') > types.indexOf('RequestStarted') &&
        types.lastIndexOf('RequestLogged') < types.indexOf('RequestCompleted'),
    );
    const logs = stream.filter((e) => e.type === 'RequestLogged').flatMap((e) => linesOf(e));
    // Invokes are batched with left padding to the longest (7 tokens); each block sees its own row.
    assert.deepEqual(logs, ['mlp 1x7x64', 'mlp 1x7x64']);
    const dispatched = stream[2];
    for (const e of stream.slice(3))
      assert.equal(e.metadata.causationId, dispatched.id, `${e.type} names the dispatch as its cause`);

    const blob = await h.blobs.get(done.data.resultRef as string);
    assert.equal(blob.size, done.data.bytes);
    assert.equal(blob.sha256, done.data.sha256);
    const container = decodeResultContainer(blob.bytes);
    assert.equal(container.meta.requestId, 'r-swap');
    assert.equal(container.meta.agentId, 'agent-p1');
    const expected = await direct.run(
      {
        invokes: [
          { prompt: PROMPT, block: READ_SWAP_BLOCK },
          { tokens: [464, 412, 733], block: READ_SWAP_BLOCK },
        ],
      },
      () => createInProcessBlocks({ manifest: direct.manifest(), tokenizer: direct.tokenizer }),
    );
    assert.equal(container.invokes.length, 2);
    container.invokes.forEach((inv, i) => {
      const want = expected.invokes[i].result;
      assert.deepEqual(inv.tree, want.tree);
      assert.equal(inv.tensors.length, want.tensors.length);
      inv.tensors.forEach((t, j) => {
        assert.equal(t.dtype, want.tensors[j].dtype);
        assert.deepEqual(t.shape, want.tensors[j].shape);
        assert.ok(
          Buffer.from(t.data).equals(Buffer.from(want.tensors[j].data)),
          `invoke ${i} tensor ${j} is bit-identical`,
        );
      });
    });
  });

  it('runs an untrusted block in a sandbox runner with the same result as trusted', async () => {
    await h.submit('r-untrusted', [{ prompt: PROMPT, block: READ_SWAP_BLOCK }], { trusted: false });
    await h.submit('r-trusted', [{ prompt: PROMPT, block: READ_SWAP_BLOCK }]);
    const [u, t] = await Promise.all([
      h.waitFor('request-r-untrusted', 'RequestCompleted', undefined, 45_000),
      h.waitFor('request-r-trusted', 'RequestCompleted'),
    ]);
    const logs = (await h.events('request-r-untrusted'))
      .filter((e) => e.type === 'RequestLogged')
      .flatMap((e) => linesOf(e));
    assert.deepEqual(logs, ['mlp 1x7x64']);
    const a = decodeResultContainer((await h.blobs.get(u.data.resultRef)).bytes);
    const b = decodeResultContainer((await h.blobs.get(t.data.resultRef)).bytes);
    assert.deepEqual(a.invokes[0].tree, b.invokes[0].tree);
    a.invokes[0].tensors.forEach((x, j) => {
      assert.ok(Buffer.from(x.data).equals(Buffer.from(b.invokes[0].tensors[j].data)), `tensor ${j} is bit-identical`);
    });
  });

  it("reports a failing block with its type, message and the block's own stack", async () => {
    await h.submit('r-throw', [
      {
        prompt: PROMPT,
        block:
          'async (m) => {\n  await m.transformer.h[1].output;\n  throw new RangeError("no such layer, said the user");\n}',
      },
    ]);
    const failed = await h.waitFor('request-r-throw', 'RequestFailed');
    assert.equal(failed.data.phase, 'execution');
    assert.equal(failed.data.reportedBy, 'agent');
    assert.match(String(failed.data.message), /no such layer, said the user/);
    assert.match(String(failed.data.stack), /RangeError[\s\S]*block-0\.js:3/);
    await h.submit('r-syntax', [{ prompt: PROMPT, block: 'async (m) => { return m.; }' }]);
    const syntax = await h.waitFor('request-r-syntax', 'RequestFailed');
    assert.equal(syntax.data.errorType, 'BlockSyntaxError');
    assert.equal(syntax.data.phase, 'validation');
  });

  it('stops a running request when it is cancelled, and reports nothing more for it', async () => {
    await h.submit('r-hang', [{ prompt: PROMPT, block: HANGING_BLOCK }]);
    await h.waitFor('request-r-hang', 'RequestLogged', (e) => linesOf(e).includes('waiting'));
    await h.run({ type: 'CancelRequest', requestId: 'r-hang', actor: 'key:operator', operator: true });
    // The model serves one request at a time: this one completes only if the cancelled run really stopped.
    await h.submit('r-after', [{ prompt: PROMPT, block: READ_SWAP_BLOCK }]);
    await h.waitFor('request-r-after', 'RequestCompleted', undefined, 20_000);
    const hang = (await h.events('request-r-hang')).map((e) => e.type);
    assert.deepEqual(hang, [
      'RequestReceived',
      'RequestQueued',
      'RequestDispatched',
      'RequestStarted',
      'RequestLogged',
      'RequestCancelled',
    ]);
  });

  it('after kill -9, the restarted agent registers a new boot, reloads its replica and runs the requeued request', async () => {
    const oldBoot = await agent.ready;
    await h.submit('r-killed', [{ prompt: PROMPT, block: slowBlock(1500) }]);
    await h.waitFor('request-r-killed', 'RequestLogged', (e) => linesOf(e).includes('slow'));
    await agent.kill9();
    agent = spawnAgent(h, 'agent-p1', HOLD);
    const newBoot = await agent.ready;
    assert.notEqual(newBoot, oldBoot);
    const reg = await h.waitFor('agent-agent-p1', 'AgentRegistered', (e) => e.data.bootId === newBoot);
    assert.equal(reg.data.previousBootId, oldBoot);
    const reload = await h.waitFor('deployment-gpt2-tiny', 'ReplicaReloadRequired', (e) => e.data.bootId === newBoot);
    const hot = await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot', (e) => e.position > reload.position);
    assert.equal(hot.metadata.causationId, reload.id);
    const requeued = await h.waitFor('request-r-killed', 'RequestRequeued');
    assert.equal(requeued.data.reason, 'AGENT_RESTARTED');
    const completed = await h.waitFor('request-r-killed', 'RequestCompleted', undefined, 30_000);
    assert.equal(completed.data.attempt, 2);
    const types = (await h.events('request-r-killed')).map((e) => e.type);
    assert.equal(types.filter((t) => t === 'RequestCompleted').length, 1);
    assert.ok(!types.includes('AgentReportIgnored'), `no stale report: ${types.join(', ')}`);
  });

  it('refuses to start with NDIF_AGENT_EP=cuda where the CUDA binaries are absent: AGENT_CUDA_UNAVAILABLE, exit 1', async () => {
    const refused = spawnAgent(h, 'agent-cuda', { NDIF_AGENT_EP: 'cuda', NDIF_LOG_LEVEL: 'fatal' });
    let stderr = '';
    refused.child.stderr!.on('data', (d: string) => (stderr += d));
    const [code] = (await refused.exited) as [number];
    await assert.rejects(refused.ready, /exited \(1\) before it was ready/);
    assert.equal(code, 1);
    assert.match(stderr, /NDIF_AGENT_EP=cuda, but onnxruntime-node's CUDA execution provider is not installed/);
  });
});
