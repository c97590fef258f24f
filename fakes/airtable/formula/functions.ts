import { FDate, FError, type FValue, firstError, flatten, isBlank, toDate, toNumber, toText, truthy } from './values.ts';

/** What a function can see of the record it runs for. */
export interface FunctionContext {
  recordId: string;
  createdTime: number;
  modifiedTime: number;
  now: number;
}

const MANY = Number.POSITIVE_INFINITY;

/** Every supported function and its [min, max] argument count; the parser rejects the rest. */
export const FUNCTION_ARITY: Record<string, [number, number]> = {
  AND: [1, MANY],
  OR: [1, MANY],
  NOT: [1, 1],
  IF: [2, 3],
  XOR: [1, MANY],
  TRUE: [0, 0],
  FALSE: [0, 0],
  BLANK: [0, 0],
  ISERROR: [1, 1],
  RECORD_ID: [0, 0],
  CREATED_TIME: [0, 0],
  LAST_MODIFIED_TIME: [0, MANY],
  NOW: [0, 0],
  TODAY: [0, 0],
  IS_AFTER: [2, 2],
  IS_BEFORE: [2, 2],
  IS_SAME: [2, 3],
  DATETIME_PARSE: [1, 3],
  DATETIME_DIFF: [2, 3],
  YEAR: [1, 1],
  LEN: [1, 1],
  UPPER: [1, 1],
  LOWER: [1, 1],
  TRIM: [1, 1],
  LEFT: [2, 2],
  RIGHT: [2, 2],
  FIND: [2, 3],
  SEARCH: [2, 3],
  SUBSTITUTE: [3, 3],
  CONCATENATE: [1, MANY],
  VALUE: [1, 1],
  T: [1, 1],
  SUM: [1, MANY],
  MAX: [1, MANY],
  MIN: [1, MANY],
  AVERAGE: [1, MANY],
  COUNT: [1, MANY],
  COUNTA: [1, MANY],
  COUNTALL: [1, MANY],
  ROUND: [1, 2],
  ABS: [1, 1],
  ARRAYJOIN: [1, 2],
  ARRAYUNIQUE: [1, 1],
  ARRAYCOMPACT: [1, 1],
};

