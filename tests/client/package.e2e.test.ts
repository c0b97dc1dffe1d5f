// The SDK as a researcher installs it: `npm pack` of the client workspace, `npm install <tarball>` into a fresh
// `npm init -y` project (CommonJS, nothing else installed; its two dependencies from npm's cache where it has them, else the registry), then — against a started embedded fabric, a real
// process with its agent child — the README's example (a trace with local tokens), a token stream (ndif.stream), the status stream of a
// request over the websocket (every status and console line, in order), `ndif status` from the installed bin,
// the README's CommonJS example by `require`, and TypeScript consumers (a CommonJS and an ES module file) checked
// against the shipped declarations with no other package (no @types/node). The tarball holds only client code and
// the install, besides `ws`, stays under 2 MB. NDIF_TEST_NODES=/path/to/node[:…] runs the consumer's scripts on
// those Node binaries too.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const MAIN = join(root, 'dist', 'fabric', 'embedded', 'main.js');
const INSTALL_LIMIT = 2_000_000;
const nodes = [process.execPath, ...(process.env.NDIF_TEST_NODES ?? '').split(':').filter((p) => p !== '')];

/** The environment without what `npm test` sets for the repository's own package (npm_config_*, npm_package_*). */
function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k) && k !== 'INIT_CWD') env[k] = v;
  return { ...env, ...extra };
}

function sh(
  cmd: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = cleanEnv(),
): { stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

function sizeOf(dir: string, skip: (name: string) => boolean = () => false): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (skip(e.name)) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) n += sizeOf(p);
    else if (e.isFile()) n += statSync(p).size;
  }
  return n;
}

let tmp: string;
let project: string;
let packed: { filename: string; size: number; unpackedSize: number; files: { path: string }[] };
let installLog = '';
let fabric: { child: ChildProcess; url: string; exited: Promise<unknown> } | undefined;

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-sdk-pack-'));
  const pack = sh('npm', ['pack', '--json', '--pack-destination', tmp], join(root, 'client'));
  packed = (JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as (typeof packed)[])[0]!;
  project = join(tmp, 'project');
  mkdirSync(project);
  sh('npm', ['init', '-y'], project);
  assert.equal(
    (JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as { type?: string }).type ?? 'commonjs',
    'commonjs',
  );
  const install = sh(
    'npm',
    ['install', join(tmp, packed.filename), '--prefer-offline', '--no-audit', '--no-fund'],
    project,
  );
  installLog = install.stdout + install.stderr;

  const child = spawn(process.execPath, [MAIN], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NDIF_DATA_DIR: join(tmp, 'data'),
      NDIF_PORT: '0',
      NDIF_LOG_LEVEL: 'warn',
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
    },
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = once(child, 'exit');
  for (const end = Date.now() + 60_000; ; ) {
    const m = /listening on (http:\/\/\S+)/.exec(out);
    if (m) {
      fabric = { child, url: m[1]!, exited };
      break;
    }
    if (child.exitCode !== null || Date.now() > end)
      throw new Error(`the fabric did not start: ${out}\n${err.slice(-3000)}`);
    await sleep(25);
  }
});

