# onnx-gateway: build with `docker build -t onnx-gateway .`, then
#   docker run -p 8080:8080 -v "$PWD/.data/models:/models:ro" -e ONNX_GATEWAY_API_KEYS=change-me onnx-gateway
# The image listens on 0.0.0.0, which the server only does with API keys: set ONNX_GATEWAY_API_KEYS
# or mount a key file and set ONNX_GATEWAY_API_KEYS_FILE. Models are not in the image: mount the
# models dir (one Hugging Face-layout folder per model) at /models.

FROM node:24-bookworm-slim AS build
WORKDIR /app
# A toolchain for native modules whose prebuilt binary can not be fetched (better-sqlite3 12, which
# only Node 20 loads, falls back to compiling); only this stage has it.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# onnxruntime-node's postinstall would download the CUDA provider (its default on linux/x64), which
# this image does not use. package.json's allowScripts skips it from npm 11.16; an older npm reads
# only this variable.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim
# jemalloc instead of glibc's malloc. glibc raises its mmap threshold as large blocks are freed, up
# to 32 MB, so that a session's weights and ONNX Runtime's arena chunks, once a model has been
# unloaded, are next allocated inside its arenas, which keep them: a server whose models load and
# unload grew by about 20 MB a cycle. A fixed low threshold (MALLOC_MMAP_THRESHOLD_) stops that but
# maps and faults in every large block anew, which cost image embeddings 38% of their throughput.
# jemalloc gives freed memory back within seconds and reuses it until then: neither cost
# (docs/performance.md, models that load and unload).
RUN apt-get update \
  && apt-get install -y --no-install-recommends libjemalloc2 \
  && ln -s "/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2" /usr/lib/libjemalloc.so.2 \
  && rm -rf /var/lib/apt/lists/*
ENV LD_PRELOAD=/usr/lib/libjemalloc.so.2
ENV NODE_ENV=production \
    ONNX_GATEWAY_HOST=0.0.0.0 \
    ONNX_GATEWAY_PORT=8080 \
    ONNX_GATEWAY_MODELS_DIR=/models \
    ONNX_GATEWAY_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The catalogue of known models (manifests only; model files come from the /models volume).
COPY models ./models
# Owned by the server's user, so a writable /models volume can take models downloaded at start.
RUN mkdir -p /models /data && chown node:node /models /data
USER node
VOLUME ["/models", "/data"]
EXPOSE 8080
# 503 while the models warm up, so allow a start period; node's own fetch needs no curl in the image.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.ONNX_GATEWAY_PORT}/health`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The server handles SIGTERM itself (drain, then exit), also as PID 1.
STOPSIGNAL SIGTERM
# --no-memory-reducer: V8 takes it only on the command line (src/v8-flags.ts says why).
ENTRYPOINT ["node", "--no-memory-reducer", "dist/cli/index.js"]
CMD ["serve"]
