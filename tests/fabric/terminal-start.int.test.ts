// `npm start` as a person sees it on a terminal (a real pty from util-linux's `script`): the embedded fabric's
// agent child logs readable lines like its parent (no raw JSON among them), and npm itself warns about nothing in
// the repository's .npmrc (it warned `Unknown project config "onnxruntime-node-install"` on every run).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const MAIN = join(root, 'dist', 'fabric', 'embedded', 'main.js');
const hasScript = spawnSync('script', ['--version']).status === 0;

it("the agent child's log lines are as readable as the fabric's on a terminal", {
  skip: !hasScript && 'no `script`',
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-tty-start-'));
  try {
    // The fabric with stderr on the terminal; its stdout (the banner) passed on by a wrapper that stops it with
    // SIGTERM 3 s after it listened (its agent child has registered and logged by then).
    const wrapper = join(dir, 'start.mjs');
    writeFileSync(
      wrapper,
      `import { spawn } from 'node:child_process';
const c = spawn(process.execPath, [${JSON.stringify(MAIN)}], { stdio: ['ignore', 'pipe', 'inherit'] });
let out = '';
c.stdout.setEncoding('utf8').on('data', (d) => { process.stdout.write(d); out += d; if (/listening on/.test(out) && !c.stopping) { c.stopping = true; setTimeout(() => c.kill('SIGTERM'), 3000); } });
setTimeout(() => c.kill('SIGKILL'), 90000).unref();
c.on('exit', (code) => process.exit(code ?? 0));
`,
    );
    const r = spawnSync('script', ['-qfec', `${process.execPath} ${wrapper}`, '/dev/null'], {
      encoding: 'utf8',
      timeout: 120_000,
      env: {
        ...process.env,
        NDIF_LOG_FORMAT: undefined,
        NDIF_LOG_LEVEL: 'info',
        NDIF_PORT: '0',
        NDIF_DATA_DIR: join(dir, 'data'),
        NDIF_AGENT_GPUS: '1x16GiB',
        NDIF_AGENT_RAM: '8GiB',
      },
    });
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the colour codes of a terminal are what is stripped
    const out = r.stdout.replace(/\x1b\[[0-9;]*m/g, '');
    assert.match(out, /NDIF fabric listening on http:\/\//, out);
    const lines = out.split(/\r?\n/).filter((l) => l.trim() !== '');
    assert.deepEqual(
      lines.filter((l) => l.trimStart().startsWith('{"level"')),
      [],
      'no JSON log lines on the terminal',
    );
    assert.ok(
      lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] \w+ \(gpu-agent\): /.test(l)),
      `a readable line from the agent child:\n${out}`,
    );
    assert.ok(
      lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] \w+ \(fabric\): /.test(l)),
      'and from the fabric',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("npm reads the repository's .npmrc without a warning; onnxruntime-node's download stays off", () => {
  assert.doesNotMatch(readFileSync(join(root, '.npmrc'), 'utf8'), /onnxruntime/, 'no config npm does not know');
  const r = spawnSync('npm', ['run', 'ndif', '--', 'help'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /npm warn/i, r.stderr);
  // npm ci stays safe on a fresh clone: npm skips the package's install script (allowScripts), and the paths
  // that install on their own set the variable the script reads.
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { allowScripts: Record<string, boolean> };
  assert.equal(pkg.allowScripts['onnxruntime-node'], false);
  assert.match(readFileSync(join(root, 'scripts', 'ensure-deps.mjs'), 'utf8'), /ONNXRUNTIME_NODE_INSTALL: 'skip'/);
  const docker = readFileSync(join(root, 'Dockerfile'), 'utf8');
  assert.ok(docker.indexOf('ENV ONNXRUNTIME_NODE_INSTALL=skip') >= 0);
  assert.ok(docker.indexOf('ENV ONNXRUNTIME_NODE_INSTALL=skip') < docker.indexOf('RUN npm ci'));
});
