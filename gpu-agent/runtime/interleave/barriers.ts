// Barriers (`ctx.barrier(name, parties)`): an invoke that WAITs at one parks — the pass goes on without it — until
// `parties` invokes are there; then all are answered together, in invoke order. A barrier that can no longer fill
// (too few invokes left that have not ended or arrived) fails for those waiting with BarrierError.
import type { HostToBlock } from '../../../protocol/interleave.js';
import { blockError } from '../errors.js';
import type { Mediator } from './mediator.js';

interface Barrier {
  name: string;
  parties: number;
  addr: string;
  /** Who arrived, in arrival order. */
  arrived: Mediator[];
}

export class Barriers {
  /** Barriers some invokes wait at, by `<seq>:<name>`. */
  private readonly open = new Map<string, Barrier>();

  constructor(
    private readonly mediators: Mediator[],
    private readonly send: (msg: HostToBlock) => void,
  ) {}

  /** WAIT at barrier `name` (its `seq`-th use): parks the invoke, or releases every party once it is the last. */
  arrive(inv: Mediator, addr: string, seq: number, name: string, parties: number): void {
    const key = `${seq}:${name}`;
    const refuse = (message: string) =>
      this.send({ kind: 'RAISE', invoke: inv.index, addr, error: blockError('BarrierError', message) });
    if (parties < 1 || parties > this.mediators.length) {
      refuse(
        `barrier ${JSON.stringify(name)} waits for ${parties} invokes, but the trace has ${this.mediators.length}`,
      );
      return;
    }
    const b = this.open.get(key) ?? { name, parties, addr, arrived: [] };
    if (b.parties !== parties) {
      refuse(
        `barrier ${JSON.stringify(name)}: invoke ${inv.index} waits for ${parties} invokes there, invoke ${b.arrived[0]!.index} for ${b.parties}; give every invoke the same parties`,
      );
      return;
    }
    this.open.set(key, b);
    inv.park({ kind: 'barrier', barrier: key, addr });
    b.arrived.push(inv);
    if (b.arrived.length < parties) {
      this.check();
      return;
    }
    this.open.delete(key);
    for (const w of b.arrived.sort((x, y) => x.index - y.index)) {
      w.resume();
      this.send({ kind: 'VALUE', invoke: w.index, addr, values: [] });
    }
  }

  /** Fails the barriers that can no longer fill: too few invokes left that have not ended or arrived. */
  check(): void {
    for (const [key, b] of this.open) {
      const could = this.mediators.filter((i) => i.status !== 'ended' && !b.arrived.includes(i)).length;
      if (b.arrived.length + could >= b.parties) continue;
      const message = this.short(key, 'the other invokes ended');
      this.open.delete(key);
      for (const w of b.arrived) {
        w.resume();
        this.send({ kind: 'RAISE', invoke: w.index, addr: b.addr, error: blockError('BarrierError', message) });
      }
    }
  }

  /** Why barrier `key` stays short: `why`, with who arrived. */
  short(key: string, why: string): string {
    const b = this.open.get(key);
    const name = b?.name ?? key.slice(key.indexOf(':') + 1);
    const arrived = b ? b.arrived.map((i) => i.index) : [];
    return `barrier ${JSON.stringify(name)} waits for ${b?.parties ?? '?'} invokes, but ${why} with ${arrived.length} there (invoke${arrived.length === 1 ? '' : 's'} ${arrived.join(', ')}): every party must reach ctx.barrier(${JSON.stringify(name)}) as often`;
  }
}
