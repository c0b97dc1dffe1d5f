// A single-node Apache Kafka (KRaft, broker+controller) for the test run. Debian has no Kafka, so the
// broker's jars are resolved from Maven Central with `mvn dependency:copy-dependencies` into
// <cache>/kafka/<version>/libs once (later runs reuse them), storage is formatted with a random
// cluster id in a fresh temp folder, and the broker listens on free loopback ports.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import kafkajs from 'kafkajs';
import { aptInstall } from './apt.mjs';
import { freePort, isAlive, run, tail, terminate } from './procs.mjs';

/** The newest Kafka 4.x Maven Central served when this was written; NDIF_KAFKA_VERSION overrides it. */
export const KAFKA_VERSION = '4.4.0';
/** slf4j 1.7 binding for the log4j 2 that kafka-server brings, so the broker's own logging reaches our file. */
const LOG4J_VERSION = '2.25.5';

function pom(version) {
  return `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ndif.test</groupId>
  <artifactId>kafka-broker-libs</artifactId>
  <version>${version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>${version}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>${LOG4J_VERSION}</version></dependency>
  </dependencies>
</project>
`;
}

function javaMajor(java) {
  const r = spawnSync(java, ['-version'], { encoding: 'utf8' });
  return r.status === 0 ? parseMajor(`${r.stdout}${r.stderr}`) : 0;
}

/**
 * Class-data sharing: a JVM's loaded classes archived at its first exit and mapped by the next ones
 * halve the broker's start (measured 4.8 s -> 2.7 s) and the formatter's (1.6 s -> 0.8 s). An archive
 * fits one JVM build and one classpath, so it is kept per Java version in the Kafka version's folder.
 */
function classDataSharing({ java, home, name, runDir }) {
  const r = spawnSync(java, ['-version'], { encoding: 'utf8' });
  const jvm = createHash('sha256').update(`${r.stdout}${r.stderr}`).digest('hex').slice(0, 12);
  const archive = join(home, 'cds', `${name}-${jvm}.jsa`);
  if (existsSync(archive)) return { flags: [`-XX:SharedArchiveFile=${archive}`], dumping: false, keep: () => {} };
  const fresh = join(runDir, `${name}.jsa`);
  return {
    flags: [`-XX:ArchiveClassesAtExit=${fresh}`],
    dumping: true,
    /** After the JVM exited normally: move its archive into the cache for the next runs. */
    keep: () => {
      try {
        if (!existsSync(fresh) || statSync(fresh).size === 0) return;
        mkdirSync(dirname(archive), { recursive: true });
        renameSync(fresh, archive);
      } catch {
        /* another run kept one first, or the folder is read-only: nothing lost but time */
      }
    },
  };
}
function parseMajor(text) {
  const m = /version "(\d+)(?:\.(\d+))?/.exec(text);
  if (!m) return 0;
  return m[1] === '1' ? Number(m[2]) : Number(m[1]);
}

