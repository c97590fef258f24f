import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { converters } from '../src/airtable/cells.ts';
import { assignNames, snakeCase } from '../src/airtable/naming.ts';
import { planMigration } from '../src/airtable/plan.ts';
import { mapBase } from '../src/airtable/schema.ts';
import type { AirtableField, AirtableTable } from '../src/airtable/types.ts';
import { AIRTABLE_DEFAULT_SETTINGS } from '../src/airtable/settings.ts';

test('table and field names become snake_case without emoji or punctuation', () => {
  const cases: Array<[string, string]> = [
    ['Client Name', 'client_name'],
    ['🚀 Launch Plan!!', 'launch_plan'],
    ['Q3 — Revenue (USD)', 'q3_revenue_usd'],
    ['CamelCaseField', 'camel_case_field'],
    ['HTTPStatus', 'http_status'],
    ['Café déjà vu', 'cafe_deja_vu'],
    ['  spaced   out  ', 'spaced_out'],
    ['e-mail / phone #', 'e_mail_phone'],
    ['已完成 tasks', '已完成_tasks'],
    ['🎉🎉', ''],
  ];
  for (const [input, expected] of cases) assert.is(snakeCase(input), expected, input);
  assert.ok(Buffer.byteLength(snakeCase('x'.repeat(100))) <= 63);
});

test('clashes are settled by upstream id, reserved names get an underscore, empty names fall back to the id', () => {
  const names = assignNames(
    [
      { id: 'fld3', name: 'Name' },
      { id: 'fld1', name: 'name!' },
      { id: 'fld2', name: 'NAME' },
      { id: 'fld4', name: 'ID' },
      { id: 'fld5', name: 'Created Time' },
      { id: 'fld6', name: '✨' },
    ],
    { reserved: ['id', 'created_time'], fallbackPrefix: 'field' },
  );
  assert.equal(Object.fromEntries(names), {
    fld1: 'name',
    fld2: 'name_2',
    fld3: 'name_3',
    fld4: 'id_',
    fld5: 'created_time_',
    fld6: 'field_fld6',
  });
  // The same fields in another order get the same names: order upstream does not matter.
  const again = assignNames(
    [
      { id: 'fld2', name: 'NAME' },
      { id: 'fld1', name: 'name!' },
      { id: 'fld3', name: 'Name' },
    ],
    { fallbackPrefix: 'field' },
  );
  assert.equal(Object.fromEntries(again), { fld1: 'name', fld2: 'name_2', fld3: 'name_3' });
});

const field = (id: string, type: string, options?: Record<string, unknown>): AirtableField => ({ id, name: `${type} ${id}`, type, options });

const everyType: AirtableField[] = [
  field('fldA01', 'multipleAttachments'),
  field('fldA02', 'autoNumber'),
  field('fldA03', 'barcode'),
  field('fldA04', 'button'),
  field('fldA05', 'checkbox'),
  field('fldA06', 'singleCollaborator'),
  field('fldA07', 'multipleCollaborators'),
  field('fldA08', 'count'),
  field('fldA09', 'createdTime'),
  field('fldA10', 'currency'),
  field('fldA11', 'date'),
  field('fldA12', 'dateTime'),
  field('fldA13', 'duration'),
  field('fldA14', 'email'),
  field('fldA15', 'formula', { result: { type: 'number' } }),
  field('fldA16', 'lastModifiedBy'),
  field('fldA17', 'multipleRecordLinks', { linkedTableId: 'tblB', prefersSingleRecordLink: true }),
  field('fldA18', 'multipleRecordLinks', { linkedTableId: 'tblB', prefersSingleRecordLink: false }),
  field('fldA19', 'multilineText'),
  field('fldA20', 'multipleLookupValues'),
  field('fldA21', 'multipleSelects'),
  field('fldA22', 'number'),
  field('fldA23', 'percent'),
  field('fldA24', 'phoneNumber'),
  field('fldA25', 'rating'),
  field('fldA26', 'rollup', { result: { type: 'number' } }),
  field('fldA27', 'rollup', { result: { type: 'singleLineText' } }),
  field('fldA28', 'singleLineText'),
  field('fldA29', 'singleSelect'),
  field('fldA30', 'url'),
  field('fldA31', 'richText'),
  field('fldA32', 'lastModifiedTime'),
  field('fldA33', 'createdBy'),
  field('fldA34', 'aiText'),
  field('fldA35', 'externalSyncSource'),
  field('fldA36', 'someTypeFromTheFuture'),
];
const table: AirtableTable = { id: 'tblA', name: 'Everything 🧪', primaryFieldId: 'fldA28', fields: everyType };

