// The status web page in real headless Chromium (CHROMIUM_PATH, provided by the test runner; Debian's chromium):
// it shows the deployed model with its HOT replica, and a request's status changing live, without a reload.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ReportingAgent, settle, startApi, submitBody, type ApiHarness } from '../command-api/harness.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let h: ApiHarness;
let browser: Browser;
let page: Page;
let agent: ReportingAgent;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: run through scripts/test.mjs (it installs Debian's chromium) or set CHROMIUM_PATH`);
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

it('shows the deployed model and a request changing status live', async () => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(h.url);
  await page.waitForSelector('#conn.live');
  await page.waitForSelector('#models .empty');

  const deploy = await h.app.inject({ method: 'POST', url: '/deployments', payload: { model: 'gpt2-tiny' } });
  assert.equal(deploy.statusCode, 202);
  await settle(h, [agent]);
  const model = page.locator('#models tr[data-model="gpt2-tiny"]');
  await model.locator('td.HOT').waitFor();
  assert.equal(await model.getAttribute('data-phase'), 'READY');
  assert.match(await model.innerText(), /gpt2-tiny#1 HOT on agent-1/);
  assert.match(await page.locator('#gpus tr[data-agent="agent-1"]').innerText(), /GiB \/ 24\.00 GiB/);

  await h.app.inject({ method: 'POST', url: '/requests', payload: submitBody({ requestId: 'page-1' }) });
  const row = page.locator('#requests tr[data-request="page-1"]');
  await row.waitFor();
  await settle(h, [agent]);
  await page.locator('#requests tr[data-request="page-1"][data-status="DISPATCHED"]').waitFor();
  const d = (await agent.dispatched())[0]!;
  await agent.started('page-1', d.attempt);
  await page.locator('#requests tr[data-request="page-1"][data-status="RUNNING"]').waitFor();
  // A running request is followed: the text it generates shows as it is streamed.
  const stream = page.locator('#streams tr[data-stream="page-1"][data-invoke="0"]');
  await agent.tokens('page-1', d.attempt, [{ step: 0, invoke: 0, token: 383, text: ' The' }]);
  await stream.locator('pre', { hasText: 'The' }).waitFor();
  await agent.tokens('page-1', d.attempt, [{ step: 1, invoke: 0, token: 3290, text: ' fabric' }, { step: 2, invoke: 0, token: 318, text: ' is' }]);
  await stream.locator('pre', { hasText: 'The fabric is' }).waitFor();
  assert.equal(await stream.locator('td').nth(2).innerText(), '3');
  await agent.complete('page-1', d.attempt);
  await page.locator('#requests tr[data-request="page-1"][data-status="COMPLETED"]').waitFor();
  assert.match(await row.locator('td.status').innerText(), /COMPLETED/);
  assert.deepEqual(errors, []);
});
