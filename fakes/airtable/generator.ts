import type { StoredAttachment } from './cells-read.ts';
import { hash, hash4, seededId, seededRecordId } from './ids.ts';
import { type Field, findField, type Rec, type Table, type User } from './model.ts';
import type { WriteSession } from './record-ops.ts';
import { addField, createTable, type FieldSpec } from './schema-ops.ts';

export interface GenerateInput {
  seed: number;
  tables: Array<{ name: string; records: number }>;
}

const WORDS = [
  'Atlas',
  'Birch',
  'Cobalt',
  'Delta',
  'Ember',
  'Fjord',
  'Granite',
  'Harbor',
  'Indigo',
  'Juniper',
  'Kestrel',
  'Lumen',
  'Meadow',
  'Nimbus',
  'Orchid',
  'Pioneer',
  'Quartz',
  'Raven',
  'Summit',
  'Tundra',
];
const PEOPLE = ['Ada Lovelace', 'Grace Hopper', 'Alan Turing', 'Katherine Johnson', 'Edsger Dijkstra'];
const EPOCH = Date.UTC(2023, 0, 1);
const DAY = 86_400_000;

/** Seeded collaborators, shared by every generated table. */
export function generatedUsers(seed: number): User[] {
  return PEOPLE.map((name, i) => ({
    id: seededId('usr', seed, 9000 + i),
    name,
    email: `${name.toLowerCase().replace(/\s+/g, '.')}@example.com`,
  }));
}

function fieldSpecs(seed: number, t: number): FieldSpec[] {
  const id = (k: number) => seededId('fld', seed, t, k);
  const choice = (k: number, name: string) => ({ id: seededId('sel', seed, t, k), name });
  return [
    { id: id(0), name: 'Name', type: 'singleLineText' },
    { id: id(1), name: 'Email', type: 'email' },
    { id: id(2), name: 'Website', type: 'url' },
    { id: id(3), name: 'Notes', type: 'multilineText' },
    { id: id(4), name: 'Summary', type: 'richText' },
    { id: id(5), name: 'Phone', type: 'phoneNumber' },
    { id: id(6), name: 'Amount', type: 'number', options: { precision: 2 } },
    { id: id(7), name: 'Ratio', type: 'percent', options: { precision: 0 } },
    { id: id(8), name: 'Price', type: 'currency', options: { precision: 2, symbol: '$' } },
    { id: id(9), name: 'Stars', type: 'rating', options: { max: 5, icon: 'star', color: 'yellowBright' } },
    { id: id(10), name: 'Number', type: 'autoNumber' },
    { id: id(11), name: 'Time spent', type: 'duration', options: { durationFormat: 'h:mm' } },
    { id: id(12), name: 'Done', type: 'checkbox', options: { icon: 'check', color: 'greenBright' } },
    { id: id(13), name: 'Due', type: 'date' },
    { id: id(14), name: 'Starts at', type: 'dateTime' },
    { id: id(15), name: 'Created', type: 'createdTime' },
    { id: id(16), name: 'Modified', type: 'lastModifiedTime' },
    { id: id(17), name: 'Status', type: 'singleSelect', options: { choices: [choice(1, 'Todo'), choice(2, 'In progress'), choice(3, 'Done')] } },
    { id: id(18), name: 'Tags', type: 'multipleSelects', options: { choices: [choice(4, 'red'), choice(5, 'green'), choice(6, 'blue'), choice(7, 'urgent')] } },
    { id: id(19), name: 'Owner', type: 'singleCollaborator' },
    { id: id(20), name: 'Created by', type: 'createdBy' },
    { id: id(21), name: 'Modified by', type: 'lastModifiedBy' },
    { id: id(22), name: 'Team', type: 'multipleCollaborators' },
    { id: id(23), name: 'Files', type: 'multipleAttachments' },
    { id: id(24), name: 'Code', type: 'barcode' },
    { id: id(25), name: 'Open', type: 'button', options: { label: 'Open' } },
    { id: id(26), name: 'Source', type: 'externalSyncSource', options: { choices: [choice(8, 'Salesforce'), choice(9, 'Jira')] } },
    { id: id(27), name: 'AI summary', type: 'aiText', options: { prompt: ['Summarise ', { field: { fieldId: id(0) } }], referencedFieldIds: [id(0)] } },
    { id: id(28), name: 'Label', type: 'formula', options: { formula: '{Name} & " (" & {Status} & ")"' } },
    { id: id(29), name: 'Total', type: 'formula', options: { formula: '{Amount} * {Stars}' } },
    { id: id(30), name: 'Per star', type: 'formula', options: { formula: '{Amount} / {Stars}' } },
    { id: id(31), name: 'Overdue', type: 'formula', options: { formula: 'AND(NOT({Done}), IS_BEFORE({Due}, "2024-07-01"))' } },
  ];
}

