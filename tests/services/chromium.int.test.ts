// The headless Chromium the page tests use (CHROMIUM_PATH, Debian's chromium driven by playwright-core)
// loads a page from a loopback server and runs its script.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { requireService } from './require.js';

const executablePath = requireService('CHROMIUM_PATH', 'NDIF_ALLOW_SKIP_CHROMIUM');

if (executablePath) {
  test('headless Chromium renders a page served on 127.0.0.1', async () => {
    const server = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(
        '<!doctype html><title>t</title><p id="out">static</p><script>document.getElementById("out").textContent = "script ran " + (6 * 7)</script>',
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const browser = await chromium.launch({
      executablePath,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    try {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${port}/`);
      assert.equal(await page.textContent('#out'), 'script ran 42');
    } finally {
      await browser.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
}
