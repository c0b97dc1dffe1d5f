// LISTEN connection that turns NOTIFY on the store's channel into an in-process append signal. When the connection
// drops it reconnects with backoff; subscriptions keep polling meanwhile, so a lost notification only adds latency.
import pg from 'pg';
import type { AppendSignal } from '../subscription.js';
import { ident } from './schema.js';

export class NotificationListener {
  private client: pg.Client | undefined;
  private stopped = false;
  private retryMs = 100;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly signal: AppendSignal,
  ) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.config);
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    client.on('notification', () => this.signal.notify());
    try {
      await client.connect();
      await client.query(`LISTEN ${ident(this.channel)}`);
    } catch (e) {
      await client.end().catch(() => undefined);
      throw e;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.retryMs = 100;
    // Events may have been appended while no one listened.
    this.signal.notify();
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.scheduleConnect();
  }

  private scheduleConnect(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.connect().catch(() => {
        this.retryMs = Math.min(this.retryMs * 2, 5000);
        this.scheduleConnect();
      });
    }, this.retryMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const c = this.client;
    this.client = undefined;
    if (c !== undefined) await c.end().catch(() => undefined);
  }
}
