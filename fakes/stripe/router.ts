/**
 * Maps a request to a path template of Stripe's spec (literal segments beat `{params}`, so
 * `/v1/customers/search` is not customer 'search') and to the fake's handler for it, if any.
 */
import type { Route } from './routes.ts';
import { type PathInfo, specPaths } from './spec/index.ts';

interface Template {
  template: string;
  segments: string[];
  info?: PathInfo;
}

export interface Resolved {
  template: string;
  path: Record<string, string>;
  route?: Route;
  info?: PathInfo;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function segmentsOf(path: string): string[] {
  return path.split('/').filter((s) => s !== '');
}

/** Literal segments first, left to right: the most specific template wins. */
function moreSpecific(a: Template, b: Template): boolean {
  for (let i = 0; i < a.segments.length; i++) {
    const la = !(a.segments[i] as string).startsWith('{');
    const lb = !(b.segments[i] as string).startsWith('{');
    if (la !== lb) return la;
  }
  return false;
}

export class Router {
  private readonly byMethod = new Map<string, Template[]>();
  private readonly routes = new Map<string, Route>();

  constructor(routes: Route[]) {
    for (const info of specPaths()) this.addTemplate(info.method, info.path, info);
    for (const r of routes) {
      const key = `${r.method} ${r.template}`;
      if (this.routes.has(key)) throw new Error(`two handlers for ${key}`);
      this.routes.set(key, r);
      if (!this.templates(r.method).some((t) => t.template === r.template)) this.addTemplate(r.method, r.template);
    }
  }

  private templates(method: string): Template[] {
    let list = this.byMethod.get(method);
    if (!list) this.byMethod.set(method, (list = []));
    return list;
  }

  private addTemplate(method: string, template: string, info?: PathInfo): void {
    this.templates(method).push({ template, segments: segmentsOf(template), ...(info ? { info } : {}) });
  }

  route(method: string, template: string): Route | undefined {
    return this.routes.get(`${method} ${template}`);
  }

  resolve(method: string, pathname: string): Resolved | undefined {
    const segs = segmentsOf(pathname);
    let best: Template | undefined;
    let bestParams: Record<string, string> = {};
    for (const t of this.byMethod.get(method) ?? []) {
      if (t.segments.length !== segs.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < segs.length && ok; i++) {
        const ts = t.segments[i] as string;
        const s = segs[i] as string;
        if (ts.startsWith('{')) params[ts.slice(1, -1)] = safeDecode(s);
        else ok = ts === s;
      }
      if (ok && (!best || moreSpecific(t, best))) {
        best = t;
        bestParams = params;
      }
    }
    if (!best) return undefined;
    const route = this.routes.get(`${method} ${best.template}`);
    return { template: best.template, path: bestParams, ...(route ? { route } : {}), ...(best.info ? { info: best.info } : {}) };
  }
}
