import { CORE } from '../syncdb/core.ts';
import type { MigrationSet } from '../syncdb/migrate.ts';
import type { SourceKind } from './kind.ts';

/** The kind's own steps of a sync database (provisioning puts the core's first). */
export function kindSchemaOf(kind: SourceKind): MigrationSet[] {
  return kind.syncDatabaseMigrations ? [{ scope: kind.name, migrations: kind.syncDatabaseMigrations }] : [];
}

/** The steps of a sync database of `kind`: the core's, then the kind's own. */
export function schemaOf(kind: SourceKind): MigrationSet[] {
  return [CORE, ...kindSchemaOf(kind)];
}

/** The kinds this service syncs, by name. */
export class SourceKinds {
  private readonly kinds = new Map<string, SourceKind>();

  constructor(kinds: SourceKind[] = []) {
    for (const kind of kinds) this.register(kind);
  }

  register(kind: SourceKind): void {
    if (this.kinds.has(kind.name)) throw new Error(`the kind ${kind.name} is registered twice`);
    this.kinds.set(kind.name, kind);
  }

  get(name: string): SourceKind {
    const kind = this.kinds.get(name);
    if (!kind) throw new Error(`no kind ${name} is registered`);
    return kind;
  }

  /** The kind of that name, if this service has one (a name from a request or a stored row). */
  find(name: string): SourceKind | undefined {
    return this.kinds.get(name);
  }

  names(): string[] {
    return [...this.kinds.keys()];
  }
}