/** Functions whose arguments are all evaluated before the call (IF is lazy and handled by the evaluator). */
export function callFunction(fn: string, args: FValue[], ctx: FunctionContext): FValue {
  const arg = (i: number): FValue => (args[i] === undefined ? null : (args[i] as FValue));
  const numbersOf = (): number[] | FError => {
    const out: number[] = [];
    for (const v of flatten(args)) {
      if (v instanceof FError) return v;
      if (v === null || v === '') continue;
      const n = toNumber(v);
      if (n instanceof FError) continue; // aggregate functions skip text, like Airtable
      out.push(n);
    }
    return out;
  };
  const text = (i: number): string | FError => {
    const v = arg(i);
    return v instanceof FError ? v : toText(v);
  };
  const withText = (i: number, f: (s: string) => FValue): FValue => {
    const s = text(i);
    return s instanceof FError ? s : f(s);
  };
  const dates = (): [FDate | null, FDate | null] | FError => {
    const a = toDate(arg(0));
    const b = toDate(arg(1));
    if (a instanceof FError) return a;
    if (b instanceof FError) return b;
    return [a, b];
  };

  switch (fn) {
    case 'AND':
      return firstError(flatten(args)) ?? flatten(args).every(truthy);
    case 'OR':
      return firstError(flatten(args)) ?? flatten(args).some(truthy);
    case 'XOR':
      return firstError(flatten(args)) ?? flatten(args).filter(truthy).length % 2 === 1;
    case 'NOT':
      return arg(0) instanceof FError ? arg(0) : !truthy(arg(0));
    case 'TRUE':
      return true;
    case 'FALSE':
      return false;
    case 'BLANK':
      return null;
    case 'ISERROR':
      return arg(0) instanceof FError || (typeof arg(0) === 'number' && !Number.isFinite(arg(0) as number));
    case 'RECORD_ID':
      return ctx.recordId;
    case 'CREATED_TIME':
      return new FDate(ctx.createdTime);
    case 'LAST_MODIFIED_TIME':
      return new FDate(ctx.modifiedTime);
    case 'NOW':
      return new FDate(ctx.now);
    case 'TODAY':
      return new FDate(Math.floor(ctx.now / 86_400_000) * 86_400_000);
    case 'IS_AFTER':
    case 'IS_BEFORE': {
      const d = dates();
      if (d instanceof FError) return d;
      const [a, b] = d;
      if (a === null || b === null) return false;
      return fn === 'IS_AFTER' ? a.ms > b.ms : a.ms < b.ms;
    }
    case 'IS_SAME': {
      const d = dates();
      if (d instanceof FError) return d;
      const [a, b] = d;
      if (a === null || b === null) return false;
      const unit = toText(arg(2)).toLowerCase();
      const cut = unit === 'day' || unit === 'days' ? 10 : unit === 'month' ? 7 : unit === 'year' ? 4 : 24;
      return new Date(a.ms).toISOString().slice(0, cut) === new Date(b.ms).toISOString().slice(0, cut);
    }
    case 'DATETIME_PARSE':
      return toDate(arg(0)) ?? null;
    case 'DATETIME_DIFF': {
      const d = dates();
      if (d instanceof FError) return d;
      const [a, b] = d;
      if (a === null || b === null) return null;
      const unit = toText(arg(2) ?? 'seconds').toLowerCase();
      const per: Record<string, number> = { milliseconds: 1, seconds: 1000, minutes: 60_000, hours: 3_600_000, days: 86_400_000 };
      return Math.trunc((a.ms - b.ms) / (per[unit] ?? 1000));
    }
    case 'YEAR': {
      const d = toDate(arg(0));
      return d instanceof FDate ? new Date(d.ms).getUTCFullYear() : d;
    }
    case 'LEN':
      return withText(0, (s) => s.length);
    case 'UPPER':
      return withText(0, (s) => s.toUpperCase());
    case 'LOWER':
      return withText(0, (s) => s.toLowerCase());
    case 'TRIM':
      return withText(0, (s) => s.trim());
    case 'T':
      return typeof arg(0) === 'string' ? arg(0) : '';
    case 'LEFT':
    case 'RIGHT': {
      const n = toNumber(arg(1));
      if (n instanceof FError) return n;
      return withText(0, (s) => (fn === 'LEFT' ? s.slice(0, Math.max(0, n)) : n <= 0 ? '' : s.slice(-n)));
    }
    case 'FIND':
    case 'SEARCH': {
      const needle = text(0);
      const hay = text(1);
      if (needle instanceof FError) return needle;
      if (hay instanceof FError) return hay;
      const from = args.length > 2 ? toNumber(arg(2)) : 0;
      if (from instanceof FError) return from;
      const i = fn === 'FIND' ? hay.indexOf(needle, Math.max(0, from - 1)) : hay.toLowerCase().indexOf(needle.toLowerCase(), Math.max(0, from - 1));
      return i < 0 ? (fn === 'FIND' ? 0 : null) : i + 1;
    }
    case 'SUBSTITUTE': {
      const [s, from, to] = [text(0), text(1), text(2)];
      if (s instanceof FError) return s;
      if (from instanceof FError) return from;
      if (to instanceof FError) return to;
      return from === '' ? s : s.split(from).join(to);
    }
    case 'CONCATENATE': {
      const err = firstError(args);
      return err ?? args.map(toText).join('');
    }
    case 'VALUE': {
      const v = arg(0);
      if (typeof v === 'string') {
        const n = Number(v.replace(/[^0-9.eE+-]/g, ''));
        return Number.isNaN(n) ? new FError() : n;
      }
      return toNumber(v);
    }
    case 'SUM':
    case 'MAX':
    case 'MIN':
    case 'AVERAGE': {
      const nums = numbersOf();
      if (nums instanceof FError) return nums;
      if (fn === 'SUM') return nums.reduce((a, b) => a + b, 0);
      if (nums.length === 0) return fn === 'AVERAGE' ? new FError() : 0;
      if (fn === 'MAX') return Math.max(...nums);
      if (fn === 'MIN') return Math.min(...nums);
      return nums.reduce((a, b) => a + b, 0) / nums.length;
    }
    case 'COUNT':
      return flatten(args).filter((v) => typeof v === 'number').length;
    case 'COUNTA':
      return flatten(args).filter((v) => !isBlank(v)).length;
    case 'COUNTALL':
      return flatten(args).length;
    case 'ROUND': {
      const n = toNumber(arg(0));
      const p = args.length > 1 ? toNumber(arg(1)) : 0;
      if (n instanceof FError) return n;
      if (p instanceof FError) return p;
      const f = 10 ** Math.trunc(p);
      return Math.round(n * f) / f;
    }
    case 'ABS': {
      const n = toNumber(arg(0));
      return n instanceof FError ? n : Math.abs(n);
    }
    case 'ARRAYJOIN': {
      const items = flatten(Array.isArray(arg(0)) ? (arg(0) as FValue[]) : [arg(0)]);
      const err = firstError(items);
      const sep = args.length > 1 ? toText(arg(1)) : ', ';
      return (
        err ??
        items
          .filter((v) => !isBlank(v))
          .map(toText)
          .join(sep)
      );
    }
    case 'ARRAYUNIQUE': {
      const items = flatten(Array.isArray(arg(0)) ? (arg(0) as FValue[]) : [arg(0)]);
      const seen = new Set<string>();
      return items.filter((v) => {
        const key = toText(v);
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      });
    }
    case 'ARRAYCOMPACT': {
      const items = flatten(Array.isArray(arg(0)) ? (arg(0) as FValue[]) : [arg(0)]);
      return items.filter((v) => !isBlank(v));
    }
    default:
      return new FError();
  }
}