function which(cmd) {
  try {
    return execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

async function ensureJava() {
  const candidates = [
    process.env.JAVA_HOME && join(process.env.JAVA_HOME, 'bin', 'java'),
    which('java'),
    '/usr/bin/java',
  ].filter(Boolean);
  for (const c of candidates) if (existsSync(c) && javaMajor(c) >= 17) return c;
  await aptInstall(['openjdk-17-jre-headless'], 'Java 17 for the Kafka broker');
  if (javaMajor('/usr/bin/java') >= 17) return '/usr/bin/java';
  throw new Error('Kafka 4 needs Java 17 or newer; none was found (set JAVA_HOME)');
}

async function ensureMaven() {
  const mvn = which('mvn');
  if (mvn) return mvn;
  await aptInstall(['maven'], 'Maven to fetch the Kafka broker jars');
  return which('mvn') ?? '/usr/bin/mvn';
}

/** Resolves the broker's jars once; returns the folder holding them. Safe against concurrent runs. */
export async function ensureKafkaLibs({ cacheDir, version }) {
  const home = join(cacheDir, 'kafka', version);
  const libs = join(home, 'libs');
  if (existsSync(libs)) return libs;
  mkdirSync(home, { recursive: true });
  const mvn = await ensureMaven();
  const work = mkdtempSync(join(home, 'resolve-'));
  try {
    writeFileSync(join(work, 'pom.xml'), pom(version));
    const r = await run(
      mvn,
      ['-B', '-q', 'dependency:copy-dependencies', '-DincludeScope=runtime', `-DoutputDirectory=${join(work, 'libs')}`],
      { cwd: work },
    );
    if (r.code !== 0) {
      throw new Error(
        `mvn could not resolve org.apache.kafka:kafka_2.13:${version} (exit ${r.code}); Maven Central must be reachable:\n${tail(r.stdout + r.stderr, 30)}`,
      );
    }
    writeFileSync(join(work, 'libs', 'ndif-kafka-version.txt'), `${version}\n`);
    try {
      renameSync(join(work, 'libs'), libs); // atomic: a folder named libs is always complete
    } catch (e) {
      if (!existsSync(libs)) throw e; // another run finished first: use theirs
    }
    return libs;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Where the broker's jars and class-data archives are kept: NDIF_CACHE_DIR, else the user's cache
 * folder, so that every checkout on a machine (a CI run's fresh clone too) starts the broker at once
 * after the first run resolved it.
 */
export function kafkaCacheDir() {
  return process.env.NDIF_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'ndif-fabric');
}

function serverProperties({ brokerPort, controllerPort, logDirs, partitions }) {
  return [
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
    `listeners=PLAINTEXT://127.0.0.1:${brokerPort},CONTROLLER://127.0.0.1:${controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${brokerPort}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    `log.dirs=${logDirs}`,
    `num.partitions=${partitions}`,
    'auto.create.topics.enable=true',
    'default.replication.factor=1',
    'min.insync.replicas=1',
    'offsets.topic.replication.factor=1',
    'offsets.topic.num.partitions=4',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'transaction.state.log.num.partitions=4',
    'share.coordinator.state.topic.replication.factor=1',
    'share.coordinator.state.topic.min.isr=1',
    'group.initial.rebalance.delay.ms=0',
    // lets tests use short session timeouts to see a crashed consumer's partitions move quickly
    'group.min.session.timeout.ms=1000',
    'num.network.threads=2',
    'num.io.threads=2',
    'num.recovery.threads.per.data.dir=1',
    'log.retention.hours=1',
    '',
  ].join('\n');
}

const LOG4J2 = `status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
`;

/** Polls until a kafkajs admin lists topics, then warms the group and producer-id coordinators. */
async function waitReady(brokers, child, logFile, timeoutMs) {
  const { Kafka, logLevel } = kafkajs;
  const kafka = new Kafka({
    clientId: 'ndif-test-services',
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
  });
  const end = Date.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => (exited = true));
  for (;;) {
    const admin = kafka.admin();
    try {
      await admin.connect();
      await admin.listTopics();
      break;
    } catch (e) {
      if (exited) throw brokerExit(logFile);
      if (Date.now() > end)
        throw new Error(
          `Kafka did not answer within ${timeoutMs} ms (${e.message}); broker log:\n${tail(readLog(logFile))}`,
        );
      await sleep(100);
    } finally {
      await admin.disconnect().catch(() => {});
    }
  }
  // The first consumer group and the first idempotent producer make the broker create and load
  // __consumer_offsets / the producer-id state; doing it here keeps that time out of the first test.
  const warm = new Kafka({
    clientId: 'ndif-test-services',
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { retries: 30, initialRetryTime: 50, maxRetryTime: 500 },
  });
  const admin = warm.admin();
  const producer = warm.producer({ idempotent: true });
  try {
    await admin.connect();
    await admin.fetchOffsets({ groupId: 'ndif-test-services-warmup', topics: [] }).catch(() => {});
    await producer.connect();
  } finally {
    await producer.disconnect().catch(() => {});
    await admin.disconnect().catch(() => {});
  }
}

function readLog(logFile) {
  return existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
}
function brokerExit(logFile) {
  const log = readLog(logFile);
  const err = new Error(`the Kafka broker exited during startup; broker log:\n${tail(log)}`);
  err.portInUse = /Address already in use|BindException/.test(log);
  return err;
}

/**
 * Starts a Kafka broker for this run. `reaper` (see reaper.mjs) ends it if this process dies.
 * Returns { env: { KAFKA_BROKERS }, info, stop() }.
 */
export async function startKafka({ reaper, id = 'kafka', partitions = 4 } = {}) {
  const version = process.env.NDIF_KAFKA_VERSION ?? KAFKA_VERSION;
  const cacheDir = kafkaCacheDir();
  const [java, libs] = await Promise.all([ensureJava(), ensureKafkaLibs({ cacheDir, version })]);
  const home = join(cacheDir, 'kafka', version);
  const dir = mkdtempSync(join(tmpdir(), 'ndif-kafka-'));
  reaper?.set(id, [{ rm: dir }]);
  const classpath = `${libs}/*`;
  const log4j = join(dir, 'log4j2.properties');
  writeFileSync(log4j, LOG4J2);
  const jvmCommon = [
    '-Djava.awt.headless=true',
    `-Dlog4j2.configurationFile=${log4j}`,
    '-Dlog4j2.disable.jmx=true',
    '-cp',
    classpath,
  ];
  let child;
  try {
    for (let attempt = 1; ; attempt++) {
      const brokerPort = await freePort();
      const controllerPort = await freePort();
      const logDirs = join(dir, `data-${attempt}`);
      const props = join(dir, 'server.properties');
      writeFileSync(props, serverProperties({ brokerPort, controllerPort, logDirs, partitions }));
      // A base64url id may start with '-', which the storage tool's argument parser takes for an option (1 run in 64
      // failed so): draw again until it starts with a letter or digit.
      let clusterId;
      do clusterId = randomBytes(16).toString('base64url');
      while (!/^[A-Za-z0-9]/.test(clusterId));
      // The formatter is a short-lived JVM: the C1 compiler alone starts it faster.
      const fmtCds = classDataSharing({ java, home, name: 'storage-tool', runDir: dir });
      const fmt = await run(
        java,
        [
          '-Xmx256m',
          '-XX:TieredStopAtLevel=1',
          '-XX:+UseSerialGC',
          ...fmtCds.flags,
          ...jvmCommon,
          'kafka.tools.StorageTool',
          'format',
          '-t',
          clusterId,
          '-c',
          props,
        ],
        { cwd: dir },
      );
      if (fmt.code !== 0)
        throw new Error(`kafka storage format failed (exit ${fmt.code}):\n${tail(fmt.stdout + fmt.stderr)}`);
      fmtCds.keep();
      const brokerCds = classDataSharing({ java, home, name: 'broker', runDir: dir });
      const logFile = join(dir, 'broker.log');
      const out = openSync(logFile, 'a');
      child = spawn(
        java,
        ['-Xms128m', '-Xmx512m', '-XX:+UseSerialGC', ...brokerCds.flags, ...jvmCommon, 'kafka.Kafka', props],
        {
          cwd: dir,
          detached: true,
          stdio: ['ignore', out, out],
        },
      );
      closeSync(out);
      child.unref();
      reaper?.set(id, [{ kill: child.pid, group: true, signal: 'SIGTERM', graceMs: 5000 }, { rm: dir }]);
      const brokers = [`127.0.0.1:${brokerPort}`];
      try {
        await waitReady(brokers, child, logFile, 60_000);
        const pid = child.pid;
        return {
          env: { KAFKA_BROKERS: brokers.join(',') },
          info: { dir, pid, version, libs, logFile },
          async stop() {
            // writing the class archive at exit takes a while, once
            if (isAlive(pid))
              await terminate(pid, { group: true, signal: 'SIGTERM', graceMs: brokerCds.dumping ? 60_000 : 15_000 });
            brokerCds.keep();
            rmSync(dir, { recursive: true, force: true });
            reaper?.del(id);
          },
        };
      } catch (e) {
        await terminate(child.pid, { group: true, signal: 'SIGKILL', graceMs: 3000 });
        if (!e.portInUse || attempt >= 3) throw e;
      }
    }
  } catch (e) {
    if (child?.pid) await terminate(child.pid, { group: true, signal: 'SIGKILL', graceMs: 3000 });
    rmSync(dir, { recursive: true, force: true });
    reaper?.del(id);
    throw e;
  }
}
