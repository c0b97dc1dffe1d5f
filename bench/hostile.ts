// `npm run bench -- hostile`: the shared service under careless and hostile keys (issue 20), on the embedded fabric's
// real processes with auth on (an operator key from NDIF_BOOTSTRAP_KEY, one ordinary key, one trusted key):
// (a) parked: the ordinary key parks a request on a promise that never settles (10 min timeout) on gpt2-tiny's one
//     replica, then submits 10 short requests one after the other (a researcher's loop): their p99 wait (received →
//     finished) over their median solo run (the same requests before the parked one); the parked request is
//     cancelled once they finish, or after 20 s (then the rest run after it);
// (b) hog: the trusted key's block pushes 100 MB Float32Arrays in a synchronous loop (stopping by itself at 4 GB, so a
//     regression cannot take the shared machine down; the agent's limit is NDIF_AGENT_MEMORY_MAX=1GiB) while 10 of the
//     ordinary key's requests are queued: agent deaths (restarts the control plane saw) and how many of the 10 complete;
// (c) tokenizer: an operator registers a copy of gpt2-tiny whose tokenizer.json is 35 MB; 16 parallel cold
//     `GET /models/<key>/tokenizer` of the ordinary key: the control plane's RSS growth (peak, sampled every 20 ms)
//     and whether it still answers;
// (d) secrets: a trusted block looks for the operator-grade secrets the fabric was started with (NDIF_BOOTSTRAP_KEY,
//     NDIF_RESULT_SECRET) in its environment and in every file it can read that may hold them (/proc/*/environ,
//     /proc/*/cmdline, the fabric's data folder): how many distinct secrets it found.
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ensureModel } from '../catalog/bundled/generate-model.js';
import { decodeResultContainer } from '../protocol/result-container.js';
import { startEmbeddedFabric, stopEmbeddedFabric, type EmbeddedFabric } from './_embedded-fabric.js';
import { median, quantile, round } from './_numbers.js';

const PROMPT = 'The Eiffel Tower is in';
const SHORT = 'async (m) => (await m.transformer.h[1].output).shape';
const PARKED = 'async (m) => { await m.transformer.h[0].output; await new Promise(() => {}); }';
const HOG = `async (m) => {
  const kept = [];
  for (let i = 0; i < 40; i++) kept.push(new Float32Array(25_000_000).fill(i));
  return kept.length;
}`;
const FINAL = ['COMPLETED', 'ERROR', 'CANCELLED'];

type Json = Record<string, unknown>;

/** A block that searches what a trusted block can read for the given secrets; returns where it found each. */
function secretsBlock(secrets: Record<string, string>, dataDir: string): string {
  return `async () => {
  const fs = process.getBuiltinModule('fs');
  const path = process.getBuiltinModule('path');
  // Reversed in the request (the payload is stored in the event log, where the search would find it otherwise).
  const secrets = Object.fromEntries(Object.entries(${JSON.stringify(
    Object.fromEntries(Object.entries(secrets).map(([k, v]) => [k, [...v].reverse().join('')])),
  )}).map(([k, v]) => [k, [...v].reverse().join('')]));
  const found = {};
  const look = (where, text) => {
    for (const [name, value] of Object.entries(secrets)) if (text.includes(value)) (found[name] ??= []).push(where);
  };
  look('process.env', JSON.stringify(process.env));
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\\d+$/.test(d))) {
    for (const f of ['environ', 'cmdline']) {
      try { look('/proc/' + pid + '/' + f, fs.readFileSync('/proc/' + pid + '/' + f, 'latin1')); } catch {}
    }
  }
  const walk = (dir, depth) => {
    let names = [];
    try { names = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
    for (const d of names) {
      const p = path.join(dir, d.name);
      if (d.isDirectory() && depth < 6) walk(p, depth + 1);
      else if (d.isFile()) {
        try { if (fs.statSync(p).size < 64 * 1024 * 1024) look(p, fs.readFileSync(p, 'latin1')); } catch {}
      }
    }
  };
  walk(${JSON.stringify(dataDir)}, 0);
  return found;
}`;
}

