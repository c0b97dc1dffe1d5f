#!/usr/bin/env node
// The `ndif` command of the @ndif/sdk package: runs the package's compiled CLI (dist/client/cli/main.js).
const entry = new URL('../dist/client/cli/main.js', import.meta.url);
const { main } = await import(entry.href).catch((e) => {
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' || !String(e.message).includes(entry.pathname)) throw e;
  process.stderr.write(`ndif: ${entry.pathname} is missing; build the package first (npm run build -w client)\n`);
  process.exit(1);
});
const ctl = new AbortController();
process.once('SIGINT', () => ctl.abort());
process.exitCode = await main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  signal: ctl.signal,
});
