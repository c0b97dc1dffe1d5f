// The scheduler leader's lease and fencing on a real PostgreSQL server: one holder at a time, a new epoch at every
// change of leader, a crashed holder's lease taken once it expires, a holder whose lease was taken finds out at its
// next renewal; and the command handlers record a leader's epoch on its events and refuse an older epoch
// (CP_LEADER_EPOCH_STALE), also after a restart (the epoch is read back from the stored events).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { LeaderLease } from '../../fabric/leader-lease.js';
import { isFabricError } from '../../protocol/errors.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from '../eventstore/pg-env.js';

if (postgresAvailable('the leader lease')) {
  describe('leader lease (PostgreSQL)', () => {
    const leases: LeaderLease[] = [];
    const open = async (name: string, ttlMs = 1000) => {
      const l = await LeaderLease.open({ connectionString: databaseUrl ?? '', name, ttlMs, retryMs: 50 });
      leases.push(l);
      return l;
    };
    after(async () => {
      for (const l of leases) await l.close().catch(() => undefined);
    });

    it('has one holder at a time and a new epoch at each change of leader', async () => {
      const name = `t-${randomUUID()}`;
      const a = await open(name, 60_000);
      const b = await open(name, 60_000);
      const la = await a.lead();
      assert.equal(la.epoch, 1);
      assert.equal(await b.tryAcquire(), undefined, 'held by a');
      assert.deepEqual(await b.current(), { holder: a.holder, epoch: 1 });
      await la.release();
      assert.equal(await la.ended, 'released');
      const lb = await b.lead();
      assert.equal(lb.epoch, 2);
      assert.equal(await a.tryAcquire(), undefined, 'held by b');
      await lb.release();
    });

    it('hands a crashed holder’s lease to a standby once it expires, with a higher epoch', async () => {
      const name = `t-${randomUUID()}`;
      const crashed = await open(name, 800);
      const standby = await open(name, 800);
      const held = await crashed.lead();
      const waiting = standby.lead();
      await crashed.close(); // no more renewals: as after kill -9
      assert.equal(await held.ended, 'lost', 'the holder itself counts the lease as lost once it cannot renew');
      const took = await waiting;
      assert.equal(took.epoch, held.epoch + 1);
      assert.deepEqual(await standby.current(), { holder: standby.holder, epoch: took.epoch });
      await took.release();
    });

    it('tells a holder whose lease was taken at its next renewal', async () => {
      const name = `t-${randomUUID()}`;
      const a = await open(name, 1000);
      const b = await open(name, 1000);
      const la = await a.lead();
      const admin = new pg.Client({ connectionString: databaseUrl });
      await admin.connect();
      try {
        // As if a's renewals had not reached the server for longer than the ttl.
        await admin.query(`UPDATE ndif_leader_lease SET expires_at = now() - interval '1 second' WHERE name = $1`, [
          name,
        ]);
      } finally {
        await admin.end();
      }
      const lb = await b.lead();
      assert.equal(lb.epoch, la.epoch + 1);
      assert.equal(await la.ended, 'lost');
      await lb.release();
    });
  });

  describe('fencing of leader commands (PostgreSQL event store)', () => {
    const schema = freshSchema('fence');
    let store: PostgresEventStore;
    before(async () => {
      store = await PostgresEventStore.open({ connectionString: databaseUrl, schema, poolSize: 2 });
    });
    after(async () => {
      await store.close();
      await dropSchema(schema);
    });

    it('records the leader epoch on the events and refuses an older epoch, also after a restart', async () => {
      const at = (s: number) => new Date(Date.UTC(2025, 2, 1, 10, 0, s)).toISOString();
      const agentId = `a-${randomUUID().slice(0, 8)}`;
      const gpus = [{ index: 0, memoryBytes: 2 ** 34, name: 'virtual' }];
      const cp = new ControlPlaneCommands(store);
      await cp.execute(
        { type: 'RegisterAgent', agentId, bootId: 'b1', gpus, ramBytes: 2 ** 33 },
        { commandId: `c-${randomUUID()}`, actor: `agent:${agentId}`, at: at(0) },
      );
      const unresponsive = {
        type: 'MarkAgentUnresponsive',
        agentId,
        bootId: 'b1',
        lastSeenAt: at(0),
        timeoutMs: 6000,
        graceMs: 30_000,
      } as const;
      const r = await cp.execute(unresponsive, {
        commandId: `c-${randomUUID()}`,
        actor: 'system:scheduler',
        at: at(7),
        leaderEpoch: 2,
      });
      assert.equal(r.events[0]?.type, 'AgentUnresponsive');
      const stream = await store.readStream(`agent-${agentId}`);
      assert.equal(stream.at(-1)?.metadata.leaderEpoch, 2);
      assert.equal(stream[0].metadata.leaderEpoch, undefined, 'an agent’s own command carries no epoch');
      await cp.execute(
        { type: 'ReportAgentHeartbeat', agentId, bootId: 'b1' },
        { commandId: `c-${randomUUID()}`, actor: `agent:${agentId}`, at: at(8) },
      );
      const before = await store.readStream(`agent-${agentId}`);
      for (const commands of [cp, new ControlPlaneCommands(store)]) {
        await assert.rejects(
          commands.execute(unresponsive, {
            commandId: `c-${randomUUID()}`,
            actor: 'system:scheduler',
            at: at(20),
            leaderEpoch: 1,
          }),
          (e: unknown) => isFabricError(e) && e.code === 'CP_LEADER_EPOCH_STALE' && e.httpStatus === 409,
        );
      }
      assert.equal((await store.readStream(`agent-${agentId}`)).length, before.length, 'nothing appended');
      await assert.rejects(
        cp.execute(unresponsive, {
          commandId: `c-${randomUUID()}`,
          actor: 'system:scheduler',
          at: at(20),
          leaderEpoch: 0,
        }),
        (e: unknown) => isFabricError(e) && e.code === 'CP_INVALID_COMMAND',
      );
      const newer = await cp.execute(unresponsive, {
        commandId: `c-${randomUUID()}`,
        actor: 'system:scheduler',
        at: at(20),
        leaderEpoch: 3,
      });
      assert.equal(newer.events[0]?.type, 'AgentUnresponsive');
    });
  });
}
