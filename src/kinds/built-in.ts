import { airtableKind } from '../airtable/kind.ts';
import { stripeKind } from '../stripe/kind.ts';
import { SourceKinds } from './registry.ts';

/** The kinds this service ships with; the one place that lists them. */
export function builtInKinds(): SourceKinds {
  return new SourceKinds([airtableKind, stripeKind]);
}