function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const say = (what: string) =>
    process.stderr.write(`hostile: ${what} at ${round((performance.now() - t0) / 1000, 1)} s\n`);
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-hostile-'));
  const dataDir = join(tmp, 'data');
  const bootstrap = `ndif_${randomBytes(8).toString('hex')}_${randomBytes(32).toString('base64url').slice(0, 43)}`;
  const resultSecret = randomBytes(32).toString('base64url');
  let fabric: EmbeddedFabric | undefined;
  try {
    fabric = await startEmbeddedFabric(dataDir, {
      NDIF_AUTH: 'on',
      NDIF_BOOTSTRAP_KEY: bootstrap,
      NDIF_RESULT_SECRET: resultSecret,
      NDIF_AGENT_RESTART_MS: '100',
      NDIF_AGENT_MEMORY_MAX: '1GiB',
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      NDIF_RATE_LIMIT: 'off',
      NDIF_LOG_LEVEL: 'fatal',
    });
    const { url } = fabric;
    const call = async (key: string, path: string, body?: unknown): Promise<Json> => {
      const r = await fetch(`${url}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const out = (await r.json()) as Json;
      if (r.status >= 400) throw new Error(`${path}: ${r.status} ${JSON.stringify(out).slice(0, 300)}`);
      return out;
    };
    const newKey = async (label: string, trusted: boolean) =>
      String((await call(bootstrap, '/keys', { label, trusted })).key);
    const ordinary = await newKey('ordinary', false);
    const trusted = await newKey('trusted', true);
    const submit = (key: string, requestId: string, block: string, extra: Json = {}) =>
      call(key, '/requests', { requestId, model: 'gpt2-tiny', invokes: [{ input: PROMPT, block }], ...extra });
    const finished = async (key: string, ids: string[], timeoutMs: number): Promise<Map<string, Json>> => {
      const end = Date.now() + timeoutMs;
      const done = new Map<string, Json>();
      while (done.size < ids.length && Date.now() < end) {
        for (const id of ids) {
          if (done.has(id)) continue;
          const v = await call(key, `/requests/${id}`).catch(() => ({}) as Json);
          if (FINAL.includes(String(v.status))) done.set(id, v);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return done;
    };
    const waitS = (v: Json) => {
      const t = v.timestamps as { receivedAt: string; finishedAt: string };
      return (Date.parse(t.finishedAt) - Date.parse(t.receivedAt)) / 1000;
    };
    const restarts = async () =>
      ((await call(bootstrap, '/agents')).agents as Array<{ health?: { restarts?: number } }>)[0]?.health?.restarts ??
      0;

    say('started');
    // Warm-up: deploys gpt2-tiny on demand (one replica) and starts the sandbox pool.
    await submit(ordinary, 'warm-up', SHORT);
    await finished(ordinary, ['warm-up'], 60_000);

    say('warmed up');
    // (a) parked
    const soloIds = Array.from({ length: 10 }, (_, i) => `solo-${i}`);
    const solo: number[] = [];
    for (const id of soloIds) {
      await submit(ordinary, id, SHORT);
      solo.push(waitS((await finished(ordinary, [id], 20_000)).get(id)!));
    }
    await submit(ordinary, 'parked', PARKED, { timeoutMs: 600_000 });
    for (let i = 0; i < 100; i++) {
      if ((await call(ordinary, '/requests/parked')).status === 'RUNNING') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // One after the other, as a researcher's loop submits them: each one's wait is its own, not the others'.
    const otherIds = Array.from({ length: 10 }, (_, i) => `other-${i}`);
    const others = new Map<string, Json>();
    const parkedUntil = Date.now() + 20_000;
    for (const id of otherIds) {
      await submit(ordinary, id, SHORT);
      const v = (await finished(ordinary, [id], Math.max(0, parkedUntil - Date.now()))).get(id);
      if (v !== undefined) others.set(id, v);
      else break;
    }
    await call(ordinary, '/requests/parked/cancel', {});
    for (const id of otherIds) {
      if (others.has(id)) continue;
      if (!(await call(ordinary, `/requests/${id}`).catch(() => null))) await submit(ordinary, id, SHORT);
      const v = (await finished(ordinary, [id], 20_000)).get(id);
      if (v !== undefined) others.set(id, v);
    }
    const othersWait = [...others.values()].map(waitS);
    const parkedRatio = quantile(othersWait, 0.99) / median(solo);

    say('parked done');
    // (d) secrets
    await submit(
      trusted,
      'secrets',
      secretsBlock({ NDIF_BOOTSTRAP_KEY: bootstrap, NDIF_RESULT_SECRET: resultSecret }, dataDir),
    );
    const sv = (await finished(trusted, ['secrets'], 30_000)).get('secrets');
    let found: Record<string, string[]> | null = null;
    if (sv?.status === 'COMPLETED') {
      const r = await fetch(`${url}/requests/secrets/result`, { headers: { 'x-api-key': trusted } });
      const c = decodeResultContainer(new Uint8Array(await r.arrayBuffer()));
      found = (c.invokes[0]?.tree ?? {}) as Record<string, string[]>;
    }

    say('secrets done');
    // (b) hog
    const before = await restarts();
    await submit(trusted, 'hog', HOG);
    const queuedIds = Array.from({ length: 10 }, (_, i) => `queued-${i}`);
    for (const id of queuedIds) await submit(ordinary, id, SHORT);
    const queued = await finished(ordinary, queuedIds, 40_000);
    say('queued done');
    const hog = (await finished(trusted, ['hog'], 10_000)).get('hog');
    const hogDeaths = (await restarts()) - before;
    const hogCompleted = [...queued.values()].filter((v) => v.status === 'COMPLETED').length;

    say('hog done');
    // (c) tokenizer
    const bigDir = join(tmp, 'big-tokenizer');
    cpSync(ensureModel('gpt2-tiny'), bigDir, { recursive: true });
    const tok = JSON.parse(readFileSync(join(bigDir, 'tokenizer.json'), 'utf8')) as Json;
    const have = JSON.stringify(tok).length;
    tok.padding_note = 'x'.repeat(Math.max(0, 35 * 1024 * 1024 - have));
    writeFileSync(join(bigDir, 'tokenizer.json'), JSON.stringify(tok));
    await call(bootstrap, '/models', { model: 'big-tokenizer', dir: bigDir });
    // The control-plane process (under the fabric's supervisor), which serves the route.
    const pid = fabric.controlPlanePid()!;
    const rss0 = rssMb(pid);
    let peak = rss0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 20);
    const fetched = await Promise.allSettled(
      Array.from({ length: 16 }, () =>
        fetch(`${url}/models/big-tokenizer/tokenizer`, { headers: { 'x-api-key': ordinary } }).then(async (r) => {
          await r.arrayBuffer();
          return r.status;
        }),
      ),
    );
    clearInterval(sampler);
    peak = Math.max(peak, rssMb(pid));
    const alive =
      fabric.child.exitCode === null &&
      fabric.child.signalCode === null &&
      fabric.controlPlanePid() === pid && // not restarted by the supervisor either
      (await fetch(`${url}/models`, { headers: { 'x-api-key': ordinary } }).then(
        (r) => r.status === 200,
        () => false,
      ));

    return {
      parked_others_p99_over_run: round(parkedRatio),
      hog_agent_deaths: hogDeaths,
      hog_others_completed: hogCompleted,
      tokenizer_fetch_rss_growth_mb: round(peak - rss0, 1),
      control_plane_alive: alive,
      trusted_env_secrets: found === null ? null : Object.keys(found).length,
      parked_others_completed: [...others.values()].filter((v) => v.status === 'COMPLETED').length,
      parked_others_p99_s: round(quantile(othersWait, 0.99)),
      solo_median_s: round(median(solo)),
      hog_status: hog ? `${hog.status}${hog.error ? ` ${(hog.error as Json).type}` : ''}` : 'unfinished',
      hog_message: hog?.error ? String((hog.error as Json).message).slice(0, 400) : null,
      queued_statuses: [...new Set([...queued.values()].map((v) => String(v.status)))],
      tokenizer_fetches_ok: fetched.filter((f) => f.status === 'fulfilled' && f.value === 200).length,
      secrets_found_at: found,
      secrets_request: sv ? String(sv.status) : 'unfinished',
      total_s: round((performance.now() - t0) / 1000),
    };
  } finally {
    await stopEmbeddedFabric(fabric);
    rmSync(tmp, { recursive: true, force: true });
  }
}
