import { type BinaryOp, type CompiledFormula, type FieldRefSpan, type FormulaNode, FormulaSyntaxError } from './ast.ts';
import { FUNCTION_ARITY } from './functions.ts';

type Token =
  | { t: 'num'; v: number; pos: number }
  | { t: 'str'; v: string; pos: number }
  | { t: 'ref'; name: string; pos: number; end: number }
  | { t: 'ident'; name: string; pos: number; end: number }
  | { t: 'op'; v: string; pos: number };

const OPERATORS = ['!=', '<=', '>=', '<>', '=', '<', '>', '&', '+', '-', '*', '/', '(', ')', ','];

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '{') {
      const start = i;
      let name = '';
      i++;
      while (i < text.length && text[i] !== '}') {
        if (text[i] === '\\' && i + 1 < text.length) i++;
        name += text[i];
        i++;
      }
      if (i >= text.length) throw new FormulaSyntaxError('unterminated field reference');
      i++;
      tokens.push({ t: 'ref', name, pos: start, end: i });
    } else if (c === '"' || c === "'") {
      const start = i;
      let value = '';
      i++;
      while (i < text.length && text[i] !== c) {
        if (text[i] === '\\' && i + 1 < text.length) {
          i++;
          const e = text[i];
          value += e === 'n' ? '\n' : e === 't' ? '\t' : e;
        } else {
          value += text[i];
        }
        i++;
      }
      if (i >= text.length) throw new FormulaSyntaxError('unterminated string');
      i++;
      tokens.push({ t: 'str', v: value, pos: start });
    } else if (/[0-9.]/.test(c)) {
      const m = /^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(text.slice(i));
      if (!m) throw new FormulaSyntaxError(`unexpected "${c}"`);
      tokens.push({ t: 'num', v: Number(m[0]), pos: i });
      i += m[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i)) as RegExpExecArray;
      tokens.push({ t: 'ident', name: m[0], pos: i, end: i + m[0].length });
      i += m[0].length;
    } else {
      const op = OPERATORS.find((o) => text.startsWith(o, i));
      if (!op) throw new FormulaSyntaxError(`unexpected "${c}"`);
      tokens.push({ t: 'op', v: op === '<>' ? '!=' : op, pos: i });
      i += op.length;
    }
  }
  return tokens;
}

export interface ParseOptions {
  /** Resolves a field name (or id) to a field id; undefined means unknown. */
  resolveField(nameOrId: string): string | undefined;
  /** Rollup formulas may use the bare word `values`. */
  allowValues?: boolean;
}

/** Parses and resolves a formula; throws FormulaSyntaxError for bad syntax or unknown names. */
export function compileFormula(text: string, options: ParseOptions): CompiledFormula {
  if (text.length > 100_000) throw new FormulaSyntaxError('formula too long');
  const tokens = tokenize(text);
  const refs: FieldRefSpan[] = [];
  const unknown: string[] = [];
  let pos = 0;
  let depth = 0;

  const peek = (): Token | undefined => tokens[pos];
  const isOp = (v: string) => {
    const tok = tokens[pos];
    return tok !== undefined && tok.t === 'op' && tok.v === v;
  };
  const expect = (v: string) => {
    if (!isOp(v)) throw new FormulaSyntaxError(`expected "${v}"`);
    pos++;
  };

  const fieldRef = (name: string, start: number, end: number): FormulaNode => {
    const id = options.resolveField(name);
    if (id === undefined) {
      unknown.push(name);
      return { k: 'str', v: '' };
    }
    refs.push({ start, end, fieldId: id });
    return { k: 'field', id };
  };

  const primary = (): FormulaNode => {
    const tok = peek();
    if (!tok) throw new FormulaSyntaxError('unexpected end of formula');
    pos++;
    switch (tok.t) {
      case 'num':
        return { k: 'num', v: tok.v };
      case 'str':
        return { k: 'str', v: tok.v };
      case 'ref':
        return fieldRef(tok.name, tok.pos, tok.end);
      case 'ident': {
        if (isOp('(')) {
          pos++;
          const fn = tok.name.toUpperCase();
          const arity = FUNCTION_ARITY[fn];
          if (!arity) throw new FormulaSyntaxError(`unknown function ${tok.name}`);
          const args: FormulaNode[] = [];
          if (!isOp(')')) {
            args.push(expression());
            while (isOp(',')) {
              pos++;
              args.push(expression());
            }
          }
          expect(')');
          if (args.length < arity[0] || args.length > arity[1]) {
            throw new FormulaSyntaxError(`wrong number of arguments to ${fn}`);
          }
          return { k: 'call', fn, args };
        }
        const upper = tok.name.toUpperCase();
        if (upper === 'TRUE' || upper === 'FALSE') return { k: 'bool', v: upper === 'TRUE' };
        if (options.allowValues && tok.name === 'values') return { k: 'values' };
        // Airtable accepts a one-word field name without braces.
        return fieldRef(tok.name, tok.pos, tok.end);
      }
      case 'op':
        if (tok.v === '(') {
          const inner = expression();
          expect(')');
          return inner;
        }
        if (tok.v === '-') return { k: 'neg', e: unary() };
        if (tok.v === '+') return unary();
        throw new FormulaSyntaxError(`unexpected "${tok.v}"`);
    }
  };
  const unary = (): FormulaNode => {
    if (++depth > 200) throw new FormulaSyntaxError('formula nested too deeply');
    const node = primary();
    depth--;
    return node;
  };
  const binaryLevel = (ops: BinaryOp[], next: () => FormulaNode) => (): FormulaNode => {
    let left = next();
    for (;;) {
      const tok = peek();
      if (tok?.t !== 'op' || !ops.includes(tok.v as BinaryOp)) return left;
      pos++;
      left = { k: 'bin', op: tok.v as BinaryOp, l: left, r: next() };
    }
  };
  const multiplicative = binaryLevel(['*', '/'], unary);
  const additive = binaryLevel(['+', '-'], multiplicative);
  const concat = binaryLevel(['&'], additive);
  const comparison = binaryLevel(['=', '!=', '<', '>', '<=', '>='], concat);
  function expression(): FormulaNode {
    return comparison();
  }

  if (tokens.length === 0) throw new FormulaSyntaxError('empty formula');
  const ast = expression();
  if (pos < tokens.length) throw new FormulaSyntaxError('unexpected text after the formula');
  if (unknown.length > 0) throw new FormulaSyntaxError(`Unknown field names: ${unknown.join(', ')}`);
  return { text, ast, refs };
}

/** The formula text with every field reference spelled `{current name}` (deleted fields keep their old text). */
export function renderFormula(formula: CompiledFormula, nameOf: (fieldId: string) => string | undefined): string {
  let out = '';
  let at = 0;
  for (const ref of formula.refs) {
    const name = nameOf(ref.fieldId);
    out += formula.text.slice(at, ref.start);
    out += name === undefined ? formula.text.slice(ref.start, ref.end) : `{${name.replace(/}/g, '\\}')}}`;
    at = ref.end;
  }
  return out + formula.text.slice(at);
}

export function referencedFieldIds(formula: CompiledFormula): string[] {
  return [...new Set(formula.refs.map((r) => r.fieldId))];
}
