/**
 * The simulation's Stripe checker types its expected columns from sim/check/stripe-fields.json:
 * it must be what scripts/stripe-fields.ts makes of the pinned stripe-mock spec.
 */
import { readFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readSpec, stripeMockSpecPath } from '../scripts/stripe-catalog.ts';
import { catalogObjects, extractFields, FIELDS_PATH, renderFields } from '../scripts/stripe-fields.ts';

test('the committed field kinds are exactly what the extractor makes of the pinned spec', () => {
  // No skip: a missing Go toolchain or module must fail loudly, never pass quietly.
  const generated = renderFields(extractFields(readSpec(stripeMockSpecPath()), catalogObjects()));
  assert.ok(generated === readFileSync(FIELDS_PATH, 'utf8'), 'stripe-fields.json is stale: run node --import tsx scripts/stripe-fields.ts');
});

test('kinds the docs type differently are told apart', () => {
  const { objects } = JSON.parse(readFileSync(FIELDS_PATH, 'utf8')) as { objects: Record<string, Record<string, string>> };
  assert.equal(
    [
      objects.charge!.amount,
      objects.charge!.created,
      objects.charge!.customer,
      objects.price!.unit_amount_decimal,
      objects.customer!.preferred_locales,
      objects.customer!.address,
    ],
    ['integer', 'unix-time', 'reference', 'decimal', 'string[]', 'object'],
  );
  assert.not.ok('object' in objects.charge!);
});

test.run();
