import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { newAdminToken, newSecretKey } from '../ids.ts';

export interface GeneratedFile {
  value: string;
  path: string;
  /** True when this start created the file. */
  created: boolean;
}

/**
 * Reads a one-line secret file from the data dir, creating it with mode 0600 on first
 * start. `flag: 'wx'` makes two processes starting at once agree on one value.
 */
async function readOrCreate(file: string, make: () => string): Promise<GeneratedFile> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    return { value: (await readFile(file, 'utf8')).trim(), path: file, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const value = make();
  try {
    await writeFile(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
    return { value, path: file, created: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return { value: (await readFile(file, 'utf8')).trim(), path: file, created: false };
  }
}

export const secretKeyFile = (dataDir: string) => readOrCreate(path.join(dataDir, 'secret-key'), () => newSecretKey().toString('base64'));

export const adminTokenFile = (dataDir: string) => readOrCreate(path.join(dataDir, 'admin-token'), newAdminToken);
