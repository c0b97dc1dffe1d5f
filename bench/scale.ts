// `npm run bench -- scale`: the control plane at national scale, driven through its real commands, deciders, store
// (embedded SQLite, in memory), view and scheduler, with simulated agents on a compressed clock.
//   1,000 agents × 8 GPUs of 80 GiB; 200 models with Zipf popularity, deployed with replicas in proportion
//   (~3,000 replicas); a burst of 100k requests drained, then 300k more at a steady rate. Each request: submitted,
//   dispatched by the scheduler, started and completed by its agent after a simulated service time.
//   placement_p99_ms        one placement decision (evaluateIndexed) on the live index, sampled during the fill
//   round_p99_ms            one scheduler round's planning (planRound), every round of the run
//   tick_p99_ms             the same for rounds that run the time-based rules
//   placed_event_bytes      largest ReplicaPlaced event data (JSON)
//   heap_mb_after_100k/400k heap after a full GC once 100k / all requests finished
//   rebuild_events_per_s    the view rebuilt from position 0 over the whole log
//   ping_p99_ms_during_fill GET /ping on an HTTP server of this process, every 5 ms, while the replicas are placed
//   lost, duplicates        requests not completed; requests dispatched more than once
// Options: --agents N, --models N, --replicas N, --burst N, --steady N, --rate N (steady requests per simulated s),
// --service-ms N (simulated run time of a request), --placements-per-round N (the scheduler's maxPlacementsPerRound),
// --keep-log FILE (keep the log in this SQLite file).
import { rmSync } from 'node:fs';
import { createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ControlPlaneCommands } from '../command-api/handlers/service.js';
import type { ControlPlaneCommand } from '../command-api/handlers/commands.js';
import { evaluateIndexed } from '../domain/placement/evaluate-indexed.js';
import { GIB } from '../domain/placement/size.js';
import { SqliteEventStore } from '../eventstore/sqlite/store.js';
import { ControlPlaneView } from '../projections/control-plane/live.js';
import { foldControlPlane, initialControlPlaneState } from '../projections/control-plane/state.js';
import { SqliteCheckpoints } from '../projections/runner/sqlite-checkpoints.js';
import { DEFAULT_SCHEDULER_CONFIG } from '../scheduler/config.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { numberArg, quantile, round } from './_numbers.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapMb = () => {
  gc();
  gc();
  return round(process.memoryUsage().heapUsed / 2 ** 20, 1);
};
const turn = () => new Promise<void>((r) => setImmediate(r));

