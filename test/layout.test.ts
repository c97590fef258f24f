/**
 * The product tree holds only the product: the fakes, the simulation and the tests live beside
 * it, the production image copies none of them, and `tributary fake` in such an image says the
 * fakes are not installed instead of failing obscurely. The core knows no upstream by name,
 * and no product file is over 400 lines.
 */
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { repoRoot, sourceFiles } from './harness/process.ts';

const run = promisify(execFile);

test('the production image copies the product alone', async () => {
  const dockerfile = await readFile(path.join(repoRoot, 'docker', 'Dockerfile'), 'utf8');
  const copied = [...dockerfile.matchAll(/^COPY\s+(.+?)\s+\S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
  assert.equal(
    copied.filter((source) => /^(fakes|sim|test|bench|scripts)\b/.test(source)),
    [],
    `COPY ${copied.join(' ')}`,
  );
  assert.ok(copied.includes('src'), 'the sources are copied');
});

test('nothing under src/ imports the fakes, but for the CLI loading them on demand', async () => {
  const imports: string[] = [];
  for (const { file, text } of await sourceFiles('src')) {
    for (const line of text.split('\n')) if (/from '[./]*fakes\/|import\('[./]*fakes\//.test(line)) imports.push(`${file}: ${line.trim()}`);
  }
  assert.equal(
    imports.filter((line) => !/^src\/cli\/main\.ts: .*await fakes\(\(\) => import\(/.test(line)),
    [],
    imports.join('\n'),
  );
  assert.is(imports.length, 2, 'the CLI loads the two fakes on demand');
});

test('the core imports no upstream folder: each kind reaches it through src/kinds/ alone', async () => {
  const core = ['sync', 'decoder', 'events', 'api', 'proxy', 'control', 'writer', 'db', 'lease', 'quota', 'syncdb', 'tenancy'];
  const crossings: string[] = [];
  for (const folder of core) {
    for (const { file, text } of await sourceFiles(`src/${folder}`)) {
      for (const line of text.split('\n')) if (/from '(\.\.\/)+(airtable|stripe)\//.test(line)) crossings.push(`${file}: ${line.trim()}`);
    }
  }
  assert.equal(crossings, []);
});

test("the simulation's upstream checks import no upstream mapping of the product", async () => {
  // An oracle that calls the product's mapping agrees with any bug in it (sim/check/*-upstream.ts).
  const imports: string[] = [];
  for (const { file, text } of await sourceFiles('sim/check')) {
    for (const line of text.split('\n')) if (/(from|import\()\s*'[^']*src\/(airtable|stripe)\//.test(line)) imports.push(`${file}: ${line.trim()}`);
  }
  assert.equal(imports, [], imports.join('\n'));
  // The pattern itself finds such an import.
  assert.match("import { rowOf } from '../../src/airtable/tables.ts';", /(from|import\()\s*'[^']*src\/(airtable|stripe)\//);
});

test('no product file is over 400 lines: a larger one is split where its code has a seam', async () => {
  const long = (await sourceFiles('src', /\.(ts|js)$/)).map(({ file, text }) => ({ file, lines: text.split('\n').length - 1 })).filter((f) => f.lines > 400);
  assert.equal(long, []);
});

test('`tributary fake` where only the product is installed names what is missing', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-image-'));
  try {
    for (const part of ['bin', 'src', 'sql', 'package.json']) await cp(path.join(repoRoot, part), path.join(dir, part), { recursive: true });
    await symlink(path.join(repoRoot, 'node_modules'), path.join(dir, 'node_modules'));
    const failed = await run(process.execPath, [path.join(dir, 'bin', 'tributary.js'), 'fake', 'airtable', '--port', '0'], { cwd: dir, timeout: 30_000 }).then(
      () => undefined,
      (error: { code?: number; stderr?: string }) => error,
    );
    assert.ok(failed, 'it fails');
    assert.not.equal(failed!.code, 0);
    assert.match(failed!.stderr ?? '', /the fakes are not part of this installation/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test.run();
