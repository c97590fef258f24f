import { WaitingList } from './control/waiting-list.ts';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { builtInKinds } from './kinds/built-in.ts';
import type { SourceKinds } from './kinds/registry.ts';
import type { SourceKind } from './kinds/kind.ts';
import { AttachmentLinks } from './attachments/links.ts';
import type { SyncRecord } from './control/syncs.ts';
import { DEFAULT_MARGIN_MS, QuotaLimiter } from './quota/limiter.ts';
import { runnerFactory, upstreamCleanup } from './sync/runners.ts';
import { LeaseWorker, releaseLeasesOfStoppedServer } from './lease/worker.ts';
import { upstreamBase } from './upstream/http.ts';
import { AccountStore } from './control/accounts.ts';
import { loadAdminToken, loadSecretBox } from './control/bootstrap-files.ts';
import { startDiskReport } from './control/disk-report.ts';
import { hardenServer, warnFewReserved } from './control/provisioner.ts';
import { ServerPool } from './control/servers.ts';
import { SyncService } from './control/sync-service.ts';
import { SyncStore } from './control/syncs.ts';
import { authenticator } from './api/auth.ts';
import { knownGoodInDatabase } from './credentials/known-good.ts';
import { FailedCredentials } from './credentials/throttle.ts';
import { createApiApp, type ApiApp } from './api/server.ts';
import type { EventEndpoints } from './api/views.ts';
import type { Config } from './config.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded.ts';
import { IdlePools } from './db/idle-pools.ts';
import { migrateControlDatabase } from './db/migrate.ts';
import { ident, withClient, withDatabase } from './db/sql.ts';
import { createEventsRestHandler } from './events/rest/server.ts';
import { EventLogReader } from './events/log.ts';
import { EventBus } from './events/bus.ts';
import { dropExpiredEventPartitions } from './events/log.ts';
import { decoderFactory } from './decoder/runner.ts';
import { webhookRunner } from './events/webhooks/runner.ts';
import { SharedBounds } from './events/webhooks/shared-bounds.ts';
import { backfillRunner } from './backfill/runner.ts';
import { accountGrants, createKafkaPublisher, KafkaAccess, kafkaRelayRunner } from './events/kafka/index.ts';
import { kafkaAccessHooks } from './events/kafka/hooks.ts';
import { listen, type RunningServer } from './http/listen.ts';
import type { Logger } from './log.ts';
import { createProxyHandler } from './proxy/server.ts';
import { ServiceMetrics } from './metrics/index.ts';
import { PassSignals } from './sync/pass-signals.ts';
import { SyncTables } from './api/sync-tables.ts';
import { asAccountWork } from './tenancy/account-work.ts';
import { controlPool } from './control/control-pool.ts';
import { TenantCaps } from './tenancy/limits.ts';
import { TenantScope } from './tenancy/scope.ts';
import type { Tunables } from './tunables.ts';

export { type Tunables, tunablesFromEnv } from './tunables.ts';

export interface Service {
  apiPort: number | undefined;
  proxyPort: number | undefined;
  eventsPort: number | undefined;
  controlDatabaseUrl: string;
  /** The management API's router, when this process serves the API (its routes are listed by the OpenAPI test). */
  apiRouter?: ApiApp['router'];
  /** Shuts every part down once, newest first; a second call waits for the same shutdown. */
  stop(): Promise<void>;
}

const CONTROL_DATABASE = 'tributary';

/** First start of the embedded server: its control database. */
async function prepareEmbedded(embedded: EmbeddedPostgres): Promise<string> {
  await withClient(embedded.adminUrl, async (admin) => {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [CONTROL_DATABASE]);
    if (rowCount === 0) await admin.query(`CREATE DATABASE ${ident(CONTROL_DATABASE)}`);
  });
  return withDatabase(embedded.adminUrl, CONTROL_DATABASE);
}

/** What startService is built of beyond its configuration: the kinds of sync (default: the built-in ones). */
export interface ServiceParts {
  kinds?: SourceKinds;
}

/**
 * Wires every part for the roles this process runs. Order matters on the way up
 * (secrets, database, migrations, then listeners) and is reversed on the way down.
 */
