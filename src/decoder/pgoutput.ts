/**
 * The pgoutput protocol (version 1) as the decoder needs it: values stay as the text the
 * server sent, so that "did this column change" is an exact text comparison and the
 * conversion to JSON (values.ts) happens once, only for what goes into an event.
 * https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html
 */

/** A TOASTed value the update did not touch; the old tuple (REPLICA IDENTITY FULL) has it. */
export const UNCHANGED = Symbol('unchanged toast');
export type RawValue = string | null | typeof UNCHANGED;

export interface Relation {
  oid: number;
  schema: string;
  name: string;
  columns: Array<{ name: string; typeOid: number }>;
}

export type PgoutputMessage =
  | { tag: 'begin'; finalLsn: string; xid: number }
  | { tag: 'commit'; commitLsn: string; endLsn: string }
  | { tag: 'relation'; relation: Relation }
  | { tag: 'insert'; relation: Relation; next: RawValue[] }
  | { tag: 'update'; relation: Relation; prior: RawValue[] | undefined; next: RawValue[] }
  | { tag: 'delete'; relation: Relation; prior: RawValue[] }
  | { tag: 'truncate'; relations: Relation[] }
  | { tag: 'message'; transactional: boolean; prefix: string; content: string }
  | { tag: 'other' };

/** An LSN as PostgreSQL prints it (`16/B374D848`), from its two 32-bit halves. */
export function formatLsn(high: number, low: number): string {
  return `${high.toString(16).toUpperCase()}/${low.toString(16).toUpperCase()}`;
}