/** The generated value of one stored field for one row; `undefined` leaves the cell empty. */
function valueMaker(field: Field, table: Table, seed: number, salt: number, users: User[]): ((row: number) => unknown) | undefined {
  const h = (row: number, k: number) => hash4(seed, salt, row, k);
  const choices = (field.options.choices as Array<{ id: string; name: string }> | undefined) ?? [];
  const choiceIds = choices.map((c) => c.id);
  const slug = table.name.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  switch (field.name) {
    case 'Name':
      return (r) => `${WORDS[h(r, 1) % WORDS.length]} ${r + 1}`;
    case 'Email':
      return (r) => (h(r, 2) % 10 === 0 ? undefined : `person${r + 1}@${slug}.example.com`);
    case 'Website':
      return (r) => (h(r, 3) % 4 === 0 ? undefined : `https://example.com/${slug}/${r + 1}`);
    case 'Notes':
      return (r) => (h(r, 4) % 3 === 0 ? undefined : `Note ${h(r, 4) % 1000}\nSecond line for row ${r + 1}`);
    case 'Summary':
      return (r) => (h(r, 5) % 3 === 0 ? undefined : `**${WORDS[h(r, 5) % WORDS.length]}** and _more_\n`);
    case 'Phone':
      return (r) => (h(r, 6) % 5 === 0 ? undefined : `(555) ${String((h(r, 6) % 900) + 100)}-${String((h(r, 7) % 9000) + 1000)}`);
    case 'Amount':
      return (r) => (h(r, 8) % 20 === 0 ? undefined : (h(r, 8) % 1_000_000) / 100);
    case 'Ratio':
      return (r) => (h(r, 9) % 101) / 100;
    case 'Price':
      return (r) => (h(r, 10) % 100_000) / 100;
    case 'Stars':
      return (r) => (h(r, 11) % 6 === 0 ? undefined : (h(r, 11) % 5) + 1);
    case 'Time spent':
      return (r) => h(r, 12) % 36_000;
    case 'Done':
      return (r) => (h(r, 13) % 2 === 0 ? true : undefined);
    case 'Due':
      return (r) => (h(r, 14) % 7 === 0 ? undefined : new Date(EPOCH + (h(r, 14) % 730) * DAY).toISOString().slice(0, 10));
    case 'Starts at':
      return (r) => new Date(EPOCH + (h(r, 15) % (730 * 24)) * 3_600_000).toISOString();
    case 'Status':
      return (r) => (h(r, 16) % 5 === 0 ? undefined : choiceIds[h(r, 16) % choiceIds.length]);
    case 'Tags':
      return (r) => {
        const bits = h(r, 17);
        const picked = choiceIds.filter((_, i) => (bits >> i) & 1);
        return picked.length === 0 ? undefined : picked;
      };
    case 'Source':
      return (r) => choices[h(r, 18) % choices.length]?.name;
    case 'Owner':
      return (r) => (h(r, 19) % 4 === 0 ? undefined : users[h(r, 19) % users.length]?.id);
    case 'Team':
      return (r) => {
        const picked = users.filter((_, i) => (h(r, 20) >> i) & 1).map((u) => u.id);
        return picked.length === 0 ? undefined : picked;
      };
    case 'Files':
      return (r) => {
        const count = h(r, 21) % 3;
        const files: StoredAttachment[] = [];
        for (let k = 0; k < count; k++) {
          const image = (h(r, 22 + k) & 1) === 0;
          const filename = image ? `photo-${r + 1}-${k + 1}.png` : `document-${r + 1}-${k + 1}.pdf`;
          const file: StoredAttachment = {
            id: seededId('att', seed, salt, r, k),
            filename,
            size: 1000 + (h(r, 24 + k) % 500_000),
            type: image ? 'image/png' : 'application/pdf',
          };
          if (image) Object.assign(file, { width: 800, height: 600 });
          files.push(file);
        }
        return files.length === 0 ? undefined : files;
      };
    case 'Code':
      return (r) => (h(r, 26) % 3 === 0 ? undefined : { text: String(100_000_000 + (h(r, 26) % 900_000_000)), type: 'code128' });
    case 'Open':
      return (r) => ({ label: 'Open', url: `https://example.com/${slug}/${r + 1}` });
    case 'AI summary':
      return (r) =>
        h(r, 27) % 10 === 0
          ? { state: 'error', errorType: 'timeout', isStale: false, value: null }
          : { state: 'generated', isStale: h(r, 27) % 7 === 0, value: `A short summary of ${WORDS[h(r, 1) % WORDS.length]} ${r + 1}.` };
    default:
      return undefined;
  }
}

/** Compressed adjacency (row → targets), the form generated links are kept in. */
interface Adjacency {
  offsets: Int32Array;
  targets: Int32Array;
}

function forwardLinks(rows: number, targetRows: number, seed: number, salt: number): Adjacency {
  const offsets = new Int32Array(rows + 1);
  const scratch: number[] = [];
  for (let r = 0; r < rows; r++) {
    const count = targetRows === 0 ? 0 : hash4(seed, salt, r, 90) % 3;
    offsets[r + 1] = (offsets[r] as number) + count;
  }
  const targets = new Int32Array(offsets[rows] as number);
  for (let r = 0; r < rows; r++) {
    const start = offsets[r] as number;
    const count = (offsets[r + 1] as number) - start;
    scratch.length = 0;
    for (let k = 0; k < count; k++) {
      let t = hash4(seed, salt, r, 91 + k) % targetRows;
      while (scratch.includes(t)) t = (t + 1) % targetRows;
      scratch.push(t);
      targets[start + k] = t;
    }
  }
  return { offsets, targets };
}

