// The embedded fabric as `npm start` runs it, for fault tests: `dist/fabric/embedded/main.js` on a free port
// over a temp data folder (SQLite): a supervisor process, its control-plane child and that one's GPU agent child
// (each restarted by its parent when it dies). The agent's pid is read from /proc (the descendant of the fabric
// process running gpu-agent.js).
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiKeys } from '../../auth/keys.js';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { COMPRESSED_TIME, type FaultFabric, type FaultFabricOptions } from './fabric.js';
import { agentBack, bootOf } from './http.js';
import { FabricProcess, controlPlaneOf, descendantsOf, pidAlive } from './process.js';

export async function startEmbedded(options: FaultFabricOptions = {}): Promise<FaultFabric> {
  const own = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'ndif-faults-'));
  const keys = new Map<string, string>();
  if (options.apiKeys !== undefined) {
    mkdirSync(join(dataDir, 'data'), { recursive: true });
    const store = new SqliteApiKeyStore({ path: join(dataDir, 'data', 'keys.sqlite') });
    const apiKeys = new ApiKeys(store);
    for (const k of options.apiKeys) {
      const tags = { trusted: k.trusted ?? true, operator: k.operator ?? false, priority: k.priority ?? false };
      keys.set(k.label, (await apiKeys.create({ label: k.label, tags }, 'test', new Date().toISOString())).key);
    }
    await store.close();
  }
  const operatorKey = options.apiKeys?.find((k) => k.operator)?.label;
  const env: NodeJS.ProcessEnv = {
    ...COMPRESSED_TIME,
    NDIF_DATA_DIR: join(dataDir, 'data'),
    NDIF_PORT: '0',
    NDIF_AGENT_GPUS: options.gpus ?? '1x16GiB',
    NDIF_AGENT_RAM: '8GiB',
    ...(options.models === undefined ? {} : { NDIF_MODELS: options.models }),
    ...(options.apiKeys === undefined ? {} : { NDIF_AUTH: 'on', NDIF_RATE_LIMIT: 'off' }),
    ...options.env,
  };
  const start = async () =>
    (await FabricProcess.start('fabric', 'embedded/main', env, /listening on (http:\/\/\S+)/)).proc;
  let main = await start();
  const urlOf = (p: FabricProcess) => /listening on (http:\/\/\S+)/.exec(p.stdout())![1]!;
  const retired: FabricProcess[] = [];
  const agentPid = () => (main.alive ? descendantsOf(main.pid, 'gpu-agent.js')[0] : undefined);
  // With `killControlPlaneOnly`, what dies is the control-plane process under the fabric's supervisor, which starts it
  // again on the same port: killed is its pid and its agent's, to see both gone and a new control plane serving.
  let killed: { controlPlane: number; agent: number | undefined } | undefined;

  const fabric: FaultFabric = {
    mode: 'embedded',
    get commandUrl() {
      return urlOf(main);
    },
    get queryUrl() {
      return urlOf(main);
    },
    agentId: env.NDIF_AGENT_ID ?? 'local-agent',
    operatorHeaders: operatorKey === undefined ? {} : { authorization: `Bearer ${keys.get(operatorKey)}` },
    keys,
    agentPid,
    async killAgent() {
      const end = Date.now() + 30_000;
      let pid = agentPid();
      while (pid === undefined && Date.now() < end) {
        await sleep(20);
        pid = agentPid();
      }
      if (pid === undefined) throw new Error('no agent process to kill');
      const bootId = await bootOf(fabric);
      process.kill(pid, 'SIGKILL');
      return { pid, bootId };
    },
    freezeAgent() {
      const pid = agentPid();
      if (pid === undefined) throw new Error('no agent process to freeze');
      process.kill(pid, 'SIGSTOP');
    },
    thawAgent() {
      const pid = agentPid();
      if (pid !== undefined) process.kill(pid, 'SIGCONT');
    },
    agentBack(killed, timeoutMs = 30_000) {
      return agentBack(fabric, killed, timeoutMs);
    },
    async killControlPlane() {
      if (options.killControlPlaneOnly) {
        const controlPlane = controlPlaneOf(main.pid);
        if (controlPlane === undefined) throw new Error('no control-plane process to kill');
        killed = { controlPlane, agent: agentPid() };
        process.kill(controlPlane, 'SIGKILL');
        return;
      }
      await main.kill9();
      retired.push(main);
    },
    async restartControlPlane() {
      if (killed === undefined) {
        main = await start();
        return;
      }
      // The supervisor does it: a new control plane, serving on the same URL, and the old one's agent gone.
      const was = killed;
      killed = undefined;
      const end = Date.now() + 60_000;
      for (;;) {
        const now = controlPlaneOf(main.pid);
        const serving =
          now !== undefined &&
          now !== was.controlPlane &&
          (await fetch(`${urlOf(main)}/ping`).then(
            (r) => r.ok,
            () => false,
          ));
        if (serving && !pidAlive(was.controlPlane) && (was.agent === undefined || !pidAlive(was.agent))) return;
        if (!main.alive || Date.now() > end)
          throw new Error(`the supervisor did not bring the control plane back: ${main.stderrTail()}`);
        await sleep(50);
      }
    },
    async restartControlPlaneCleanly() {
      await main.stop();
      retired.push(main);
      main = await start();
    },
    async openStore() {
      const store = new SqliteEventStore({ path: join(dataDir, 'data', 'events.sqlite') });
      return { store, close: () => store.close() };
    },
    loggedErrors() {
      return [...retired, main].flatMap((p) => p.errors);
    },
    processes() {
      return [main];
    },
    async stop() {
      return [{ name: 'fabric', code: await main.stop() }];
    },
    async close() {
      await main.stop();
      if (own) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return fabric;
}