/** LSNs compared as numbers; `X/Y` text does not sort. */
export function lsnToBigInt(lsn: string): bigint {
  const [high, low] = lsn.split('/');
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`);
}

/**
 * A column's text. Buffer's own UTF-8 slice, without toString's checks of its arguments: it
 * runs for every column of every change, and those checks took two fifths of its time.
 */
const text = (buf: Buffer, start: number, end: number): string => (buf as unknown as { utf8Slice(start: number, end: number): string }).utf8Slice(start, end);

/** Whether two byte ranges of one buffer are equal; by hand below 64 bytes, where compare()'s call costs more. */
function sameBytes(buf: Buffer, a: number, b: number, length: number): boolean {
  if (length >= 64) return buf.compare(buf, b, b + length, a, a + length) === 0;
  for (let i = 0; i < length; i++) if (buf[a + i] !== buf[b + i]) return false;
  return true;
}

/** A column sent without text: null, or a TOASTed value the update did not touch. */
function notText(kind: number | undefined): RawValue {
  if (kind === 0x6e /* n */) return null;
  if (kind === 0x75 /* u */) return UNCHANGED;
  throw new Error(`pgoutput: unexpected column kind ${String(kind)} (binary mode is not requested)`);
}

export class PgoutputParser {
  private readonly relations = new Map<number, Relation>();
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;

  parse(buf: Buffer): PgoutputMessage {
    this.buf = buf;
    this.pos = 1;
    switch (buf[0]) {
      case 0x42 /* B */:
        {
          const finalLsn = this.lsn();
          this.pos += 8; // commit time
          return { tag: 'begin', finalLsn, xid: this.int32() };
        }
      case 0x43 /* C */:
        {
          this.pos += 1; // flags
          const commitLsn = this.lsn();
          return { tag: 'commit', commitLsn, endLsn: this.lsn() };
        }
      case 0x52 /* R */:
        return { tag: 'relation', relation: this.relationMessage() };
      case 0x49 /* I */:
        {
          const relation = this.relation();
          this.pos += 1; // 'N'
          return { tag: 'insert', relation, next: this.tuple() };
        }
      case 0x55 /* U */:
        {
          const relation = this.relation();
          const marker = this.buf[this.pos++];
          if (marker !== 0x4b /* K */ && marker !== 0x4f /* O */) return { tag: 'update', relation, prior: undefined, next: this.tuple() };
          // The old row first; its values are made text only where they differ from the new.
          const old = this.pos;
          this.skipTuple();
          this.pos += 1; // 'N'
          const fresh = this.pos;
          const next = this.tuple();
          return { tag: 'update', relation, prior: this.priorOf(old, fresh, next), next };
        }
      case 0x44 /* D */:
        {
          const relation = this.relation();
          this.pos += 1; // 'K' or 'O'
          return { tag: 'delete', relation, prior: this.tuple() };
        }
      case 0x54 /* T */:
        {
          const count = this.int32();
          this.pos += 1; // options
          const relations: Relation[] = [];
          for (let i = 0; i < count; i++) relations.push(this.relationById(this.int32()));
          return { tag: 'truncate', relations };
        }
      case 0x4d /* M */:
        {
          const transactional = (this.buf[this.pos++]! & 1) === 1;
          this.pos += 8; // message LSN
          const prefix = this.cstring();
          const length = this.int32();
          const content = this.buf.toString('utf8', this.pos, this.pos + length);
          this.pos += length;
          return { tag: 'message', transactional, prefix, content };
        }
      default:
        // Origin ('O') and Type ('Y') carry nothing the decoder uses.
        return { tag: 'other' };
    }
  }

  private relationMessage(): Relation {
    const oid = this.int32();
    const schema = this.cstring();
    const name = this.cstring();
    this.pos += 1; // replica identity
    const count = this.int16();
    const columns: Relation['columns'] = [];
    for (let i = 0; i < count; i++) {
      this.pos += 1; // flags
      const columnName = this.cstring();
      const typeOid = this.int32();
      this.pos += 4; // type modifier
      columns.push({ name: columnName, typeOid });
    }
    const relation = { oid, schema, name, columns };
    this.relations.set(oid, relation);
    return relation;
  }

  private relation(): Relation {
    return this.relationById(this.int32());
  }

  private relationById(oid: number): Relation {
    const relation = this.relations.get(oid);
    // The server always sends a Relation message before a relation's first row in a session.
    if (!relation) throw new Error(`pgoutput: row for relation ${oid} before its Relation message`);
    return relation;
  }

  private tuple(): RawValue[] {
    const count = this.int16();
    const values: RawValue[] = new Array(count);
    for (let i = 0; i < count; i++) {
      const kind = this.buf[this.pos++];
      if (kind === 0x74 /* t */) {
        const length = this.int32();
        values[i] = text(this.buf, this.pos, this.pos + length);
        this.pos += length;
      } else {
        values[i] = notText(kind);
      }
    }
    return values;
  }

  private skipTuple(): void {
    const count = this.int16();
    for (let i = 0; i < count; i++) {
      if (this.buf[this.pos++] !== 0x74 /* t */) continue;
      const length = this.int32();
      this.pos += length;
    }
  }

  /**
   * An update's old row, from the old tuple at `old` and the new one at `fresh` (already read
   * as `next`): a column whose bytes are the new one's is the very same string, so the
   * decoder's comparison is one reference check and no text is made for it. Most columns of
   * an update are unchanged, and this halved the strings an update makes.
   */
  private priorOf(old: number, fresh: number, next: RawValue[]): RawValue[] {
    const buf = this.buf;
    const count = buf.readInt16BE(old);
    const prior: RawValue[] = new Array(count);
    let a = old + 2;
    let b = fresh + 2;
    for (let i = 0; i < count; i++) {
      const kind = buf[a++];
      const nextKind = i < next.length ? buf[b++] : undefined;
      let nextStart = b;
      let nextLength = -1;
      if (nextKind === 0x74 /* t */) {
        nextLength = buf.readInt32BE(b);
        nextStart = b + 4;
        b = nextStart + nextLength;
      }
      if (kind === 0x74 /* t */) {
        const length = buf.readInt32BE(a);
        const start = a + 4;
        a = start + length;
        prior[i] = length === nextLength && sameBytes(buf, start, nextStart, length) ? next[i]! : text(buf, start, a);
      } else {
        prior[i] = notText(kind);
      }
    }
    return prior;
  }

  private lsn(): string {
    const high = this.buf.readUInt32BE(this.pos);
    const low = this.buf.readUInt32BE(this.pos + 4);
    this.pos += 8;
    return formatLsn(high, low);
  }

  private int32(): number {
    const value = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return value;
  }

  private int16(): number {
    const value = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return value;
  }

  private cstring(): string {
    const end = this.buf.indexOf(0, this.pos);
    const text = this.buf.toString('utf8', this.pos, end);
    this.pos = end + 1;
    return text;
  }
}
