// The IPC adapter (the embedded agent process's transport) passes the transport contract: each client is a
// separate connection to one server in front of one broker, as agent processes are.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InProcessBroker, IpcTransport, IpcTransportServer } from '../../transport/index.js';
import { transportContract } from './contract.js';
import { until } from '../support/until.js';

transportContract('ipc', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-ipc-'));
  const broker = new InProcessBroker({ partitions: 4 });
  const server = await IpcTransportServer.listen({ path: join(dir, 't.sock'), broker });
  return {
    partitions: 4,
    open: () => IpcTransport.connect({ path: server.path }),
    dispose: async () => {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('IPC transport across processes', () => {
  it("gives the message a killed client was handling to the group's next member, and tells a client the server went away", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-ipc-'));
    const broker = new InProcessBroker({ partitions: 2 });
    const server = await IpcTransportServer.listen({ path: join(dir, 't.sock'), broker });
    try {
      const fixture = fileURLToPath(new URL('./fixtures/stuck-ipc-consumer.js', import.meta.url));
      const child = spawn(process.execPath, [fixture, server.path, 'crash', 'g'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const lines: string[] = [];
      const exited = once(child, 'exit');
      child.stdout.setEncoding('utf8').on('data', (d: string) => lines.push(...d.split('\n').filter(Boolean)));
      await until('the child subscribed', () => lines.includes('subscribed'));
      const publisher = await IpcTransport.connect({ path: server.path });
      await publisher.publish('crash', [{ key: 'agent-1', value: Buffer.from('one') }]);
      await until('the child handling one', () => lines.includes('handling one'));
      child.kill('SIGKILL');
      await exited;
      const got: string[] = [];
      const sub = await publisher.subscribe('crash', 'g', async (m) => void got.push(m.value.toString()), {
        fromBeginning: true,
      });
      await until('a delivery', () => got.length > 0);
      assert.deepEqual(got, ['one']);
      await sub.close();

      let lost: Error | undefined;
      const watcher = await IpcTransport.connect({ path: server.path, onDisconnect: (e) => (lost = e) });
      await server.close();
      await until('the subscription lost', () => lost !== undefined);
      assert.equal((lost as Error & { code?: string }).code, 'TRANSPORT_UNAVAILABLE');
      await assert.rejects(
        watcher.publish('crash', [{ key: 'k', value: Buffer.from('x') }]),
        (e: unknown) => (e as { code?: string }).code === 'TRANSPORT_UNAVAILABLE',
      );
      await publisher.close();
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
