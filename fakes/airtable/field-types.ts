/** The field type catalog: which types exist, which the fake computes, which the API may write or create. */
export const KNOWN_TYPES = new Set([
  'singleLineText',
  'email',
  'url',
  'multilineText',
  'richText',
  'phoneNumber',
  'number',
  'percent',
  'currency',
  'rating',
  'autoNumber',
  'count',
  'duration',
  'checkbox',
  'date',
  'dateTime',
  'createdTime',
  'lastModifiedTime',
  'singleSelect',
  'multipleSelects',
  'singleCollaborator',
  'createdBy',
  'lastModifiedBy',
  'multipleCollaborators',
  'multipleRecordLinks',
  'multipleAttachments',
  'barcode',
  'button',
  'formula',
  'rollup',
  'multipleLookupValues',
  'externalSyncSource',
  'aiText',
]);

/** Values the fake derives from other data on every read. */
export const DERIVED_TYPES = new Set([
  'formula',
  'rollup',
  'multipleLookupValues',
  'count',
  'autoNumber',
  'createdTime',
  'lastModifiedTime',
  'createdBy',
  'lastModifiedBy',
]);

/** Stored, but written only by Airtable itself (the control API may set them). */
export const SYSTEM_WRITTEN_TYPES = new Set(['button', 'externalSyncSource', 'aiText']);

export const isDerived = (type: string) => DERIVED_TYPES.has(type);
export const isApiWritable = (type: string) => !DERIVED_TYPES.has(type) && !SYSTEM_WRITTEN_TYPES.has(type);
/** The metadata API cannot create computed or system fields (Airtable answers 422 for them). */
export const isApiCreatable = (type: string) => KNOWN_TYPES.has(type) && isApiWritable(type);

export const TEXT_TYPES = new Set(['singleLineText', 'email', 'url', 'multilineText', 'richText', 'phoneNumber']);
export const NUMBER_TYPES = new Set(['number', 'percent', 'currency', 'rating', 'duration']);

/** Options Airtable requires when a field of that type is created through the API. */
export const REQUIRED_OPTIONS: Record<string, string[]> = {
  number: ['precision'],
  percent: ['precision'],
  currency: ['precision', 'symbol'],
  rating: ['max', 'icon', 'color'],
  duration: ['durationFormat'],
  checkbox: ['icon', 'color'],
  date: ['dateFormat'],
  dateTime: ['dateFormat', 'timeFormat', 'timeZone'],
  singleSelect: ['choices'],
  multipleSelects: ['choices'],
  multipleRecordLinks: ['linkedTableId'],
};

const DATE_FORMAT = { name: 'iso', format: 'YYYY-MM-DD' };
const TIME_FORMAT = { name: '24hour', format: 'HH:mm' };

/** Defaults the control API fills in, so tests can write `{ type: 'number' }`. */
export const DEFAULT_OPTIONS: Record<string, Record<string, unknown>> = {
  number: { precision: 0 },
  percent: { precision: 0 },
  currency: { precision: 2, symbol: '$' },
  rating: { max: 5, icon: 'star', color: 'yellowBright' },
  duration: { durationFormat: 'h:mm' },
  checkbox: { icon: 'check', color: 'greenBright' },
  date: { dateFormat: DATE_FORMAT },
  dateTime: { dateFormat: DATE_FORMAT, timeFormat: TIME_FORMAT, timeZone: 'utc' },
  createdTime: { dateFormat: DATE_FORMAT, timeFormat: TIME_FORMAT, timeZone: 'utc' },
  lastModifiedTime: { dateFormat: DATE_FORMAT, timeFormat: TIME_FORMAT, timeZone: 'utc' },
  singleSelect: { choices: [] },
  multipleSelects: { choices: [] },
  externalSyncSource: { choices: [] },
  button: { label: 'Open' },
};

export const CHOICE_COLORS = [
  'blueLight2',
  'cyanLight2',
  'tealLight2',
  'greenLight2',
  'yellowLight2',
  'orangeLight2',
  'redLight2',
  'pinkLight2',
  'purpleLight2',
  'grayLight2',
];
