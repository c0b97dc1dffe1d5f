// Operator calls (the `ndif` CLI is built on these): register, remove, disable and enable models, deploy, scale, evict, pin, kill,
// API keys, and the cluster,
// queue and agent views. Each call checks the fabric's protocol version once first.
import type { CallOptions, FabricHttp } from './http.js';
import type {
  AgentsReply,
  ClusterReply,
  CreatedKeyReply,
  DeployBody,
  EditRegisteredReply,
  EditReply,
  KeyReply,
  ModelReply,
  ModelSwitchReply,
  QueueReply,
  RequestsReply,
  RegisteredModelReply,
  VersionReply,
  WhoamiReply,
} from './wire.js';
import { versionChecker } from './version-check.js';

export class FabricAdmin {
  /** The fabric's /version; rejects with ProtocolMismatchError for another protocol major. */
  readonly version: () => Promise<VersionReply>;

  constructor(readonly http: FabricHttp) {
    this.version = versionChecker(http);
  }

  private async json<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
    await this.version();
    return this.http.json<T>(method, path, opts);
  }

  whoami = () => this.json<WhoamiReply>('GET', '/whoami');
  cluster = (signal?: AbortSignal) => this.json<ClusterReply>('GET', '/cluster', signal ? { signal } : {});
  queue = (q: { model?: string; limit?: number } = {}) => this.json<QueueReply>('GET', '/queue', { query: q });
  agents = () => this.json<AgentsReply>('GET', '/agents');
  requests = (q: { active?: boolean; model?: string; limit?: number } = {}) =>
    this.json<RequestsReply>('GET', '/requests', {
      query: { ...q, active: q.active === undefined ? undefined : String(q.active) },
    });
  models = () => this.json<{ models: ModelReply[] }>('GET', '/models');
  registerModel = (body: { model: string; dir: string; replace?: boolean }) =>
    this.json<RegisteredModelReply>('POST', '/models', { body });
  removeModel = (model: string) =>
    this.json<{ model: string; removed: boolean; logPosition: number | null }>('POST', '/models/remove', {
      body: { model },
    });
  /** Registers a persistent edit (`<model>@<name>`): private (only this key may use it) unless `visibility` says public. */
  registerEdit = (body: { model: string; name: string; source: string; visibility?: 'public' | 'private' }) =>
    this.json<EditRegisteredReply>('POST', '/models/edits', { body });
  removeEdit = (model: string, name: string) =>
    this.json<{ variant: string; removed: boolean; logPosition: number | null }>('POST', '/models/edits/remove', {
      body: { model, name },
    });
  /** The edits of a model this key may use. */
  edits = (model: string) =>
    this.json<{ model: string; edits: EditReply[] }>('GET', `/models/${encodeURIComponent(model)}/edits`);
  disableModel = (model: string, reason: string) =>
    this.json<ModelSwitchReply>('POST', '/models/disable', { body: { model, reason } });
  enableModel = (model: string) => this.json<ModelSwitchReply>('POST', '/models/enable', { body: { model } });

  deploy = (body: DeployBody) =>
    this.json<{ model: string; replicaIds: string[]; logPosition: number }>('POST', '/deployments', { body });
  scale = (model: string, replicas: number) =>
    this.json<{ model: string; replicas: number; replicaIds: string[]; evicting: string[]; logPosition: number }>(
      'POST',
      '/deployments/scale',
      { body: { model, replicas } },
    );
  evict = (target: { model: string } | { replica: string } | { all: true }) =>
    this.json<{ evicted: string[]; logPosition: number }>('POST', '/deployments/evict', { body: target });
  pin = (model: string, pinned: boolean) =>
    this.json<{ model: string; pinned: boolean; logPosition: number }>('POST', '/deployments/pin', {
      body: { model, pinned },
    });
  kill = (requestId: string) =>
    this.json<{ requestId: string; cancelled: boolean; alreadyCancelled: boolean }>(
      'POST',
      `/requests/${encodeURIComponent(requestId)}/cancel`,
      { body: {} },
    );
  createKey = (body: { label: string; trusted?: boolean; priority?: boolean; operator?: boolean }) =>
    this.json<CreatedKeyReply>('POST', '/keys', { body });
  listKeys = () => this.json<{ keys: KeyReply[] }>('GET', '/keys');
  revokeKey = (id: string) =>
    this.json<{ id: string; revokedAt: string }>('POST', `/keys/${encodeURIComponent(id)}/revoke`);
  drain = (agentId: string) =>
    this.json<{ agentId: string; draining: boolean; logPosition: number }>(
      'POST',
      `/agents/${encodeURIComponent(agentId)}/drain`,
    );
}
