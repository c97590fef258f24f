import kafkajs, { type AclEntry, type AclFilter } from 'kafkajs';
import type { Secret } from '../../control/secrets.ts';
import { TributaryError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import { LazyAdmin } from './admin.ts';
import { newKafkaClient, type KafkaConnectionOptions } from './config.ts';
import { deleteScramUsers, upsertScramUsers } from './scram.ts';

const { AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes } = kafkajs;

/**
 * What an account's event credentials may do on Kafka, enforced by the
 * broker's authorizer:
 *
 * - its event username/password are a SCRAM-SHA-256 user;
 * - READ and DESCRIBE on the topics of each of its syncs: one PREFIXED topic ACL per sync,
 *   `svc.<sync_id>.` (the trailing dot keeps `svc.syn_ab.` from covering `svc.syn_abc.…`);
 * - READ and DESCRIBE on the consumer groups named `<username>` or `<username>.<anything>`
 *   (a LITERAL and a PREFIXED group ACL). Group ids are thereby the account's own: no
 *   account can join, read the offsets of or disturb another account's group. Usernames
 *   (`ev_` + 12 lowercase letters and digits) contain no dot, so no prefix covers another's.
 *
 * Nothing else: no WRITE, no CREATE, no cluster rights, nothing on other accounts' topics.
 * Every call is idempotent (the broker ignores an ACL it already has).
 */
export interface KafkaAccessOptions extends KafkaConnectionOptions {
  logger: Logger;
}

export interface AccountCredentials {
  username: string;
  password: Secret | string;
}

export interface AccountGrants extends AccountCredentials {
  /** The syncs whose topics the account may read: every sync it has, except ones being deleted. */
  syncIds: string[];
}

/** The topic prefix of a sync's topics (`svc.<sync_id>.<collection>`). */
export const syncTopicPrefix = (syncId: string) => `svc.${syncId}.`;
/** The group-id prefix an account's Kafka consumers must use (or the bare username). */
export const accountGroupPrefix = (username: string) => `${username}.`;
const principalOf = (username: string) => `User:${username}`;

const READ_OPERATIONS = [AclOperationTypes.READ, AclOperationTypes.DESCRIBE];

/** Names that end up in ACL resource names and principals: nothing a prefix could stretch. */
function checkName(kind: string, value: string): void {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(value)) {
    throw new TributaryError('internal', `${kind} "${value}" cannot be used in a Kafka ACL`, { expose: false });
  }
}

function topicAcls(username: string, syncId: string): AclEntry[] {
  return READ_OPERATIONS.map((operation) => ({
    resourceType: AclResourceTypes.TOPIC,
    resourceName: syncTopicPrefix(syncId),
    resourcePatternType: ResourcePatternTypes.PREFIXED,
    principal: principalOf(username),
    host: '*',
    operation,
    permissionType: AclPermissionTypes.ALLOW,
  }));
}

function groupAcls(username: string): AclEntry[] {
  const patterns = [
    { resourceName: username, resourcePatternType: ResourcePatternTypes.LITERAL },
    { resourceName: accountGroupPrefix(username), resourcePatternType: ResourcePatternTypes.PREFIXED },
  ];
  return patterns.flatMap((pattern) =>
    READ_OPERATIONS.map((operation) => ({
      resourceType: AclResourceTypes.GROUP,
      ...pattern,
      principal: principalOf(username),
      host: '*',
      operation,
      permissionType: AclPermissionTypes.ALLOW,
    })),
  );
}

const reveal = (password: Secret | string) => (typeof password === 'string' ? password : password.reveal());

export class KafkaAccess {
  private readonly admin: LazyAdmin;
  private readonly logger: Logger;

  constructor(private readonly options: KafkaAccessOptions) {
    this.logger = options.logger.child({ part: 'kafka-access' });
    this.admin = new LazyAdmin(newKafkaClient({ ...options, clientId: options.clientId ?? 'tributary-access' }, this.logger));
  }

  /** The account's SCRAM user (created, or its password set again) and its consumer-group rights. */
  async ensureAccount(account: AccountCredentials): Promise<void> {
    checkName('username', account.username);
    await upsertScramUsers(this.options, [{ username: account.username, password: reveal(account.password) }]);
    await this.createAcls(groupAcls(account.username));
    this.logger.info({ username: account.username }, 'Kafka user ensured');
  }

