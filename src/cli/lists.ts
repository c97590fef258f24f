import { ago, colourWanted, paintIndicator, shortDuration } from './format.ts';
import { renderTable, type Column } from './table.ts';

/** The fields of the API's sync view that the table shows (src/api/views.ts). */
interface SyncRow {
  id: string;
  kind: string;
  name: string | null;
  status: { indicator: string; lag_seconds: number | null; completed_at: string | null };
  created_at: string;
}

interface AccountRow {
  id: string;
  name: string;
  created_at: string;
}

export const syncColumns: Column<SyncRow>[] = [
  { header: 'ID', value: (s) => s.id },
  { header: 'KIND', value: (s) => s.kind },
  { header: 'NAME', value: (s) => s.name ?? '' },
  {
    header: 'STATUS',
    // Until its first pass completes a sync's database is still filling: worth saying beside "normal".
    value: (s) => (s.status.completed_at ? s.status.indicator : `${s.status.indicator} (first pass)`),
    paint: (text, s) => paintIndicator(text, s.status.indicator),
  },
  { header: 'LAG', value: (s) => (s.status.lag_seconds === null ? '-' : shortDuration(s.status.lag_seconds)) },
  { header: 'CREATED', value: (s) => ago(s.created_at) },
];

export const accountColumns: Column<AccountRow>[] = [
  { header: 'ID', value: (a) => a.id },
  { header: 'NAME', value: (a) => a.name },
  { header: 'CREATED', value: (a) => ago(a.created_at) },
];

/** The fields of the API's server view that the table shows. */
interface ServerRow {
  id: string;
  region: string;
  capacity: number;
  syncs: number;
  free: number;
  draining: boolean;
  configured: boolean;
  max_slot_wal_keep_size_mb: number | null;
}

export const serverColumns: Column<ServerRow>[] = [
  { header: 'ID', value: (s) => s.id },
  { header: 'REGION', value: (s) => s.region },
  { header: 'SYNCS', value: (s) => String(s.syncs) },
  { header: 'CAPACITY', value: (s) => String(s.capacity) },
  { header: 'FREE', value: (s) => String(s.free) },
  { header: 'STATE', value: (s) => (s.draining ? 'draining' : 'open') },
  // The configured server's URL comes from the service's configuration, not from servers add.
  { header: 'SERVER', value: (s) => (s.configured ? 'configured' : 'added') },
  // max_slot_wal_keep_size: "none" is a warning (docs/operations.md#wal-retention).
  {
    header: 'WAL-BOUND',
    value: (s) => (s.max_slot_wal_keep_size_mb === null ? '?' : s.max_slot_wal_keep_size_mb < 0 ? 'none' : `${s.max_slot_wal_keep_size_mb} MB`),
  },
];

/** The fields of the API's webhook view that the table shows. */
interface WebhookRow {
  id: string;
  url: string;
  topics: string[];
  state: string;
  disabled_reason: string | null;
  disabled_at: string | null;
  created_at: string;
}

/** A few names in full, then how many more: a cell stays readable with 100 topics. */
export function someOf(names: string[], shown = 3): string {
  if (names.length <= shown) return names.join(', ');
  return `${names.slice(0, shown).join(', ')} +${names.length - shown}`;
}

export const webhookColumns: Column<WebhookRow>[] = [
  { header: 'ID', value: (w) => w.id },
  { header: 'URL', value: (w) => w.url },
  { header: 'TOPICS', value: (w) => someOf(w.topics) },
  {
    header: 'STATE',
    // A disabled webhook says why and since when: a 410 and "disabled by request" call for different action.
    value: (w) => (w.state === 'disabled' ? `disabled: ${w.disabled_reason ?? 'no reason given'}${w.disabled_at ? ` (${ago(w.disabled_at)})` : ''}` : w.state),
    paint: (text, w) => paintIndicator(text, w.state === 'disabled' ? 'red' : 'normal'),
  },
  { header: 'CREATED', value: (w) => ago(w.created_at) },
];

/** The fields of the API's delivery view that the table shows. */
interface DeliveryRow {
  id: string;
  topic: string;
  record_id: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
}

export const deliveryColumns: Column<DeliveryRow>[] = [
  { header: 'ID', value: (d) => d.id },
  { header: 'TOPIC', value: (d) => d.topic },
  { header: 'RECORD', value: (d) => d.record_id },
  { header: 'STATUS', value: (d) => d.status },
  { header: 'ATTEMPTS', value: (d) => String(d.attempts) },
  { header: 'LAST ANSWER', value: (d) => (d.last_status_code ? `HTTP ${d.last_status_code}` : (d.last_error ?? '-')) },
  { header: 'LAST ATTEMPT', value: (d) => (d.last_attempt_at ? ago(d.last_attempt_at) : '-') },
];

/** The fields of the API's backfill view that the table shows. */
export interface BackfillRow {
  id: string;
  state: string;
  collections: string[];
  webhook: string | null;
  rows: number;
  collection: string | null;
  error: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

/** A backfill's state as the sync indicator's colours say it: done green, running yellow, failed red. */
const STATE_INDICATOR: Record<string, string> = { done: 'normal', running: 'yellow', failed: 'red' };

export const backfillColumns: Column<BackfillRow>[] = [
  { header: 'ID', value: (b) => b.id },
  { header: 'STATE', value: (b) => b.state, paint: (text, b) => paintIndicator(text, STATE_INDICATOR[b.state] ?? '') },
  { header: 'ROWS', value: (b) => b.rows.toLocaleString('en-US') },
  { header: 'READING', value: (b) => b.collection ?? '-' },
  { header: 'COLLECTIONS', value: (b) => someOf(b.collections) },
  { header: 'TO', value: (b) => b.webhook ?? 'topics' },
  { header: 'CREATED', value: (b) => ago(b.created_at) },
  { header: 'FINISHED', value: (b) => (b.finished_at ? ago(b.finished_at) : '-') },
];

export const printJson = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

/** A list answer ({ data: [...] }) as a table for people, or the answer itself with --json. */
export function printList<T>(answer: unknown, columns: Column<T>[], json: boolean): void {
  if (json) return void printJson(answer);
  const items = (answer as { data: T[] }).data;
  process.stdout.write(renderTable(items, columns, { colour: colourWanted(process.stdout, process.env) }));
}
