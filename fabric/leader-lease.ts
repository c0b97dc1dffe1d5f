// The scheduler leader's lease in PostgreSQL (docs/control-plane.md, "Several schedulers"). One row per lease
// name: holder, epoch, expiry. A process takes the lease only when it has expired (or was released), which adds 1
// to the epoch: the fencing epoch its commands carry. Expiry is the server's clock (now() + ttl), so the processes'
// clocks do not matter. The holder renews every renewMs and counts its lease as held only until the start of its
// last successful renewal + ttl (by its own monotonic clock, which is earlier than the server's expiry): past that
// it has lost the lease, whether or not anyone took it, and must stop issuing commands.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import pg from 'pg';

export interface LeaderLeaseOptions {
  connectionString: string;
  /** Lease name; one leader per name. Default `scheduler`. */
  name?: string;
  /** This process, in the row and in logs. Default host:pid:random. */
  holder?: string;
  /** How long a lease lasts without renewal. Default 5000 ms. */
  ttlMs?: number;
  /** Renewal period while leading. Default ttlMs / 5. */
  renewMs?: number;
  /** Retry period of a standby. Default 500 ms. */
  retryMs?: number;
}

export interface Leadership {
  epoch: number;
  /** Settles when the lease is lost (renewal failed or too late) or released; tells which. */
  readonly ended: Promise<'lost' | 'released'>;
  /** Why the lease was lost (for the log), once it was. */
  readonly lostReason: () => string | undefined;
  /** Stops renewing and expires the row now, so a standby takes over at once. */
  release(): Promise<void>;
}

const TABLE = 'ndif_leader_lease';

export class LeaderLease {
  readonly name: string;
  readonly holder: string;
  readonly ttlMs: number;
  private readonly renewMs: number;
  private readonly retryMs: number;
  private readonly pool: pg.Pool;
  private closed = false;

  private constructor(o: LeaderLeaseOptions) {
    this.name = o.name ?? 'scheduler';
    this.holder = o.holder ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.ttlMs = o.ttlMs ?? 5000;
    this.renewMs = o.renewMs ?? Math.max(50, Math.floor(this.ttlMs / 5));
    this.retryMs = o.retryMs ?? 500;
    // Its own small pool: a renewal never waits behind the event store's queries.
    this.pool = new pg.Pool({ connectionString: o.connectionString, max: 2 });
    this.pool.on('error', () => undefined);
  }

  static async open(o: LeaderLeaseOptions): Promise<LeaderLease> {
    const lease = new LeaderLease(o);
    await lease.pool
      .query(
        `CREATE TABLE IF NOT EXISTS ${TABLE} (name text PRIMARY KEY, holder text NOT NULL, epoch bigint NOT NULL, expires_at timestamptz NOT NULL)`,
      )
      .catch(async (e: unknown) => {
        // Two processes creating the table at once: one wins, the other sees a unique violation on the catalog.
        if ((e as { code?: string }).code !== '23505') throw e;
      });
    return lease;
  }

  /** Takes the lease if it is free: returns the new epoch, or undefined while another process holds it. */
  async tryAcquire(): Promise<number | undefined> {
    const r = await this.pool.query<{ epoch: string }>(
      `INSERT INTO ${TABLE} AS l (name, holder, epoch, expires_at) VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
       ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at
       WHERE l.expires_at < now()
       RETURNING epoch`,
      [this.name, this.holder, this.ttlMs],
    );
    return r.rows.length === 0 ? undefined : Number(r.rows[0].epoch);
  }

  /** Who holds the lease now (undefined: nobody, or expired). */
  async current(): Promise<{ holder: string; epoch: number } | undefined> {
    const r = await this.pool.query<{ holder: string; epoch: string }>(
      `SELECT holder, epoch FROM ${TABLE} WHERE name = $1 AND expires_at >= now()`,
      [this.name],
    );
    return r.rows.length === 0 ? undefined : { holder: r.rows[0].holder, epoch: Number(r.rows[0].epoch) };
  }

  /** Waits (retrying every retryMs) until this process holds the lease; then renews it until lost or released. */
  async lead(signal?: AbortSignal): Promise<Leadership> {
    for (;;) {
      if (signal?.aborted || this.closed) throw new Error('leader lease: stopped waiting for the lease');
      const startedAt = performance.now();
      const epoch = await this.tryAcquire().catch(() => undefined);
      if (epoch !== undefined) return this.hold(epoch, startedAt);
      await new Promise((r) => setTimeout(r, this.retryMs));
    }
  }

  private hold(epoch: number, acquiredAt: number): Leadership {
    let validUntil = acquiredAt + this.ttlMs;
    let end: (how: 'lost' | 'released') => void = () => undefined;
    const ended = new Promise<'lost' | 'released'>((r) => (end = r));
    let over = false;
    let timer: NodeJS.Timeout | undefined;
    let reason: string | undefined;
    const finish = (how: 'lost' | 'released', why?: string) => {
      if (over) return;
      over = true;
      reason = why;
      if (timer !== undefined) clearTimeout(timer);
      end(how);
    };
    let lastError: string | undefined;
    const renew = async () => {
      if (over) return;
      const sentAt = performance.now();
      try {
        const r = await this.pool.query(
          `UPDATE ${TABLE} SET expires_at = now() + $3 * interval '1 millisecond'
            WHERE name = $1 AND holder = $2 AND epoch = $4 AND expires_at >= now()`,
          [this.name, this.holder, this.ttlMs, epoch],
        );
        if (r.rowCount === 0) return finish('lost', 'another process holds the lease (renewal found no row of ours)');
        validUntil = sentAt + this.ttlMs;
      } catch (e) {
        // The server is unreachable: retried below until the lease runs out.
        lastError = (e as Error).message;
      }
      if (over) return;
      const left = validUntil - performance.now();
      if (left <= 0)
        return finish('lost', `no renewal succeeded within ${this.ttlMs} ms (last error: ${lastError ?? 'none'})`);
      timer = setTimeout(() => void renew(), Math.min(this.renewMs, left));
    };
    // The lease also ends at validUntil if a renewal hangs.
    const watchdog = setInterval(
      () => {
        const now = performance.now();
        if (now >= validUntil)
          finish(
            'lost',
            `no renewal succeeded within ${this.ttlMs} ms (${Math.round(now - validUntil)} ms late; last error: ${lastError ?? 'none'})`,
          );
      },
      Math.min(100, this.renewMs),
    );
    void ended.then(() => clearInterval(watchdog));
    timer = setTimeout(() => void renew(), this.renewMs);
    return {
      epoch,
      ended,
      lostReason: () => reason,
      release: async () => {
        if (over) return;
        finish('released');
        await this.pool
          .query(
            `UPDATE ${TABLE} SET expires_at = now() - interval '1 millisecond' WHERE name = $1 AND holder = $2 AND epoch = $3`,
            [this.name, this.holder, epoch],
          )
          .catch(() => undefined);
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.pool.end();
  }
}
