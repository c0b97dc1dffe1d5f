# One image for every fabric process; NDIF_ROLE picks which one runs:
#   command-api | query-api | scheduler-relay | gpu-agent | gateway
# Build: docker build -t ndif-fabric .   (docker-compose.yml builds it for you)

FROM node:20-bookworm-slim AS build
WORKDIR /app
# onnxruntime-node's install script downloads CUDA binaries; the CPU build ships in the package.
ENV ONNXRUNTIME_NODE_INSTALL=skip
# better-sqlite3 compiles from source
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json .npmrc ./
# npm workspaces: the SDK package's manifest must be there for npm ci to link it
COPY client/package.json client/
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx tsc -p . && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/models ./models
COPY --from=build /app/protocol ./protocol
USER node
# exec: the role's process is PID 1's only child and receives SIGTERM from `docker stop` directly.
# A GPU agent starts with fabric/agent-node-flags.ts's V8 flags.
CMD ["sh", "-c", "case \"$NDIF_ROLE\" in gpu-agent) exec node --enable-source-maps --initial-old-space-size=256 dist/fabric/gpu-agent.js ;; command-api|query-api|scheduler-relay|gateway) exec node --enable-source-maps dist/fabric/$NDIF_ROLE.js ;; *) echo \"NDIF_ROLE must be command-api, query-api, scheduler-relay, gpu-agent or gateway (got '$NDIF_ROLE')\" >&2; exit 64 ;; esac"]
