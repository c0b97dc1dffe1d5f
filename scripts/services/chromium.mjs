// Headless Chromium for the page tests: Debian's chromium package, installed on first need.
import { existsSync } from 'node:fs';
import { aptInstall } from './apt.mjs';

const CHROMIUM = '/usr/bin/chromium';

/** Returns { env: { CHROMIUM_PATH } }, installing Debian's chromium when it is missing. */
export async function ensureChromium() {
  const given = process.env.CHROMIUM_PATH;
  if (given) {
    if (!existsSync(given)) throw new Error(`CHROMIUM_PATH=${given} does not exist`);
    return { env: { CHROMIUM_PATH: given } };
  }
  if (!existsSync(CHROMIUM)) await aptInstall(['chromium'], 'headless Chromium for the page tests');
  if (!existsSync(CHROMIUM)) throw new Error(`the chromium package was installed but ${CHROMIUM} is missing`);
  return { env: { CHROMIUM_PATH: CHROMIUM } };
}
