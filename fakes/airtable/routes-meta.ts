import { runWrite } from './core.ts';
import { forbidden, notFound, unprocessable } from './errors.ts';
import { type BaseModel, findField, findTable, type Table } from './model.ts';
import type { Answer, RequestContext } from './request-context.ts';
import { fieldJson, tableJson } from './schema.ts';
import { addField, createTable, type FieldSpec, renameField, renameTable } from './schema-ops.ts';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function onlyKeys(body: Record<string, unknown>, allowed: string[]): void {
  const extra = Object.keys(body).filter((k) => !allowed.includes(k));
  if (extra.length > 0) throw unprocessable('INVALID_REQUEST_UNKNOWN', `Invalid request: unsupported keys ${extra.join(', ')}`);
}

function tableOf(base: BaseModel, nameOrId: string): Table {
  const table = findTable(base, nameOrId);
  if (!table) throw forbidden();
  return table;
}

export function whoami(ctx: RequestContext): Answer {
  const { user, token } = ctx.authorize(null);
  return { status: 200, body: { id: user.id, scopes: [...token.scopes] } };
}

export function listBases(ctx: RequestContext): Answer {
  const { token } = ctx.authorize('schema.bases:read');
  const bases = [...ctx.core.world.bases.values()]
    .filter((b) => ctx.core.tokens.canSee(token, b.id))
    .map((b) => ({ id: b.id, name: b.name, permissionLevel: 'create' }));
  return { status: 200, body: { bases } };
}

export function getSchema(ctx: RequestContext, baseId: string): Answer {
  const { base } = ctx.authorize('schema.bases:read', baseId);
  return { status: 200, body: { tables: (base as BaseModel).tables.map((t) => tableJson(ctx.core.world, t)) } };
}

export function postTable(ctx: RequestContext, baseId: string): Answer {
  const { base, user } = ctx.authorize('schema.bases:write', baseId);
  const body = ctx.jsonObject();
  onlyKeys(body, ['name', 'description', 'fields']);
  const table = runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) =>
    createTable(s, { name: body.name, description: body.description, fields: body.fields }, { trusted: false }),
  );
  return { status: 200, body: tableJson(ctx.core.world, table) };
}

export function patchTable(ctx: RequestContext, baseId: string, tableName: string): Answer {
  const { base, user } = ctx.authorize('schema.bases:write', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const body = ctx.jsonObject();
  onlyKeys(body, ['name', 'description']);
  runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) => renameTable(s, table, body));
  return { status: 200, body: tableJson(ctx.core.world, table) };
}

export function postField(ctx: RequestContext, baseId: string, tableName: string): Answer {
  const { base, user } = ctx.authorize('schema.bases:write', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const body = ctx.jsonObject();
  onlyKeys(body, ['name', 'type', 'description', 'options']);
  if (body.options !== undefined && !isObject(body.options)) throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'options must be an object');
  const field = runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) =>
    addField(s, table, body as unknown as FieldSpec, { trusted: false }),
  );
  return { status: 200, body: fieldJson(ctx.core.world, table, field) };
}

export function patchField(ctx: RequestContext, baseId: string, tableName: string, fieldId: string): Answer {
  const { base, user } = ctx.authorize('schema.bases:write', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const field = findField(table, fieldId);
  if (!field) throw notFound(`Could not find field ${fieldId}`);
  const body = ctx.jsonObject();
  onlyKeys(body, ['name', 'description']);
  runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) => renameField(s, table, field, body));
  return { status: 200, body: fieldJson(ctx.core.world, table, field) };
}
