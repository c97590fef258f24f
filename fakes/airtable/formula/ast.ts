/** The parsed form of an Airtable formula. Field references hold field ids, so renames don't break them. */
export type FormulaNode =
  | { k: 'num'; v: number }
  | { k: 'str'; v: string }
  | { k: 'bool'; v: boolean }
  | { k: 'field'; id: string }
  | { k: 'values' }
  | { k: 'call'; fn: string; args: FormulaNode[] }
  | { k: 'bin'; op: BinaryOp; l: FormulaNode; r: FormulaNode }
  | { k: 'neg'; e: FormulaNode };

export type BinaryOp = '=' | '!=' | '<' | '>' | '<=' | '>=' | '&' | '+' | '-' | '*' | '/';

/** Where a field reference sits in the source text, so the text can be re-rendered with new names. */
export interface FieldRefSpan {
  start: number;
  end: number;
  fieldId: string;
}

export interface CompiledFormula {
  text: string;
  ast: FormulaNode;
  refs: FieldRefSpan[];
}

export class FormulaSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FormulaSyntaxError';
  }
}
