/** What a resource module registers: handlers for spec path templates. */
import type { Ctx } from './context.ts';
import type { Params } from './params.ts';
import type { ParamSchema } from './spec/index.ts';

export interface Call {
  ctx: Ctx;
  /** Validated parameters (form body for POST, query otherwise). */
  params: Params;
  /** Path parameters by the template's names: `{customer}` → path.customer. */
  path: Record<string, string>;
  /** The request path, for list `url`s of nested resources. */
  url: string;
}

export type Handler = (call: Call) => unknown;

export interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  /** Spec path template, e.g. '/v1/customers/{customer}'. */
  template: string;
  /** Restricted-key permission group; GETs need read, everything else write. */
  group: string;
  handler: Handler;
  /** For templates the current spec no longer has (legacy endpoints). */
  schema?: ParamSchema;
}
