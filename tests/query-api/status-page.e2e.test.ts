// The status page in real headless Chromium (CHROMIUM_PATH, provided by the test runner; Debian's chromium),
// never reloaded: it shows the deployed model with its HOT replica, a request's status and its phase timeline
// changing live, and — when an operator evicts the replica under the running request — the eviction and the
// request's requeue appearing live with why they happened (the `why` chain), the request back in the model's
// queue, then running again on a new replica with the requeue in its timeline.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ReportingAgent, settle, startApi, submitBody, type ApiHarness } from '../command-api/harness.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let h: ApiHarness;
let browser: Browser;
let page: Page;
let agent: ReportingAgent;

before(async () => {
  assert.ok(
    existsSync(CHROMIUM),
    `no Chromium at ${CHROMIUM}: run through scripts/test.mjs (it installs Debian's chromium) or set CHROMIUM_PATH`,
  );
  h = await startApi({ config: { rateLimit: null } });
  await h.listen();
  agent = new ReportingAgent(h);
  await agent.register();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  page = await browser.newPage();
});
after(async () => {
  await browser?.close();
  await h?.close();
});

const model = () => page.locator('section.model[data-model="gpt2-tiny"]');
const phases = async (requestId: string) =>
  page
    .locator(`.run[data-running="${requestId}"] .seg`)
    .evaluateAll((xs) => xs.map((x) => x.getAttribute('data-phase')));

it('shows models, replicas, running timelines, and an eviction and requeue live', async () => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(h.url);
  await page.waitForSelector('#conn.live');
  await page.waitForSelector('#models .empty');
  await page.waitForSelector('#changes .empty');

  const deploy = await h.app.inject({ method: 'POST', url: '/deployments', payload: { model: 'gpt2-tiny' } });
  assert.equal(deploy.statusCode, 202);
  await settle(h, [agent]);
  await model().locator('.replica.HOT[data-replica="gpt2-tiny#1"]').waitFor();
  assert.equal(await model().getAttribute('data-phase'), 'READY');
  assert.match(await model().locator('.replica.HOT').innerText(), /gpt2-tiny#1 HOT on agent-1/);
  assert.match(await page.locator('#gpus tr[data-agent="agent-1"]').innerText(), /GiB \/ 24\.00 GiB/);

  // A request runs: its status and its timeline, live.
  await h.app.inject({ method: 'POST', url: '/requests', payload: submitBody({ requestId: 'page-1' }) });
  await page.locator('#requests tr[data-request="page-1"]').waitFor();
  await settle(h, [agent]);
  await page.locator('#requests tr[data-request="page-1"][data-status="DISPATCHED"]').waitFor();
  const first = (await agent.dispatched())[0]!;
  h.clock.now += 40;
  await agent.started('page-1', first.attempt);
  await model().locator('.run[data-running="page-1"][data-status="RUNNING"]').waitFor();
  assert.deepEqual(await phases('page-1'), ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING']);
  assert.match(
    await model().locator('.run[data-running="page-1"] .seg[data-phase="DISPATCHED"]').innerText(),
    /DISPATCHED 40 ms/,
  );

  // A running request is followed: the text it generates shows as it is streamed.
  const stream = page.locator('#streams tr[data-stream="page-1"][data-invoke="0"]');
  await agent.tokens('page-1', first.attempt, [{ step: 0, invoke: 0, token: 383, text: ' The' }]);
  await stream.locator('pre', { hasText: 'The' }).waitFor();
  await agent.tokens('page-1', first.attempt, [
    { step: 1, invoke: 0, token: 3290, text: ' fabric' },
    { step: 2, invoke: 0, token: 318, text: ' is' },
  ]);
  await stream.locator('pre', { hasText: 'The fabric is' }).waitFor();
  assert.equal(await stream.locator('td').nth(2).innerText(), '3');

  // The operator evicts the replica under it: the scheduler sends the request back to the queue.
  h.clock.now += 1000;
  const evict = await h.app.inject({ method: 'POST', url: '/deployments/evict', payload: { replica: 'gpt2-tiny#1' } });
  assert.equal(evict.statusCode, 202, evict.body);
  const eviction = page.locator('#changes tr[data-kind="eviction"][data-subject="gpt2-tiny#1"]');
  await eviction.waitFor();
  assert.match(await eviction.innerText(), /OPERATOR/);
  for (let i = 0; i < 10 && h.view.state.requests.byId.get('page-1')!.requeues.length === 0; i++)
    await h.scheduler.step();
  const requeue = page.locator('#changes tr[data-kind="requeue"][data-subject="page-1"]');
  await requeue.waitFor();
  const why = await requeue.innerText();
  assert.match(why, /PREEMPTED/);
  assert.match(why, /ReplicaEvictionRequested by /, 'the cause: the eviction');
  assert.match(why, /command .* by /, 'and the operator command that started it');
  await model().locator('ol.queue li[data-queued="page-1"][data-requeued="yes"]').waitFor();
  assert.equal(await model().locator('.run[data-running="page-1"]').count(), 0, 'no longer running');

  // It runs again on a new replica (deployed on demand), with the requeue in its timeline.
  await settle(h, [agent]);
  const again = (await agent.dispatched()).find((d) => d.requestId === 'page-1')!;
  assert.equal(again.attempt, 2);
  await agent.started('page-1', again.attempt);
  await model().locator('.run[data-running="page-1"][data-status="RUNNING"][data-attempt="2"]').waitFor();
  const p = await phases('page-1');
  assert.deepEqual(p.slice(0, 4), ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING']);
  assert.ok(p.includes('REQUEUED') && p.at(-1) === 'RUNNING', p.join(','));
  assert.match(
    await model().locator('.run[data-running="page-1"] .seg[data-phase="REQUEUED"]').innerText(),
    /REQUEUED PREEMPTED/,
  );

  await agent.complete('page-1', again.attempt);
  await page.locator('#requests tr[data-request="page-1"][data-status="COMPLETED"]').waitFor();
  await model().locator('.running .empty').waitFor();
  assert.deepEqual(errors, []);
});

it('answers GET /live with the same facts the page draws', async () => {
  const r = await h.app.inject({ method: 'GET', url: '/live' });
  assert.equal(r.statusCode, 200);
  const live = r.json() as {
    models: { model: string; replicas: { level: string }[]; running: unknown[]; queueLength: number }[];
    changes: { kind: string; subject: string; causes: string[] }[];
  };
  const m = live.models.find((x) => x.model === 'gpt2-tiny')!;
  assert.equal(m.queueLength, 0);
  assert.deepEqual(m.running, []);
  assert.ok(m.replicas.some((x) => x.level === 'HOT'));
  assert.deepEqual(
    live.changes
      .map((c) => [c.kind, c.subject])
      .slice(0, 2)
      .sort(),
    [
      ['eviction', 'gpt2-tiny#1'],
      ['requeue', 'page-1'],
    ],
  );
  assert.ok(
    live.changes.every((c) => c.causes.length > 0),
    'every change says what caused it',
  );
});