function inverseLinks(forward: Adjacency, rows: number, targetRows: number): Adjacency {
  const offsets = new Int32Array(targetRows + 1);
  for (const t of forward.targets) offsets[t + 1] = (offsets[t + 1] as number) + 1;
  for (let i = 0; i < targetRows; i++) offsets[i + 1] = (offsets[i + 1] as number) + (offsets[i] as number);
  const fill = offsets.slice(0, targetRows);
  const targets = new Int32Array(forward.targets.length);
  for (let r = 0; r < rows; r++) {
    for (let k = forward.offsets[r] as number; k < (forward.offsets[r + 1] as number); k++) {
      const t = forward.targets[k] as number;
      const at = fill[t] as number;
      targets[at] = r;
      fill[t] = at + 1;
    }
  }
  return { offsets, targets };
}

function linkMaker(adj: Adjacency, ids: string[]): (row: number) => unknown {
  return (row) => {
    const start = adj.offsets[row] as number;
    const end = adj.offsets[row + 1] as number;
    if (start === end) return undefined;
    const out: string[] = [];
    for (let k = start; k < end; k++) out.push(ids[adj.targets[k] as number] as string);
    return out;
  };
}

/**
 * Builds tables with every field type, links from each table to the next (a single table links
 * to itself), lookups, rollups, counts and formulas over them, and N rows each. Rows are not
 * stored: their values are a pure function of (seed, table, row) until someone writes to them.
 */
export function generateTables(s: WriteSession, input: GenerateInput): Table[] {
  const { seed } = input;
  const users = generatedUsers(seed);
  for (const u of users) if (!s.world.users.has(u.id)) s.world.users.set(u.id, u);
  const offset = s.base.tables.length;
  const tables = input.tables.map((spec, i) => {
    const t = offset + i;
    const table = createTable(s, { id: seededId('tbl', seed, t), name: spec.name, fields: fieldSpecs(seed, t) }, { trusted: true });
    (table.views[0] as { id: string }).id = seededId('viw', seed, t);
    return table;
  });

  input.tables.forEach((_, i) => {
    const table = tables[i] as Table;
    const next = tables[(i + 1) % tables.length] as Table;
    const t = offset + i;
    const id = (k: number) => seededId('fld', seed, t, k);
    const link = addField(
      s,
      table,
      { id: id(40), name: `Link to ${next.name}`, type: 'multipleRecordLinks', options: { linkedTableId: next.id, prefersSingleRecordLink: false } },
      { trusted: true, inverseId: id(41) },
    );
    const nextName = findField(next, 'Name') as Field;
    const nextAmount = findField(next, 'Amount') as Field;
    addField(s, table, { id: id(42), name: 'Linked count', type: 'count', options: { recordLinkFieldId: link.id } }, { trusted: true });
    addField(
      s,
      table,
      { id: id(43), name: 'Linked names', type: 'multipleLookupValues', options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: nextName.id } },
      { trusted: true },
    );
    addField(
      s,
      table,
      {
        id: id(44),
        name: 'Linked amount',
        type: 'rollup',
        options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: nextAmount.id, formula: 'SUM(values)' },
      },
      { trusted: true },
    );
  });

  // Rows: ids and metadata come from the seed; cells stay virtual.
  input.tables.forEach((spec, i) => {
    const table = tables[i] as Table;
    const rows = Math.max(0, Math.floor(spec.records));
    const salt = hash(seed, offset + i, 0x7ab1e);
    const ids = new Array<string>(rows);
    for (let r = 0; r < rows; r++) {
      let recId = seededRecordId(salt, r);
      if (table.records.has(recId)) recId = seededRecordId(salt ^ 0x5bd1e995, r);
      ids[r] = recId;
      const rec: Rec = { id: recId, row: r, cells: null, meta: null };
      table.records.set(recId, rec);
    }
    table.gen = { seed, salt, rows, ids, epochMs: EPOCH + (offset + i) * 1000, userIds: users.map((u) => u.id) };
    table.nextAutoNumber = rows + 1;
    for (const field of table.fields) {
      const make = valueMaker(field, table, seed, salt, users);
      if (make) field.gen = make;
    }
  });

  input.tables.forEach((_, i) => {
    const table = tables[i] as Table;
    const next = tables[(i + 1) % tables.length] as Table;
    const from = table.gen as NonNullable<Table['gen']>;
    const to = next.gen as NonNullable<Table['gen']>;
    const link = findField(table, `Link to ${next.name}`) as Field;
    const forward = forwardLinks(from.rows, to.rows, seed, from.salt);
    link.gen = linkMaker(forward, to.ids);
    const inverseId = link.options.inverseLinkFieldId;
    if (typeof inverseId === 'string') {
      const inverse = findField(next, inverseId) as Field;
      inverse.gen = linkMaker(inverseLinks(forward, from.rows, to.rows), from.ids);
    }
  });
  return tables;
}
