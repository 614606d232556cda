/**
 * The container image and the Kubernetes manifests, checked without Docker or a cluster: the
 * Dockerfile's stages, user, port and health check (run for real against a stub server), and the
 * manifests' wiring (selectors, probes, ports, volumes, secrets, settings) as the server reads it.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { chunkQueueName } from '../../src/batch/shared.js';
import { settings } from '../../src/config.js';

const run = promisify(execFile);
const settingEnvs = new Set(Object.values(settings).map((spec) => spec.env));

describe('Dockerfile', () => {
  const text = readFileSync('Dockerfile', 'utf8').replace(/\\\n/g, ' ');
  const instructions = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const [name, ...rest] = line.split(/\s+/);
      return { name: name!.toUpperCase(), args: rest.join(' ') };
    });
  const stages = instructions.reduce<(typeof instructions)[]>((all, instruction) => {
    if (instruction.name === 'FROM') all.push([]);
    all[all.length - 1]!.push(instruction);
    return all;
  }, []);
  const runtime = stages[stages.length - 1]!;
  const args = (name: string) => runtime.filter((i) => i.name === name).map((i) => i.args);

  it('builds in one stage and runs from another, both on node 24 bookworm-slim', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage[0]!.args).toMatch(/^node:24-bookworm-slim\b/);
    expect(stages[0]!.some((i) => i.name === 'RUN' && /npm ci/.test(i.args))).toBe(true);
    expect(stages[0]!.some((i) => i.name === 'RUN' && /npm run build/.test(i.args))).toBe(true);
    expect(stages[0]!.some((i) => i.name === 'RUN' && /npm prune --omit=dev/.test(i.args))).toBe(true);
    // The runtime stage takes the built code and production modules, never the toolchain or sources.
    expect(args('COPY').filter((a) => a.startsWith('--from='))).toEqual(
      expect.arrayContaining([expect.stringContaining('/app/dist'), expect.stringContaining('/app/node_modules')]),
    );
    expect(args('COPY').some((a) => /\bsrc\b/.test(a))).toBe(false);
  });

  it('runs as a non-root user, with models as a volume at /models, on port 8080', () => {
    const user = args('USER').at(-1);
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(args('VOLUME').join(' ')).toContain('/models');
    expect(args('EXPOSE')).toEqual(['8080']);
    const env = args('ENV').join(' ');
    expect(env).toMatch(/ONNX_GATEWAY_MODELS_DIR=\/models\b/);
    expect(env).toMatch(/ONNX_GATEWAY_PORT=8080\b/);
    expect(env).toMatch(/ONNX_GATEWAY_HOST=0\.0\.0\.0\b/);
    for (const [, name] of env.matchAll(/(ONNX_GATEWAY_\w+)=/g)) expect(settingEnvs, name).toContain(name);
    // Memory freed by unloaded models goes back to the system, without glibc's fixed mmap
    // threshold's cost to large buffers (docs/performance.md, model churn): jemalloc, installed.
    expect(env).toMatch(/LD_PRELOAD=\/usr\/lib\/libjemalloc\.so\.2\b/);
    expect(env).not.toMatch(/MALLOC_MMAP_THRESHOLD_/);
    expect(args('RUN').join(' ')).toMatch(
      /apt-get install .*libjemalloc2[\s\S]*ln -s .*libjemalloc\.so\.2"? \/usr\/lib\/libjemalloc\.so\.2/,
    );
    expect(args('ENTRYPOINT').concat(args('CMD')).join(' ')).toMatch(/dist\/cli\/index\.js.*serve/);
  });

  it('copies only files that exist in the build context', () => {
    const ignored = readFileSync('.dockerignore', 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith('#'));
    for (const copy of [...stages.flat()].filter((i) => i.name === 'COPY' && !i.args.startsWith('--from='))) {
      const sources = copy.args.split(/\s+/).slice(0, -1);
      for (const source of sources) {
        expect(existsSync(source), source).toBe(true);
        expect(ignored, source).not.toContain(source.replace(/\/$/, ''));
      }
    }
  });

  describe('HEALTHCHECK', () => {
    const healthcheck = args('HEALTHCHECK').at(-1)!;
    const command = JSON.parse(healthcheck.slice(healthcheck.indexOf('CMD') + 3).trim()) as string[];

    async function check(status: number): Promise<{ code: number; paths: string[] }> {
      const paths: string[] = [];
      const server: Server = createServer((request, response) => {
        paths.push(request.url ?? '');
        response.writeHead(status).end();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as AddressInfo).port;
      try {
        await run(command[0] === 'node' ? process.execPath : command[0]!, command.slice(1), {
          env: { ...process.env, ONNX_GATEWAY_PORT: String(port) },
        });
        return { code: 0, paths };
      } catch (error) {
        return { code: (error as { code: number }).code, paths };
      } finally {
        server.close();
      }
    }

    it('passes when /health answers 200 and fails on 503, with node alone', async () => {
      expect(command[0]).toBe('node');
      const ready = await check(200);
      expect(ready).toEqual({ code: 0, paths: ['/health'] });
      const loading = await check(503);
      expect(loading).toEqual({ code: 1, paths: ['/health'] });
    });
  });
});

// Parsed YAML, typed by the fields the tests below read (and check).
interface Probe {
  httpGet: { path: string; port: string | number };
}
interface Container {
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } }[];
  ports: { name?: string; containerPort: number }[];
  startupProbe: Probe;
  readinessProbe: Probe;
  livenessProbe: Probe;
  resources: Record<'requests' | 'limits', { cpu: string | number; memory: string }>;
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
  securityContext: { readOnlyRootFilesystem: boolean };
  lifecycle: { preStop: { exec: { command: string[] } } };
}
interface PodSpec {
  containers: [Container, ...Container[]];
  volumes: { name: string; persistentVolumeClaim?: { claimName: string } }[];
  securityContext: { runAsNonRoot: boolean };
  terminationGracePeriodSeconds: number;
}
interface Labelled {
  apiVersion: string;
  metadata: { name: string };
}
interface Deployment extends Labelled {
  kind: 'Deployment';
  spec: {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}
interface Service extends Labelled {
  kind: 'Service';
  spec: { selector: Record<string, string>; ports: { port: number; targetPort: string | number }[] };
}
interface Secret extends Labelled {
  kind: 'Secret';
  stringData?: Record<string, string>;
  data?: Record<string, string>;
}
interface Claim extends Labelled {
  kind: 'PersistentVolumeClaim';
  spec: { accessModes: string[] };
}
type Manifest = Deployment | Service | Secret | Claim;

describe('Kubernetes manifests', () => {
  const dir = 'deploy/kubernetes';
  const kustomization = parseAllDocuments(readFileSync(`${dir}/kustomization.yaml`, 'utf8'))[0]!.toJS() as {
    resources: string[];
  };
  const docs: Manifest[] = kustomization.resources.flatMap((file) =>
    parseAllDocuments(readFileSync(`${dir}/${file}`, 'utf8')).map((doc) => {
      expect(doc.errors, file).toEqual([]);
      return doc.toJS() as Manifest;
    }),
  );
  const find = <K extends Manifest['kind']>(kind: K, name: string) =>
    docs.find((doc): doc is Extract<Manifest, { kind: K }> => doc.kind === kind && doc.metadata.name === name);
  const gateway = find('Deployment', 'onnx-gateway')!;
  const pod = gateway?.spec.template.spec;
  const container = pod?.containers[0];
  const env = new Map((container?.env ?? []).map((e) => [e.name, e]));
  const envValue = (name: string): string => {
    expect(env.has(name), name).toBe(true);
    return env.get(name)!.value as string;
  };

  it('lists every manifest in the kustomization, and each parses with a kind and a name', () => {
    const files = readdirSync(dir).filter((file) => file.endsWith('.yaml') && file !== 'kustomization.yaml');
    expect([...kustomization.resources].sort()).toEqual(files.sort());
    for (const doc of docs) {
      expect(doc.apiVersion).toBeTruthy();
      expect(doc.kind).toBeTruthy();
      expect(doc.metadata?.name).toBeTruthy();
    }
    expect(docs.map((doc) => doc.kind).sort()).toEqual([
      'Deployment',
      'Deployment',
      'PersistentVolumeClaim',
      'PersistentVolumeClaim',
      'Secret',
      'Service',
      'Service',
    ]);
  });

  it('runs several gateway replicas whose selector matches their pods', () => {
    expect(gateway.apiVersion).toBe('apps/v1');
    expect(gateway.spec.replicas).toBeGreaterThanOrEqual(2);
    expect(gateway.spec.template.metadata.labels).toMatchObject(gateway.spec.selector.matchLabels);
  });

  it('probes /health on a port the container declares', () => {
    const ports = new Set(container.ports.flatMap((p) => [p.name, p.containerPort]));
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'] as const) {
      expect(container[probe]?.httpGet?.path, probe).toBe('/health');
      expect(ports, probe).toContain(container[probe].httpGet.port);
    }
  });

  it('sets resources, and no more worker threads than the CPUs it requests', () => {
    for (const kind of ['requests', 'limits'] as const) {
      expect(container.resources[kind].cpu, kind).toBeDefined();
      expect(container.resources[kind].memory, kind).toBeDefined();
    }
    const threads = Number(envValue('ONNX_GATEWAY_WORKERS')) * Number(envValue('ONNX_GATEWAY_INTRA_OP_THREADS'));
    expect(threads).toBeLessThanOrEqual(Number(container.resources.requests.cpu));
  });

  it('sets only environment the server reads, with the API keys from the Secret', () => {
    for (const name of env.keys()) expect(settingEnvs.has(name), name).toBe(true);
    const ref = env.get('ONNX_GATEWAY_API_KEYS')!.valueFrom!.secretKeyRef;
    const secret = find('Secret', ref.name);
    expect(secret).toBeDefined();
    expect(Object.keys({ ...secret!.stringData, ...secret!.data })).toContain(ref.key);
    // Beyond loopback the server needs keys; the manifests bind all interfaces.
    expect(envValue('ONNX_GATEWAY_HOST')).toBe('0.0.0.0');
  });

  it('mounts the models claim read-only where the models dir points, and writable data and tmp', () => {
    const volumes = new Map(pod.volumes.map((v) => [v.name, v]));
    const mounts = new Map(container.volumeMounts.map((m) => [m.mountPath, m]));
    for (const mount of mounts.values()) expect(volumes.has(mount.name), mount.name).toBe(true);
    const models = mounts.get(envValue('ONNX_GATEWAY_MODELS_DIR'))!;
    expect(models.readOnly).toBe(true);
    expect(find('PersistentVolumeClaim', volumes.get(models.name)!.persistentVolumeClaim!.claimName)).toBeDefined();
    // The root filesystem is read-only, so everything the server writes needs a volume.
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(mounts.has(envValue('ONNX_GATEWAY_DATA_DIR'))).toBe(true);
    expect(mounts.has('/tmp')).toBe(true);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
  });

  it('mounts one ReadWriteMany claim where the files dir points, for the replicas that share batches', () => {
    expect(envValue('ONNX_GATEWAY_REDIS_URL')).toBeTruthy();
    const mount = container.volumeMounts.find((m) => m.mountPath === envValue('ONNX_GATEWAY_FILES_DIR'))!;
    expect(mount.readOnly).toBeFalsy();
    const volume = pod.volumes.find((v) => v.name === mount.name)!;
    const claim = find('PersistentVolumeClaim', volume.persistentVolumeClaim!.claimName)!;
    expect(claim.spec.accessModes).toEqual(['ReadWriteMany']);
  });

  it("scales the gateway with KEDA on the batch queue's waiting chunks (an overlay of the base)", () => {
    const overlay = parseAllDocuments(readFileSync(`${dir}/keda/kustomization.yaml`, 'utf8'))[0]!.toJS() as {
      resources: string[];
    };
    expect(overlay.resources).toContain('..');
    const [scaled] = overlay.resources
      .filter((file) => file.endsWith('.yaml'))
      .map(
        (file) =>
          parseAllDocuments(readFileSync(`${dir}/keda/${file}`, 'utf8'))[0]!.toJS() as {
            kind: string;
            spec: {
              scaleTargetRef: { name: string };
              minReplicaCount: number;
              triggers: { type: string; metadata: Record<string, string> }[];
            };
          },
      );
    expect(scaled!.kind).toBe('ScaledObject');
    expect(scaled!.spec.scaleTargetRef.name).toBe(gateway.metadata.name);
    expect(scaled!.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
    const trigger = scaled!.spec.triggers.find((t) => t.type === 'redis')!;
    // BullMQ's list of waiting jobs: <prefix>:<queue>:wait.
    expect(trigger.metadata.listName).toBe(`onnx-gateway:${chunkQueueName}:wait`);
    const redis = new URL(envValue('ONNX_GATEWAY_REDIS_URL'));
    expect(trigger.metadata.address).toBe(redis.host);
  });

  it('gives the drain time to finish before the pod is killed', () => {
    const preStopSeconds = Number(container.lifecycle.preStop.exec.command.at(-1));
    const drainMs = Number(envValue('ONNX_GATEWAY_SHUTDOWN_TIMEOUT'));
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(preStopSeconds * 1000 + drainMs);
  });

  it('points each Service at pods that exist, on a port they declare', () => {
    for (const service of docs.filter((doc) => doc.kind === 'Service')) {
      const target = docs.find(
        (doc): doc is Deployment =>
          doc.kind === 'Deployment' &&
          Object.entries(service.spec.selector).every(([k, v]) => doc.spec.template.metadata.labels[k] === v),
      );
      expect(target, service.metadata.name).toBeDefined();
      const ports = target!.spec.template.spec.containers.flatMap((c) =>
        c.ports.flatMap((p) => [p.name, p.containerPort]),
      );
      for (const port of service.spec.ports) expect(ports, service.metadata.name).toContain(port.targetPort);
    }
  });

  it('runs Redis for shared state at the address the gateway is given', () => {
    const url = new URL(envValue('ONNX_GATEWAY_REDIS_URL'));
    const service = find('Service', url.hostname);
    expect(service).toBeDefined();
    expect(service!.spec.ports.map((p) => p.port)).toContain(Number(url.port));
    const redis = find('Deployment', url.hostname)!;
    const args = redis.spec.template.spec.containers[0].args ?? [];
    // BullMQ loses jobs if Redis evicts keys.
    expect(args[args.indexOf('--maxmemory-policy') + 1]).toBe('noeviction');
  });
});
