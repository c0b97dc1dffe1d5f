// Streams a request's tokens to the control plane as they are generated: each token with its text (decoded in the
// context of the tokens before it, so a leading space or a character split across tokens comes out right), batched
// so one request reports at most every FLUSH_MS: the first token at once, then every token since the last report
// in one ReportRequestTokens (one RequestTokensGenerated event; docs/events.md, "Streamed tokens"). `close()`
// reports what is left, before the request's outcome.
import type { StreamedToken } from '../../domain/request/commands.js';
import type { TokenEvent } from '../runtime/index.js';

export const FLUSH_MS = 50;
/** Tokens of context a token's text is decoded in. */
const CONTEXT = 16;

export class TokenStream {
  private buffer: StreamedToken[] = [];
  private last = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private readonly ids = new Map<number, number[]>();

  constructor(
    private readonly report: (tokens: StreamedToken[]) => void,
    private readonly decode: ((ids: number[]) => string) | undefined,
    private readonly now: () => number = () => performance.now(),
  ) {}

  add(t: TokenEvent): void {
    const ids = this.ids.get(t.invoke) ?? this.ids.set(t.invoke, []).get(t.invoke)!;
    ids.push(t.token);
    const out: StreamedToken = { step: t.step, invoke: t.invoke, token: t.token };
    const text = this.textOf(ids);
    if (text !== undefined) out.text = text;
    if (t.finish) out.finish = t.finish;
    this.buffer.push(out);
    const waited = this.now() - this.last;
    if (waited >= FLUSH_MS) this.flush();
    else if (this.timer === undefined) {
      this.timer = setTimeout(() => this.flush(), FLUSH_MS - waited);
      this.timer.unref();
    }
  }

  private textOf(ids: number[]): string | undefined {
    if (!this.decode) return undefined;
    const before = ids.slice(Math.max(0, ids.length - CONTEXT), -1);
    const withToken = this.decode([...before, ids[ids.length - 1]!]);
    const prefix = before.length === 0 ? '' : this.decode(before);
    return withToken.startsWith(prefix) ? withToken.slice(prefix.length) : this.decode([ids[ids.length - 1]!]);
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.buffer.length === 0) return;
    const tokens = this.buffer;
    this.buffer = [];
    this.last = this.now();
    this.report(tokens);
  }

  /** Reports what is left; nothing is reported after. */
  close(): void {
    this.flush();
    this.add = () => {};
  }
}