/** A deterministic generator (mulberry32), so every run places the same cluster. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Pinger: GET /ping every 5 ms on a server of this process; the latencies while `on()`. */
async function pinger(on: () => boolean) {
  const server = createServer((_req, res) => res.end('pong'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const samples: number[] = [];
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      const t = performance.now();
      await new Promise<void>((resolve) =>
        get({ host: '127.0.0.1', port, path: '/ping', agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve());
        }).on('error', () => resolve()),
      );
      if (on()) samples.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    samples,
    close: async () => {
      stop = true;
      await loop;
      server.close();
    },
  };
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const agents = numberArg(args, 'agents', 1000);
  const models = numberArg(args, 'models', 200);
  const replicaTarget = numberArg(args, 'replicas', 3000);
  const burst = numberArg(args, 'burst', 100_000);
  const steady = numberArg(args, 'steady', 300_000);
  const rate = numberArg(args, 'rate', 2000);
  const serviceMs = numberArg(args, 'service-ms', 1000);
  const placementsPerRound = numberArg(args, 'placements-per-round', DEFAULT_SCHEDULER_CONFIG.maxPlacementsPerRound);
  const t0 = performance.now();
  const random = rng(22);
  let submitted = 0;
  const finished = () => {
    const t = view.state.requests.totals;
    return t.completed + t.failed + t.cancelled;
  };

  // --keep-log <file>: the log is written to that SQLite file and kept (for profiling a rebuild over it).
  const keep = args.indexOf('--keep-log');
  const logPath = keep >= 0 ? args[keep + 1] : undefined;
  if (logPath !== undefined) rmSync(logPath, { force: true });
  const store = new SqliteEventStore({ path: logPath ?? ':memory:' });
  // Snapshots of the whole view are left out here: the bench measures the control plane's decisions.
  const view = new ControlPlaneView(store, new SqliteCheckpoints(store.db), {
    snapshotEveryEvents: Number.MAX_SAFE_INTEGER,
    snapshotEveryMs: 86_400_000,
    // As the fabric configures it when results are kept forever (resultRetentionMs null below).
    hot: { retention: false },
  });
  await view.start();
  let now = Date.parse('2026-01-05T08:00:00.000Z');
  const iso = () => new Date(now).toISOString();
  const commands = new ControlPlaneCommands(store, { cachedStreams: 200_000 });
  const rounds: number[] = [];
  const ticks: number[] = [];
  const roundsCpu: number[] = [];
  const ticksCpu: number[] = [];
  const scheduler = new Scheduler({
    view,
    commands,
    clock: () => now,
    config: {
      onDemand: () => undefined,
      heartbeatTimeoutMs: 3_600_000,
      resultRetentionMs: null,
      maxPlacementsPerRound: placementsPerRound,
    },
    onRoundPlanned: (ms, _n, tick, cpuMs) => {
      (tick ? ticks : rounds).push(ms);
      (tick ? ticksCpu : roundsCpu).push(cpuMs);
    },
    onError: (e) => {
      throw e;
    },
  });
  let seq = 0;
  const exec = (c: ControlPlaneCommand, actor: string, id = `b-${++seq}`) =>
    commands.execute(c, { commandId: id, actor, at: iso() });

  // Agents and models.
  for (let i = 0; i < agents; i++) {
    const agentId = `agent-${String(i).padStart(4, '0')}`;
    await exec(
      {
        type: 'RegisterAgent',
        agentId,
        bootId: 'boot-1',
        gpus: Array.from({ length: 8 }, (_, index) => ({ index, memoryBytes: 80 * GIB, name: 'H100' })),
        ramBytes: 1024 * GIB,
      },
      `agent:${agentId}`,
    );
    scheduler.observeHeartbeat(agentId, 'boot-1', now);
  }
  const harmonic = Array.from({ length: models }, (_, k) => 1 / (k + 1)).reduce((a, b) => a + b, 0);
  const weight = (k: number) => 1 / (k + 1) / harmonic;
  const cumulative: number[] = [];
  for (let k = 0, c = 0; k < models; k++) {
    c += weight(k);
    cumulative.push(c);
  }
  const pickModel = () => {
    const x = random();
    let lo = 0;
    let hi = models - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid] < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const modelKey = (k: number) => `model-${String(k).padStart(3, '0')}`;

  // Simulated agents: react to the events of the view (a replica placed is HOT at once; a request dispatched is
  // started at once and completed after serviceMs of the simulated clock).
  const hot: { replicaId: string; agentId: string }[] = [];
  const due: { atMs: number; requestId: string; attempt: number; agentId: string }[] = [];
  let placedBytes = 0;
  let dispatchedTwice = 0;
  const dispatched = new Set<string>();
  const unsubscribe = view.onApplied((e) => {
    const d = e.data as Record<string, unknown>;
    if (e.type === 'ReplicaPlaced' || e.type === 'ReplicaRestored' || e.type === 'ReplicaReloadRequired') {
      if (e.type === 'ReplicaPlaced') placedBytes = Math.max(placedBytes, JSON.stringify(e.data).length);
      hot.push({ replicaId: d.replicaId as string, agentId: d.agentId as string });
    } else if (e.type === 'RequestDispatched') {
      const id = d.requestId as string;
      if (dispatched.has(id)) dispatchedTwice++;
      else dispatched.add(id);
      due.push({ atMs: now + serviceMs, requestId: id, attempt: d.attempt as number, agentId: d.agentId as string });
    } else if (e.type === 'RequestCompleted' || e.type === 'RequestFailed' || e.type === 'RequestCancelled') {
      dispatched.delete(d.requestId as string);
    }
  });
  let msg = 0;
  const report = (c: ControlPlaneCommand, agentId: string) =>
    commands.execute(c, { commandId: `agent:${agentId}:m${++msg}`, actor: `agent:${agentId}`, at: iso() });
  // Agents report concurrently (each is its own process): up to 16 reports in flight, as the command API would
  // receive them; a request's started report goes before its completed one.
  const AGENT_REPORTS_IN_FLIGHT = 16;
  const actAgents = async () => {
    let acted = 0;
    const pending: Promise<unknown>[] = [];
    const flush = async () => {
      await Promise.all(pending.splice(0));
      await turn();
    };
    for (const h of hot.splice(0)) {
      pending.push(
        report(
          {
            type: 'ReportReplicaHot',
            replicaId: h.replicaId,
            agentId: h.agentId,
            agentMessageId: `hot-${h.replicaId}`,
            loadMs: 5,
          },
          h.agentId,
        ),
      );
      acted++;
      if (pending.length >= AGENT_REPORTS_IN_FLIGHT) await flush();
    }
    let keep = 0;
    for (const x of due) {
      if (x.atMs > now) {
        due[keep++] = x;
        continue;
      }
      const base = { requestId: x.requestId, attempt: x.attempt, agentId: x.agentId };
      pending.push(
        report(
          { type: 'ReportRequestStarted', ...base, agentMessageId: `s-${x.requestId}-${x.attempt}` },
          x.agentId,
        ).then(() =>
          report(
            {
              type: 'ReportRequestCompleted',
              ...base,
              agentMessageId: `c-${x.requestId}-${x.attempt}`,
              resultRef: `blob:${x.requestId}`,
              bytes: 16,
              sha256: 'ab'.repeat(32),
            },
            x.agentId,
          ),
        ),
      );
      acted++;
      if (pending.length >= AGENT_REPORTS_IN_FLIGHT) await flush();
    }
    due.length = keep;
    await flush();
    return acted;
  };

  // Deployments in proportion to popularity (at least one replica each).
  let filling = false;
  const ping = await pinger(() => filling);
  for (let k = 0; k < models; k++) {
    const weightsBytes = Math.round((2 + random() * 38) * GIB);
    // A deploy adds at most 16 replicas: deploy again until the model has its share.
    for (let left = Math.max(1, Math.round(replicaTarget * weight(k))); left > 0; left -= 16)
      await exec(
        {
          type: 'RequestDeployment',
          modelKey: modelKey(k),
          settings: { weightsBytes, autoscale: { enabled: false } },
          replicas: Math.min(16, left),
          onDemand: false,
        },
        'operator:bench',
      );
    await turn();
  }
  const placeSamples: number[] = [];
  const placeCpu: number[] = [];
  // 20 decisions on the live index per step of the fill, each timed by the wall clock and by the process's CPU time
  // (the difference is time this process was not running), a turn of the event loop between them.
  const samplePlacement = async () => {
    const idx = view.state.cluster.index.capacity;
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      const c = process.cpuUsage();
      evaluateIndexed(idx, {
        modelKey: modelKey(pickModel()),
        sizeBytes: Math.round((3 + random() * 45) * GIB),
        gpus: 1,
        nowMs: now,
        force: false,
      });
      const cpu = process.cpuUsage(c);
      placeSamples.push(performance.now() - t);
      placeCpu.push((cpu.user + cpu.system) / 1000);
      if (i % 4 === 3) await turn();
    }
  };
  filling = true;
  const fillStart = performance.now();
  const progress = setInterval(() => {
    const c = view.state.cluster.index.byState;
    console.error(
      `[scale] ${round((performance.now() - t0) / 1000, 1)} s: requested ${c.get('REQUESTED')?.size ?? 0}, hot ${c.get('HOT')?.size ?? 0}, submitted ${submitted}, finished ${finished()}, due ${due.length}, position ${view.position}`,
    );
  }, 5000);
  progress.unref();
  for (;;) {
    await samplePlacement();
    const r = await scheduler.step();
    const acted = await actAgents();
    if (r.executed.some((x) => x.refused))
      console.error('[scale] refused', r.executed.filter((x) => x.refused).slice(0, 3));
    if (r.executed.length === 0 && acted === 0) break;
  }
  filling = false;
  const fillMs = performance.now() - fillStart;
  const replicasHot = view.state.cluster.index.byState.get('HOT')?.size ?? 0;

  // Requests: the burst, then the steady stream; the clock jumps to the next completion when nothing is left to do.
  // Submissions from many clients at once: up to 16 in flight.
  const submit = async (n: number) => {
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < n; i++) {
      const id = `r-${submitted++}`;
      pending.push(
        exec(
          {
            type: 'SubmitRequest',
            requestId: id,
            modelKey: modelKey(pickModel()),
            submitter: `key:user${submitted % 500}`,
            priority: false,
            trusted: true,
            payload: { prompt: 'x' },
          },
          `key:user${submitted % 500}`,
          `submit-${id}`,
        ),
      );
      if (pending.length >= 16) {
        await Promise.all(pending.splice(0));
        await turn();
      }
    }
    await Promise.all(pending);
  };
  const drainUntil = async (target: number, arrivals: () => Promise<void>) => {
    while (finished() < target) {
      await arrivals();
      await scheduler.step();
      const acted = await actAgents();
      if (acted === 0) {
        const next = due.reduce((m, x) => Math.min(m, x.atMs), Number.POSITIVE_INFINITY);
        now = Number.isFinite(next) ? Math.max(now + 1, next) : now + 100;
        for (let i = 0; i < agents; i++)
          scheduler.observeHeartbeat(`agent-${String(i).padStart(4, '0')}`, 'boot-1', now);
      }
    }
    await view.catchUp();
  };
  const cpuS = (since: NodeJS.CpuUsage) => {
    const c = process.cpuUsage(since);
    return (c.user + c.system) / 1e6;
  };
  const burstStart = performance.now();
  const burstCpu = process.cpuUsage();
  await submit(burst);
  await drainUntil(burst, async () => undefined);
  const burstMs = performance.now() - burstStart;
  const burstCpuS = cpuS(burstCpu);
  const heapAfter100k = heapMb();

  const steadyStart = performance.now();
  const steadyCpu = process.cpuUsage();
  let lastArrival = now;
  await drainUntil(burst + steady, async () => {
    const n = Math.min(burst + steady - submitted, Math.floor(((now - lastArrival) * rate) / 1000));
    if (n > 0) {
      lastArrival = now;
      await submit(n);
    } else if (submitted < burst + steady && due.length === 0) now += 100;
  });
  const steadyMs = performance.now() - steadyStart;
  const steadyCpuS = cpuS(steadyCpu);
  const heapAfter400k = heapMb();
  unsubscribe();
  clearInterval(progress);
  await ping.close();
  await scheduler.stop();
  const totals = view.state.requests.totals;
  const head = await store.headPosition();
  await view.stop();

  // Rebuild from position 0 over the whole log.
  store.db.prepare(`DELETE FROM projection_checkpoints WHERE name = 'control-plane'`).run();
  const rebuilt = new ControlPlaneView(store, new SqliteCheckpoints(store.db), {
    snapshotEveryEvents: Number.MAX_SAFE_INTEGER,
    snapshotEveryMs: 86_400_000,
  });
  const tr = performance.now();
  const rebuildCpu = process.cpuUsage();
  await rebuilt.start();
  await rebuilt.waitForPosition(head, 600_000);
  const rebuildPerS = (rebuilt.status().eventsApplied / (performance.now() - tr)) * 1000;
  const rebuildCpuPerS = rebuilt.status().eventsApplied / cpuS(rebuildCpu);
  await rebuilt.stop();
  // The fold alone, over events already read (the rebuild above includes reading and parsing them): page by page,
  // only the folds timed (the whole log in one array would be gigabytes at the full size).
  const folded = initialControlPlaneState();
  let foldMs = 0;
  let foldedEvents = 0;
  for (let after = 0; ; ) {
    const page = await store.readAll({ afterPosition: after, limit: 256 });
    if (page.length === 0) break;
    const tf = performance.now();
    foldControlPlane(page, folded);
    foldMs += performance.now() - tf;
    foldedEvents += page.length;
    after = page[page.length - 1].position;
  }
  const foldPerS = (foldedEvents / foldMs) * 1000;
  await store.close();

  const q = (xs: number[]) => round(quantile(xs, 0.99), 2);
  console.log(
    JSON.stringify({
      events: head,
      replicas_hot: replicasHot,
      fill_s: round(fillMs / 1000, 1),
      burst_s: round(burstMs / 1000, 1),
      steady_s: round(steadyMs / 1000, 1),
      // CPU time of this process (all its threads: GC helpers included), a measure that the machine's load does not
      // stretch as it does the wall times.
      cpu_ms_per_request_burst: round((burstCpuS / burst) * 1000, 3),
      cpu_ms_per_request_steady: round((steadyCpuS / steady) * 1000, 3),
      rebuild_cpu_events_per_s: Math.round(rebuildCpuPerS),
      rounds: rounds.length + ticks.length,
      round_p50_ms: round(quantile(rounds, 0.5), 3),
      round_cpu_p50_ms: round(quantile(roundsCpu, 0.5), 3),
      round_cpu_p99_ms: round(quantile(roundsCpu, 0.99), 2),
      tick_cpu_p50_ms: round(quantile(ticksCpu, 0.5), 3),
      tick_cpu_p99_ms: round(quantile(ticksCpu, 0.99), 2),
      placement_cpu_p99_ms: round(quantile(placeCpu, 0.99), 3),
      fold_events_per_s: Math.round(foldPerS),
      tick_p50_ms: round(quantile(ticks, 0.5), 3),
      placement_p50_ms: round(quantile(placeSamples, 0.5), 3),
      ping_p50_ms: round(quantile(ping.samples, 0.5), 2),
      load_avg_1m: round(loadavg()[0], 1),
      total_s: round((performance.now() - t0) / 1000, 1),
      ping_samples: ping.samples.length,
    }),
  );
  return {
    agents,
    placement_p99_ms: q(placeSamples),
    round_p99_ms: q(rounds),
    tick_p99_ms: q(ticks),
    placed_event_bytes: placedBytes,
    heap_mb_after_100k: heapAfter100k,
    heap_mb_after_400k: heapAfter400k,
    rebuild_events_per_s: Math.round(rebuildPerS),
    ping_p99_ms_during_fill: q(ping.samples),
    lost: submitted - totals.completed,
    duplicates: dispatchedTwice,
  };
}