test('every field type gets its documented column type', () => {
  const [mapping] = mapBase([table], AIRTABLE_DEFAULT_SETTINGS);
  const types = Object.fromEntries(mapping!.columns.map((c) => [c.upstreamType + (c.fieldId ?? ''), c.type]));
  const expected: Record<string, string> = {
    multipleAttachments: 'text[]',
    autoNumber: 'numeric',
    barcode: 'numeric',
    button: 'text',
    checkbox: 'boolean',
    singleCollaborator: 'text[]',
    multipleCollaborators: 'text[]',
    count: 'numeric',
    createdTime: 'timestamptz',
    currency: 'numeric',
    date: 'date',
    dateTime: 'timestamptz',
    duration: 'text',
    email: 'text',
    formula: 'text',
    lastModifiedBy: 'text',
    multilineText: 'text',
    multipleLookupValues: 'text[]',
    multipleSelects: 'text[]',
    number: 'numeric',
    percent: 'numeric',
    phoneNumber: 'text',
    rating: 'numeric',
    singleLineText: 'text',
    singleSelect: 'text',
    url: 'text',
    richText: 'text',
    lastModifiedTime: 'timestamptz',
    createdBy: 'text',
    aiText: 'text',
    externalSyncSource: 'text',
    someTypeFromTheFuture: 'jsonb',
  };
  for (const f of everyType) {
    if (f.type === 'multipleRecordLinks' || f.type === 'rollup') continue;
    assert.is(types[f.type + f.id], expected[f.type], f.type);
  }
  assert.is(types.multipleRecordLinksfldA17, 'text', 'single link with intelligent cast');
  assert.is(types.multipleRecordLinksfldA18, 'text[]', 'multiple links');
  assert.is(types.rollupfldA26, 'numeric', 'numeric rollup');
  assert.is(types.rollupfldA27, 'text[]', 'text rollup');
  assert.equal(
    mapping!.columns.slice(0, 2).map((c) => [c.name, c.type]),
    [
      ['id', 'text'],
      ['created_time', 'timestamptz'],
    ],
  );
  assert.is(mapping!.name, 'everything');
});

test('Intelligent cast off makes every link text[]; lookup_as text makes lookups text', () => {
  const [mapping] = mapBase([table], { ...AIRTABLE_DEFAULT_SETTINGS, intelligent_cast: false, lookup_as: 'text' });
  const byField = new Map(mapping!.columns.map((c) => [c.fieldId, c]));
  assert.is(byField.get('fldA17')!.type, 'text[]');
  assert.is(byField.get('fldA18')!.type, 'text[]');
  assert.is(byField.get('fldA20')!.type, 'text');
  assert.is(byField.get('fldA20')!.converter, 'joinedText');
});