after(async () => {
  if (fabric !== undefined && fabric.child.exitCode === null) {
    fabric.child.kill('SIGTERM');
    await fabric.exited;
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const consumerEnv = () => cleanEnv({ NDIF_URL: fabric!.url, NDIF_CACHE_DIR: join(tmp, 'cache') });

/** The package's files an entry loads: its relative imports, followed. */
function importGraph(dir: string, entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (p: string) => {
    if (seen.has(p)) return;
    seen.add(p);
    const src = readFileSync(join(dir, p), 'utf8');
    for (const m of src.matchAll(
      /^\s*(?:import|export)\b[^;]*?from\s*['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]/gm,
    ))
      visit(join(p, '..', (m[1] ?? m[2])!).replaceAll('\\', '/'));
  };
  visit(entry);
  return seen;
}

it('packs only client code, with declarations, and installs without warnings', (t) => {
  const paths = packed.files.map((f) => f.path).sort();
  const allowed =
    /^(package\.json|README\.md|bin\/ndif\.mjs|dist\/(client\/(sdk|cli)\/.+|protocol\/[a-z-]+|gpu-agent\/.+|domain\/.+|command-api\/http\/submit\/[a-z-]+|block-source\/[a-z-]+|auth\/key-format)\.(js|d\.ts))$/;
  assert.deepEqual(
    paths.filter((p) => !allowed.test(p) && !['package.json', 'README.md', 'bin/ndif.mjs'].includes(p)),
    [],
    'nothing but the SDK, the CLI, the local mode and the files they import',
  );
  assert.ok(paths.includes('dist/client/sdk/index.d.ts') && paths.includes('dist/client/sdk/index.js'));
  const installed = join(project, 'node_modules', '@ndif', 'sdk');
  const heavy =
    /from ['"](onnxruntime-node|better-sqlite3|pg|fastify|kafkajs|zod|pino|acorn|@kurrent\/[^'"]+|protobufjs)['"]/;
  // The SDK's and the CLI's entries load nothing heavy: only the local mode's entry reaches the model runtime.
  const light = new Set([
    ...importGraph(installed, 'dist/client/sdk/index.js'),
    ...importGraph(installed, 'dist/client/cli/main.js'),
  ]);
  assert.ok(light.size > 20, `the main entries' graph has ${light.size} files`);
  assert.ok(!light.has('dist/gpu-agent/runtime/index.js'));
  for (const p of light) assert.doesNotMatch(readFileSync(join(installed, p), 'utf8'), heavy, p);
  const local = importGraph(installed, 'dist/client/sdk/local/index.js');
  assert.ok(local.has('dist/gpu-agent/runtime/index.js'), 'the local entry loads the agent runtime');
  const deps = readdirSync(join(project, 'node_modules'))
    .filter((d) => !d.startsWith('.'))
    .sort();
  assert.deepEqual(deps, ['@huggingface', '@ndif', 'ws']);
  assert.doesNotMatch(installLog, /EBADENGINE|npm warn|npm WARN/, installLog);
  const size = sizeOf(
    join(project, 'node_modules'),
    (name) => name === 'ws' || name === '.bin' || name === '.package-lock.json',
  );
  t.diagnostic(
    `tarball ${packed.size} bytes (${packed.unpackedSize} unpacked); installed besides ws: ${size} bytes (${(size / 1e6).toFixed(2)} MB); ws: ${sizeOf(join(project, 'node_modules', 'ws'))} bytes`,
  );
  assert.ok(size < INSTALL_LIMIT, `installed size besides ws ${size} bytes, over ${INSTALL_LIMIT}`);
});

const readmeExample = (name: string) => {
  const readme = readFileSync(join(root, 'client', 'README.md'), 'utf8');
  const m = new RegExp(`<!-- readme-example: ${name} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(readme);
  assert.ok(m, `client/README.md has the ${name} example`);
  return m[1]!;
};

it("runs the README's CommonJS example by require in the npm init -y project", () => {
  writeFileSync(join(project, 'example.js'), readmeExample('cjs'));
  for (const node of nodes) {
    const out = JSON.parse(sh(node, ['example.js'], project, consumerEnv()).stdout.trim()) as {
      tokens: number;
      next: string;
    };
    assert.equal(out.tokens, 7, node);
    assert.equal(typeof out.next, 'string');
  }
});

it("runs the README's example: a trace with a swap and a read, tokens encoded and decoded locally", () => {
  writeFileSync(join(project, 'example.mjs'), readmeExample('esm'));
  for (const node of nodes) {
    const out = JSON.parse(sh(node, ['example.mjs'], project, consumerEnv()).stdout.trim()) as {
      tokens: number;
      hidden: number[];
      next: string;
      statuses: string[];
    };
    assert.equal(out.tokens, 7, node);
    assert.deepEqual(out.hidden, [1, 7, 64]);
    assert.equal(typeof out.next, 'string');
    assert.equal(out.statuses.at(-1), 'COMPLETED');
    for (const s of ['RECEIVED', 'DISPATCHED', 'RUNNING'])
      assert.ok(out.statuses.includes(s), `${s} in ${out.statuses.join(',')}`);
  }
});

it("streams a request's statuses and console lines over the websocket, in order, and reuses the cached tokenizer", () => {
  writeFileSync(
    join(project, 'stream.mjs'),
    `import { Fabric, Tensor } from '@ndif/sdk';
const ndif = new Fabric({ progress: false, onLog: null });
const messages = [];
const mean = await ndif.trace('gpt2-tiny', 'Hello there', async (m) => {
  for (let i = 0; i < 2; i++) console.log('layer', i, (await m.transformer.h[i].output).shape.join('x'));
  return (await m.transformer.h[1].output).mean();
}, { onMessage: (msg) => messages.push({ status: msg.status, cursor: msg.cursor, line: msg.line ?? null }) });
const tok = await ndif.tokenizer('gpt2-tiny');
console.log(JSON.stringify({ messages, mean: mean instanceof Tensor ? mean.item() : null, tokenizer: tok.source }));
ndif.close();
`,
  );
  for (const node of nodes) {
    const out = JSON.parse(sh(node, ['stream.mjs'], project, consumerEnv()).stdout.trim()) as {
      messages: { status: string; cursor: string; line: string | null }[];
      mean: number | null;
      tokenizer: string;
    };
    const statuses = out.messages.map((m) => m.status);
    assert.deepEqual(
      statuses.filter((s) => s !== 'LOG'),
      ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING', 'COMPLETED'],
      node,
    );
    assert.deepEqual(
      out.messages.filter((m) => m.status === 'LOG').map((m) => m.line),
      ['layer 0 1x2x64', 'layer 1 1x2x64'],
    );
    assert.ok(
      statuses.indexOf('LOG') > statuses.indexOf('RUNNING') &&
        statuses.lastIndexOf('LOG') < statuses.indexOf('COMPLETED'),
    );
    const at = out.messages.map((m) => Number.parseInt(m.cursor, 10));
    assert.ok(
      at.every((p, i) => i === 0 || p >= at[i - 1]!),
      'cursors follow the log (the lines of one log batch share its position)',
    );
    assert.equal(typeof out.mean, 'number');
    assert.equal(out.tokenizer, 'cache', 'the tokenizer the example cached, confirmed by the fabric');
  }
});

it('streams generated tokens with ndif.stream from the installed package: each once, in order, the same as the result', () => {
  writeFileSync(
    join(project, 'generate.mjs'),
    `import { Fabric } from '@ndif/sdk';
const ndif = new Fabric({ progress: false, onLog: null });
const tokens = [];
const s = ndif.stream('gpt2-tiny', 'The Eiffel Tower is in', undefined, { maxNewTokens: 6, ignoreEos: true });
for await (const t of s) tokens.push({ step: t.step, token: t.token, text: t.text ?? null });
const done = await s.result;
console.log(JSON.stringify({ tokens, generated: done.meta.generated }));
ndif.close();
`,
  );
  for (const node of nodes) {
    const out = JSON.parse(sh(node, ['generate.mjs'], project, consumerEnv()).stdout.trim()) as {
      tokens: { step: number; token: number; text: string | null }[];
      generated: number[][];
    };
    assert.deepEqual(
      out.tokens.map((t) => t.step),
      [0, 1, 2, 3, 4, 5],
      node,
    );
    assert.deepEqual(
      out.tokens.map((t) => t.token),
      out.generated[0],
      'the streamed tokens are the generated ones',
    );
    assert.ok(out.tokens.every((t) => typeof t.text === 'string'));
  }
});

it('`ndif status` from the installed bin shows the deployment the traces made', () => {
  for (const node of nodes) {
    const bin = join(project, 'node_modules', '@ndif', 'sdk', 'bin', 'ndif.mjs');
    const out = JSON.parse(sh(node, [bin, 'status', '--json'], project, consumerEnv()).stdout) as {
      deployments: { modelKey: string; replicas: { level: string }[] }[];
      agents: { agentId: string }[];
    };
    const d = out.deployments.find((x) => x.modelKey === 'gpt2-tiny');
    assert.ok(d, 'gpt2-tiny deployed on demand');
    assert.ok(d.replicas.some((r) => r.level === 'HOT'));
    assert.equal(out.agents.length, 1);
  }
  const viaNpx = sh(join(project, 'node_modules', '.bin', 'ndif'), ['help'], project, consumerEnv()).stdout;
  assert.match(viaNpx, /status/);
});

it('type-checks TypeScript consumers, CommonJS and ES module, with only the package installed (no @types/node)', () => {
  const consumer = `import { Fabric, Tensor, FabricClientError, type ModelTokenizer, type StatusUpdate } from '@ndif/sdk';
import type { LocalFabric } from '@ndif/sdk/local';
const ndif = new Fabric({ url: 'http://127.0.0.1:1', cacheDir: false });
const tok: Promise<ModelTokenizer> = ndif.tokenizer('gpt2-tiny');
const t: Tensor = Tensor.zeros([1, 2]);
const seen: StatusUpdate[] = [];
async function main(local: LocalFabric) {
  const h = await ndif.trace<Tensor>('gpt2-tiny', 'hi', async (m: any) => m.output, { onStatus: (u) => seen.push(u) });
  const same: Tensor = await local.trace<Tensor>('gpt2-tiny', 'hi', async (m: any) => m.output);
  return h.shape.length + same.shape.length;
}
void main;
void tok; void t; void FabricClientError;
// @ts-expect-error: encode takes text
void tok.then((k) => k.encode(42));
`;
  writeFileSync(join(project, 'check.ts'), consumer);
  writeFileSync(join(project, 'check.mts'), consumer);
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        noEmit: true,
        types: [],
      },
      files: ['check.ts', 'check.mts'],
    }),
  );
  assert.ok(!readdirSync(join(project, 'node_modules')).includes('@types'), 'no @types in the project');
  sh(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], project);
});