  /** Lets the account read the topics of one of its syncs. */
  async grantSync(username: string, syncId: string): Promise<void> {
    checkName('username', username);
    checkName('sync id', syncId);
    await this.createAcls(topicAcls(username, syncId));
    this.logger.info({ username, sync: syncId }, 'Kafka read access granted');
  }

  /** Takes away the account's rights on one sync's topics (the sync is being deleted). */
  async revokeSync(username: string, syncId: string): Promise<void> {
    checkName('username', username);
    checkName('sync id', syncId);
    await this.deleteAcls([
      {
        resourceType: AclResourceTypes.TOPIC,
        resourceName: syncTopicPrefix(syncId),
        resourcePatternType: ResourcePatternTypes.PREFIXED,
        principal: principalOf(username),
        host: '*',
        operation: AclOperationTypes.ANY,
        permissionType: AclPermissionTypes.ANY,
      },
    ]);
    this.logger.info({ username, sync: syncId }, 'Kafka read access revoked');
  }

  /** Removes the account's SCRAM user and every ACL of its principal. */
  async removeAccount(username: string): Promise<void> {
    checkName('username', username);
    await this.deleteAcls([
      {
        resourceType: AclResourceTypes.ANY,
        resourcePatternType: ResourcePatternTypes.ANY,
        principal: principalOf(username),
        host: '*',
        operation: AclOperationTypes.ANY,
        permissionType: AclPermissionTypes.ANY,
      },
    ]);
    await deleteScramUsers(this.options, [username]);
    this.logger.info({ username }, 'Kafka user removed');
  }

  /**
   * Startup: makes the broker match the control database for these accounts: every user
   * with its current password, its group rights and a grant per listed sync; and takes
   * away topic grants of these users on syncs no longer listed. ACLs of principals not
   * listed here (the operator's own, other deployments') are left alone.
   */
  async reconcile(accounts: AccountGrants[]): Promise<{ granted: number; revoked: number }> {
    for (const account of accounts) {
      checkName('username', account.username);
      for (const syncId of account.syncIds) checkName('sync id', syncId);
    }
    await upsertScramUsers(
      this.options,
      accounts.map((a) => ({ username: a.username, password: reveal(a.password) })),
    );
    const wanted = accounts.flatMap((a) => [...groupAcls(a.username), ...a.syncIds.flatMap((s) => topicAcls(a.username, s))]);
    await this.createAcls(wanted);

    const wantedPrefixes = new Map(accounts.map((a) => [principalOf(a.username), new Set(a.syncIds.map(syncTopicPrefix))]));
    const existing = await this.admin.run((admin) =>
      admin.describeAcls({
        resourceType: AclResourceTypes.TOPIC,
        resourcePatternType: ResourcePatternTypes.PREFIXED,
        operation: AclOperationTypes.ANY,
        permissionType: AclPermissionTypes.ANY,
      }),
    );
    const stale: AclFilter[] = [];
    for (const resource of existing.resources) {
      if (!resource.resourceName.startsWith('svc.')) continue;
      for (const acl of resource.acls) {
        const prefixes = wantedPrefixes.get(acl.principal);
        if (!prefixes || prefixes.has(resource.resourceName)) continue;
        stale.push({
          resourceType: AclResourceTypes.TOPIC,
          resourceName: resource.resourceName,
          resourcePatternType: ResourcePatternTypes.PREFIXED,
          principal: acl.principal,
          host: acl.host,
          operation: acl.operation,
          permissionType: acl.permissionType,
        });
      }
    }
    if (stale.length > 0) await this.deleteAcls(stale);
    const result = { granted: wanted.length, revoked: stale.length };
    this.logger.info({ accounts: accounts.length, ...result }, 'Kafka users and ACLs reconciled');
    return result;
  }

  async close(): Promise<void> {
    await this.admin.close();
  }

  private async createAcls(acl: AclEntry[]): Promise<void> {
    if (acl.length === 0) return;
    await this.admin.run((admin) => admin.createAcls({ acl }));
  }

  private async deleteAcls(filters: AclFilter[]): Promise<void> {
    await this.admin.run((admin) => admin.deleteAcls({ filters }));
  }
}
