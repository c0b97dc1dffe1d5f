// ndif env: what the CLI would talk to, with which key, and what the fabric there says about itself.
import { API_PROTOCOL_VERSION } from '../../../protocol/api-version.js';
import { maskKey } from '../../sdk/config.js';
import type { VersionReply, WhoamiReply } from '../../sdk/wire.js';
import type { CliCommand } from '../command.js';
import { exitCodeOf } from '../failures.js';
import { ExitCode } from '../exit-codes.js';

const command: CliCommand = {
  summary: 'show the resolved fabric URL, API key source, client and fabric versions, and who the key is',
  usage: '[--json]',
  details: `Exit code ${ExitCode.unreachable} when the fabric does not answer, ${ExitCode.protocolMismatch} when it speaks another protocol major (the local settings are printed anyway).`,
  async run(ctx) {
    const c = ctx.config;
    let version: VersionReply | null = null;
    let whoami: WhoamiReply | null = null;
    let problem: unknown = null;
    try {
      version = await ctx.admin.version();
      whoami = await ctx.admin.whoami();
    } catch (e) {
      problem = e;
    }
    const info = {
      url: c.url,
      urlSource: c.urlSource,
      apiKey: maskKey(c.apiKey),
      apiKeySource: c.apiKeySource,
      client: { protocol: API_PROTOCOL_VERSION, node: process.version },
      fabric: version
        ? {
            version: version.fabric,
            protocol: version.protocol,
            api: version.api,
            auth: version.auth,
            capabilities: version.capabilities,
            limits: version.limits,
          }
        : null,
      whoami,
      problem: problem ? (problem as Error).message : null,
    };
    if (ctx.out.json) ctx.out.printJson(info);
    else {
      ctx.out.line(`url          ${c.url}  (from ${c.urlSource})`);
      ctx.out.line(`api key      ${info.apiKey ?? 'none'}  (from ${c.apiKeySource})`);
      ctx.out.line(`client       protocol ${API_PROTOCOL_VERSION}, node ${process.version}`);
      if (version) {
        ctx.out.line(
          `fabric       ${version.fabric}, protocol ${version.protocol} (${version.api} API, auth ${version.auth ? 'on' : 'off'})`,
        );
        ctx.out.line(`capabilities ${version.capabilities.join(', ')}`);
      }
      if (whoami)
        ctx.out.line(
          `caller       ${whoami.actor}${whoami.label ? ` "${whoami.label}"` : ''}; tags: ${
            Object.entries(whoami.tags)
              .filter(([, v]) => v)
              .map(([k]) => k)
              .join(', ') || 'none'
          }`,
        );
    }
    if (problem) {
      ctx.out.note(`fabric       ${(problem as Error).message}`);
      return exitCodeOf(problem);
    }
    return ExitCode.ok;
  },
};

export default command;
