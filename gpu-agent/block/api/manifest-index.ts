// Lookup tables over a Manifest for the block side: modules by path, forward rank of each point, and the
// reason a point cannot be observed.
import type { Manifest, ManifestModule } from '../../../protocol/manifest.js';
import { pointKey } from '../../../protocol/manifest.js';
import type { Point } from '../../../protocol/interleave.js';

/** One index per manifest object: a model's manifest is the same object for every request, and never changes. */
const indexes = new WeakMap<Manifest, ManifestIndex>();

export class ManifestIndex {
  static of(manifest: Manifest): ManifestIndex {
    let index = indexes.get(manifest);
    if (index === undefined) {
      index = new ManifestIndex(manifest);
      indexes.set(manifest, index);
    }
    return index;
  }

  readonly modules: Map<string, ManifestModule>;
  readonly paths: string[];
  private readonly ranks: Map<string, number>;

  constructor(readonly manifest: Manifest) {
    this.modules = new Map(manifest.modules.map((m) => [m.path, m]));
    this.paths = manifest.modules.map((m) => m.path);
    this.ranks = new Map(manifest.order.map((k, i) => [k, i]));
  }

  rank(path: string, point: Point): number | undefined {
    return this.ranks.get(pointKey(path, point));
  }

  /** Why `path.point` has no value in a forward pass (undefined when it has one). */
  unobservable(path: string, point: Point): string | undefined {
    if (this.rank(path, point) !== undefined) return undefined;
    const m = this.modules.get(path);
    const name = path || 'the model';
    if (!m) return `${name} is not a module of ${this.manifest.model}`;
    if (m.list) return `${path} is a list of modules; index it, e.g. ${path}[0].${point}`;
    if (point === 'output' && m.outputs.length === 0) return `${name} has no output that the rest of the model reads`;
    if (point === 'input' && m.inputs.length === 0)
      return `${name} reads no activation from outside it (only weights and shape constants)`;
    return `the nodes of ${name} are interleaved with other modules' nodes, so its ${point} has no single point in the forward pass`;
  }
}
