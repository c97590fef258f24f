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
          let prior: RawValue[] | undefined;
          const marker = this.buf[this.pos++];
          if (marker === 0x4b /* K */ || marker === 0x4f /* O */) {
            prior = this.tuple();
            this.pos += 1; // 'N'
          }
          return { tag: 'update', relation, prior, next: this.tuple() };
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
        values[i] = this.buf.toString('utf8', this.pos, this.pos + length);
        this.pos += length;
      } else if (kind === 0x6e /* n */) {
        values[i] = null;
      } else if (kind === 0x75 /* u */) {
        values[i] = UNCHANGED;
      } else {
        throw new Error(`pgoutput: unexpected column kind ${String(kind)} (binary mode is not requested)`);
      }
    }
    return values;
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
