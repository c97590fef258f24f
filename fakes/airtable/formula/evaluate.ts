import type { FormulaNode } from './ast.ts';
import { callFunction, type FunctionContext } from './functions.ts';
import { compare, FDate, FError, type FValue, toNumber, toText, truthy } from './values.ts';

export interface EvalEnv extends FunctionContext {
  /** The formula value of a field of the current record. */
  field(fieldId: string): FValue;
  /** Bound for rollup formulas. */
  values?: FValue[];
}

export function evaluate(node: FormulaNode, env: EvalEnv): FValue {
  switch (node.k) {
    case 'num':
      return node.v;
    case 'str':
      return node.v;
    case 'bool':
      return node.v;
    case 'field':
      return env.field(node.id);
    case 'values':
      return env.values ?? [];
    case 'neg': {
      const n = toNumber(evaluate(node.e, env));
      return n instanceof FError ? n : -n;
    }
    case 'call': {
      if (node.fn === 'IF') {
        const cond = evaluate(node.args[0] as FormulaNode, env);
        if (cond instanceof FError) return cond;
        const branch = truthy(cond) ? node.args[1] : node.args[2];
        return branch ? evaluate(branch, env) : null;
      }
      return callFunction(
        node.fn,
        node.args.map((a) => evaluate(a, env)),
        env,
      );
    }
    case 'bin': {
      const l = evaluate(node.l, env);
      const r = evaluate(node.r, env);
      switch (node.op) {
        case '&':
          if (l instanceof FError) return l;
          if (r instanceof FError) return r;
          return toText(l) + toText(r);
        case '+':
        case '-':
        case '*':
        case '/': {
          if (node.op === '+' && (l instanceof FDate || r instanceof FDate)) return new FError();
          const a = toNumber(l);
          const b = toNumber(r);
          if (a instanceof FError) return a;
          if (b instanceof FError) return b;
          if (node.op === '+') return a + b;
          if (node.op === '-') return a - b;
          if (node.op === '*') return a * b;
          return a / b;
        }
        default: {
          const c = compare(l, r);
          if (c instanceof FError) return c;
          switch (node.op) {
            case '=':
              return c === 0;
            case '!=':
              return c !== 0;
            case '<':
              return c < 0;
            case '>':
              return c > 0;
            case '<=':
              return c <= 0;
            default:
              return c >= 0;
          }
        }
      }
    }
  }
}

/** The `result.type` Airtable reports for a formula, inferred from its outermost operation. */
export type ResultType = 'number' | 'singleLineText' | 'checkbox' | 'dateTime' | 'multipleLookupValues';

const NUMBER_FUNCTIONS = new Set([
  'LEN',
  'SUM',
  'MAX',
  'MIN',
  'AVERAGE',
  'COUNT',
  'COUNTA',
  'COUNTALL',
  'ROUND',
  'ABS',
  'VALUE',
  'FIND',
  'SEARCH',
  'DATETIME_DIFF',
  'YEAR',
]);
const BOOLEAN_FUNCTIONS = new Set(['AND', 'OR', 'NOT', 'XOR', 'TRUE', 'FALSE', 'IS_AFTER', 'IS_BEFORE', 'IS_SAME', 'ISERROR']);
const DATE_FUNCTIONS = new Set(['CREATED_TIME', 'LAST_MODIFIED_TIME', 'NOW', 'TODAY', 'DATETIME_PARSE']);
const ARRAY_FUNCTIONS = new Set(['ARRAYUNIQUE', 'ARRAYCOMPACT']);

export function inferResultType(node: FormulaNode, fieldResult: (fieldId: string) => ResultType): ResultType {
  switch (node.k) {
    case 'num':
    case 'neg':
      return 'number';
    case 'str':
      return 'singleLineText';
    case 'bool':
      return 'checkbox';
    case 'field':
      return fieldResult(node.id);
    case 'values':
      return 'multipleLookupValues';
    case 'bin':
      if (node.op === '&') return 'singleLineText';
      if (['+', '-', '*', '/'].includes(node.op)) return 'number';
      return 'checkbox';
    case 'call':
      if (node.fn === 'IF') return inferResultType(node.args[1] as FormulaNode, fieldResult);
      if (NUMBER_FUNCTIONS.has(node.fn)) return 'number';
      if (BOOLEAN_FUNCTIONS.has(node.fn)) return 'checkbox';
      if (DATE_FUNCTIONS.has(node.fn)) return 'dateTime';
      if (ARRAY_FUNCTIONS.has(node.fn)) return 'multipleLookupValues';
      return 'singleLineText';
  }
}

/** Formula output as cell JSON: errors as Airtable's special objects, blanks as undefined. */
export function formulaCellJson(v: FValue): unknown {
  if (v === null || v === '' || v === false) return undefined;
  if (v instanceof FError) return { error: v.code };
  if (v instanceof FDate) return new Date(v.ms).toISOString();
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return { specialValue: 'NaN' };
    if (!Number.isFinite(v)) return { specialValue: v > 0 ? 'Infinity' : '-Infinity' };
    return v;
  }
  if (Array.isArray(v)) {
    const items = v.map(formulaCellJson).filter((x) => x !== undefined);
    return items.length === 0 ? undefined : items;
  }
  return v;
}