test('cells convert to the values the columns hold', () => {
  assert.equal(converters.textArray([{ id: 'att1', url: 'https://x/a.png', filename: 'a.png' }]), ['https://x/a.png']);
  assert.equal(converters.textArray([{ id: 'usr1', email: 'a@b.c', name: 'A' }]), ['a@b.c']);
  assert.equal(converters.textArray(['recA', 'recB']), ['recA', 'recB']);
  assert.equal(converters.textArray([]), null);
  assert.equal(converters.textArray(undefined), null);
  assert.is(converters.checkbox(undefined), false);
  assert.is(converters.checkbox(true), true);
  assert.is(converters.numeric(0.5), 0.5);
  assert.is(converters.numeric({ specialValue: 'NaN' }), null);
  assert.is(converters.barcode({ text: '0123456789', type: 'upce' }), '0123456789');
  assert.is(converters.barcode({ text: 'ABC-1' }), null);
  assert.is(converters.button({ label: 'Open', url: 'https://example.com/r/1' }), 'https://example.com/r/1');
  assert.is(converters.duration(5400), '1:30:00');
  assert.is(converters.duration(3.25), '0:00:03.25');
  assert.is(converters.text({ specialValue: 'NaN' }), 'NaN');
  assert.is(converters.text({ error: '#ERROR!' }), '#ERROR!');
  assert.is(converters.text(42), '42');
  assert.is(converters.text(true), 'true');
  assert.is(converters.text({ id: 'usr1', email: 'a@b.c', name: 'A' }), 'a@b.c');
  assert.is(converters.firstLink(['recA']), 'recA');
  assert.is(converters.firstLink(undefined), null);
  assert.is(converters.joinedText(['x', 2, { email: 'e@x.y' }]), 'x, 2, e@x.y');
  assert.is(converters.aiText({ state: 'generated', isStale: false, value: 'Summary' }), 'Summary');
  assert.is(converters.rollupNumber(12.5), 12.5);
  assert.equal(converters.json({ any: ['thing'] }), { any: ['thing'] });
});

test('a duration just short of a whole second carries into it instead of ending in a bare dot', () => {
  assert.is(converters.duration(59.9996), '0:01:00');
  assert.is(converters.duration(3599.9999), '1:00:00');
  assert.is(converters.duration(0.001), '0:00:00.001');
  assert.is(converters.duration(-61.5), '-0:01:01.5');
});

test('a button is its URL or NULL, never its label; looked-up AI text and buttons read as in their own columns', () => {
  assert.is(converters.button({ label: 'Run script' }), null);
  assert.equal(
    converters.textArray([
      { state: 'generated', isStale: false, value: 'Summary' },
      { state: 'error', isStale: false, value: null },
    ]),
    ['Summary'],
  );
  assert.equal(converters.textArray([{ label: 'Open', url: 'https://example.com/r/1' }, { label: 'Run script' }]), ['https://example.com/r/1']);
  assert.is(converters.joinedText([{ state: 'generated', isStale: true, value: 'A' }, 'B']), 'A, B');
});

test('a plan sweeps unchanged tables, rebuilds reshaped ones, recomments renamed ones, drops gone ones', () => {
  const base = (name: string, fieldName: string): AirtableTable => ({
    id: `tbl${name}`,
    name,
    primaryFieldId: 'fld1',
    fields: [{ id: 'fld1', name: fieldName, type: 'singleLineText' }],
  });
  const before = mapBase([base('Keep', 'Title'), base('Reshape', 'Title'), base('Rename', 'Title'), base('Gone', 'Title')], AIRTABLE_DEFAULT_SETTINGS);
  const built = new Map(before.map((m) => [m.tableId, m]));
  const after = mapBase([base('Keep', 'Title'), base('Reshape', 'Heading'), base('Rename', 'title'), base('New', 'Title')], AIRTABLE_DEFAULT_SETTINGS);
  const plan = planMigration(after, built);
  assert.equal(
    plan.sweep.map((m) => m.name),
    ['keep'],
  );
  assert.equal(
    plan.rebuild.map((m) => m.name),
    ['reshape', 'new'],
  );
  assert.equal(
    plan.recomment.map((m) => m.name),
    ['rename'],
  );
  assert.equal(
    plan.drop.map((m) => m.name),
    ['gone'],
  );
});

test.run();