export async function startService(config: Config, logger: Logger, tunables: Tunables = {}, parts: ServiceParts = {}): Promise<Service> {
  const closers: Array<() => Promise<void>> = [];
  // One shutdown, newest part first, however many callers ask for it.
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      for (const close of [...closers].reverse()) await close();
    })());
  try {
    const box = await loadSecretBox(config, logger);
    const adminToken = await loadAdminToken(config, logger);

    let controlUrl = config.databaseUrl;
    let startedEmbedded = false;
    if (!controlUrl) {
      const embedded = await startEmbeddedPostgres({
        dir: config.dataDir,
        port: config.embeddedPgPort,
        listen: config.host,
        processMemoryMb: config.embeddedPgProcessMemoryMb,
        slotWalKeepMb: config.embeddedPgSlotWalKeepMb,
        logger: logger.child({ part: 'postgres' }),
      });
      closers.push(() => embedded.stop());
      controlUrl = await prepareEmbedded(embedded);
      startedEmbedded = embedded.startedHere;
    }
    await migrateControlDatabase(controlUrl, logger);

    // Requests run in a scope that names their account; the control pool shares its ten
    // connections by it, so that no account's requests hold them all.
    const tenantScope = new TenantScope({ requestsPerAccount: config.tenantLimits.requests });
    const pool = controlPool({
      url: controlUrl,
      scope: tenantScope,
      perTenant: config.tenantLimits.controlConnections,
      queryTimeoutMs: tunables.controlDb?.queryTimeoutMs,
      logger,
    });
    closers.push(() => pool.end());
    if (startedEmbedded) await releaseLeasesOfStoppedServer(pool, logger);

    // Sync readers live on the pool's servers: they may open their own database and nothing else.
    const sharedServerUrl = config.targetDatabaseUrl ?? controlUrl;
    const controlDatabase = new URL(controlUrl).pathname.slice(1);
    await hardenServer(sharedServerUrl, [controlDatabase]);
    await warnFewReserved(sharedServerUrl, logger);

    const accounts = new AccountStore(pool, box);
    const syncs = new SyncStore(pool, box);
    // The configured server is the pool's first member; syncs made before the pool are its.
    const servers = new ServerPool({
      pool,
      box,
      configuredUrl: sharedServerUrl,
      protectedDatabases: [controlDatabase],
      logger: logger.child({ part: 'control' }),
    });
    await servers.ensureConfigured(config.defaultRegion);
    // The embedded server's free disk, in its row of the pool (docs/operations.md#wal-retention).
    if (!config.databaseUrl && !config.targetDatabaseUrl) closers.push(startDiskReport({ pool, dir: config.dataDir, logger }));
    // The upstreams this service syncs: each kind is one folder and one object.
    const kinds = parts.kinds ?? builtInKinds();
    const limiter = new QuotaLimiter({ pool, marginMs: DEFAULT_MARGIN_MS / (tunables.airtable?.timeScale ?? 1) });
    const kindContext = (kind: SourceKind) => ({
      baseUrl: upstreamBase(config.upstreams, kind.upstreamHost),
      limiter,
      logger: logger.child({ part: 'control' }),
      control: pool,
    });
    const ports: Partial<Record<'api' | 'proxy' | 'events', number>> = {};
    // Read as each link is made: with port 0 the API's port is known only once it listens.
    const origin = () => config.publicOrigin ?? `http://${config.publicHost}:${ports.api ?? config.apiPort}`;
    const attachmentLinks = new AttachmentLinks({ key: box.derive('attachment links'), origin });
    // Created after the service exists, since cleanup needs the service's database URLs.
    let cleanup: ((sync: SyncRecord) => Promise<void>) | undefined;
    const syncService: SyncService = new SyncService({
      store: syncs,
      servers,
      defaultRegion: config.defaultRegion,
      serverUrlPolicy: { allowPrivate: config.databaseAllowPrivate, ownServers: [controlUrl, sharedServerUrl] },
      kinds,
      kindContext,
      upstreamCleanup: (sync) => cleanup?.(sync) ?? Promise.resolve(),
      // The embedded server is reached where the service is; an external one at its own host unless told otherwise.
      publicHost: config.publicHostSet || (!config.databaseUrl && !config.targetDatabaseUrl) ? config.publicHost : undefined,
      logger: logger.child({ part: 'control' }),
    });
    // The wait endpoint's signals: wait requests wake sync runners, completed passes wake waiters.
    const passes =
      config.roles.includes('api') || config.roles.includes('sync')
        ? new PassSignals({ url: controlUrl, logger: logger.child({ part: 'passes' }), heartbeatMs: tunables.controlDb?.heartbeatMs })
        : undefined;
    const metrics = new ServiceMetrics({ pool, kafka: config.kafkaBrokers.length > 0, statusBounds: tunables.status });
    const runnerOptions = {
      control: pool,
      store: syncs,
      syncService,
      limiter,
      upstreams: config.upstreams,
      logger,
      passRequests: passes,
      kinds,
      tunables: tunables as Record<string, unknown>,
      readerCheckMs: tunables.readerCheckMs,
      publicOrigin: config.publicOrigin,
      attachmentLinks,
    };
    cleanup = upstreamCleanup(runnerOptions);
    // Read when an answer is made: with port 0 the real port is known only once listening.
    const events: EventEndpoints = {
      get restUrl() {
        return `http://${config.publicHost}:${ports.events ?? config.eventsPort}`;
      },
      kafkaBrokers: config.kafkaBrokers,
    };
    const serve = async (name: 'api' | 'proxy' | 'events', handler: Parameters<typeof listen>[0], port: number) => {
      const server: RunningServer = await listen(handler, { host: config.host, port });
      closers.push(() => server.close());
      ports[name] = server.port;
      logger.info({ role: name, address: `http://${config.publicHost}:${server.port}` }, `${name} listening`);
    };

    // Kafka on: the accounts' event credentials are SCRAM users with read ACLs on their topics.
    const kafkaOn = config.kafkaBrokers.length > 0;
    let eventAccess: ReturnType<typeof kafkaAccessHooks> | undefined;
    if (kafkaOn && config.roles.includes('api')) {
      const access = new KafkaAccess({ brokers: config.kafkaBrokers, logger: logger.child({ part: 'kafka' }) });
      closers.push(() => access.close());
      eventAccess = kafkaAccessHooks({ access, accounts, pool, logger: logger.child({ part: 'kafka' }) });
      // In the background: a broker that is down must not hold up the API; the hooks retry nothing, the next start repairs.
      void accountGrants({ pool, accounts })
        .then((grants) => access.reconcile(grants))
        .catch((err: unknown) => logger.warn({ err }, 'could not bring Kafka users and ACLs in step with the accounts'));
    }

    // The API's wait endpoint needs the bus too (the decoder reports wait markers through it).
    const needsBus = config.roles.includes('api') || config.roles.includes('decoder') || config.roles.includes('events');
    const bus = needsBus
      ? new EventBus({ url: controlUrl, logger: logger.child({ part: 'events' }), heartbeatMs: tunables.controlDb?.heartbeatMs })
      : undefined;
    if (bus) {
      await bus.start();
      closers.push(() => bus.stop());
    }
    if (passes) {
      await passes.start();
      closers.push(() => passes.stop());
    }

    // One throttle for the API and the event REST interface of this process: an address's
    // failures count against one allowance, whichever interface they were tried on.
    const throttle = new FailedCredentials({
      logger: logger.child({ part: 'credentials' }),
      limits: config.failedCredentials,
      store: knownGoodInDatabase(pool),
    });
    if (config.roles.includes('api') || config.roles.includes('events')) await throttle.start(); // only they check credentials

    let apiRouter: ApiApp['router'] | undefined;
    if (config.roles.includes('api')) {
      const recovered = await syncService.reconcile();
      if (recovered > 0) logger.warn({ count: recovered }, 'finished interrupted sync creates and deletes');
      await syncs.fillKeyDigests(kinds.names().filter((name) => kinds.get(name).keyNamesAccount));
      const markerPools = new IdlePools();
      closers.push(() => markerPools.close());
      const syncTables = new SyncTables({ syncService, logger: logger.child({ part: 'console' }) });
      closers.push(() => syncTables.close());
      const app = createApiApp({
        pool,
        markerPools,
        accounts,
        syncs,
        syncService,
        servers,
        kinds,
        waitingList: new WaitingList(pool, config.waitingListKinds),
        authenticate: authenticator(accounts, adminToken, throttle),
        events,
        logger,
        box,
        webhookAllowPrivate: config.webhookAllowPrivate,
        eventRetentionMs: config.eventRetentionMs,
        publicOrigin: config.publicOrigin,
        reverseProxies: config.reverseProxies,
        eventAccess,
        proxyUrl: () => `http://${config.publicHost}:${ports.proxy ?? config.proxyPort}`,
        apiUrl: () => `http://${config.publicHost}:${ports.api ?? config.apiPort}`,
        attachmentLinks,
        kindContext,
        attachmentUrlTtlMs: tunables.attachmentUrlTtlMs,
        bus,
        passes,
        metrics,
        syncTables,
        tenantScope,
        caps: new TenantCaps(config.tenantLimits),
        backfillLimits: config.backfillLimits,
        statusBounds: tunables.status,
      });
      apiRouter = app.router;
      await serve('api', app.callback(), config.apiPort);
      // Closers run in reverse: waits end (503) before the API drains its connections. PassSignals.stop() may run twice.
      if (passes) closers.push(() => passes.stop());
    }
    if (config.roles.includes('sync')) {
      const worker = new LeaseWorker({
        control: pool,
        workerId: `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
        logger: logger.child({ part: 'sync' }),
        makeRunner: runnerFactory({ ...runnerOptions, logger: logger.child({ part: 'sync' }) }),
        tickMs: tunables.workerTickMs,
        maxSyncs: config.maxSyncsPerProcess,
      });
      worker.start();
      passes?.onSyncReady(() => worker.claimSoon());
      closers.push(() => worker.stop());
    }
    if (config.roles.includes('decoder') && bus) {
      const { leaseMs, ...decoderTunables } = tunables.decoder ?? {};
      const publisher = kafkaOn ? createKafkaPublisher({ brokers: config.kafkaBrokers, logger: logger.child({ part: 'kafka' }) }) : undefined;
      if (publisher) closers.push(() => publisher.close());
      const decoders = new LeaseWorker({
        control: pool,
        maxSyncs: config.maxSyncsPerProcess,
        workerId: `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
        logger: logger.child({ part: 'decoder' }),
        makeRunner: decoderFactory({
          kinds,
          control: pool,
          store: syncs,
          syncService,
          bus,
          logger: logger.child({ part: 'decoder' }),
          partitions: config.eventPartitions,
          tunables: decoderTunables,
          alongside: [
            // Each of these names its own part (and sync) in its log lines.
            backfillRunner({ control: pool, syncs, syncService, kinds, bus, logger, tuning: tunables.backfills, limits: config.backfillLimits }),
            webhookRunner({
              pool,
              box,
              bounds: new SharedBounds(config.webhookBounds), // one for every sync's webhooks in this process
              reader: new EventLogReader(pool),
              bus,
              logger,
              allowPrivate: config.webhookAllowPrivate,
              schedule: tunables.webhooks?.schedule,
              tuning: { maxExhausted: config.webhookMaxExhausted, disableAfterMs: config.webhookDisableAfterMs, ...tunables.webhooks?.tuning },
            }),
            ...(publisher ? [kafkaRelayRunner({ pool, reader: new EventLogReader(pool), bus, kafka: publisher, logger })] : []),
          ].map((make) => asAccountWork(tenantScope, async (id) => (await syncs.get(id))?.accountId, make)),
        }),
        tickMs: tunables.workerTickMs,
        leaseMs,
        lease: { owner: 'decoder_lease_owner', until: 'decoder_lease_until' },
        // One decoder per database: leased by the sync that made it, serving every sync in it.
        claimable: 'database_of IS NULL',
      });
      decoders.start();
      closers.push(() => decoders.stop());
      // Retention: whole day partitions go once they are older than the retention.
      const retention = setInterval(() => {
        dropExpiredEventPartitions(pool, config.eventRetentionMs).catch((err: unknown) => logger.warn({ err }, 'could not drop expired event partitions'));
      }, 3_600_000);
      retention.unref();
      closers.push(async () => clearInterval(retention));
      await dropExpiredEventPartitions(pool, config.eventRetentionMs);
    }
    if (config.roles.includes('proxy')) {
      const proxy = createProxyHandler({
        pool,
        syncs,
        syncService,
        kinds,
        limiter,
        upstreams: config.upstreams,
        logger: logger.child({ part: 'proxy' }),
        timeScale: tunables.airtable?.timeScale,
        metrics,
        writeThroughPatienceMs: tunables.proxy?.writeThroughPatienceMs,
        attachmentLinks,
      });
      // Pushed before the listener's closer: closers run in reverse, so the listener drains first,
      // then requests in flight finish their write-through and the pools close.
      closers.push(() => proxy.close());
      await serve('proxy', proxy, config.proxyPort);
    }
    if (config.roles.includes('events') && bus) {
      const rest = createEventsRestHandler({
        pool,
        accounts,
        reader: new EventLogReader(pool),
        bus,
        logger: logger.child({ part: 'events-rest' }),
        throttle,
        reverseProxies: config.reverseProxies,
        limits: { groupRetentionMs: config.consumerGroupRetentionMs, maxLongPollsPerAccount: config.tenantLimits.longPolls, ...tunables.eventsRest },
        scope: tenantScope,
      });
      await serve('events', rest, config.eventsPort);
      // Closers run in reverse: waiting long polls end before the listener drains its connections.
      closers.push(() => rest.close());
    }

    return { apiPort: ports.api, proxyPort: ports.proxy, eventsPort: ports.events, controlDatabaseUrl: controlUrl, apiRouter, stop };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}
