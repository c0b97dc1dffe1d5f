// A status websocket client for tests: collects every message and waits for the ones a test expects.
import WebSocket from 'ws';

export interface WsMessage {
  type: string;
  [k: string]: unknown;
}

export class TestSocket {
  readonly messages: WsMessage[] = [];
  private waiters: Array<{ test: (m: WsMessage[]) => boolean; resolve: () => void }> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      this.messages.push(isBinary ? { type: 'binary', data: data as Buffer } : (JSON.parse(String(data)) as WsMessage));
      this.waiters = this.waiters.filter((w) => {
        if (!w.test(this.messages)) return true;
        w.resolve();
        return false;
      });
    });
  }

  static open(url: string, headers: Record<string, string> = {}, query = ''): Promise<TestSocket> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws${query}`, { headers });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new TestSocket(ws)));
      ws.once('error', reject);
    });
  }

  /** The HTTP answer of a refused upgrade: status and JSON body. */
  static refused(
    url: string,
    headers: Record<string, string> = {},
    path = '/ws',
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${path}`, { headers });
    return new Promise((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += String(c)));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }),
        );
      });
      ws.once('open', () => reject(new Error('the upgrade was accepted')));
      ws.once('error', () => undefined);
    });
  }

  send(m: object): void {
    this.ws.send(JSON.stringify(m));
  }

  /** Waits until `test` holds for the messages received so far. */
  until(test: (m: WsMessage[]) => boolean, what: string, timeoutMs = 5000): Promise<void> {
    if (test(this.messages)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `timed out waiting for ${what}; got ${JSON.stringify(this.messages.map((m) => m.status ?? m.type))}`,
            ),
          ),
        timeoutMs,
      );
      this.waiters.push({
        test,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  statuses(requestId: string): WsMessage[] {
    return this.messages.filter((m) => m.type === 'status' && m.requestId === requestId);
  }

  untilStatus(requestId: string, status: string, timeoutMs?: number): Promise<void> {
    return this.until(
      (ms) => ms.some((m) => m.type === 'status' && m.requestId === requestId && m.status === status),
      `${status} of ${requestId}`,
      timeoutMs,
    );
  }

  async subscribe(requestId: string, since?: string): Promise<void> {
    const before = this.messages.filter((m) => m.type === 'subscribed' && m.requestId === requestId).length;
    this.send(since === undefined ? { type: 'subscribe', requestId } : { type: 'subscribe', requestId, since });
    await this.until(
      (ms) => ms.filter((m) => m.type === 'subscribed' && m.requestId === requestId).length > before,
      `subscribed ${requestId}`,
    );
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.ws.readyState === WebSocket.CLOSED) return resolve();
      this.ws.once('close', () => resolve());
      this.ws.close();
    });
  }
}
